package durable_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorap/gorap/rap"
	"github.com/gorap/gorap/rap/durable"

	_ "modernc.org/sqlite"
)

func open(t testing.TB, path string) *durable.Store {
	t.Helper()
	st, err := durable.Open(path)
	if err != nil {
		t.Fatalf("Open(%s): %v", path, err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func msg(i int) rap.OutboxMessage {
	return rap.OutboxMessage{
		Key:  fmt.Sprintf("k%03d", i),
		URL:  fmt.Sprintf("http://runtime.test/cb/%d?token=t", i%3),
		Body: []byte(fmt.Sprintf(`{"type":"tool_result","group_id":"g","id":"call-%d","text":"r"}`, i)),
	}
}

func keys(ms []rap.OutboxMessage) []string {
	var out []string
	for _, m := range ms {
		out = append(out, m.Key)
	}
	return out
}

func TestOutboxLifecycle(t *testing.T) {
	ctx := context.Background()
	st := open(t, filepath.Join(t.TempDir(), "tool.db"))
	before := time.Now()
	for i := range 5 {
		if err := st.Enqueue(ctx, msg(i)); err != nil {
			t.Fatalf("Enqueue %d: %v", i, err)
		}
	}
	p, err := st.Pending(ctx, 3)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(keys(p), ","); got != "k000,k001,k002" {
		t.Errorf("Pending(3) = %s, want the three oldest in enqueue order", got)
	}
	m := msg(1)
	if p[1].URL != m.URL || string(p[1].Body) != string(m.Body) || p[1].Attempts != 0 {
		t.Errorf("Pending()[1] = %+v, want %+v", p[1], m)
	}
	if p[1].Created.Before(before.Add(-time.Second)) || p[1].Created.After(time.Now().Add(time.Second)) {
		t.Errorf("Created = %v, want about now", p[1].Created)
	}

	for range 2 {
		if err := st.Attempted(ctx, "k001"); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Delivered(ctx, "k000"); err != nil {
		t.Fatal(err)
	}
	if err := st.Delivered(ctx, "no-such-key"); err != nil {
		t.Errorf("Delivered(unknown) = %v, want nil", err)
	}
	if err := st.Attempted(ctx, "no-such-key"); err != nil {
		t.Errorf("Attempted(unknown) = %v, want nil", err)
	}
	p, err = st.Pending(ctx, 100)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(keys(p), ","); got != "k001,k002,k003,k004" {
		t.Errorf("Pending after Delivered = %s", got)
	}
	if p[0].Attempts != 2 {
		t.Errorf("Attempts = %d, want 2", p[0].Attempts)
	}
}

func TestEnqueueIsIdempotentOnKey(t *testing.T) {
	ctx := context.Background()
	st := open(t, filepath.Join(t.TempDir(), "tool.db"))
	first := msg(1)
	if err := st.Enqueue(ctx, first); err != nil {
		t.Fatal(err)
	}
	if err := st.Enqueue(ctx, msg(2)); err != nil {
		t.Fatal(err)
	}
	again := first
	again.Body = []byte(`{"changed":true}`)
	if err := st.Enqueue(ctx, again); err != nil {
		t.Fatalf("re-Enqueue of the same key: %v", err)
	}
	p, _ := st.Pending(ctx, 10)
	if len(p) != 2 || p[0].Key != first.Key || string(p[0].Body) != string(first.Body) {
		t.Errorf("Pending = %+v; want the first copy of %s kept, still first in order", p, first.Key)
	}
}

func TestEnqueueRejectsBadInputAndKeepsTheRest(t *testing.T) {
	// Bad input is refused with an error naming the field; what was
	// accepted before stays.
	ctx := context.Background()
	st := open(t, filepath.Join(t.TempDir(), "tool.db"))
	if err := st.Enqueue(ctx, msg(0)); err != nil {
		t.Fatal(err)
	}
	bad := func(f func(*rap.OutboxMessage)) rap.OutboxMessage {
		m := msg(9)
		f(&m)
		return m
	}
	cases := map[string]struct {
		m    rap.OutboxMessage
		want string
	}{
		"empty key": {bad(func(m *rap.OutboxMessage) { m.Key = "" }), "empty Key"},
		"long key":  {bad(func(m *rap.OutboxMessage) { m.Key = strings.Repeat("k", durable.MaxKeyBytes+1) }), "Key is"},
		"no URL":    {bad(func(m *rap.OutboxMessage) { m.URL = "" }), "empty URL"},
		"long URL":  {bad(func(m *rap.OutboxMessage) { m.URL = "http://x/" + strings.Repeat("u", durable.MaxURLBytes) }), "URL is"},
		"no body":   {bad(func(m *rap.OutboxMessage) { m.Body = nil }), "empty Body"},
		"huge body": {bad(func(m *rap.OutboxMessage) { m.Body = make([]byte, durable.MaxBodyBytes+1) }), "Body is"},
	}
	for name, c := range cases {
		err := st.Enqueue(ctx, c.m)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: Enqueue = %v, want an error containing %q", name, err, c.want)
		}
	}
	if _, err := st.Pending(ctx, 0); err == nil {
		t.Errorf("Pending(0) = nil error, want one asking for at least one message")
	}
	p, err := st.Pending(ctx, 10)
	if err != nil || len(p) != 1 || p[0].Key != "k000" {
		t.Errorf("Pending = %v, %v; want only k000", keys(p), err)
	}
}

func TestOpenErrors(t *testing.T) {
	if _, err := durable.Open(""); err == nil {
		t.Error("Open(\"\") succeeded")
	}
	if _, err := durable.Open(filepath.Join(t.TempDir(), "a?b.db")); err == nil || !strings.Contains(err.Error(), "must not contain") {
		t.Errorf("Open with '?' = %v", err)
	}
	_, err := durable.Open(filepath.Join(t.TempDir(), "missing-dir", "tool.db"))
	if err == nil || !strings.Contains(err.Error(), "missing-dir") {
		t.Errorf("Open in a missing directory = %v, want an error naming the path", err)
	}
}

func TestSchemaMigrations(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "tool.db")
	st := open(t, path)
	v, err := st.SchemaVersion(ctx)
	if err != nil || v != 6 {
		t.Fatalf("SchemaVersion = %d, %v; want 6", v, err)
	}
	if err := st.Enqueue(ctx, msg(1)); err != nil {
		t.Fatal(err)
	}
	st.Close()

	// Reopening applies nothing twice and keeps the data.
	st2 := open(t, path)
	if p, err := st2.Pending(ctx, 10); err != nil || len(p) != 1 {
		t.Errorf("after reopen Pending = %v, %v", keys(p), err)
	}
	st2.Close()

	// A file written by a newer gorap is refused, not misread.
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`INSERT INTO schema_migrations (version, applied_at) VALUES (99, 0)`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if _, err := durable.Open(path); err == nil || !strings.Contains(err.Error(), "newer") {
		t.Errorf("Open of a newer schema = %v, want an error saying it is newer", err)
	}
}

func TestConcurrentEnqueueAcrossStores(t *testing.T) {
	// Several goroutines and two handles on one file (as two processes
	// would have) enqueue at once; every message lands exactly once.
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "tool.db")
	a, b := open(t, path), open(t, path)
	var wg sync.WaitGroup
	errs := make(chan error, 200)
	for i := range 200 {
		st := a
		if i%2 == 1 {
			st = b
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- st.Enqueue(ctx, msg(i))
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	p, err := a.Pending(ctx, 1000)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, m := range p {
		seen[m.Key] = true
	}
	if len(p) != 200 || len(seen) != 200 {
		t.Errorf("Pending holds %d messages (%d distinct), want 200", len(p), len(seen))
	}
}

func sub(group, id string) rap.SubscriptionRecord {
	return rap.SubscriptionRecord{
		Invocation: rap.Invocation{
			Operation:   "watch",
			Arguments:   json.RawMessage(`{"path":"/tmp"}`),
			ID:          id,
			CallbackURL: "http://runtime.test/cb?token=t",
			GroupID:     group,
		},
		State:   json.RawMessage(`{"cursor":1}`),
		Created: time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC),
	}
}

func TestSubscriptionsSurviveReopen(t *testing.T) {
	// RAP SU-1: the tool stores callback_url, group_id and id durably, so
	// a restarted tool server can keep sending events.
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "tool.db")
	st := open(t, path)
	r1, r2 := sub("g1", "call-1"), sub("g2", "call-2")
	r2.Created = r1.Created.Add(time.Second)
	for _, r := range []rap.SubscriptionRecord{r2, r1} {
		if err := st.SaveSubscription(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	// Saving again replaces: here the cursor moves on.
	r1.State = json.RawMessage(`{"cursor":2}`)
	if err := st.SaveSubscription(ctx, r1); err != nil {
		t.Fatal(err)
	}
	st.Close()

	st = open(t, path)
	got, err := st.ListSubscriptions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Fatalf("ListSubscriptions = %d records, want 2", len(got))
	}
	g := got[0]
	if g.Invocation.ID != "call-1" || g.Invocation.GroupID != "g1" || g.Invocation.CallbackURL != r1.Invocation.CallbackURL ||
		g.Invocation.Operation != "watch" || string(g.Invocation.Arguments) != `{"path":"/tmp"}` ||
		string(g.State) != `{"cursor":2}` || !g.Created.Equal(r1.Created) {
		t.Errorf("first record = %+v, want %+v", g, r1)
	}
	if got[1].Invocation.ID != "call-2" {
		t.Errorf("second record = %s, want call-2 (oldest first)", got[1].Invocation.ID)
	}

	if err := st.DeleteSubscription(ctx, "g1", "call-1"); err != nil {
		t.Fatal(err)
	}
	if err := st.DeleteSubscription(ctx, "g1", "never-existed"); err != nil {
		t.Errorf("DeleteSubscription(unknown) = %v, want nil", err)
	}
	got, _ = st.ListSubscriptions(ctx)
	if len(got) != 1 || got[0].Invocation.ID != "call-2" {
		t.Errorf("after delete: %+v, want only call-2", got)
	}
}

func TestSaveSubscriptionRejectsBadInput(t *testing.T) {
	ctx := context.Background()
	st := open(t, filepath.Join(t.TempDir(), "tool.db"))
	if err := st.SaveSubscription(ctx, sub("g", "ok")); err != nil {
		t.Fatal(err)
	}
	mod := func(f func(*rap.SubscriptionRecord)) rap.SubscriptionRecord {
		r := sub("g", "bad")
		f(&r)
		return r
	}
	cases := map[string]struct {
		r    rap.SubscriptionRecord
		want string
	}{
		"no group":    {mod(func(r *rap.SubscriptionRecord) { r.Invocation.GroupID = "" }), "group_id is empty"},
		"no id":       {mod(func(r *rap.SubscriptionRecord) { r.Invocation.ID = "" }), "invocation.id is empty"},
		"no callback": {mod(func(r *rap.SubscriptionRecord) { r.Invocation.CallbackURL = "" }), "callback_url is empty"},
		"bad state":   {mod(func(r *rap.SubscriptionRecord) { r.State = json.RawMessage(`{nope`) }), "state is not valid JSON"},
		"huge state": {mod(func(r *rap.SubscriptionRecord) {
			r.State = json.RawMessage(`"` + strings.Repeat("s", durable.MaxRecordBytes) + `"`)
		}), "byte limit"},
		"long id": {mod(func(r *rap.SubscriptionRecord) { r.Invocation.ID = strings.Repeat("i", durable.MaxIDBytes+1) }), "byte limit"},
	}
	for name, c := range cases {
		if err := st.SaveSubscription(ctx, c.r); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: SaveSubscription = %v, want an error containing %q", name, err, c.want)
		}
	}
	got, err := st.ListSubscriptions(ctx)
	if err != nil || len(got) != 1 || got[0].Invocation.ID != "ok" {
		t.Errorf("ListSubscriptions = %+v, %v; want only the good record", got, err)
	}
}

func BenchmarkEnqueue(b *testing.B) {
	// Each Enqueue is a durable (fsynced) transaction.
	ctx := context.Background()
	st := open(b, filepath.Join(b.TempDir(), "tool.db"))
	m := msg(0)
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		m.Key = fmt.Sprintf("k%d", i)
		if err := st.Enqueue(ctx, m); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "enqueues/s")
}

func TestClosedAndCancelled(t *testing.T) {
	st, err := durable.Open(filepath.Join(t.TempDir(), "tool.db"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := st.Enqueue(ctx, msg(1)); !errors.Is(err, context.Canceled) {
		t.Errorf("Enqueue with a cancelled context = %v, want context.Canceled", err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Errorf("second Close = %v, want nil", err)
	}
	if err := st.Enqueue(context.Background(), msg(2)); !errors.Is(err, durable.ErrClosed) {
		t.Errorf("Enqueue after Close = %v, want ErrClosed", err)
	}
	if err := st.Delivered(context.Background(), "k"); !errors.Is(err, durable.ErrClosed) {
		t.Errorf("Delivered after Close = %v, want ErrClosed", err)
	}
}

func TestGroupCommitKeepsGoodWritesWhenOneFails(t *testing.T) {
	// Many concurrent writes are committed together; a write the database
	// rejects fails alone and the others in its batch still land.
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "tool.db")
	st := open(t, path)
	// A trigger makes the database refuse one particular key, standing
	// in for a write that fails inside a batch.
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`CREATE TRIGGER refuse BEFORE INSERT ON outbox WHEN NEW.key = 'k013'
		BEGIN SELECT RAISE(ABORT, 'refused by test trigger'); END`); err != nil {
		t.Fatal(err)
	}
	db.Close()

	var wg sync.WaitGroup
	errs := make([]error, 100)
	for i := range 100 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = st.Enqueue(ctx, msg(i))
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if i == 13 {
			if err == nil || !strings.Contains(err.Error(), "Enqueue k013") || !strings.Contains(err.Error(), "refused by test trigger") {
				t.Errorf("Enqueue k013 = %v, want the trigger's refusal naming the key", err)
			}
			continue
		}
		if err != nil {
			t.Errorf("Enqueue %d: %v", i, err)
		}
	}
	p, err := st.Pending(ctx, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if len(p) != 99 {
		t.Errorf("Pending holds %d, want 99", len(p))
	}
}

func TestPendingAfter(t *testing.T) {
	ctx := context.Background()
	st := open(t, filepath.Join(t.TempDir(), "tool.db"))
	for i := range 5 {
		if err := st.Enqueue(ctx, msg(i)); err != nil {
			t.Fatal(err)
		}
	}
	first, err := st.PendingAfter(ctx, 0, 2)
	if err != nil || len(first) != 2 || first[0].Key != "k000" || first[1].Key != "k001" || first[0].Seq >= first[1].Seq {
		t.Fatalf("PendingAfter(0, 2) = %+v, %v; want k000, k001 with growing Seq", first, err)
	}
	// Delivering the messages already read does not shift what comes
	// after them, and new messages come after all old ones.
	if err := st.Delivered(ctx, "k001"); err != nil {
		t.Fatal(err)
	}
	if err := st.Enqueue(ctx, msg(5)); err != nil {
		t.Fatal(err)
	}
	rest, err := st.PendingAfter(ctx, first[1].Seq, 100)
	if err != nil {
		t.Fatal(err)
	}
	var ks []string
	for _, m := range rest {
		ks = append(ks, m.Key)
	}
	if got := strings.Join(ks, ","); got != "k002,k003,k004,k005" {
		t.Errorf("PendingAfter(k001) = %s, want k002,k003,k004,k005", got)
	}
	if string(rest[0].Body) != string(msg(2).Body) || rest[0].URL != msg(2).URL {
		t.Errorf("PendingAfter()[0] = %+v, want %+v", rest[0], msg(2))
	}
	if _, err := st.PendingAfter(ctx, 0, 0); err == nil {
		t.Error("PendingAfter with limit 0 succeeded")
	}
}

func TestDurabilitySettings(t *testing.T) {
	// An acknowledged Enqueue must survive SIGKILL and power loss: the
	// store runs in WAL mode with synchronous=FULL (2) and waits for
	// other processes' locks rather than failing at once.
	ctx := context.Background()
	st := open(t, filepath.Join(t.TempDir(), "tool.db"))
	for name, want := range map[string]string{"journal_mode": "wal", "synchronous": "2", "busy_timeout": "10000"} {
		got, err := st.PragmaForTest(ctx, name)
		if err != nil || got != want {
			t.Errorf("PRAGMA %s = %q, %v; want %q", name, got, err, want)
		}
	}
}

// A file written before the call journal existed (schema 1) is upgraded in
// place: its outbox is kept and the journal works.
func TestSchemaUpgradeFromVersion1(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "tool.db")
	st := open(t, path)
	if err := st.Enqueue(ctx, msg(1)); err != nil {
		t.Fatal(err)
	}
	st.Close()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`DROP TABLE calls; DROP TABLE dead_letters; ALTER TABLE outbox DROP COLUMN traceparent; ALTER TABLE outbox DROP COLUMN tracestate; ALTER TABLE outbox DROP COLUMN for_id; DELETE FROM schema_migrations WHERE version >= 2`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	st2 := open(t, path)
	defer st2.Close()
	if v, err := st2.SchemaVersion(ctx); err != nil || v != 6 {
		t.Fatalf("after upgrade SchemaVersion = %d, %v; want 6", v, err)
	}
	if p, err := st2.Pending(ctx, 10); err != nil || len(p) != 1 {
		t.Errorf("after upgrade Pending = %v, %v; the outbox must be kept", keys(p), err)
	}
	if err := st2.BeginCall(ctx, rap.CallRecord{GroupID: "g", ID: "1", CallbackURL: "http://rt/cb"}); err != nil {
		t.Fatalf("BeginCall after upgrade: %v", err)
	}
}

// The call journal keeps accepted calls across a reopen until EndCall;
// recording a call twice keeps one record; bad records are refused with
// an error naming the problem, and nothing already recorded is lost.
func TestCallJournal(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "tool.db")
	st := open(t, path)
	t0 := time.Unix(1_800_000_000, 0)
	for i, id := range []string{"a", "b", "c"} {
		r := rap.CallRecord{GroupID: "thread-1", ID: id, CallID: "toolu_" + id, Operation: "build",
			CallbackURL: "http://rt/cb?t=" + id, Accepted: t0.Add(time.Duration(i) * time.Second)}
		if err := st.BeginCall(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.BeginCall(ctx, rap.CallRecord{GroupID: "thread-1", ID: "a", CallbackURL: "http://other"}); err != nil {
		t.Fatalf("recording a call again: %v", err)
	}
	bad := []struct {
		r    rap.CallRecord
		want string
	}{
		{rap.CallRecord{ID: "x", CallbackURL: "http://rt"}, "empty group id"},
		{rap.CallRecord{GroupID: "g", ID: strings.Repeat("x", durable.MaxIDBytes+1), CallbackURL: "http://rt"}, "limit"},
	}
	for _, b := range bad {
		if err := st.BeginCall(ctx, b.r); err == nil || !strings.Contains(err.Error(), b.want) {
			t.Errorf("BeginCall(%+v) = %v, want an error saying %q", b.r, err, b.want)
		}
	}
	if err := st.EndCall(ctx, "thread-1", "b"); err != nil {
		t.Fatal(err)
	}
	if err := st.EndCall(ctx, "thread-1", "unknown"); err != nil {
		t.Fatalf("EndCall of an unknown call: %v", err)
	}
	// Storing a call's result forgets the call, in the same transaction.
	m := msg(1)
	m.EndsGroupID, m.EndsID = "thread-1", "c"
	if err := st.Enqueue(ctx, m); err != nil {
		t.Fatal(err)
	}
	if p, err := st.Pending(ctx, 10); err != nil || len(p) != 1 {
		t.Fatalf("the result was not stored: %v, %v", keys(p), err)
	}
	st.Close()
	st2 := open(t, path)
	defer st2.Close()
	got, err := st2.UnfinishedCalls(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].ID != "a" {
		t.Fatalf("after reopen UnfinishedCalls = %+v, want only a (b ended, c answered)", got)
	}
	a := got[0]
	if a.CallID != "toolu_a" || a.Operation != "build" || a.CallbackURL != "http://rt/cb?t=a" || !a.Accepted.Equal(t0) {
		t.Errorf("record a = %+v; the second BeginCall must not replace the first", a)
	}
}

// A recorded call keeps the state saved with it across a reopen, the last
// one saved replacing the earlier; a call without one has none; saving the
// state of a call that has ended records nothing; an oversized state is
// refused with an error naming the limit.
func TestCallState(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "tool.db")
	st := open(t, path)
	for _, id := range []string{"a", "b"} {
		if err := st.BeginCall(ctx, rap.CallRecord{GroupID: "g", ID: id, CallbackURL: "http://rt/cb"}); err != nil {
			t.Fatal(err)
		}
	}
	for _, state := range []string{`{"phase":"call"}`, `{"phase":"auth"}`} {
		if err := st.SaveCallState(ctx, "g", "a", []byte(state)); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.SaveCallState(ctx, "g", "ended", []byte(`{}`)); err != nil {
		t.Fatalf("saving the state of an unrecorded call: %v", err)
	}
	if err := st.SaveCallState(ctx, "g", "b", make([]byte, rap.MaxCallStateBytes+1)); err == nil || !strings.Contains(err.Error(), "limit") {
		t.Fatalf("oversized state: %v, want an error naming the limit", err)
	}
	st.Close()
	st2 := open(t, path)
	defer st2.Close()
	got, err := st2.UnfinishedCalls(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Fatalf("UnfinishedCalls = %+v, want a and b only", got)
	}
	for _, r := range got {
		switch r.ID {
		case "a":
			if string(r.State) != `{"phase":"auth"}` {
				t.Errorf("state of a = %s, want the last one saved", r.State)
			}
		case "b":
			if r.State != nil {
				t.Errorf("state of b = %s, want none", r.State)
			}
		}
	}
}

// The invocation a message is about (ForID, for a view update that names
// no call) is kept with it across a reopen, and read back by every way of
// reading the outbox; a message without one reads back without.
func TestOutboxKeepsTheCallAMessageIsFor(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "tool.db")
	st := open(t, path)
	m := msg(1)
	m.ForID = "call-7"
	for _, m := range []rap.OutboxMessage{m, msg(2)} {
		if err := st.Enqueue(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	st.Close()
	st = open(t, path)
	defer st.Close()
	pending, err := st.Pending(ctx, 10)
	if err != nil || len(pending) != 2 || pending[0].ForID != "call-7" || pending[1].ForID != "" {
		t.Fatalf("Pending = %+v, %v; want ForID call-7 on the first message only", pending, err)
	}
	after, err := st.PendingAfter(ctx, 0, 10)
	if err != nil || len(after) != 2 || after[0].ForID != "call-7" || after[1].ForID != "" {
		t.Errorf("PendingAfter = %+v, %v; want ForID call-7 on the first message only", after, err)
	}
	dest, err := st.PendingFor(ctx, rap.Destination(m.URL), 0, 10)
	if err != nil || len(dest) != 2 || dest[0].ForID != "call-7" {
		t.Errorf("PendingFor = %+v, %v; want ForID call-7 on the first message", dest, err)
	}
}
