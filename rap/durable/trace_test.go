package durable_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/gorap/gorap/rap"
)

const (
	testParent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	testState  = "gorap=1"
)

// The trace context of a call and of a callback survives a reopen: the
// call journal and the outbox give back what they were given, and a
// record without one gives back empty strings.
func TestTraceContextKeptWithCallsAndCallbacks(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "tool.db")
	st := open(t, path)
	if err := st.BeginCall(ctx, rap.CallRecord{GroupID: "g", ID: "1", CallbackURL: "http://rt/cb", TraceParent: testParent, TraceState: testState}); err != nil {
		t.Fatal(err)
	}
	if err := st.BeginCall(ctx, rap.CallRecord{GroupID: "g", ID: "2", CallbackURL: "http://rt/cb"}); err != nil {
		t.Fatal(err)
	}
	m := msg(1)
	m.TraceParent, m.TraceState = testParent, testState
	if err := st.Enqueue(ctx, m); err != nil {
		t.Fatal(err)
	}
	if err := st.Enqueue(ctx, msg(2)); err != nil {
		t.Fatal(err)
	}
	st.Close()
	st2 := open(t, path)
	calls, err := st2.UnfinishedCalls(ctx)
	if err != nil || len(calls) != 2 {
		t.Fatalf("UnfinishedCalls = %v, %v; want 2 calls", calls, err)
	}
	got := map[string]rap.CallRecord{calls[0].ID: calls[0], calls[1].ID: calls[1]}
	if c := got["1"]; c.TraceParent != testParent || c.TraceState != testState {
		t.Errorf("call 1 trace context = %q, %q; want %q, %q", c.TraceParent, c.TraceState, testParent, testState)
	}
	if c := got["2"]; c.TraceParent != "" || c.TraceState != "" {
		t.Errorf("call 2 trace context = %q, %q; want none", c.TraceParent, c.TraceState)
	}
	pending, err := st2.Pending(ctx, 10)
	if err != nil || len(pending) != 2 {
		t.Fatalf("Pending = %v, %v", keys(pending), err)
	}
	if p := pending[0]; p.TraceParent != testParent || p.TraceState != testState {
		t.Errorf("Pending()[0] trace context = %q, %q", p.TraceParent, p.TraceState)
	}
	after, err := st2.PendingAfter(ctx, 0, 10)
	if err != nil || len(after) != 2 || after[0].TraceParent != testParent || after[1].TraceParent != "" {
		t.Errorf("PendingAfter = %+v, %v; want the trace context of the first message only", after, err)
	}
}

// A file written at schema 4, before the trace context was kept, opens:
// its recorded calls and queued callbacks read back with no trace
// context, and new ones keep theirs.
func TestSchemaUpgradeFromVersion4KeepsCallsAndCallbacks(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "tool.db")
	st := open(t, path)
	st.Close()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	// Back to schema 4, with a row in each table as version 4 wrote it.
	for _, stmt := range []string{
		`ALTER TABLE calls DROP COLUMN traceparent`, `ALTER TABLE calls DROP COLUMN tracestate`,
		`ALTER TABLE outbox DROP COLUMN traceparent`, `ALTER TABLE outbox DROP COLUMN tracestate`, `ALTER TABLE outbox DROP COLUMN for_id`,
		`DELETE FROM schema_migrations WHERE version >= 5`,
		`INSERT INTO calls (group_id, id, call_id, operation, callback_url, accepted) VALUES ('g', 'old', '', 'op', 'http://rt/cb', 1)`,
		`INSERT INTO outbox (key, url, body, attempts, created) VALUES ('old', 'http://rt/cb', '{}', 0, 1)`,
	} {
		if _, err := db.Exec(stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	db.Close()
	st2 := open(t, path)
	if v, err := st2.SchemaVersion(ctx); err != nil || v != 6 {
		t.Fatalf("after upgrade SchemaVersion = %d, %v; want 6", v, err)
	}
	calls, err := st2.UnfinishedCalls(ctx)
	if err != nil || len(calls) != 1 || calls[0].ID != "old" || calls[0].TraceParent != "" {
		t.Fatalf("UnfinishedCalls after upgrade = %+v, %v; want the old call, without trace context", calls, err)
	}
	if p, err := st2.Pending(ctx, 10); err != nil || len(p) != 1 || p[0].Key != "old" || p[0].TraceParent != "" {
		t.Fatalf("Pending after upgrade = %+v, %v", p, err)
	}
	if err := st2.BeginCall(ctx, rap.CallRecord{GroupID: "g", ID: "new", CallbackURL: "http://rt/cb", TraceParent: testParent}); err != nil {
		t.Fatal(err)
	}
	calls, err = st2.UnfinishedCalls(ctx)
	if err != nil || len(calls) != 2 || calls[1].TraceParent != testParent {
		t.Fatalf("UnfinishedCalls = %+v, %v; want the new call with its trace context", calls, err)
	}
}
