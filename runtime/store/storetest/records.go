package storetest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/gorap/gorap/runtime/store"
)

// testViews: PutView inserts or overwrites (thread, view type);
// ThreadViews returns one thread's views ordered by view type (RAP VU-2).
func testViews(t *testing.T, s store.Store) {
	createThreads(t, s, "a", "b")
	update(t, s, func(tx store.Tx) error {
		for _, v := range []store.View{
			{ThreadID: "a", ViewType: "todo", Content: json.RawMessage(`{"items":[1]}`), Updated: at(time.Second)},
			{ThreadID: "a", ViewType: "plan", Content: json.RawMessage(`{"step":1}`), Updated: at(time.Second)},
			{ThreadID: "b", ViewType: "todo", Content: json.RawMessage(`{"items":["b"]}`), Updated: at(time.Second)},
		} {
			if err := tx.PutView(v); err != nil {
				return err
			}
		}
		return nil
	})
	update(t, s, func(tx store.Tx) error {
		return tx.PutView(store.View{ThreadID: "a", ViewType: "todo", Content: json.RawMessage(`{"items":[1,2]}`), Updated: at(2 * time.Second)})
	})
	view(t, s, func(tx store.Tx) error {
		vs, err := tx.ThreadViews("a")
		if err != nil {
			return err
		}
		if len(vs) != 2 || vs[0].ViewType != "plan" || vs[1].ViewType != "todo" {
			t.Fatalf("ThreadViews(a) = %+v, want plan then todo", vs)
		}
		if v := vs[1]; v.ThreadID != "a" || !jsonEqual(v.Content, []byte(`{"items":[1,2]}`)) || !v.Updated.Equal(at(2*time.Second)) {
			t.Errorf("the overwritten view reads %+v, want the second content and Updated", v)
		}
		if v := vs[0]; v.ThreadID != "a" || !jsonEqual(v.Content, []byte(`{"step":1}`)) || !v.Updated.Equal(at(time.Second)) {
			t.Errorf("view plan reads %+v", v)
		}
		vb, err := tx.ThreadViews("b")
		if err != nil || len(vb) != 1 || !jsonEqual(vb[0].Content, []byte(`{"items":["b"]}`)) {
			t.Errorf("ThreadViews(b) = %+v, %v; want b's own view untouched", vb, err)
		}
		return nil
	})
}

func timerIDs(ts []store.Timer) []string {
	out := make([]string, len(ts))
	for i, tm := range ts {
		out[i] = tm.ID
	}
	return out
}

// testTimers: PutTimer inserts or replaces by id; DeleteTimer of an
// unknown id is not an error; DueTimers returns the timers due at or
// before now, earliest first; NextTimer the earliest due time.
func testTimers(t *testing.T, s store.Store) {
	createThreads(t, s, "a")
	view(t, s, func(tx store.Tx) error {
		if _, ok, err := tx.NextTimer(); err != nil || ok {
			t.Errorf("NextTimer with no timers: ok = %v, %v; want false", ok, err)
		}
		return nil
	})
	update(t, s, func(tx store.Tx) error {
		for _, tm := range []store.Timer{
			{ID: "t3", ThreadID: "a", Kind: "sleep", Payload: json.RawMessage(`{"n":3}`), Due: at(3 * time.Second), Created: at(0)},
			{ID: "t1", ThreadID: "a", Kind: "sleep", Due: at(time.Second), Created: at(0)},
			{ID: "t2", ThreadID: "a", Kind: "deadline", Payload: json.RawMessage(`{"n":2}`), Due: at(2 * time.Second), Created: at(0)},
			{ID: "t0", ThreadID: "a", Kind: "sleep", Due: at(2 * time.Second), Created: at(0)},
		} {
			if err := tx.PutTimer(tm); err != nil {
				return err
			}
		}
		return nil
	})
	view(t, s, func(tx store.Tx) error {
		due, err := tx.DueTimers(at(2 * time.Second))
		if err != nil {
			return err
		}
		if ids := timerIDs(due); len(ids) != 3 || ids[0] != "t1" || !slices.Contains(ids, "t0") || !slices.Contains(ids, "t2") {
			t.Errorf("DueTimers at 2s = %v, want t1 then t0 and t2 (due at or before now, earliest first)", ids)
		}
		for _, tm := range due {
			if tm.ID == "t2" && (tm.ThreadID != "a" || tm.Kind != "deadline" || !jsonEqual(tm.Payload, []byte(`{"n":2}`)) || !tm.Due.Equal(at(2*time.Second)) || !tm.Created.Equal(at(0))) {
				t.Errorf("timer t2 reads %+v, want every field as written", tm)
			}
			if tm.ID == "t1" && len(tm.Payload) != 0 && string(tm.Payload) != "null" {
				t.Errorf("timer t1 was written without a payload and reads payload %s", tm.Payload)
			}
		}
		if due, err := tx.DueTimers(at(time.Second - time.Microsecond)); err != nil || len(due) != 0 {
			t.Errorf("DueTimers before the first due time = %v, %v", timerIDs(due), err)
		}
		if next, ok, err := tx.NextTimer(); err != nil || !ok || !next.Equal(at(time.Second)) {
			t.Errorf("NextTimer = %v, %v, %v; want %v", next, ok, err, at(time.Second))
		}
		return nil
	})
	// Replace t1 to later, delete t0 and an unknown id.
	update(t, s, func(tx store.Tx) error {
		if err := tx.PutTimer(store.Timer{ID: "t1", ThreadID: "a", Kind: "sleep", Due: at(10 * time.Second), Created: at(0)}); err != nil {
			return err
		}
		if err := tx.DeleteTimer("t0"); err != nil {
			return err
		}
		return tx.DeleteTimer("no-such-timer")
	})
	view(t, s, func(tx store.Tx) error {
		due, err := tx.DueTimers(at(time.Hour))
		if err != nil {
			return err
		}
		if ids := timerIDs(due); !slices.Equal(ids, []string{"t2", "t3", "t1"}) {
			t.Errorf("DueTimers after replacing t1 and deleting t0 = %v, want [t2 t3 t1]", ids)
		}
		if next, ok, err := tx.NextTimer(); err != nil || !ok || !next.Equal(at(2*time.Second)) {
			t.Errorf("NextTimer = %v, %v, %v; want %v", next, ok, err, at(2*time.Second))
		}
		return nil
	})
}

// testToolsetCache: PutToolset inserts or replaces (root, base URL);
// SessionToolsets lists a session's manifests; LatestToolset returns the
// most recently fetched manifest of a base URL from any session.
func testToolsetCache(t *testing.T, s store.Store) {
	createThreads(t, s, "r1", "r2")
	update(t, s, func(tx store.Tx) error {
		for _, c := range []store.CachedToolset{
			{RootID: "r1", BaseURL: "http://x", Manifest: json.RawMessage(`{"v":1}`), Fetched: at(time.Second)},
			{RootID: "r1", BaseURL: "http://y", Manifest: json.RawMessage(`{"y":1}`), Fetched: at(time.Second)},
			{RootID: "r2", BaseURL: "http://x", Manifest: json.RawMessage(`{"v":2}`), Fetched: at(2 * time.Second)},
		} {
			if err := tx.PutToolset(c); err != nil {
				return err
			}
		}
		return nil
	})
	view(t, s, func(tx store.Tx) error {
		c, err := tx.LatestToolset("http://x")
		if err != nil {
			return err
		}
		if c.RootID != "r2" || c.BaseURL != "http://x" || !jsonEqual(c.Manifest, []byte(`{"v":2}`)) || !c.Fetched.Equal(at(2*time.Second)) {
			t.Errorf("LatestToolset(x) = %+v, want r2's manifest fetched at 2s", c)
		}
		return nil
	})
	update(t, s, func(tx store.Tx) error {
		return tx.PutToolset(store.CachedToolset{RootID: "r1", BaseURL: "http://x", Manifest: json.RawMessage(`{"v":3}`), Fetched: at(3 * time.Second)})
	})
	view(t, s, func(tx store.Tx) error {
		cs, err := tx.SessionToolsets("r1")
		if err != nil {
			return err
		}
		got := map[string]string{}
		for _, c := range cs {
			if c.RootID != "r1" {
				t.Errorf("SessionToolsets(r1) returned a manifest of session %q", c.RootID)
			}
			got[c.BaseURL] = string(c.Manifest)
		}
		if len(cs) != 2 || !jsonEqual([]byte(got["http://x"]), []byte(`{"v":3}`)) || !jsonEqual([]byte(got["http://y"]), []byte(`{"y":1}`)) {
			t.Errorf("SessionToolsets(r1) = %v, want x replaced by v3 and y", got)
		}
		c, err := tx.LatestToolset("http://x")
		if err != nil || c.RootID != "r1" || !jsonEqual(c.Manifest, []byte(`{"v":3}`)) {
			t.Errorf("LatestToolset(x) after r1 refetched = %+v, %v; want r1's v3", c, err)
		}
		if cs, err := tx.SessionToolsets("r2"); err != nil || len(cs) != 1 {
			t.Errorf("SessionToolsets(r2) = %+v, %v; want its one manifest", cs, err)
		}
		return nil
	})
}

// testToolsetTrust: TrustToolset records a session's first digest for a
// base URL and returns it; a later, different digest for the same session
// and URL does not replace it (in a later transaction too), while another
// session or another URL records its own; a write to the toolset cache
// does not touch it.
func testToolsetTrust(t *testing.T, s store.Store) {
	createThreads(t, s, "r1", "r2")
	trust := func(root, url, digest, want string) {
		t.Helper()
		update(t, s, func(tx store.Tx) error {
			got, err := tx.TrustToolset(root, url, digest)
			if err != nil {
				return err
			}
			if got != want {
				t.Errorf("TrustToolset(%s, %s, %s) = %s, want %s", root, url, digest, got, want)
			}
			return nil
		})
	}
	trust("r1", "http://x", "d1", "d1")
	trust("r1", "http://x", "d2", "d1")
	trust("r2", "http://x", "d2", "d2")
	trust("r1", "http://y", "d3", "d3")
	update(t, s, func(tx store.Tx) error {
		return tx.PutToolset(store.CachedToolset{RootID: "r1", BaseURL: "http://x", Manifest: json.RawMessage(`{"v":9}`), Fetched: at(time.Second)})
	})
	trust("r1", "http://x", "d9", "d1")
	// A digest recorded in a transaction that rolls back is not kept.
	err := s.Update(context.Background(), func(tx store.Tx) error {
		if _, err := tx.TrustToolset("r2", "http://z", "rolled-back"); err != nil {
			return err
		}
		return errRollback
	})
	if !errors.Is(err, errRollback) {
		t.Fatalf("Update = %v, want the function's error", err)
	}
	trust("r2", "http://z", "d4", "d4")
}

// testChoices: PutChoice inserts or replaces (thread, call), ResponseURL
// included; ThreadChoices lists a thread's choices oldest first;
// TakeChoice returns a choice and deletes it, so a second take finds
// nothing (RAP UC-1).
func testChoices(t *testing.T, s store.Store) {
	createThreads(t, s, "a", "b")
	mk := func(thread, call string, created time.Duration) store.Choice {
		return store.Choice{ThreadID: thread, CallID: call, ToolName: "ask", Prompt: "pick " + call, Choices: []string{"yes", "no"},
			Default: 1, ResponseURL: "http://tools.example/choice?key=secret-" + call, Created: at(created)}
	}
	update(t, s, func(tx store.Tx) error {
		for _, c := range []store.Choice{mk("a", "k1", 2*time.Second), mk("a", "k2", time.Second), mk("b", "k1", time.Second)} {
			if err := tx.PutChoice(c); err != nil {
				return err
			}
		}
		return nil
	})
	replaced := mk("a", "k2", time.Second)
	replaced.Choices, replaced.Default = []string{"a", "b", "c"}, 2
	update(t, s, func(tx store.Tx) error { return tx.PutChoice(replaced) })
	view(t, s, func(tx store.Tx) error {
		cs, err := tx.ThreadChoices("a")
		if err != nil {
			return err
		}
		if len(cs) != 2 || cs[0].CallID != "k2" || cs[1].CallID != "k1" {
			t.Fatalf("ThreadChoices(a) = %+v, want k2 then k1 (oldest first)", cs)
		}
		if !choiceEqual(cs[0], replaced) || !choiceEqual(cs[1], mk("a", "k1", 2*time.Second)) {
			t.Errorf("ThreadChoices(a) =\n%+v\nwant\n%+v", cs, []store.Choice{replaced, mk("a", "k1", 2*time.Second)})
		}
		return nil
	})
	var took store.Choice
	update(t, s, func(tx store.Tx) error {
		var err error
		took, err = tx.TakeChoice("a", "k1")
		return err
	})
	if !choiceEqual(took, mk("a", "k1", 2*time.Second)) {
		t.Errorf("TakeChoice(a, k1) = %+v", took)
	}
	update(t, s, func(tx store.Tx) error {
		_, err := tx.TakeChoice("a", "k1")
		wantNotFound(t, "a second TakeChoice(a, k1)", err)
		return nil
	})
	view(t, s, func(tx store.Tx) error {
		for thread, want := range map[string]int{"a": 1, "b": 1} {
			if cs, err := tx.ThreadChoices(thread); err != nil || len(cs) != want {
				t.Errorf("ThreadChoices(%s) after taking a's k1 = %d choices, %v; want %d", thread, len(cs), err, want)
			}
		}
		return nil
	})
	// A user input keeps its fields; a choice has none.
	input := mk("b", "k9", 3*time.Second)
	input.Choices, input.Default = nil, 0
	input.Fields = json.RawMessage(`[{"name":"email","type":"string","required":true}]`)
	update(t, s, func(tx store.Tx) error { return tx.PutChoice(input) })
	view(t, s, func(tx store.Tx) error {
		cs, err := tx.ThreadChoices("b")
		if err != nil {
			return err
		}
		if len(cs) != 2 || cs[0].Fields != nil || !choiceEqual(cs[1], input) {
			t.Errorf("ThreadChoices(b) = %+v, want k1 without fields and then the user input %+v", cs, input)
		}
		return nil
	})
	update(t, s, func(tx store.Tx) error {
		took, err := tx.TakeChoice("b", "k9")
		if err == nil && !choiceEqual(took, input) {
			t.Errorf("TakeChoice(b, k9) = %+v, want %+v", took, input)
		}
		return err
	})
}

func choiceEqual(a, b store.Choice) bool {
	return a.ThreadID == b.ThreadID && a.CallID == b.CallID && a.ToolName == b.ToolName && a.Prompt == b.Prompt &&
		slices.Equal(a.Choices, b.Choices) && a.Default == b.Default && a.ResponseURL == b.ResponseURL && a.Created.Equal(b.Created) &&
		bytes.Equal(a.Fields, b.Fields)
}

// testHeldEvents: HoldEvent appends to a call's held events with
// increasing ids; HeldEventStats counts them and their payload bytes, per
// call and in the store; TakeHeldEvents returns them in arrival order and
// deletes them (none is not an error); EndedHeldCalls lists the calls with
// held events that are no longer pending (RAP SU-1, SU-3).
func testHeldEvents(t *testing.T, s store.Store) {
	createThreads(t, s, "a")
	update(t, s, func(tx store.Tx) error {
		return tx.PutCalls([]store.Call{
			{ThreadID: "a", CallID: "w1", ToolName: "watch", Arguments: json.RawMessage(`{}`), State: store.CallDispatched, Created: at(time.Second)},
			{ThreadID: "a", CallID: "w2", ToolName: "watch", Arguments: json.RawMessage(`{}`), State: store.CallDispatched, Created: at(2 * time.Second)},
		})
	})
	p := []string{`{"event_id":"e1","data":1}`, `{"event_id":"e2","data":22}`, `{"event_id":"e3","data":333}`}
	update(t, s, func(tx store.Tx) error {
		for i, call := range []string{"w1", "w2", "w1"} {
			if err := tx.HoldEvent(store.HeldEvent{ThreadID: "a", CallID: call, Payload: json.RawMessage(p[i]), Created: at(time.Minute)}); err != nil {
				return err
			}
		}
		return nil
	})
	view(t, s, func(tx store.Tx) error {
		st, err := tx.HeldEventStats("a", "w1")
		if err != nil {
			return err
		}
		total := int64(len(p[0]) + len(p[1]) + len(p[2]))
		if st.Count != 2 || st.Bytes != int64(len(p[0])+len(p[2])) || st.TotalBytes != total {
			t.Errorf("HeldEventStats(a, w1) = %+v, want Count 2, Bytes %d, TotalBytes %d", st, len(p[0])+len(p[2]), total)
		}
		if st, err := tx.HeldEventStats("a", "none"); err != nil || st.Count != 0 || st.Bytes != 0 || st.TotalBytes != total {
			t.Errorf("HeldEventStats of a call with none = %+v, %v", st, err)
		}
		if ended, err := tx.EndedHeldCalls(); err != nil || len(ended) != 0 {
			t.Errorf("EndedHeldCalls with every call pending = %v, %v", callIDs(ended), err)
		}
		return nil
	})
	update(t, s, func(tx store.Tx) error {
		_, err := tx.SetCallState("a", "w2", store.CallDone)
		return err
	})
	var taken []store.HeldEvent
	update(t, s, func(tx store.Tx) error {
		ended, err := tx.EndedHeldCalls()
		if err != nil {
			return err
		}
		if len(ended) != 1 || ended[0].CallID != "w2" || ended[0].State != store.CallDone {
			t.Errorf("EndedHeldCalls after w2 ended = %+v, want w2", ended)
		}
		taken, err = tx.TakeHeldEvents("a", "w1")
		if err != nil {
			return err
		}
		none, err := tx.TakeHeldEvents("a", "never")
		if err != nil || len(none) != 0 {
			t.Errorf("TakeHeldEvents of a call with none = %v, %v; want nothing, no error", none, err)
		}
		return nil
	})
	if len(taken) != 2 || !jsonEqual(taken[0].Payload, []byte(p[0])) || !jsonEqual(taken[1].Payload, []byte(p[2])) || taken[0].ID >= taken[1].ID {
		t.Fatalf("TakeHeldEvents(a, w1) = %+v, want e1 then e3 with increasing ids", taken)
	}
	for _, e := range taken {
		if e.ThreadID != "a" || e.CallID != "w1" || !e.Created.Equal(at(time.Minute)) {
			t.Errorf("taken held event %+v, want thread a, call w1, Created as written", e)
		}
	}
	view(t, s, func(tx store.Tx) error {
		if st, err := tx.HeldEventStats("a", "w1"); err != nil || st.Count != 0 || st.TotalBytes != int64(len(p[1])) {
			t.Errorf("HeldEventStats after the take = %+v, %v; want none of w1's left, w2's %d bytes in total", st, err, len(p[1]))
		}
		return nil
	})
	update(t, s, func(tx store.Tx) error {
		_, err := tx.TakeHeldEvents("a", "w2")
		return err
	})
	view(t, s, func(tx store.Tx) error {
		if ended, err := tx.EndedHeldCalls(); err != nil || len(ended) != 0 {
			t.Errorf("EndedHeldCalls after taking w2's events = %v, %v; want none", callIDs(ended), err)
		}
		return nil
	})
}

// testCallChecks: PutCallCheck inserts or replaces (thread, call);
// DeleteCallCheck of none is not an error; DueCallChecks returns up to
// limit due checks, earliest first; NextCallCheck the earliest due time;
// AdvanceCallChecks makes every later check due and counts them.
func testCallChecks(t *testing.T, s store.Store) {
	createThreads(t, s, "a")
	view(t, s, func(tx store.Tx) error {
		if _, ok, err := tx.NextCallCheck(); err != nil || ok {
			t.Errorf("NextCallCheck with no checks: ok = %v, %v; want false", ok, err)
		}
		return nil
	})
	update(t, s, func(tx store.Tx) error {
		for _, c := range []store.CallCheck{
			{ThreadID: "a", CallID: "c3", Due: at(3 * time.Second)},
			{ThreadID: "a", CallID: "c1", Due: at(time.Second), Failures: 2},
			{ThreadID: "a", CallID: "c2", Due: at(2 * time.Second)},
			{ThreadID: "a", CallID: "c4", Due: at(4 * time.Second)},
		} {
			if err := tx.PutCallCheck(c); err != nil {
				return err
			}
		}
		return tx.DeleteCallCheck("a", "none")
	})
	view(t, s, func(tx store.Tx) error {
		due, err := tx.DueCallChecks(at(3*time.Second), 2)
		if err != nil {
			return err
		}
		if len(due) != 2 || due[0].CallID != "c1" || due[1].CallID != "c2" || due[0].Failures != 2 || due[0].ThreadID != "a" || !due[0].Due.Equal(at(time.Second)) {
			t.Errorf("DueCallChecks(3s, limit 2) = %+v, want c1 (2 failures, due 1s) then c2", due)
		}
		if due, err := tx.DueCallChecks(at(time.Second-time.Microsecond), 10); err != nil || len(due) != 0 {
			t.Errorf("DueCallChecks before any is due = %+v, %v", due, err)
		}
		if next, ok, err := tx.NextCallCheck(); err != nil || !ok || !next.Equal(at(time.Second)) {
			t.Errorf("NextCallCheck = %v, %v, %v; want %v", next, ok, err, at(time.Second))
		}
		return nil
	})
	update(t, s, func(tx store.Tx) error {
		if err := tx.PutCallCheck(store.CallCheck{ThreadID: "a", CallID: "c1", Due: at(10 * time.Second), Failures: 3}); err != nil {
			return err
		}
		return tx.DeleteCallCheck("a", "c2")
	})
	var advanced int64
	update(t, s, func(tx store.Tx) error {
		var err error
		advanced, err = tx.AdvanceCallChecks(at(3 * time.Second))
		return err
	})
	if advanced != 2 {
		t.Errorf("AdvanceCallChecks(3s) changed %d checks, want 2 (c4 and the rescheduled c1; c3 is already due then)", advanced)
	}
	view(t, s, func(tx store.Tx) error {
		due, err := tx.DueCallChecks(at(3*time.Second), 10)
		if err != nil {
			return err
		}
		got := map[string]store.CallCheck{}
		for _, c := range due {
			got[c.CallID] = c
		}
		if len(due) != 3 || got["c1"].Failures != 3 || got["c3"].CallID == "" || got["c4"].CallID == "" {
			t.Errorf("DueCallChecks(3s) after the advance = %+v, want c1 (3 failures), c3, c4", due)
		}
		return nil
	})
}

// errRollback is the error the suite's failing Update functions return.
var errRollback = errors.New("storetest: roll this transaction back")

// testUncheckedCalls: UncheckedCalls lists the dispatched calls, updated
// at or before a time and not of the skipped toolset, that have no check,
// up to a limit; AddCallCheck and AddCallChecks add a check only where
// none is, keeping the existing one as it is.
func testUncheckedCalls(t *testing.T, s store.Store) {
	createThreads(t, s, "a")
	call := func(id, toolset string, state store.CallState) store.Call {
		return store.Call{ThreadID: "a", CallID: id, ToolName: "x", Arguments: []byte(`{}`), Toolset: toolset,
			Endpoint: "http://tool.example/invoke", State: state, Created: at(0)}
	}
	update(t, s, func(tx store.Tx) error {
		if err := tx.PutCalls([]store.Call{call("d1", "ts", store.CallDispatched), call("d2", "ts", store.CallDispatched),
			call("d3", "ts", store.CallDispatched), call("b1", "builtin", store.CallDispatched),
			call("n1", "ts", store.CallNew), call("x1", "ts", store.CallDone)}); err != nil {
			return err
		}
		return tx.PutCallCheck(store.CallCheck{ThreadID: "a", CallID: "d2", Due: at(time.Hour), Failures: 2})
	})
	ids := func(calls []store.Call) []string {
		var out []string
		for _, c := range calls {
			out = append(out, c.CallID)
		}
		slices.Sort(out)
		return out
	}
	later, earlier := time.Now().Add(time.Hour), time.Now().Add(-time.Hour)
	view(t, s, func(tx store.Tx) error {
		got, err := tx.UncheckedCalls(later, "builtin", 10)
		if err != nil {
			return err
		}
		if !slices.Equal(ids(got), []string{"d1", "d3"}) {
			t.Errorf("UncheckedCalls = %v, want the dispatched calls without a check: d1, d3", ids(got))
		}
		if got, err := tx.UncheckedCalls(later, "builtin", 1); err != nil || len(got) != 1 {
			t.Errorf("UncheckedCalls with limit 1 = %v, %v; want one call", ids(got), err)
		}
		if got, err := tx.UncheckedCalls(earlier, "builtin", 10); err != nil || len(got) != 0 {
			t.Errorf("UncheckedCalls before the calls were updated = %v, %v; want none", ids(got), err)
		}
		return nil
	})
	update(t, s, func(tx store.Tx) error {
		for _, c := range []struct {
			id   string
			want bool
		}{{"d1", true}, {"d1", false}} {
			added, err := tx.AddCallCheck(store.CallCheck{ThreadID: "a", CallID: c.id, Due: at(time.Minute)})
			if err != nil {
				return err
			}
			if added != c.want {
				t.Errorf("AddCallCheck(%s) = %v, want %v", c.id, added, c.want)
			}
		}
		if n, err := tx.AddCallChecks(nil); err != nil || n != 0 {
			t.Errorf("AddCallChecks(none) = %d, %v; want 0", n, err)
		}
		n, err := tx.AddCallChecks([]store.CallCheck{
			{ThreadID: "a", CallID: "d1", Due: at(time.Minute)}, {ThreadID: "a", CallID: "d2", Due: at(time.Minute)},
			{ThreadID: "a", CallID: "d3", Due: at(time.Minute)}})
		if err != nil {
			return err
		}
		if n != 1 {
			t.Errorf("AddCallChecks(d1, d2, d3) = %d, want 1: only d3 had no check", n)
		}
		return nil
	})
	view(t, s, func(tx store.Tx) error {
		if got, err := tx.UncheckedCalls(later, "builtin", 10); err != nil || len(got) != 0 {
			t.Errorf("UncheckedCalls after AddCallChecks = %v, %v; want none", ids(got), err)
		}
		due, err := tx.DueCallChecks(at(2*time.Hour), 10)
		if err != nil {
			return err
		}
		for _, c := range due {
			if c.CallID == "d2" && (!c.Due.Equal(at(time.Hour)) || c.Failures != 2) {
				t.Errorf("the check of d2 after AddCallCheck = %+v; want it kept (due in an hour, 2 failures)", c)
			}
		}
		if len(due) != 3 {
			t.Errorf("checks = %+v, want d1, d2 and d3", due)
		}
		return nil
	})
}
