package runtime

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorap/gorap/model"
	"github.com/gorap/gorap/model/scripted"
	"github.com/gorap/gorap/rap"
	"github.com/gorap/gorap/runtime/api"
	"github.com/gorap/gorap/runtime/store"
	"github.com/gorap/gorap/runtime/store/postgres/pgtest"
)

// deleteEnv is a session whose root thread has a call pending at a tool
// server, a sleep timer and a child thread; closesSeen records, for each
// /close_thread the tool server received, whether the thread still
// existed in the store at that moment.
type deleteEnv struct {
	*env
	root, child string
	inv         rap.Invocation
	mu          sync.Mutex
	closesSeen  map[string]bool
}

func newDeleteEnv(t *testing.T) *deleteEnv {
	t.Helper()
	d := &deleteEnv{closesSeen: map[string]bool{}}
	ts := newToolServer(t, "jobs", tool("job"))
	ts.onOther = func(r *http.Request, body []byte) {
		if r.URL.Path != rap.CloseThreadPath {
			return
		}
		req, err := rap.DecodeCloseThread(body)
		if err != nil {
			t.Errorf("/close_thread body %s: %v", body, err)
			return
		}
		var exists bool
		d.rt.store.View(context.Background(), func(tx store.Tx) error {
			_, err := tx.Thread(req.ThreadID)
			exists = err == nil
			return nil
		})
		d.mu.Lock()
		d.closesSeen[req.ThreadID] = exists
		d.mu.Unlock()
	}
	d.env = newEnv(t, envOptions{servers: []string{ts.URL()}, turns: []scripted.Turn{
		{ToolCalls: []scripted.Call{call("job", `{}`), call(BuiltinSleep, `{"seconds": 3600}`)}},
		{Text: "done", Repeat: true},
	}})
	d.root = d.newThread()
	d.post(d.root, "start")
	d.inv = ts.next()
	d.idle(d.root)
	d.child = "child-of-" + d.root
	if err := d.rt.store.Update(context.Background(), func(tx store.Tx) error {
		return tx.CreateThread(store.Thread{ID: d.child, ParentID: d.root, RootID: d.root, Status: store.ThreadActive, Created: time.Now()})
	}); err != nil {
		t.Fatal(err)
	}
	return d
}

// sessionRecords counts what the store keeps of the threads: the threads
// themselves, their messages, calls, timers and queued inputs.
func sessionRecords(t *testing.T, st store.Store, root string, threads ...string) (n int) {
	t.Helper()
	err := st.View(context.Background(), func(tx store.Tx) error {
		ths, err := tx.SessionThreads(root)
		if err != nil {
			return err
		}
		n += len(ths)
		for _, id := range threads {
			calls, err := tx.ThreadCalls(id)
			if err != nil {
				return err
			}
			timers, err := tx.ThreadTimers(id)
			if err != nil {
				return err
			}
			queued, err := tx.Queued(id)
			if err != nil {
				return err
			}
			n += len(calls) + len(timers) + len(queued)
			if _, err := tx.Thread(id); err == nil {
				h, err := tx.History(id)
				if err != nil {
					return err
				}
				n += len(h)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// DeleteSession removes every record of the session (threads, history,
// calls, timers); before that each open thread was closed at the tool
// servers (RAP TC-1) while it still existed; a late callback of the
// session's call is answered 404 and changes nothing (RAP RE-5); a second
// delete is ErrUnknownThread; and after a restart the session is still
// gone.
func TestDeleteSessionRemovesEverything(t *testing.T) {
	d := newDeleteEnv(t)
	ctx := context.Background()
	if n := sessionRecords(t, d.rt.store, d.root, d.root, d.child); n < 5 {
		t.Fatalf("before the delete the session has %d records, want its threads, history, calls and timer", n)
	}
	n, err := d.rt.DeleteSession(ctx, d.root)
	if err != nil {
		t.Fatal(err)
	}
	if n != 2 {
		t.Errorf("DeleteSession removed %d threads, want 2 (the root and its child)", n)
	}
	d.mu.Lock()
	for _, id := range []string{d.root, d.child} {
		existed, told := d.closesSeen[id]
		if !told {
			t.Errorf("the tool server got no /close_thread for %s before DeleteSession returned (RAP TC-1)", id)
		} else if !existed {
			t.Errorf("the tool server's /close_thread for %s came after the thread was deleted; it must come first", id)
		}
	}
	d.mu.Unlock()
	if left := sessionRecords(t, d.rt.store, d.root, d.root, d.child); left != 0 {
		t.Errorf("after the delete %d records of the session are left, want none", left)
	}
	// RAP RE-5: the tool's late result is refused and changes nothing.
	status, body := callback(t, d.inv.CallbackURL, rap.ToolResult{GroupID: d.root, ID: d.inv.ID, Text: "late"})
	if status != http.StatusNotFound {
		t.Errorf("late callback of a deleted session: status %d (%s), want 404", status, body)
	}
	if left := sessionRecords(t, d.rt.store, d.root, d.root, d.child); left != 0 {
		t.Errorf("the late callback left %d records of the deleted session", left)
	}
	if _, err := d.rt.DeleteSession(ctx, d.root); !errors.Is(err, ErrUnknownThread) {
		t.Errorf("deleting the session again: err = %v, want ErrUnknownThread", err)
	}
	d.restart()
	if err := d.rt.CheckThread(ctx, d.root); !errors.Is(err, ErrUnknownThread) {
		t.Errorf("after a restart the deleted session answers %v, want ErrUnknownThread", err)
	}
	page, err := d.rt.ThreadsPage(ctx, "", "", 100)
	if err != nil {
		t.Fatal(err)
	}
	for _, th := range page.Threads {
		if th.RootID == d.root {
			t.Errorf("after a restart the thread list still has %s of the deleted session", th.ID)
		}
	}
}

// A child thread's id is refused with ErrBadInput naming its session, and
// nothing is deleted.
func TestDeleteSessionRefusesChildThread(t *testing.T) {
	d := newDeleteEnv(t)
	_, err := d.rt.DeleteSession(context.Background(), d.child)
	if !errors.Is(err, ErrBadInput) {
		t.Fatalf("DeleteSession(child) err = %v, want ErrBadInput", err)
	}
	if !strings.Contains(err.Error(), d.child) || !strings.Contains(err.Error(), "session "+d.root) {
		t.Errorf("error %q should name the child %s and its session %s", err, d.child, d.root)
	}
	if n := sessionRecords(t, d.rt.store, d.root); n != 2 {
		t.Errorf("after the refused delete the session has %d threads, want 2", n)
	}
}

// A caller bound to a user cannot delete (nor tell apart from a missing
// one) another user's session; it can delete its own.
func TestDeleteSessionScopedToCallersUser(t *testing.T) {
	e := newEnv(t, envOptions{turns: []scripted.Turn{{Text: "ok", Repeat: true}}})
	ctx := context.Background()
	bob, err := e.rt.CreateThreadFor(ctx, "bob")
	if err != nil {
		t.Fatal(err)
	}
	alice, err := e.rt.CreateThreadFor(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	asAlice := WithCaller(ctx, Caller{UserID: "alice"})
	if _, err := e.rt.DeleteSession(asAlice, bob); !errors.Is(err, ErrUnknownThread) {
		t.Errorf("alice deleting bob's session: err = %v, want ErrUnknownThread", err)
	}
	if err := e.rt.CheckThread(ctx, bob); err != nil {
		t.Errorf("bob's session after alice's refused delete: %v", err)
	}
	if n, err := e.rt.DeleteSession(asAlice, alice); err != nil || n != 1 {
		t.Errorf("alice deleting her own session: n = %d, err = %v; want 1, nil", n, err)
	}
}

// A session being moved to another runtime is not deleted: the error
// wraps ErrSessionMoving and the session stays.
func TestDeleteSessionRefusesMovingSession(t *testing.T) {
	e := newEnv(t, envOptions{turns: []scripted.Turn{{Text: "ok", Repeat: true}}})
	ctx := context.Background()
	th := e.newThread()
	if err := e.rt.store.Update(ctx, func(tx store.Tx) error {
		return tx.PutMove(store.Move{RootID: th, Direction: store.MoveOut, ID: "m1", State: store.MoveLeaving,
			Peer: "http://127.0.0.1:9", Secret: "s3cr3t-of-the-move", Created: time.Now()})
	}); err != nil {
		t.Fatal(err)
	}
	_, err := e.rt.DeleteSession(ctx, th)
	if !errors.Is(err, ErrSessionMoving) {
		t.Fatalf("DeleteSession of a moving session: err = %v, want ErrSessionMoving", err)
	}
	if strings.Contains(err.Error(), "s3cr3t") {
		t.Errorf("the error shows the move's secret: %v", err)
	}
	if err := e.rt.CheckThread(ctx, th); err != nil {
		t.Errorf("the moving session after the refused delete: %v", err)
	}
	if e.thread(th).Status != store.ThreadActive {
		t.Errorf("the refused delete closed the moving session")
	}
}

// A client following a deleted thread's events gets an error event saying
// the session was deleted, and then its stream ends.
func TestDeleteSessionEndsEventStreams(t *testing.T) {
	e := newEnv(t, envOptions{turns: []scripted.Turn{{Text: "ok", Repeat: true}}})
	ctx := context.Background()
	th := e.newThread()
	stream, err := e.rt.FollowEvents(ctx, th, "")
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	stream.Replay()
	if _, err := e.rt.DeleteSession(ctx, th); err != nil {
		t.Fatal(err)
	}
	var got []api.Event
	deadline := time.After(waitFor)
	for {
		select {
		case <-stream.Ready():
		case <-deadline:
			t.Fatalf("the stream of the deleted thread did not end; events: %+v", got)
		}
		evs, closed := stream.Next()
		got = append(got, evs...)
		if closed {
			break
		}
	}
	if len(got) == 0 || got[len(got)-1].Type != api.EventError || !strings.Contains(string(got[len(got)-1].Data), "deleted") {
		t.Fatalf("the stream's last event should be an error saying the session was deleted; got %+v", got)
	}
}

// Retention deletes a closed session whose last activity is older than
// Config.Retention, and keeps an open one and a recently active closed one.
func TestRetentionDeletesOnlyExpiredClosedSessions(t *testing.T) {
	e := newEnv(t, envOptions{turns: []scripted.Turn{{Text: "ok", Repeat: true}},
		tweak: func(c *Config) { c.Retention = time.Hour }})
	ctx := context.Background()
	old, open := e.newThread(), e.newThread()
	e.post(old, "hello")
	e.idle(old)
	if err := e.rt.CloseThread(ctx, old); err != nil {
		t.Fatal(err)
	}
	// Half an hour on, nothing has expired.
	if n, err := e.rt.sweepRetention(ctx, time.Now().Add(30*time.Minute)); err != nil || n != 0 {
		t.Fatalf("sweep 30 min on: deleted %d, err %v; want 0", n, err)
	}
	// Two hours on, the closed session has; the open one is kept.
	n, err := e.rt.sweepRetention(ctx, time.Now().Add(2*time.Hour))
	if err != nil || n != 1 {
		t.Fatalf("sweep 2 h on: deleted %d, err %v; want 1", n, err)
	}
	if err := e.rt.CheckThread(ctx, old); !errors.Is(err, ErrUnknownThread) {
		t.Errorf("the expired closed session: %v, want deleted", err)
	}
	if err := e.rt.CheckThread(ctx, open); err != nil {
		t.Errorf("the open session: %v, want kept", err)
	}
}

// With a short Config.Retention the runtime's own sweep deletes a closed
// session once it expired, without being asked, and logs it.
func TestRetentionLoopDeletesExpiredSession(t *testing.T) {
	e := newEnv(t, envOptions{turns: []scripted.Turn{{Text: "ok", Repeat: true}},
		tweak: func(c *Config) { c.Retention = 100 * time.Millisecond }})
	ctx := context.Background()
	th := e.newThread()
	if err := e.rt.CloseThread(ctx, th); err != nil {
		t.Fatal(err)
	}
	poll(t, "the retention sweep to delete the closed session", func() bool {
		return errors.Is(e.rt.CheckThread(ctx, th), ErrUnknownThread)
	})
	poll(t, "the sweep's log line", func() bool { return len(e.logs.records("retention: deleted expired sessions")) > 0 })
}

// releaseModel is a model whose completions wait until release is closed
// (or their context ends), then answer; started is signalled at each.
type releaseModel struct {
	started chan struct{}
	release chan struct{}
}

func (m *releaseModel) Name() string         { return "release" }
func (m *releaseModel) SupportsImages() bool { return false }
func (m *releaseModel) Complete(ctx context.Context, req model.Request, s model.Stream) (*model.Response, error) {
	select {
	case m.started <- struct{}{}:
	default:
	}
	select {
	case <-m.release:
		return &model.Response{Text: "too late"}, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// On a store several processes share, a session deleted by one process
// while another runs a slice of it stays deleted: the slice's commit
// fails, it ends quietly (no error event, no retry), and nothing of the
// thread is written again — no history, no lease, no client event.
func TestSharedDeleteWhileAnotherProcessRunsASlice(t *testing.T) {
	u := pgtest.URL(t)
	m := &releaseModel{started: make(chan struct{}, 1), release: make(chan struct{})}
	a := newEnv(t, envOptions{pgURL: u, model: m, tweak: func(c *Config) { c.LeaseTTL = time.Hour }})
	th := a.newThread()
	a.post(th, "hello")
	select {
	case <-m.started:
	case <-time.After(waitFor):
		t.Fatal("the slice never called the model")
	}
	b := newEnv(t, envOptions{pgURL: u, turns: []scripted.Turn{{Text: "ok", Repeat: true}}, tweak: func(c *Config) { c.LeaseTTL = time.Hour }})
	if n, err := b.rt.DeleteSession(context.Background(), th); err != nil || n != 1 {
		t.Fatalf("DeleteSession from the other process: n = %d, err = %v; want 1, nil", n, err)
	}
	close(m.release)
	poll(t, "the slice of the deleted thread to end", func() bool {
		return len(a.logs.records("slice dropped: its thread was deleted")) > 0
	})
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	if err := a.rt.Idle(ctx, th); err != nil && !errors.Is(err, ErrUnknownThread) {
		t.Errorf("Idle after the dropped slice: %v", err)
	}
	if got := a.logs.records("slice failed"); len(got) > 0 {
		t.Errorf("the dropped slice was logged as failed: %v", got)
	}
	// Whatever the processes still write, nothing of the thread comes
	// back: look again after the event writers have flushed.
	a.stop()
	b.stop()
	b.offline(func(tx store.Tx) error {
		if ths, err := tx.SessionThreads(th); err != nil || len(ths) != 0 {
			t.Errorf("threads of the deleted session: %v, %v; want none", ths, err)
		}
		if owner, _, err := leases(tx).ThreadLease(th); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("the deleted thread has a lease again (owner %q, err %v)", owner, err)
		}
		if last, err := tx.LastThreadEventID(th); err != nil || last != 0 {
			t.Errorf("the deleted thread has client events again: last id %d, err %v", last, err)
		}
		if q, err := tx.Queued(th); err != nil || len(q) != 0 {
			t.Errorf("the deleted thread has queued inputs again: %v, %v", q, err)
		}
		return nil
	})
}
