package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gorap/gorap/runtime/store"
)

// TestPendingCallQueriesUseThePartialIndexes: every query for pending
// calls finds them through the indexes that hold only pending calls
// (migration 11), never by scanning the calls table, which keeps every
// call ever made. SQLite uses a partial index only when the query repeats
// its condition, so a query rewritten without it would fall back to a scan.
func TestPendingCallQueriesUseThePartialIndexes(t *testing.T) {
	s, _ := open(t)
	queries := map[string][]any{
		pendingCallsSQL:           {"t"},
		callsInPendingStateSQL:    {"new"},
		dueCallsSQL:               {1},
		nextDeadlineSQL:           nil,
		uncheckedCallsSQL:         {1, "b", 10},
		oldestPendingCallsSQL:     {0, "", "", 10},
		oldestUserPendingCallsSQL: {0, "", "", 10, "u"},
	}
	for q, args := range queries {
		plan := queryPlan(t, s.group.conn, q, args...)
		joined := strings.Join(plan, "; ")
		if !strings.Contains(joined, "USING INDEX calls_pending") && !strings.Contains(joined, "USING COVERING INDEX calls_pending") {
			t.Errorf("query %q\nplan %q: want it to search a calls_pending index", q, joined)
		}
	}
}

// TestOldestPendingCallsWalkTheIndexInOrder: the list of the oldest
// pending calls reads calls_pending_created in its order and stops at
// the limit, without sorting every pending call first.
func TestOldestPendingCallsWalkTheIndexInOrder(t *testing.T) {
	s, _ := open(t)
	plan := strings.Join(queryPlan(t, s.group.conn, oldestPendingCallsSQL, 0, "", "", 10), "; ")
	if !strings.Contains(plan, "INDEX calls_pending_created") || strings.Contains(plan, "TEMP B-TREE") {
		t.Errorf("plan %q: want a search of calls_pending_created without a sort", plan)
	}
}

// queryPlan returns the details of SQLite's plan for q, one per step.
func queryPlan(t *testing.T, db interface {
	QueryContext(context.Context, string, ...any) (*sql.Rows, error)
}, q string, args ...any) []string {
	t.Helper()
	rows, err := db.QueryContext(context.Background(), `EXPLAIN QUERY PLAN `+q, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, notused int
		var detail string
		if err := rows.Scan(&id, &parent, &notused, &detail); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, detail)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return plan
}

// TestCallsInStateOutsideTheIndex: CallsInState still finds calls in a
// state the partial indexes do not hold.
func TestCallsInStateOutsideTheIndex(t *testing.T) {
	s, _ := open(t)
	update(t, s, func(tx store.Tx) error {
		if err := tx.CreateThread(store.Thread{ID: "t"}); err != nil {
			return err
		}
		return tx.PutCalls([]store.Call{{ThreadID: "t", CallID: "a", State: store.CallDone}, {ThreadID: "t", CallID: "b"}})
	})
	for st, want := range map[store.CallState]string{store.CallDone: "a", store.CallNew: "b"} {
		var got []store.Call
		view(t, s, func(tx store.Tx) (err error) { got, err = tx.CallsInState(st); return err })
		if len(got) != 1 || got[0].CallID != want {
			t.Errorf("CallsInState(%s) = %v; want [%s]", st, callIDs(got), want)
		}
	}
}

// TestMigrationToPartialCallIndexes: a store written before migration 11
// answers the same after it, through the new indexes.
func TestMigrationToPartialCallIndexes(t *testing.T) {
	all := migrations
	t.Cleanup(func() { migrations = all })
	migrations = all[:11-1]
	path := filepath.Join(t.TempDir(), "rap.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(-time.Minute).UTC()
	oldThread(t, s, "t")
	update(t, s, func(tx store.Tx) error {
		return tx.PutCalls([]store.Call{
			{ThreadID: "t", CallID: "new", Deadline: deadline},
			{ThreadID: "t", CallID: "dispatched", State: store.CallDispatched},
			{ThreadID: "t", CallID: "done", State: store.CallDone, Deadline: deadline},
			{ThreadID: "t", CallID: "cancelled", State: store.CallCancelled},
		})
	})
	s.Close()
	migrations = all
	if s, err = Open(path); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var indexes []string
	rows, err := s.reader.Query(`SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'calls' AND name NOT LIKE 'sqlite_%' ORDER BY name`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var n string
		rows.Scan(&n)
		indexes = append(indexes, n)
	}
	rows.Close()
	if fmt.Sprint(indexes) != "[calls_pending calls_pending_created calls_pending_thread]" {
		t.Errorf("indexes on calls after the upgrade: %v; want [calls_pending calls_pending_created calls_pending_thread]", indexes)
	}
	view(t, s, func(tx store.Tx) error {
		pending, err := tx.PendingCalls("t")
		if err != nil {
			return err
		}
		due, err := tx.DueCalls(time.Now())
		if err != nil {
			return err
		}
		next, ok, err := tx.NextDeadline()
		if err != nil {
			return err
		}
		if got := fmt.Sprint(callIDs(pending)); got != "[dispatched/dispatched new/new]" {
			t.Errorf("pending calls after the upgrade: %s", got)
		}
		if got := fmt.Sprint(callIDs(due)); got != "[new/new]" {
			t.Errorf("calls past their deadline after the upgrade: %s", got)
		}
		if !ok || !next.Equal(deadline) {
			t.Errorf("next deadline %v, %v; want %v", next, ok, deadline)
		}
		return nil
	})
}

// BenchmarkMigrationToPartialCallIndexes times the first start after the
// upgrade to migration 11 of a store holding a million calls (all done
// but a thousand), which replaces two indexes over the whole calls table.
// One operation is one such start; the store is built outside the timer.
func BenchmarkMigrationToPartialCallIndexes(b *testing.B) {
	const calls, threads = 1_000_000, 10_000
	ctx := context.Background()
	all := migrations
	b.Cleanup(func() { migrations = all })
	for b.Loop() {
		b.StopTimer()
		migrations = all[:11-1]
		path := filepath.Join(b.TempDir(), "rap.db")
		s, err := Open(path)
		if err != nil {
			b.Fatal(err)
		}
		_, err = s.group.conn.ExecContext(ctx, `
			WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i + 1 < ?)
			INSERT INTO threads (id, root_id, status, created)
				SELECT printf('thread-%05d', i), printf('thread-%05d', i), 'active', 1 FROM n;
		`, threads)
		if err == nil {
			_, err = s.group.conn.ExecContext(ctx, `
			WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i + 1 < ?)
			INSERT INTO calls (thread_id, call_id, tool_name, arguments, toolset, endpoint, turn_seq, state, deadline, created, updated)
				SELECT printf('thread-%05d', i % ?), printf('call_%07d', i), 'work', '{}', 'bench', 'http://127.0.0.1:1/invoke', i,
					CASE WHEN i % 1000 = 0 THEN 'dispatched' ELSE 'done' END, i, i, i FROM n;
		`, calls, threads)
		}
		s.Close()
		if err != nil {
			b.Fatal(err)
		}
		migrations = all
		b.StartTimer()
		if s, err = Open(path); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		s.Close()
		os.RemoveAll(filepath.Dir(path)) // about 300 MB each
		b.StartTimer()
	}
}

// oldThread inserts a root thread with the columns of the first schema,
// into a store opened with fewer migrations than there are (CreateThread
// writes every column of the current schema).
func oldThread(t *testing.T, s *Store, id string) {
	t.Helper()
	if _, err := s.group.conn.ExecContext(context.Background(), `INSERT INTO threads (id, root_id, status, created) VALUES (?, ?, 'active', 1)`, id, id); err != nil {
		t.Fatal(err)
	}
}
