package storetest

import (
	"slices"
	"testing"
	"time"

	"github.com/gorap/gorap/runtime/store"
)

// testOldestPendingCalls: OldestPendingCalls returns only pending calls
// (new or dispatched), every thread's, oldest first by creation (then
// thread and call id for calls made at the same time), at most limit of
// them after the cursor, so that pages walk them all once; with a user,
// only the calls of that user's threads, children included.
func testOldestPendingCalls(t *testing.T, s store.Store) {
	update(t, s, func(tx store.Tx) error {
		for _, th := range []store.Thread{
			{ID: "ann1", UserID: "ann"}, {ID: "ann2", ParentID: "ann1", UserID: "ann"}, {ID: "bob1", UserID: "bob"}, {ID: "none"},
		} {
			th.Status, th.Created = store.ThreadActive, base
			if err := tx.CreateThread(th); err != nil {
				return err
			}
		}
		mk := func(thread, id string, age time.Duration, state store.CallState) store.Call {
			return store.Call{ThreadID: thread, CallID: id, ToolName: "tool", Toolset: "ts", Endpoint: "http://tools.example/invoke",
				TurnSeq: 1, State: state, Created: base.Add(-age)}
		}
		return tx.PutCalls([]store.Call{
			mk("bob1", "b1", 5*time.Hour, store.CallDispatched),
			mk("ann1", "a-done", 4*time.Hour, store.CallDone),
			mk("ann1", "a1", 3*time.Hour, store.CallNew),
			mk("ann2", "a2", 2*time.Hour, store.CallDispatched),
			mk("none", "n-gone", 2*time.Hour, store.CallCancelled),
			mk("none", "n2", time.Hour, store.CallDispatched),
			mk("none", "n1", time.Hour, store.CallDispatched),
			mk("ann1", "a3", time.Hour, store.CallNew),
			mk("bob1", "b2", time.Minute, store.CallNew),
		})
	})
	list := func(user string, after store.CallCursor, limit int) []store.Call {
		t.Helper()
		var got []store.Call
		view(t, s, func(tx store.Tx) (err error) {
			got, err = tx.OldestPendingCalls(user, after, limit)
			return err
		})
		return got
	}
	// Same time: thread ann1 before none, n1 before n2.
	all := []string{"b1", "a1", "a2", "a3", "n1", "n2", "b2"}
	got := list("", store.CallCursor{}, 100)
	if ids := callIDs(got); !slices.Equal(ids, all) {
		t.Fatalf("OldestPendingCalls(all, 100) = %v, want %v", ids, all)
	}
	if got[0].ThreadID != "bob1" || got[0].ToolName != "tool" || got[0].State != store.CallDispatched || !got[0].Created.Equal(base.Add(-5*time.Hour)) {
		t.Errorf("first call = %+v, want bob1's b1 as stored", got[0])
	}
	var paged []string
	after := store.CallCursor{}
	for range len(all) {
		page := list("", after, 3)
		if len(page) > 3 {
			t.Fatalf("a page of limit 3 has %d calls", len(page))
		}
		if len(page) == 0 {
			break
		}
		paged = append(paged, callIDs(page)...)
		after = store.CallCursorOf(page[len(page)-1])
	}
	if !slices.Equal(paged, all) {
		t.Errorf("pages of 3 = %v, want %v", paged, all)
	}
	if ids := callIDs(list("ann", store.CallCursor{}, 100)); !slices.Equal(ids, []string{"a1", "a2", "a3"}) {
		t.Errorf("OldestPendingCalls(ann) = %v, want [a1 a2 a3] (ann2 is ann's child thread)", ids)
	}
	if ids := callIDs(list("ann", store.CallCursorOf(got[1]), 1)); !slices.Equal(ids, []string{"a2"}) {
		t.Errorf("OldestPendingCalls(ann, after a1, 1) = %v, want [a2]", ids)
	}
	if ids := callIDs(list("carol", store.CallCursor{}, 100)); len(ids) != 0 {
		t.Errorf("OldestPendingCalls(carol) = %v, want none", ids)
	}
	if ids := callIDs(list("", store.CallCursor{}, 0)); len(ids) != 0 {
		t.Errorf("OldestPendingCalls(limit 0) = %v, want none", ids)
	}
}
