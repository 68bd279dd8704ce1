package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/gorap/gorap/runtime/store"
)

// Ids of the threads in testdata/release-818f824.db (see testdata/README.md).
const (
	oldTokyo  = "01a21e79-37e8-7e75-bede-00e31cd6a206" // user ada: the Tokyo question
	oldClock  = "01a21e79-417e-77c4-a88a-7a0f52bbac15" // user alice: the clock subscription
	oldChild1 = "01a21e79-46a4-759a-b8f6-8ed05a9d40f6" // the three children of oldClock, one per tick
	oldChild2 = "01a21e79-4a8a-7834-977f-4d2cab3bea95"
	oldChild3 = "01a21e79-4e71-766f-8686-c350e5978872"
)

// oldSchemaVersion is the schema version release 818f824 wrote.
const oldSchemaVersion = 11

// A store written by the previous release (818f824, schema version 11)
// opens with the current Open, which migrates it to SchemaVersion, and
// reads back as that release wrote it: the threads and their tree, user
// ids and statuses, the histories (roles, texts, tool calls with their
// arguments and display, tool results, the subscription confirmation,
// inherited history of the children), the calls and the subscription. It
// then takes writes. A failure means users upgrading lose or misread their
// conversations: fix the migration or the reading code, never the fixture.
func TestOpensStoreOfPreviousRelease(t *testing.T) {
	path := copyFixture(t, "release-818f824.db")
	if v := fileSchemaVersion(t, path); v != oldSchemaVersion {
		t.Fatalf("fixture has schema version %d, want %d: the fixture changed", v, oldSchemaVersion)
	}
	s, err := Open(path)
	if err != nil {
		t.Fatalf("Open of the previous release's store: %v", err)
	}
	defer s.Close()

	var version int
	if err := s.group.conn.QueryRowContext(context.Background(), `SELECT version FROM schema_version`).Scan(&version); err != nil {
		t.Fatal(err)
	}
	if version != SchemaVersion || SchemaVersion <= oldSchemaVersion {
		t.Fatalf("schema version after Open = %d, want the current %d (> %d)", version, SchemaVersion, oldSchemaVersion)
	}

	view(t, s, func(tx store.Tx) error {
		checkOldThreads(t, tx)
		checkOldHistories(t, tx)
		checkOldCallsAndSubscriptions(t, tx)
		return nil
	})

	// The migrated store takes writes, including to the tables and indexes
	// added since (toolset trust, threads by user).
	update(t, s, func(tx store.Tx) error {
		if _, err := tx.AppendMessages(oldTokyo, []store.Message{{Role: store.RoleUser, Text: "And in Paris?"}}); err != nil {
			return err
		}
		_, err := tx.TrustToolset(oldTokyo, "http://127.0.0.1:41797", strings.Repeat("ab", 32))
		return err
	})
	view(t, s, func(tx store.Tx) error {
		last, err := tx.LastSeq(oldTokyo)
		if err != nil || last != 5 {
			t.Errorf("LastSeq after an append = %d, %v; want 5", last, err)
		}
		page, err := tx.UserThreadsPage("alice", store.ThreadCursor{}, 10)
		if err != nil {
			return err
		}
		if got := threadIDs(page); !reflect.DeepEqual(got, []string{oldClock, oldChild1, oldChild2, oldChild3}) {
			t.Errorf("alice's threads = %v", got)
		}
		return nil
	})
}

func checkOldThreads(t *testing.T, tx store.Tx) {
	t.Helper()
	threads, err := tx.ListThreads()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, th := range threads {
		got = append(got, fmt.Sprintf("%s parent=%s root=%s %s user=%s origin=%s/%s inherit=%d",
			th.ID, th.ParentID, th.RootID, th.Status, th.UserID, th.OriginTool, th.OriginCallID, th.InheritSeq))
	}
	want := []string{
		oldTokyo + " parent= root=" + oldTokyo + " active user=ada origin=/ inherit=0",
		oldClock + " parent= root=" + oldClock + " active user=alice origin=/ inherit=0",
		oldChild1 + " parent=" + oldClock + " root=" + oldClock + " closed user=alice origin=subscribe_clock/call_1_3_0 inherit=4",
		oldChild2 + " parent=" + oldClock + " root=" + oldClock + " closed user=alice origin=subscribe_clock/call_1_3_0 inherit=7",
		oldChild3 + " parent=" + oldClock + " root=" + oldClock + " closed user=alice origin=subscribe_clock/call_1_3_0 inherit=10",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("threads:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if len(threads) != len(want) {
		return
	}
	if want := time.Date(2026, 11, 27, 19, 26, 30, 377066317, time.UTC); !threads[0].Created.Equal(want) {
		t.Errorf("created = %v, want %v", threads[0].Created, want)
	}
	if !sameJSON(threads[2].OriginArgs, `{"interval_seconds":1,"count":3}`) {
		t.Errorf("origin args = %s", threads[2].OriginArgs)
	}
	children, err := tx.ChildThreads(oldClock, store.ThreadCursor{}, 10)
	if err != nil {
		t.Fatal(err)
	}
	if got := threadIDs(children); !reflect.DeepEqual(got, []string{oldChild1, oldChild2, oldChild3}) {
		t.Errorf("children = %v", got)
	}
}

func checkOldHistories(t *testing.T, tx store.Tx) {
	t.Helper()
	tokyo, err := tx.History(oldTokyo)
	if err != nil {
		t.Fatal(err)
	}
	wantHistory(t, oldTokyo, tokyo, []string{
		oldTokyo + " 1 user: What time is it in Tokyo?",
		oldTokyo + ` 2 assistant: Let me ask the clock. call call_1_1_0 get_time_in_zone {"timezone":"Asia/Tokyo"} "Time in Asia/Tokyo"`,
		oldTokyo + " 3 tool: result call_1_1_0 get_time_in_zone error=false sub=false 2026-11-28T04:26:30+09:00 (Asia/Tokyo, JST)",
		oldTokyo + " 4 assistant: In Tokyo it is 2026-11-28T04:26:30+09:00 (Asia/Tokyo, JST).",
	})
	if len(tokyo) > 0 {
		if want := time.Date(2026, 11, 27, 19, 26, 30, 624455151, time.UTC); !tokyo[0].Created.Equal(want) {
			t.Errorf("first message created = %v, want %v", tokyo[0].Created, want)
		}
	}

	clockArgs := `{"count":3,"interval_seconds":1}`
	report := func(seq int, callID, child string) []string {
		return []string{
			fmt.Sprintf(`%s %d assistant: call %s receive_event__injected {"original_args":%s,"original_tool_call_id":"call_1_3_0","original_tool_name":"subscribe_clock"} "report from thread %s"`, oldClock, seq, callID, clockArgs, child),
			fmt.Sprintf("%s %d tool: result %s receive_event__injected error=false sub=false Final report from child thread %s:\nthe clock ticked", oldClock, seq+1, callID, child),
			fmt.Sprintf("%s %d assistant: A child thread reports that the clock ticked.", oldClock, seq+2),
		}
	}
	clockStart := []string{
		oldClock + " 1 user: watch the clock tick",
		oldClock + ` 2 assistant: I will watch the clock tick three times. call call_1_3_0 subscribe_clock ` + clockArgs + ` "Clock every 1s, 3 ticks"`,
		oldClock + ` 3 tool: result call_1_3_0 subscribe_clock error=false sub=true Subscribed (subscribe_clock). Subscription ID: call_1_3_0. Events will arrive as they happen; to stop them, cancel the subscription with tool_call_id "call_1_3_0".`,
		oldClock + " 4 assistant: Subscribed: each tick is handled in a child thread.",
	}
	var clockWant []string
	clockWant = append(clockWant, clockStart...)
	clockWant = append(clockWant, report(5, "report_6", oldChild1)...)
	clockWant = append(clockWant, report(8, "report_8", oldChild2)...)
	clockWant = append(clockWant, report(11, "report_10", oldChild3)...)
	clock, err := tx.History(oldClock)
	if err != nil {
		t.Fatal(err)
	}
	wantHistory(t, oldClock, clock, clockWant)

	// The first child inherits the parent's history up to Seq 4, then has
	// its own: the event, the runtime's instruction, and its close_thread.
	child, err := tx.History(oldChild1)
	if err != nil {
		t.Fatal(err)
	}
	c := oldChild1
	wantHistory(t, c, child, append(append([]string(nil), clockStart...),
		c+` 5 assistant: call event_752c38f238224a0f8fbbf349bc05a869 receive_event__injected {"original_args":`+clockArgs+`,"original_tool_call_id":"call_1_3_0","original_tool_name":"subscribe_clock"} "event from subscribe_clock"`,
		c+` 6 tool: result event_752c38f238224a0f8fbbf349bc05a869 receive_event__injected error=false sub=false {"time":"2026-11-27T19:26:34.144502631Z","n":1}`,
		c+` 7 user: [runtime] This thread (`+c+`) was started to handle the subscription event of subscribe_clock shown above. Handle it. Then call close_thread with thread_id "`+c+`", giving report_to_parent with what the parent thread needs to know, or without report_to_parent if nothing needs reporting.`,
		c+` 8 assistant: call call_5_0_0 close_thread {"report_to_parent":"the clock ticked","thread_id":"`+c+`"} "close_thread({\"thread_id\":\"`+c+`\",\"report_to_parent\":\"the clock ticked\"})"`,
		c+` 9 tool: result call_5_0_0 close_thread error=false sub=false Thread `+c+` is closed.`,
	))
}

func checkOldCallsAndSubscriptions(t *testing.T, tx store.Tx) {
	t.Helper()
	calls, err := tx.ThreadCalls(oldTokyo)
	if err != nil {
		t.Fatal(err)
	}
	if len(calls) != 1 {
		t.Fatalf("calls of the Tokyo thread: %+v", calls)
	}
	c := calls[0]
	if c.CallID != "call_1_1_0" || c.ToolName != "get_time_in_zone" || c.Toolset != "gettime" ||
		c.Endpoint != "http://127.0.0.1:41797" || c.TurnSeq != 2 || c.State != store.CallDone ||
		!c.Deadline.IsZero() || !sameJSON(c.Arguments, `{"timezone":"Asia/Tokyo"}`) ||
		!c.Created.Equal(time.Date(2026, 11, 27, 19, 26, 30, 626652024, time.UTC)) {
		t.Errorf("call = %+v (arguments %s)", c, c.Arguments)
	}
	for _, state := range []store.CallState{store.CallNew, store.CallDispatched} {
		open, err := tx.CallsInState(state)
		if err != nil || len(open) != 0 {
			t.Errorf("calls in state %s: %+v, %v; want none", state, open, err)
		}
	}
	subs, err := tx.ThreadSubscriptions(oldClock)
	if err != nil {
		t.Fatal(err)
	}
	if len(subs) != 1 || subs[0].CallID != "call_1_3_0" || subs[0].ToolName != "subscribe_clock" || subs[0].State != store.SubscriptionFinal {
		t.Errorf("subscriptions = %+v", subs)
	}
	choices, err := tx.ThreadChoices(oldClock)
	if err != nil || len(choices) != 0 {
		t.Errorf("choices = %+v, %v; want none", choices, err)
	}
}

// wantHistory compares a history, one line per message, with want.
func wantHistory(t *testing.T, thread string, msgs []store.Message, want []string) {
	t.Helper()
	var got []string
	for _, m := range msgs {
		got = append(got, messageLine(m))
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("history of %s:\n%s\nwant:\n%s", thread, strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// messageLine renders m with every field the fixture sets; arguments are
// compacted with their keys sorted.
func messageLine(m store.Message) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %d %s:", m.ThreadID, m.Seq, m.Role)
	if m.Text != "" {
		b.WriteString(" " + m.Text)
	}
	for _, c := range m.ToolCalls {
		fmt.Fprintf(&b, " call %s %s %s %q", c.ID, c.Name, canonicalJSON(c.Arguments), c.Display)
	}
	for _, r := range m.ToolResults {
		fmt.Fprintf(&b, " result %s %s error=%t sub=%t %s", r.CallID, r.Name, r.IsError, r.Subscription, r.Text)
		if len(r.Content) > 0 || len(r.DisplayAs) > 0 {
			fmt.Fprintf(&b, " content=%v display_as=%v", r.Content, r.DisplayAs)
		}
	}
	return b.String()
}

// canonicalJSON re-encodes raw with object keys sorted and no spaces.
func canonicalJSON(raw json.RawMessage) string {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return "invalid JSON " + string(raw)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// sameJSON reports whether raw and want are the same JSON value.
func sameJSON(raw json.RawMessage, want string) bool {
	return canonicalJSON(raw) == canonicalJSON(json.RawMessage(want))
}

func threadIDs(threads []store.Thread) []string {
	var ids []string
	for _, th := range threads {
		ids = append(ids, th.ID)
	}
	return ids
}

// copyFixture copies testdata/name to a new temp dir, mode 0600 as the
// runtime writes its store, and returns the copy's path.
func copyFixture(t *testing.T, name string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(data, []byte("SQLite format 3\x00")) {
		t.Fatalf("testdata/%s is not an SQLite database (a Git LFS pointer?)", name)
	}
	path := filepath.Join(t.TempDir(), "runtime.db")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// fileSchemaVersion reads the schema version of the database at path
// without migrating it.
func fileSchemaVersion(t *testing.T, path string) int {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var v int
	if err := db.QueryRowContext(context.Background(), `SELECT version FROM schema_version`).Scan(&v); err != nil {
		t.Fatalf("read the fixture's schema version: %v", err)
	}
	return v
}
