package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorap/gorap/runtime/store"
)

// testNotFound: every lookup of a missing record returns an error wrapping
// store.ErrNotFound that names the record, and the transaction stays
// usable after it.
func testNotFound(t *testing.T, s store.Store) {
	createThreads(t, s, "a")
	lookups := []struct {
		name, id string
		fn       func(tx store.Tx) error
	}{
		{"Thread", "ghost", func(tx store.Tx) error { _, err := tx.Thread("ghost"); return err }},
		{"SetThreadStatus", "ghost", func(tx store.Tx) error { return tx.SetThreadStatus("ghost", store.ThreadClosed) }},
		{"Call", "ghost-call", func(tx store.Tx) error { _, err := tx.Call("a", "ghost-call"); return err }},
		{"Subscription", "ghost-sub", func(tx store.Tx) error { _, err := tx.Subscription("a", "ghost-sub"); return err }},
		{"LatestToolset", "http://ghost.example", func(tx store.Tx) error { _, err := tx.LatestToolset("http://ghost.example"); return err }},
		{"TakeChoice", "ghost-choice", func(tx store.Tx) error { _, err := tx.TakeChoice("a", "ghost-choice"); return err }},
	}
	for _, l := range lookups {
		read := func(tx store.Tx) error {
			err := l.fn(tx)
			wantNotFound(t, l.name, err)
			if err != nil && !strings.Contains(err.Error(), l.id) {
				t.Errorf("%s: error %q does not name the missing %q", l.name, err, l.id)
			}
			return nil
		}
		if l.name != "SetThreadStatus" && l.name != "TakeChoice" {
			view(t, s, read)
		}
		update(t, s, read)
	}
	// A not-found answer does not spoil the transaction it happened in.
	update(t, s, func(tx store.Tx) error {
		for _, l := range lookups {
			l.fn(tx)
		}
		return tx.CreateThread(store.Thread{ID: "after", Status: store.ThreadActive, Created: at(time.Second)})
	})
	view(t, s, func(tx store.Tx) error {
		_, err := tx.Thread("after")
		if err != nil {
			t.Errorf("a thread created after not-found lookups in the same Update was not committed: %v", err)
		}
		return nil
	})
}

// writeOneOfEach writes one record of every kind for thread th (which it
// creates), its keys and ids derived from th.
func writeOneOfEach(tx store.Tx, th string) error {
	if err := tx.CreateThread(store.Thread{ID: th, Status: store.ThreadActive, Created: at(time.Second)}); err != nil {
		return err
	}
	if _, err := tx.AppendMessages(th, []store.Message{{Role: store.RoleUser, Text: "m"}}); err != nil {
		return err
	}
	if _, err := tx.Enqueue(store.InboxItem{ThreadID: th, Kind: store.KindWake, Payload: json.RawMessage(`null`), DedupKey: "key-" + th}); err != nil {
		return err
	}
	if _, err := tx.MarkKeySeen(th, "mark-"+th); err != nil {
		return err
	}
	if err := tx.PutCalls([]store.Call{{ThreadID: th, CallID: "c", ToolName: "t", Arguments: json.RawMessage(`{}`), State: store.CallDispatched, Deadline: at(time.Minute)}}); err != nil {
		return err
	}
	if err := tx.PutSubscription(store.Subscription{ThreadID: th, CallID: "c", ToolName: "t", State: store.SubscriptionActive}); err != nil {
		return err
	}
	if err := tx.PutView(store.View{ThreadID: th, ViewType: "v", Content: json.RawMessage(`{}`)}); err != nil {
		return err
	}
	if err := tx.PutTimer(store.Timer{ID: "timer-" + th, ThreadID: th, Kind: "sleep", Due: at(time.Minute)}); err != nil {
		return err
	}
	if err := tx.PutToolset(store.CachedToolset{RootID: th, BaseURL: "http://" + th, Manifest: json.RawMessage(`{}`)}); err != nil {
		return err
	}
	if err := tx.PutChoice(store.Choice{ThreadID: th, CallID: "c", ToolName: "t", Prompt: "p", Choices: []string{"x"}, ResponseURL: "http://r"}); err != nil {
		return err
	}
	if err := tx.HoldEvent(store.HeldEvent{ThreadID: th, CallID: "c", Payload: json.RawMessage(`{"event_id":"e"}`)}); err != nil {
		return err
	}
	return tx.PutCallCheck(store.CallCheck{ThreadID: th, CallID: "c", Due: at(time.Minute)})
}

// leftovers lists what of writeOneOfEach(th) the store holds.
func leftovers(tx store.Tx, th string) []string {
	var out []string
	note := func(what string, present bool) {
		if present {
			out = append(out, what)
		}
	}
	_, err := tx.Thread(th)
	note("thread", err == nil)
	h, _ := tx.History(th)
	note("messages", len(h) > 0)
	q, _ := tx.Queued(th)
	note("inbox items", len(q) > 0)
	seen, _ := tx.SeenKey("key-" + th)
	note("dedup key", seen)
	seen, _ = tx.SeenKey("mark-" + th)
	note("marked key", seen)
	_, err = tx.Call(th, "c")
	note("call", err == nil)
	_, err = tx.Subscription(th, "c")
	note("subscription", err == nil)
	vs, _ := tx.ThreadViews(th)
	note("view", len(vs) > 0)
	tms, _ := tx.DueTimers(at(time.Hour))
	for _, tm := range tms {
		note("timer", tm.ID == "timer-"+th)
	}
	ts, _ := tx.SessionToolsets(th)
	note("cached toolset", len(ts) > 0)
	cs, _ := tx.ThreadChoices(th)
	note("choice", len(cs) > 0)
	st, _ := tx.HeldEventStats(th, "c")
	note("held event", st.Count > 0)
	checks, _ := tx.DueCallChecks(at(time.Hour), 1000)
	for _, c := range checks {
		note("call check", c.ThreadID == th)
	}
	return out
}

// testUpdateAtomicity: an Update whose function fails returns that error
// and leaves no trace, neither of its inserts nor of its changes to
// existing records; failing Updates running alongside succeeding ones do
// not take the others' writes with them, nor leave their own.
func testUpdateAtomicity(t *testing.T, s store.Store) {
	err := s.Update(ctx(), func(tx store.Tx) error {
		if err := writeOneOfEach(tx, "doomed"); err != nil {
			return fmt.Errorf("the writes before the failure: %w", err)
		}
		return errRollback
	})
	if !errors.Is(err, errRollback) {
		t.Fatalf("Update returned %v, want the function's error", err)
	}
	view(t, s, func(tx store.Tx) error {
		if left := leftovers(tx, "doomed"); len(left) > 0 {
			t.Errorf("a failed Update left its writes: %v", left)
		}
		return nil
	})

	// Changes to existing records roll back too.
	update(t, s, func(tx store.Tx) error { return writeOneOfEach(tx, "kept") })
	var before []store.InboxItem
	view(t, s, func(tx store.Tx) error {
		var err error
		before, err = tx.Queued("kept")
		return err
	})
	err = s.Update(ctx(), func(tx store.Tx) error {
		steps := []error{
			tx.SetThreadStatus("kept", store.ThreadClosed),
			tx.Consume([]int64{before[0].ID}),
			tx.DeleteTimer("timer-kept"),
			tx.PutView(store.View{ThreadID: "kept", ViewType: "v", Content: json.RawMessage(`{"changed":true}`)}),
			tx.DeleteCallCheck("kept", "c"),
		}
		_, err := tx.SetCallState("kept", "c", store.CallDone)
		steps = append(steps, err)
		_, err = tx.TakeChoice("kept", "c")
		steps = append(steps, err)
		_, err = tx.TakeHeldEvents("kept", "c")
		steps = append(steps, err)
		_, err = tx.AppendMessages("kept", []store.Message{{Role: store.RoleAssistant, Text: "more"}})
		steps = append(steps, err)
		if err := errors.Join(steps...); err != nil {
			return fmt.Errorf("the changes before the failure: %w", err)
		}
		return errRollback
	})
	if !errors.Is(err, errRollback) {
		t.Fatalf("Update returned %v, want the function's error", err)
	}
	view(t, s, func(tx store.Tx) error {
		left := leftovers(tx, "kept")
		if want := "[thread messages inbox items dedup key marked key call subscription view timer cached toolset choice held event call check]"; fmt.Sprint(left) != want {
			t.Errorf("after a failed Update that changed them, the records read %v, want all of %s", left, want)
		}
		th, _ := tx.Thread("kept")
		c, _ := tx.Call("kept", "c")
		vs, _ := tx.ThreadViews("kept")
		n, _ := tx.LastSeq("kept")
		if th.Status != store.ThreadActive || c.State != store.CallDispatched || len(vs) != 1 || !jsonEqual(vs[0].Content, []byte(`{}`)) || n != 1 {
			t.Errorf("a failed Update's changes stayed: thread %s, call %s, views %+v, last seq %d", th.Status, c.State, vs, n)
		}
		return nil
	})

	// Failing and succeeding Updates at once: each keeps exactly its own fate.
	const n = 12
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			th := "mixed-" + strconv.Itoa(i)
			err := s.Update(ctx(), func(tx store.Tx) error {
				if err := writeOneOfEach(tx, th); err != nil {
					return err
				}
				if i%2 == 1 {
					return errRollback
				}
				return nil
			})
			if (i%2 == 1) != errors.Is(err, errRollback) || (i%2 == 0 && err != nil) {
				t.Errorf("concurrent Update %d returned %v", i, err)
			}
		})
	}
	wg.Wait()
	view(t, s, func(tx store.Tx) error {
		for i := range n {
			left := leftovers(tx, "mixed-"+strconv.Itoa(i))
			if i%2 == 1 && len(left) > 0 {
				t.Errorf("failed concurrent Update %d left %v", i, left)
			}
			if i%2 == 0 && len(left) != 13 {
				t.Errorf("succeeded concurrent Update %d kept only %v", i, left)
			}
		}
		return nil
	})
}

// testUpdateSeesOwnWrites: inside one Update, reads see the writes made
// earlier in it.
func testUpdateSeesOwnWrites(t *testing.T, s store.Store) {
	update(t, s, func(tx store.Tx) error {
		if err := writeOneOfEach(tx, "own"); err != nil {
			return err
		}
		if left := leftovers(tx, "own"); len(left) != 13 {
			t.Errorf("inside the Update that wrote them, reads found only %v", left)
		}
		if n, err := tx.LastSeq("own"); err != nil || n != 1 {
			t.Errorf("LastSeq inside the Update = %d, %v; want 1", n, err)
		}
		return nil
	})
}

// testViewIsolation: a View does not see the writes of an Update that has
// not committed; once Update returns, View and QuickView see them; a View
// reads one snapshot, unchanged by Updates committed while it runs.
func testViewIsolation(t *testing.T, s store.Store) {
	createThreads(t, s, "a")
	// inside has room for the one signal, so the Update never waits for
	// the reader to be ready; a retried run finds it full and goes on.
	inside, release := make(chan struct{}, 1), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- s.Update(ctx(), func(tx store.Tx) error {
			if err := writeOneOfEach(tx, "pending"); err != nil {
				return err
			}
			select {
			case inside <- struct{}{}:
			default:
			}
			select {
			case <-release:
			case <-time.After(10 * time.Second):
				return errors.New("storetest: the reader never released the Update")
			}
			return nil
		})
	}()
	select {
	case <-inside:
	case err := <-done:
		t.Fatalf("the Update ended before the View looked: %v", err)
	}
	view(t, s, func(tx store.Tx) error {
		if left := leftovers(tx, "pending"); len(left) > 0 {
			t.Errorf("a View saw writes of an Update that had not committed: %v", left)
		}
		return nil
	})
	close(release)
	if err := <-done; err != nil {
		t.Fatalf("the Update: %v", err)
	}
	view(t, s, func(tx store.Tx) error {
		if left := leftovers(tx, "pending"); len(left) != 13 {
			t.Errorf("after Update returned, a View saw only %v", left)
		}
		return nil
	})
	if err := s.QuickView(ctx(), func(tx store.Tx) error {
		if _, err := tx.Thread("pending"); err != nil {
			t.Errorf("after Update returned, QuickView did not see its thread: %v", err)
		}
		return nil
	}); err != nil {
		t.Fatalf("QuickView: %v", err)
	}

	// One snapshot per View.
	view(t, s, func(tx store.Tx) error {
		first, err := tx.ListThreads()
		if err != nil {
			return err
		}
		h1, err := tx.History("a")
		if err != nil {
			return err
		}
		update(t, s, func(w store.Tx) error {
			if err := w.CreateThread(store.Thread{ID: "during", Status: store.ThreadActive, Created: at(time.Hour)}); err != nil {
				return err
			}
			_, err := w.AppendMessages("a", []store.Message{{Role: store.RoleUser, Text: "during"}})
			return err
		})
		second, err := tx.ListThreads()
		if err != nil {
			return err
		}
		h2, err := tx.History("a")
		if err != nil {
			return err
		}
		if len(first) != len(second) || len(h1) != len(h2) {
			t.Errorf("an Update committed during a View changed what it reads: threads %d then %d, messages %d then %d",
				len(first), len(second), len(h1), len(h2))
		}
		return nil
	})
}

// testViewIsReadOnly: a write inside View fails and leaves nothing.
func testViewIsReadOnly(t *testing.T, s store.Store) {
	var writeErr error
	err := s.View(ctx(), func(tx store.Tx) error {
		writeErr = tx.CreateThread(store.Thread{ID: "written-in-view", Status: store.ThreadActive, Created: at(0)})
		return nil
	})
	if writeErr == nil && err == nil {
		t.Errorf("CreateThread inside View succeeded; a View is read-only")
	}
	t.Logf("CreateThread inside View: %v", writeErr)
	view(t, s, func(tx store.Tx) error {
		_, err := tx.Thread("written-in-view")
		if !errors.Is(err, store.ErrNotFound) {
			t.Errorf("a thread created inside View exists afterwards (%v)", err)
		}
		return nil
	})
}

// testConcurrentUpdates: Updates from several goroutines lose no write:
// a counter read and rewritten by every Update ends at their number, and
// every append and enqueue is there once, with contiguous Seqs.
func testConcurrentUpdates(t *testing.T, s store.Store) {
	createThreads(t, s, "shared")
	const workers, each = 8, 15
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				err := s.Update(ctx(), func(tx store.Tx) error {
					n := 0
					vs, err := tx.ThreadViews("shared")
					if err != nil {
						return err
					}
					if len(vs) == 1 {
						if err := json.Unmarshal(vs[0].Content, &n); err != nil {
							return err
						}
					}
					if err := tx.PutView(store.View{ThreadID: "shared", ViewType: "counter", Content: json.RawMessage(strconv.Itoa(n + 1))}); err != nil {
						return err
					}
					text := fmt.Sprintf("w%d-%d", w, i)
					if _, err := tx.AppendMessages("shared", []store.Message{{Role: store.RoleUser, Text: text}}); err != nil {
						return err
					}
					_, err = tx.Enqueue(store.InboxItem{ThreadID: "shared", Kind: store.KindNote, Payload: json.RawMessage(`{}`), DedupKey: text})
					return err
				})
				if err != nil {
					t.Errorf("worker %d, update %d: %v", w, i, err)
					return
				}
			}
		})
	}
	wg.Wait()
	view(t, s, func(tx store.Tx) error {
		vs, err := tx.ThreadViews("shared")
		if err != nil {
			return err
		}
		if len(vs) != 1 || !jsonEqual(vs[0].Content, []byte(strconv.Itoa(workers*each))) {
			t.Errorf("the counter every Update incremented reads %+v, want %d: an Update lost another's write", vs, workers*each)
		}
		h, err := tx.History("shared")
		if err != nil {
			return err
		}
		texts := map[string]bool{}
		for i, m := range h {
			if m.Seq != int64(i+1) {
				t.Errorf("message %d has Seq %d: Seqs must be contiguous", i, m.Seq)
				break
			}
			texts[m.Text] = true
		}
		q, err := tx.Queued("shared")
		if err != nil {
			return err
		}
		if len(h) != workers*each || len(texts) != workers*each || len(q) != workers*each {
			t.Errorf("after %d Updates: %d messages (%d distinct), %d inbox items; want %d of each", workers*each, len(h), len(texts), len(q), workers*each)
		}
		return nil
	})
}
