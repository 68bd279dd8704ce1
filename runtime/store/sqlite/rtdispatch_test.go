package sqlite

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gorap/gorap/runtime/store"
)

// A root thread keeps its user id; a child created
// without one gets its parent's, across generations.
func TestThreadUserID(t *testing.T) {
	s, _ := open(t)
	update(t, s, func(tx store.Tx) error {
		if err := tx.CreateThread(store.Thread{ID: "root", UserID: "alice"}); err != nil {
			return err
		}
		if err := tx.CreateThread(store.Thread{ID: "child", ParentID: "root"}); err != nil {
			return err
		}
		return tx.CreateThread(store.Thread{ID: "grandchild", ParentID: "child"})
	})
	view(t, s, func(tx store.Tx) error {
		for _, id := range []string{"root", "child", "grandchild"} {
			th, err := tx.Thread(id)
			if err != nil {
				return err
			}
			if th.UserID != "alice" || th.RootID != "root" {
				t.Errorf("thread %s: user %q root %q, want alice and root", id, th.UserID, th.RootID)
			}
		}
		return nil
	})
}

// Call status checks are kept by (thread, call), listed
// due-first up to a limit, and advanced all at once after a restart.
func TestCallChecks(t *testing.T) {
	s, _ := open(t)
	now := time.Now()
	update(t, s, func(tx store.Tx) error {
		for i, id := range []string{"a", "b", "c"} {
			if err := tx.PutCallCheck(store.CallCheck{ThreadID: "t", CallID: id, Due: now.Add(time.Duration(i) * time.Hour)}); err != nil {
				return err
			}
		}
		// Replacing keeps one row per call.
		return tx.PutCallCheck(store.CallCheck{ThreadID: "t", CallID: "a", Due: now.Add(-time.Minute), Failures: 2})
	})
	view(t, s, func(tx store.Tx) error {
		due, err := tx.DueCallChecks(now, 10)
		if err != nil {
			return err
		}
		if len(due) != 1 || due[0].CallID != "a" || due[0].Failures != 2 {
			t.Errorf("due = %+v, want only a, with 2 failures", due)
		}
		next, ok, err := tx.NextCallCheck()
		if err != nil || !ok || !next.Equal(now.Add(-time.Minute)) {
			t.Errorf("next = %v %v %v, want %v", next, ok, err, now.Add(-time.Minute))
		}
		return nil
	})
	update(t, s, func(tx store.Tx) error {
		n, err := tx.AdvanceCallChecks(now)
		if err != nil {
			return err
		}
		if n != 2 {
			t.Errorf("advanced %d checks, want 2 (b and c)", n)
		}
		return tx.DeleteCallCheck("t", "b")
	})
	view(t, s, func(tx store.Tx) error {
		due, err := tx.DueCallChecks(now, 1)
		if err != nil {
			return err
		}
		if len(due) != 1 {
			t.Errorf("limit 1: got %d", len(due))
		}
		all, err := tx.DueCallChecks(now, 10)
		if len(all) != 2 {
			t.Errorf("after delete and advance: %+v, want a and c", all)
		}
		return err
	})
}

// Upgrading a store schedules a status check, due at
// once, for every dispatched (non-builtin) call and active subscription
// it holds, so the runtime asks about them after the upgrade's restart.
func TestMigrationSchedulesChecksOfPendingCalls(t *testing.T) {
	all := migrations
	t.Cleanup(func() { migrations = all })
	before := slices.IndexFunc(all, func(m string) bool { return strings.Contains(m, "CREATE TABLE call_checks") })
	if before < 0 {
		t.Fatal("no migration creates call_checks")
	}
	migrations = all[:before] // the schema before call checks
	path := filepath.Join(t.TempDir(), "rap.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	oldThread(t, s, "t")
	update(t, s, func(tx store.Tx) error {
		calls := []store.Call{
			{ThreadID: "t", CallID: "dispatched", ToolName: "x", Arguments: []byte(`{}`), Toolset: "ts", State: store.CallDispatched},
			{ThreadID: "t", CallID: "sleep", ToolName: "sleep", Arguments: []byte(`{}`), Toolset: "builtin", State: store.CallDispatched},
			{ThreadID: "t", CallID: "done", ToolName: "x", Arguments: []byte(`{}`), Toolset: "ts", State: store.CallDone},
			{ThreadID: "t", CallID: "sub", ToolName: "x", Arguments: []byte(`{}`), Toolset: "ts", State: store.CallDone},
		}
		if err := tx.PutCalls(calls); err != nil {
			return err
		}
		return tx.PutSubscription(store.Subscription{ThreadID: "t", CallID: "sub", ToolName: "x", State: store.SubscriptionActive})
	})
	s.Close()
	migrations = all
	s, err = Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	view(t, s, func(tx store.Tx) error {
		due, err := tx.DueCallChecks(time.Now(), 10)
		var ids []string
		for _, c := range due {
			ids = append(ids, c.CallID)
		}
		if fmt.Sprint(ids) != "[dispatched sub]" && fmt.Sprint(ids) != "[sub dispatched]" {
			t.Errorf("checks due after the upgrade: %v, want the dispatched call and the subscription", ids)
		}
		return err
	})
}
