package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gorap/gorap/model"
	"github.com/gorap/gorap/rap"
	"github.com/gorap/gorap/runtime/api"
	"github.com/gorap/gorap/runtime/store"
	"github.com/gorap/gorap/runtime/store/postgres/pgtest"
)

// failingOn is m, failing each completion whose last user message is
// word.
type failingOn struct {
	*fnModel
	word string
}

func (f failingOn) Complete(ctx context.Context, req model.Request, s model.Stream) (*model.Response, error) {
	if inputOfReq(req).user == f.word {
		return nil, errors.New("model unavailable (HTTP 529)")
	}
	return f.fnModel.Complete(ctx, req, s)
}

// Waiting lists the threads waiting longest, oldest first: one waiting
// on a tool server's call (tool, toolset, call id), one asleep (the
// timer's due time), one whose completion failed (since its queued
// message, with the error); each with its session's title and state. A
// limit keeps the oldest, and a caller bound to a user sees only that
// user's threads.
func TestWaitingListsTheThreadsWaitingLongest(t *testing.T) {
	ts := newToolServer(t, "jobs", tool("job"))
	m := failingOn{fnModel: &fnModel{fn: func(req model.Request) *model.Response {
		switch inputOfReq(req).user {
		case "nap":
			return &model.Response{ToolCalls: []model.ToolCall{toolCall(BuiltinSleep, map[string]any{"seconds": 3600})}}
		case "work":
			return &model.Response{ToolCalls: []model.ToolCall{toolCall("job", map[string]any{})}}
		}
		return &model.Response{Text: "done"}
	}}, word: "fail"}
	e := newEnv(t, envOptions{model: m, servers: []string{ts.URL()}})
	ctx := context.Background()
	session := func(user string) string {
		t.Helper()
		resp, err := e.rt.CreateSession(ctx, user)
		if err != nil {
			t.Fatal(err)
		}
		return resp.ID
	}
	worker, sleeper, failer := session("ann"), session("bob"), session("ann")
	e.post(worker, "work")
	inv := ts.next()
	waitState(t, e, worker, api.StateWaitingTools)
	e.post(sleeper, "nap")
	waitState(t, e, sleeper, api.StateWaitingTimer)
	e.post(failer, "fail")
	idleCtx, cancel := context.WithTimeout(ctx, waitFor)
	defer cancel()
	if err := e.rt.Idle(idleCtx, failer); !errors.Is(err, ErrSliceFailed) {
		t.Fatalf("Idle of the failing thread = %v, want ErrSliceFailed", err)
	}

	before := time.Now()
	got, err := e.rt.Waiting(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	if got.AsOf.Before(before.Add(-time.Minute)) || got.AsOf.After(time.Now().Add(time.Minute)) {
		t.Errorf("AsOf = %v, want about now", got.AsOf)
	}
	var ids []string
	for _, w := range got.Threads {
		ids = append(ids, w.ThreadID)
	}
	if want := []string{worker, sleeper, failer}; strings.Join(ids, " ") != strings.Join(want, " ") {
		t.Fatalf("Waiting lists %v, want %v (worker, sleeper, failer: oldest first)", ids, want)
	}
	w, s, f := got.Threads[0], got.Threads[1], got.Threads[2]
	if w.State != api.StateWaitingTools || w.Title != "work" || w.UserID != "ann" || w.RootID != worker || len(w.WaitingOn) != 1 {
		t.Fatalf("the worker = %+v, want waiting_tools, titled work, of ann, waiting on one call", w)
	}
	if it := w.WaitingOn[0]; it.Kind != api.WaitTool || it.Tool != "job" || it.CallID != inv.ID || it.Toolset == "" || it.Toolset == builtinToolset ||
		!it.Since.Equal(w.Since) || !it.Due.IsZero() {
		t.Errorf("the worker waits on %+v, want the tool job of its toolset, call %s, since the thread's since, no due time", it, inv.ID)
	}
	if w.LastError != "" || w.LastErrorUnknown {
		t.Errorf("the worker's last error = %q (unknown %v), want none", w.LastError, w.LastErrorUnknown)
	}
	if s.State != api.StateWaitingTimer || s.Title != "nap" || len(s.WaitingOn) != 1 {
		t.Fatalf("the sleeper = %+v, want waiting_timer, titled nap, waiting on one call", s)
	}
	if it := s.WaitingOn[0]; it.Kind != api.WaitTimer || it.Tool != BuiltinSleep || it.Due.Sub(it.Since) < 59*time.Minute || it.Due.Sub(it.Since) > 61*time.Minute {
		t.Errorf("the sleeper waits on %+v, want the sleep call, due an hour after it was made", it)
	}
	if f.State != api.StateFailed || f.Title != "fail" || len(f.WaitingOn) != 1 || f.WaitingOn[0].Kind != api.WaitRetry {
		t.Fatalf("the failed thread = %+v, want failed, titled fail, waiting on a retry", f)
	}
	if !strings.Contains(f.LastError, "model unavailable (HTTP 529)") || f.LastErrorUnknown {
		t.Errorf("the failed thread's last error = %q (unknown %v), want the model's error", f.LastError, f.LastErrorUnknown)
	}
	if !w.Since.Before(s.Since) || !s.Since.Before(f.Since) {
		t.Errorf("since: worker %v, sleeper %v, failer %v; want them in that order", w.Since, s.Since, f.Since)
	}

	two, err := e.rt.Waiting(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(two.Threads) != 2 || two.Threads[0].ThreadID != worker || two.Threads[1].ThreadID != sleeper {
		t.Errorf("Waiting(2) = %+v, want the worker and the sleeper", two.Threads)
	}
	ann, err := e.rt.Waiting(api.WithCaller(ctx, api.Caller{UserID: "ann"}), 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(ann.Threads) != 2 || ann.Threads[0].ThreadID != worker || ann.Threads[1].ThreadID != failer {
		t.Errorf("Waiting for ann = %+v, want her worker and failed threads", ann.Threads)
	}

	reply(t, inv, "job done")
	waitState(t, e, worker, api.StateQuiet)
	after, err := e.rt.Waiting(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(after.Threads) != 2 || after.Threads[0].ThreadID != sleeper {
		t.Errorf("after the job's result Waiting = %+v, want the sleeper and the failed thread", after.Threads)
	}
}

// waitingIDs returns the ids of resp's threads, in order.
func waitingIDs(resp api.WaitingResponse) []string {
	var ids []string
	for _, w := range resp.Threads {
		ids = append(ids, w.ThreadID)
	}
	return ids
}

// Waiting lists a parent that waits only on its child thread right
// after the child, with a children item naming it (state
// waiting_children); and a thread whose only wait is an active
// subscription, with the subscription's call and tool.
func TestWaitingListsParentsOfWaitingChildrenAndSubscriptions(t *testing.T) {
	ts := newToolServer(t, "jobs", tool("job"), tool("watch"))
	m := &fnModel{fn: func(req model.Request) *model.Response {
		in := inputOfReq(req)
		switch {
		case in.user == "watch":
			return &model.Response{ToolCalls: []model.ToolCall{toolCall("watch", map[string]any{})}}
		case in.user == "delegate":
			var stack []string
			json.Unmarshal([]byte(stackOfRe.FindStringSubmatch(req.System)[1]), &stack)
			return &model.Response{ToolCalls: []model.ToolCall{toolCall(BuiltinSpawnThread, map[string]any{"instructions": "do the job", "child_of": stack})}}
		case strings.Contains(in.result, "You are now inside the spawned thread"):
			return &model.Response{ToolCalls: []model.ToolCall{toolCall("job", map[string]any{})}}
		}
		return &model.Response{Text: "done"}
	}}
	e := newEnv(t, envOptions{model: m, servers: []string{ts.URL()}})
	ctx := context.Background()

	root := e.newThread()
	e.post(root, "delegate")
	job := ts.next() // the child's call
	child := job.GroupID
	waitState(t, e, root, api.StateWaitingChildren)

	watcher := e.newThread()
	e.post(watcher, "watch")
	sub := ts.next()
	if status, body := callback(t, sub.CallbackURL, rap.ToolResult{GroupID: sub.GroupID, ID: sub.ID, Text: "subscribed", Subscription: true}); status != http.StatusOK {
		t.Fatalf("confirm the subscription: %d %s", status, body)
	}
	waitState(t, e, watcher, api.StateWaitingTools)
	poll(t, "the watcher's pending call to end", func() bool {
		var n int
		e.offlineView(func(tx store.Tx) error {
			calls, err := tx.PendingCalls(watcher)
			n = len(calls)
			return err
		})
		return n == 0
	})

	got, err := e.rt.Waiting(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{child, root, watcher}; strings.Join(waitingIDs(got), " ") != strings.Join(want, " ") {
		t.Fatalf("Waiting lists %v, want %v (the child, its parent, the watcher)", waitingIDs(got), want)
	}
	c, p, w := got.Threads[0], got.Threads[1], got.Threads[2]
	if c.ParentID != root || c.State != api.StateWaitingTools || len(c.WaitingOn) != 1 || c.WaitingOn[0].CallID != job.ID {
		t.Errorf("the child = %+v, want a child of %s waiting on the call %s", c, root, job.ID)
	}
	if p.State != api.StateWaitingChildren || p.RootID != root || len(p.WaitingOn) != 1 || !p.Since.Equal(c.Since) {
		t.Fatalf("the parent = %+v, want waiting_children on one item, since the child's since", p)
	}
	if it := p.WaitingOn[0]; it.Kind != api.WaitChildren || it.ThreadID != child || it.CallID != "" {
		t.Errorf("the parent waits on %+v, want the child thread %s", it, child)
	}
	if w.State != api.StateWaitingTools || len(w.WaitingOn) != 1 {
		t.Fatalf("the watcher = %+v, want waiting_tools on one item", w)
	}
	if it := w.WaitingOn[0]; it.Kind != api.WaitSubscription || it.CallID != sub.ID || it.Tool != "watch" || !it.Since.Equal(w.Since) {
		t.Errorf("the watcher waits on %+v, want the subscription of call %s of the tool watch", it, sub.ID)
	}

	// A limit of one keeps the child only; once the child's job is done,
	// neither it nor its parent is listed.
	one, err := e.rt.Waiting(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(waitingIDs(one), " ") != child {
		t.Errorf("Waiting(1) lists %v, want the child only", waitingIDs(one))
	}
	reply(t, job, "job done")
	waitState(t, e, root, api.StateQuiet)
	after, err := e.rt.Waiting(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(waitingIDs(after), " ") != watcher {
		t.Errorf("after the child's result Waiting lists %v, want the watcher only", waitingIDs(after))
	}
}

// On a PostgreSQL store two processes share, a completion that failed in
// one, its retry scheduled, is listed by the other as failed with the
// error the first recorded, not as an error it cannot know.
func TestWaitingShowsAFailureRecordedByAnotherProcess(t *testing.T) {
	u := pgtest.URL(t)
	m := failingOn{fnModel: &fnModel{fn: func(model.Request) *model.Response { return &model.Response{Text: "done"} }}, word: "fail"}
	retryLater := func(c *Config) { c.ModelRetry = ModelRetryPolicy{Initial: time.Hour, Max: time.Hour, Attempts: 3} }
	a := newEnv(t, envOptions{pgURL: u, model: m, tweak: retryLater})
	failer := a.newThread()
	a.post(failer, "fail")
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	if err := a.rt.Idle(ctx, failer); !errors.Is(err, ErrSliceFailed) {
		t.Fatalf("Idle of the failing thread = %v, want ErrSliceFailed", err)
	}
	b := newEnv(t, envOptions{pgURL: u, model: m, tweak: retryLater})
	// B, starting, wakes the thread whose input is queued; its worker
	// finds A's lease and lets go. Until it has, B shows the thread as
	// running in its own process: wait for that to pass.
	var got api.WaitingResponse
	for deadline := time.Now().Add(waitFor); ; {
		var err error
		if got, err = b.rt.Waiting(context.Background(), 10); err != nil {
			t.Fatal(err)
		}
		if len(got.Threads) != 1 || got.Threads[0].State != api.StateRunning || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if strings.Join(waitingIDs(got), " ") != failer {
		t.Fatalf("the other process lists %v, want the failed thread %s", waitingIDs(got), failer)
	}
	f := got.Threads[0]
	if f.State != api.StateFailed || len(f.WaitingOn) != 1 || f.WaitingOn[0].Kind != api.WaitRetry || f.WaitingOn[0].Due.Before(time.Now().Add(50*time.Minute)) {
		t.Errorf("the failed thread = %+v, want failed, waiting on a retry due in about an hour", f)
	}
	if !strings.Contains(f.LastError, "model unavailable (HTTP 529)") || f.LastErrorUnknown {
		t.Errorf("the other process shows the last error %q (unknown %v), want the model's error", f.LastError, f.LastErrorUnknown)
	}
}
