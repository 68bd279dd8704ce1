package sqlite

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorap/gorap/runtime/store"
)

// TestRowCacheFollowsCommitsOnly: the writer's cache of thread rows and
// last seqs shows what was committed, never what a
// rolled-back transaction wrote, and what a committed one did.
func TestRowCacheFollowsCommitsOnly(t *testing.T) {
	s, _ := open(t)
	ctx := context.Background()
	update := func(fn func(store.Tx) error) error { return s.Update(ctx, fn) }
	status := func() store.ThreadStatus {
		t.Helper()
		var th store.Thread
		if err := s.QuickView(ctx, func(tx store.Tx) (err error) { th, err = tx.Thread("t1"); return err }); err != nil {
			t.Fatal(err)
		}
		return th.Status
	}
	if err := update(func(tx store.Tx) error {
		return tx.CreateThread(store.Thread{ID: "t1", Status: store.ThreadActive})
	}); err != nil {
		t.Fatal(err)
	}
	if got := status(); got != store.ThreadActive {
		t.Fatalf("status %q; want active", got)
	}
	boom := errors.New("boom")
	// A rolled-back status change and append leave no trace.
	if err := update(func(tx store.Tx) error {
		if err := tx.SetThreadStatus("t1", store.ThreadClosed); err != nil {
			return err
		}
		if th, err := tx.Thread("t1"); err != nil || th.Status != store.ThreadClosed {
			t.Errorf("in the transaction: Thread = %+v, %v; want it closed", th, err)
		}
		if _, err := tx.AppendMessages("t1", []store.Message{{Role: store.RoleUser, Text: "lost"}}); err != nil {
			return err
		}
		return boom
	}); !errors.Is(err, boom) {
		t.Fatalf("Update = %v; want boom", err)
	}
	if got := status(); got != store.ThreadActive {
		t.Errorf("after a rollback: status %q; want active", got)
	}
	var seqs []int64
	if err := update(func(tx store.Tx) error {
		msgs, err := tx.AppendMessages("t1", []store.Message{{Role: store.RoleUser, Text: "a"}, {Role: store.RoleUser, Text: "b"}})
		for _, m := range msgs {
			seqs = append(seqs, m.Seq)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if len(seqs) != 2 || seqs[0] != 1 || seqs[1] != 2 {
		t.Errorf("seqs after a rolled-back append: %v; want [1 2]", seqs)
	}
	// A committed change is seen by the next transactions.
	if err := update(func(tx store.Tx) error { return tx.SetThreadStatus("t1", store.ThreadClosed) }); err != nil {
		t.Fatal(err)
	}
	if got := status(); got != store.ThreadClosed {
		t.Errorf("after a commit: status %q; want closed", got)
	}
	if err := update(func(tx store.Tx) error {
		msgs, err := tx.AppendMessages("t1", []store.Message{{Role: store.RoleUser, Text: "c"}})
		if err == nil && msgs[0].Seq != 3 {
			t.Errorf("next seq %d; want 3", msgs[0].Seq)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	var h []store.Message
	if err := s.View(ctx, func(tx store.Tx) (err error) { h, err = tx.History("t1"); return err }); err != nil {
		t.Fatal(err)
	}
	if len(h) != 3 || h[2].Text != "c" {
		t.Errorf("history %+v; want a, b, c", h)
	}
	// HistorySince answers from the cached last seq when nothing is newer.
	for after, want := range map[int64]int{3: 0, 7: 0, 2: 1, 0: 3} {
		var got []store.Message
		if err := s.QuickView(ctx, func(tx store.Tx) (err error) { got, err = tx.HistorySince("t1", after); return err }); err != nil {
			t.Fatal(err)
		}
		if len(got) != want {
			t.Errorf("HistorySince(t1, %d) = %d messages; want %d", after, len(got), want)
		}
	}
}

// TestCallCacheAgreesWithTheDatabase: the writer's cached call rows (read
// back by the transaction that takes a call's result) are exactly what the
// database holds, after inserts, committed and rolled-back state changes,
// moves that do not happen, and calls too big to keep.
func TestCallCacheAgreesWithTheDatabase(t *testing.T) {
	s, _ := open(t)
	ctx := context.Background()
	update(t, s, func(tx store.Tx) error { return tx.CreateThread(store.Thread{ID: "t1"}) })
	big := json.RawMessage(`{"text":"` + strings.Repeat("x", maxCachedCallArgs) + `"}`)
	update(t, s, func(tx store.Tx) error {
		return tx.PutCalls([]store.Call{
			{ThreadID: "t1", CallID: "c1", ToolName: "echo", Toolset: "ts", Endpoint: "http://x/invoke", TurnSeq: 2},
			{ThreadID: "t1", CallID: "c2", ToolName: "echo", Arguments: json.RawMessage(`{"a":1}`), Deadline: time.Now().Add(time.Hour)},
			{ThreadID: "t1", CallID: "big", ToolName: "echo", Arguments: big},
		})
	})
	cached := func(id string) bool {
		s.group.rows.mu.Lock()
		defer s.group.rows.mu.Unlock()
		_, ok := s.group.rows.calls[callKey{"t1", id}]
		return ok
	}
	// check compares the writer's answer (cache or statement) with a
	// reader connection's, which never uses the cache.
	check := func(step, id string, wantState store.CallState) {
		t.Helper()
		var w, r store.Call
		if err := s.QuickView(ctx, func(tx store.Tx) (err error) { w, err = tx.Call("t1", id); return err }); err != nil {
			t.Fatalf("%s: writer: %v", step, err)
		}
		view(t, s, func(tx store.Tx) (err error) { r, err = tx.Call("t1", id); return err })
		if !reflect.DeepEqual(w, r) {
			t.Errorf("%s: call %s from the writer's cache\n%+v\nin the database\n%+v", step, id, w, r)
		}
		if r.State != wantState {
			t.Errorf("%s: call %s is %s; want %s", step, id, r.State, wantState)
		}
	}
	if !cached("c1") || !cached("c2") || cached("big") {
		t.Fatalf("cached after insert: c1 %v, c2 %v, big %v; want true, true, false", cached("c1"), cached("c2"), cached("big"))
	}
	check("inserted", "c1", store.CallNew)
	check("inserted", "c2", store.CallNew)
	check("inserted", "big", store.CallNew)
	if cached("big") {
		t.Error("a call with arguments over the limit was cached when read")
	}

	// A caller changing what it got does not change the cache.
	update(t, s, func(tx store.Tx) error {
		c, err := tx.Call("t1", "c2")
		c.Arguments[2] = 'Z'
		return err
	})
	check("after a caller changed its copy", "c2", store.CallNew)

	// A rolled-back move leaves no trace.
	boom := errors.New("boom")
	if err := s.Update(ctx, func(tx store.Tx) error {
		if _, err := tx.SetCallState("t1", "c1", store.CallDispatched); err != nil {
			return err
		}
		if c, err := tx.Call("t1", "c1"); err != nil || c.State != store.CallDispatched {
			t.Errorf("in the transaction: %+v, %v; want dispatched", c, err)
		}
		return boom
	}); !errors.Is(err, boom) {
		t.Fatalf("Update = %v; want boom", err)
	}
	check("after a rollback", "c1", store.CallNew)

	// Committed moves, one that happens and one that does not.
	var moved, again bool
	update(t, s, func(tx store.Tx) (err error) {
		moved, err = tx.SetCallState("t1", "c1", store.CallDispatched, store.CallNew)
		return err
	})
	update(t, s, func(tx store.Tx) (err error) {
		again, err = tx.SetCallState("t1", "c1", store.CallDispatched, store.CallNew)
		return err
	})
	if !moved || again {
		t.Errorf("moves new→dispatched: %v, then %v; want true, false", moved, again)
	}
	check("after a move", "c1", store.CallDispatched)
	update(t, s, func(tx store.Tx) (err error) {
		_, err = tx.SetCallState("t1", "c1", store.CallDone, store.CallNew, store.CallDispatched)
		return err
	})
	check("after a second move", "c1", store.CallDone)
	update(t, s, func(tx store.Tx) (err error) {
		_, err = tx.SetCallState("t1", "big", store.CallCancelled)
		return err
	})
	check("big, cancelled", "big", store.CallCancelled)
	if !cached("c1") {
		t.Error("c1 fell out of the cache")
	}

	// A call that does not exist is not found, cached or not.
	if err := s.QuickView(ctx, func(tx store.Tx) error {
		_, err := tx.Call("t1", "nope")
		return err
	}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("unknown call: %v; want ErrNotFound", err)
	}
}

// TestCallCacheRandomOperations runs random inserts, state moves
// (conditional or not, committed or rolled back, several in one
// transaction) over a few threads and checks after each transaction that
// the writer's PendingCalls and Call, answered from its row cache when it
// can, equal a reader connection's, which always asks the database.
func TestCallCacheRandomOperations(t *testing.T) {
	s, _ := open(t)
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(11, 26))
	threads := []string{"a", "b", "c"}
	for _, th := range threads {
		update(t, s, func(tx store.Tx) error { return tx.CreateThread(store.Thread{ID: th}) })
	}
	states := []store.CallState{store.CallNew, store.CallDispatched, store.CallDone, store.CallCancelled}
	var made []callKey
	next := 0
	boom := errors.New("boom")
	for step := range 400 {
		ops := 1 + rng.IntN(3)
		rollback := rng.IntN(5) == 0
		err := s.Update(ctx, func(tx store.Tx) error {
			for range ops {
				th := threads[rng.IntN(len(threads))]
				if len(made) == 0 || rng.IntN(3) == 0 {
					next++
					id := fmt.Sprintf("c%d", next)
					args := json.RawMessage(`{"n":1}`)
					if rng.IntN(6) == 0 {
						args = json.RawMessage(`{"s":"` + strings.Repeat("y", maxCachedCallArgs) + `"}`)
					}
					var st store.CallState
					if rng.IntN(4) > 0 {
						st = states[rng.IntN(len(states))]
					}
					if err := tx.PutCalls([]store.Call{{ThreadID: th, CallID: id, ToolName: "t", Arguments: args, State: st}}); err != nil {
						return err
					}
					if !rollback {
						made = append(made, callKey{th, id})
					}
					continue
				}
				k := made[rng.IntN(len(made))]
				var from []store.CallState
				for _, f := range states {
					if rng.IntN(3) == 0 {
						from = append(from, f)
					}
				}
				if _, err := tx.SetCallState(k.thread, k.call, states[rng.IntN(len(states))], from...); err != nil {
					return err
				}
				if rng.IntN(2) == 0 { // read inside the transaction too
					if _, err := tx.PendingCalls(k.thread); err != nil {
						return err
					}
				}
			}
			if rollback {
				return boom
			}
			return nil
		})
		if err != nil && !(rollback && errors.Is(err, boom)) {
			t.Fatalf("step %d: %v", step, err)
		}
		for _, th := range threads {
			var w, r []store.Call
			if err := s.QuickView(ctx, func(tx store.Tx) (err error) { w, err = tx.PendingCalls(th); return err }); err != nil {
				t.Fatal(err)
			}
			view(t, s, func(tx store.Tx) (err error) { r, err = tx.PendingCalls(th); return err })
			if len(w) != len(r) || (len(w) > 0 && !reflect.DeepEqual(w, r)) {
				t.Fatalf("step %d: pending calls of %s from the writer %v, in the database %v", step, th, callIDs(w), callIDs(r))
			}
		}
		if len(made) == 0 {
			continue
		}
		k := made[rng.IntN(len(made))]
		var w, r store.Call
		if err := s.QuickView(ctx, func(tx store.Tx) (err error) { w, err = tx.Call(k.thread, k.call); return err }); err != nil {
			t.Fatal(err)
		}
		view(t, s, func(tx store.Tx) (err error) { r, err = tx.Call(k.thread, k.call); return err })
		if !reflect.DeepEqual(w, r) {
			t.Fatalf("step %d: call %v from the writer %+v, in the database %+v", step, k, w, r)
		}
	}
}

func callIDs(calls []store.Call) []string {
	var ids []string
	for _, c := range calls {
		ids = append(ids, c.CallID+"/"+string(c.State))
	}
	return ids
}

// TestQuickViewCannotWrite: a QuickView function that writes gets an
// error and leaves nothing behind, in the database or in the writer's row
// cache (found by review: the write reached the cache, then the group of
// reads was rolled back).
func TestQuickViewCannotWrite(t *testing.T) {
	s, _ := open(t)
	ctx := context.Background()
	update(t, s, func(tx store.Tx) error {
		if err := tx.CreateThread(store.Thread{ID: "t"}); err != nil {
			return err
		}
		return tx.PutCalls([]store.Call{{ThreadID: "t", CallID: "c"}})
	})
	err := s.QuickView(ctx, func(tx store.Tx) error {
		if _, err := tx.PendingCalls("t"); err != nil {
			return err
		}
		_, err := tx.SetCallState("t", "c", store.CallDone)
		return err
	})
	if err == nil {
		t.Fatal("a QuickView wrote without an error")
	}
	// Statements that write and return rows (DELETE … RETURNING through
	// Query, INSERT … RETURNING through QueryRow) are refused too.
	err = s.QuickView(ctx, func(tx store.Tx) error {
		_, err := tx.TakeHeldEvents("t", "c")
		return err
	})
	if !errors.Is(err, errWriteInRead) {
		t.Errorf("TakeHeldEvents in a QuickView: %v; want %v", err, errWriteInRead)
	}
	err = s.QuickView(ctx, func(tx store.Tx) error {
		_, err := tx.AppendThreadEvents([]store.ThreadEvent{{ThreadID: "t", Type: "x", Data: json.RawMessage(`{}`)}})
		return err
	})
	if !errors.Is(err, errWriteInRead) {
		t.Errorf("AppendThreadEvents in a QuickView: %v; want %v", err, errWriteInRead)
	}
	var last int64
	view(t, s, func(tx store.Tx) (err error) { last, err = tx.LastThreadEventID("t"); return err })
	if last != 0 {
		t.Errorf("after refused writes: last event id %d, want 0", last)
	}
	var w, r []store.Call
	if err := s.QuickView(ctx, func(tx store.Tx) (err error) { w, err = tx.PendingCalls("t"); return err }); err != nil {
		t.Fatal(err)
	}
	view(t, s, func(tx store.Tx) (err error) { r, err = tx.PendingCalls("t"); return err })
	if len(w) != 1 || len(r) != 1 || w[0].State != store.CallNew || r[0].State != store.CallNew {
		t.Errorf("after a refused write: writer %v, database %v; want [c/new] in both", callIDs(w), callIDs(r))
	}
	// Writes still work after it.
	update(t, s, func(tx store.Tx) error {
		_, err := tx.SetCallState("t", "c", store.CallDispatched)
		return err
	})
}

// TestCallCacheUnderGroupCommit: 16 goroutines insert calls and move them
// (one transaction in six failing, so the others of its group run again)
// while others read, with a slow sync so that calls share groups and join
// running transactions; afterwards every pending list and every call the
// writer answers equals the database's (from a review).
func TestCallCacheUnderGroupCommit(t *testing.T) {
	s, err := openWith(filepath.Join(t.TempDir(), "rap.db"), openOptions{sync: func() error { time.Sleep(2 * time.Millisecond); return nil }})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	threads := []string{"a", "b", "c", "d"}
	for _, th := range threads {
		update(t, s, func(tx store.Tx) error { return tx.CreateThread(store.Thread{ID: th}) })
	}
	states := []store.CallState{store.CallNew, store.CallDispatched, store.CallDone, store.CallCancelled}
	boom := errors.New("boom")
	var wg sync.WaitGroup
	var next atomic.Int64
	for g := range 16 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 7))
			for range 150 {
				th := threads[rng.IntN(len(threads))]
				if rng.IntN(3) == 0 {
					s.QuickView(ctx, func(tx store.Tx) error { _, err := tx.PendingCalls(th); return err })
					continue
				}
				fail := rng.IntN(6) == 0
				id := fmt.Sprintf("c%d", next.Add(1))
				s.Update(ctx, func(tx store.Tx) error {
					if err := tx.PutCalls([]store.Call{{ThreadID: th, CallID: id, ToolName: "t"}}); err != nil {
						return err
					}
					pending, err := tx.PendingCalls(th)
					if err != nil {
						return err
					}
					for _, c := range pending {
						if rng.IntN(3) == 0 {
							if _, err := tx.SetCallState(th, c.CallID, states[rng.IntN(len(states))], store.CallNew, store.CallDispatched); err != nil {
								return err
							}
						}
					}
					if fail {
						return boom
					}
					return nil
				})
			}
		})
	}
	wg.Wait()
	if st := s.WriterStats(); st.Updates <= st.Transactions {
		t.Errorf("%d updates in %d transactions: no group formed, the test does not test group commit", st.Updates, st.Transactions)
	}
	for _, th := range threads {
		var w, r, all []store.Call
		if err := s.QuickView(ctx, func(tx store.Tx) (err error) { w, err = tx.PendingCalls(th); return err }); err != nil {
			t.Fatal(err)
		}
		view(t, s, func(tx store.Tx) (err error) { r, err = tx.PendingCalls(th); return err })
		if !reflect.DeepEqual(w, r) {
			t.Errorf("thread %s: pending calls from the writer %v, in the database %v", th, callIDs(w), callIDs(r))
		}
		view(t, s, func(tx store.Tx) (err error) { all, err = tx.ThreadCalls(th); return err })
		for _, c := range all {
			var wc store.Call
			if err := s.QuickView(ctx, func(tx store.Tx) (err error) { wc, err = tx.Call(th, c.CallID); return err }); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(wc, c) {
				t.Errorf("call %s/%s from the writer %+v, in the database %+v", th, c.CallID, wc, c)
			}
		}
	}
}
