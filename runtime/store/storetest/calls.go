package storetest

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/gorap/gorap/runtime/store"
)

func callIDs(cs []store.Call) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.CallID
	}
	return out
}

// testCalls: PutCalls stores every field and refuses an existing (thread,
// call id); SetCallState moves a call only from the given states (any when
// none) and reports it; CallsInState, ThreadCalls and PendingCalls are
// oldest first; DueCalls and NextDeadline see only pending calls with a
// deadline.
func testCalls(t *testing.T, s store.Store) {
	createThreads(t, s, "a", "b")
	mk := func(thread, id string, created time.Duration, state store.CallState, deadline time.Time) store.Call {
		return store.Call{ThreadID: thread, CallID: id, ToolName: "tool-" + id, Arguments: json.RawMessage(`{"id":"` + id + `"}`),
			Toolset: "ts", Endpoint: "http://tools.example/" + id, TurnSeq: 2, State: state, Deadline: deadline, Created: at(created)}
	}
	calls := []store.Call{
		mk("a", "c2", time.Second, store.CallNew, at(time.Hour)),
		mk("a", "c1", 2*time.Second, store.CallDispatched, at(30*time.Minute)),
		mk("a", "c3", 3*time.Second, store.CallDone, at(time.Minute)),
		mk("b", "c1", 4*time.Second, store.CallNew, time.Time{}),
	}
	update(t, s, func(tx store.Tx) error { return tx.PutCalls(calls) })
	if err := s.Update(ctx(), func(tx store.Tx) error {
		return tx.PutCalls([]store.Call{mk("a", "c1", 0, store.CallNew, time.Time{})})
	}); err == nil {
		t.Errorf("PutCalls of an existing (thread, call id) succeeded; want an error")
	}
	view(t, s, func(tx store.Tx) error {
		for _, want := range calls {
			got, err := tx.Call(want.ThreadID, want.CallID)
			if err != nil {
				return err
			}
			if got.ThreadID != want.ThreadID || got.CallID != want.CallID || got.ToolName != want.ToolName || !jsonEqual(got.Arguments, want.Arguments) ||
				got.Toolset != want.Toolset || got.Endpoint != want.Endpoint || got.TurnSeq != want.TurnSeq || got.State != want.State ||
				!got.Deadline.Equal(want.Deadline) || !got.Created.Equal(want.Created) || got.Updated.IsZero() {
				t.Errorf("Call(%s, %s) =\n%+v\nwant\n%+v (and Updated set)", want.ThreadID, want.CallID, got, want)
			}
		}
		check := func(what string, got []store.Call, err error, want ...string) {
			t.Helper()
			if err != nil {
				t.Errorf("%s: %v", what, err)
			} else if !slices.Equal(callIDs(got), want) && len(got)+len(want) > 0 {
				t.Errorf("%s = %v, want %v", what, callIDs(got), want)
			}
		}
		got, err := tx.ThreadCalls("a")
		check("ThreadCalls(a)", got, err, "c2", "c1", "c3")
		got, err = tx.PendingCalls("a")
		check("PendingCalls(a)", got, err, "c2", "c1")
		got, err = tx.CallsInState(store.CallNew)
		check("CallsInState(new)", got, err, "c2", "c1")
		got, err = tx.DueCalls(at(30 * time.Minute))
		check("DueCalls at the first deadline", got, err, "c1")
		got, err = tx.DueCalls(at(30*time.Minute - time.Microsecond))
		check("DueCalls before any pending deadline", got, err)
		got, err = tx.DueCalls(at(2 * time.Hour))
		check("DueCalls after every deadline", got, err, "c1", "c2")
		d, ok, err := tx.NextDeadline()
		if err != nil || !ok || !d.Equal(at(30*time.Minute)) {
			t.Errorf("NextDeadline = %v, %v, %v; want the pending call's %v (a done call's earlier deadline does not count)", d, ok, err, at(30*time.Minute))
		}
		return nil
	})
	update(t, s, func(tx store.Tx) error {
		for _, c := range []struct {
			thread, id string
			to         store.CallState
			from       []store.CallState
			want       bool
		}{
			{"a", "c2", store.CallDone, []store.CallState{store.CallDispatched}, false},
			{"a", "c2", store.CallDispatched, []store.CallState{store.CallNew}, true},
			{"a", "c2", store.CallDone, []store.CallState{store.CallNew, store.CallDispatched}, true},
			{"a", "c3", store.CallCancelled, nil, true},
			{"a", "nope", store.CallDone, nil, false},
		} {
			changed, err := tx.SetCallState(c.thread, c.id, c.to, c.from...)
			if err != nil && !(c.id == "nope") {
				return err
			}
			if changed != c.want {
				t.Errorf("SetCallState(%s, %s, %s, from %v) changed = %v, want %v", c.thread, c.id, c.to, c.from, changed, c.want)
			}
		}
		return nil
	})
	view(t, s, func(tx store.Tx) error {
		for id, want := range map[string]store.CallState{"c1": store.CallDispatched, "c2": store.CallDone, "c3": store.CallCancelled} {
			if c, err := tx.Call("a", id); err != nil || c.State != want {
				t.Errorf("Call(a, %s) state = %q, %v; want %q", id, c.State, err, want)
			}
		}
		if c, err := tx.Call("b", "c1"); err != nil || c.State != store.CallNew {
			t.Errorf("b's call c1 has state %q, %v; a's call of the same id must not move it", c.State, err)
		}
		got, err := tx.PendingCalls("a")
		if err != nil || !slices.Equal(callIDs(got), []string{"c1"}) {
			t.Errorf("PendingCalls(a) = %v, %v; want [c1]", callIDs(got), err)
		}
		d, ok, err := tx.NextDeadline()
		if err != nil || !ok || !d.Equal(at(30*time.Minute)) {
			t.Errorf("NextDeadline = %v, %v, %v", d, ok, err)
		}
		return nil
	})
	update(t, s, func(tx store.Tx) error {
		_, err := tx.SetCallState("a", "c1", store.CallDone)
		return err
	})
	view(t, s, func(tx store.Tx) error {
		if _, ok, err := tx.NextDeadline(); err != nil || ok {
			t.Errorf("NextDeadline with no pending call that has a deadline: ok = %v, %v; want false", ok, err)
		}
		return nil
	})
}

// testSubscriptions: PutSubscription inserts or replaces (thread, call);
// Subscription and ThreadSubscriptions read them back.
func testSubscriptions(t *testing.T, s store.Store) {
	createThreads(t, s, "a", "b")
	update(t, s, func(tx store.Tx) error {
		for _, sub := range []store.Subscription{
			{ThreadID: "a", CallID: "s2", ToolName: "watch", State: store.SubscriptionActive, Created: at(2 * time.Second)},
			{ThreadID: "a", CallID: "s1", ToolName: "watch", State: store.SubscriptionActive, Created: at(time.Second)},
			{ThreadID: "b", CallID: "s1", ToolName: "other", State: store.SubscriptionActive, Created: at(time.Second)},
		} {
			if err := tx.PutSubscription(sub); err != nil {
				return err
			}
		}
		return nil
	})
	update(t, s, func(tx store.Tx) error {
		return tx.PutSubscription(store.Subscription{ThreadID: "a", CallID: "s1", ToolName: "watch", State: store.SubscriptionFinal, Created: at(time.Second)})
	})
	view(t, s, func(tx store.Tx) error {
		got, err := tx.Subscription("a", "s1")
		if err != nil {
			return err
		}
		if got.ThreadID != "a" || got.CallID != "s1" || got.ToolName != "watch" || got.State != store.SubscriptionFinal || !got.Created.Equal(at(time.Second)) {
			t.Errorf("Subscription(a, s1) after a replace = %+v, want state final and the rest as written", got)
		}
		if got, err := tx.Subscription("b", "s1"); err != nil || got.State != store.SubscriptionActive || got.ToolName != "other" {
			t.Errorf("Subscription(b, s1) = %+v, %v; replacing a's must not touch b's", got, err)
		}
		subs, err := tx.ThreadSubscriptions("a")
		if err != nil {
			return err
		}
		var ids []string
		for _, sub := range subs {
			ids = append(ids, sub.CallID)
		}
		slices.Sort(ids)
		if !slices.Equal(ids, []string{"s1", "s2"}) {
			t.Errorf("ThreadSubscriptions(a) = %v, want s1 and s2", ids)
		}
		return nil
	})
}

// testPendingStates: a call is pending (store.CallState.Pending) exactly
// while it is new or dispatched, and every query for pending calls agrees:
// PendingCalls, CallsInState, DueCalls and NextDeadline see the new and
// dispatched calls and never a done or cancelled one, and EndedHeldCalls
// sees only the done and cancelled ones.
func testPendingStates(t *testing.T, s store.Store) {
	createThreads(t, s, "a")
	states := []store.CallState{store.CallNew, store.CallDispatched, store.CallDone, store.CallCancelled}
	var calls []store.Call
	var pending, ended []string
	for i, st := range states {
		id := "c-" + string(st)
		// The ended calls have the earlier deadlines: a query that let
		// them through would see them first.
		deadline := at(time.Hour - time.Duration(i)*time.Minute)
		calls = append(calls, store.Call{ThreadID: "a", CallID: id, ToolName: "watch", Arguments: json.RawMessage(`{}`),
			State: st, Deadline: deadline, Created: at(time.Duration(i) * time.Second)})
		if st.Pending() {
			pending = append(pending, id)
		} else {
			ended = append(ended, id)
		}
	}
	if !slices.Equal(pending, []string{"c-new", "c-dispatched"}) {
		t.Fatalf("CallState.Pending holds for %v; this case expects new and dispatched", pending)
	}
	update(t, s, func(tx store.Tx) error {
		if err := tx.PutCalls(calls); err != nil {
			return err
		}
		for _, c := range calls {
			if err := tx.HoldEvent(store.HeldEvent{ThreadID: "a", CallID: c.CallID, Payload: json.RawMessage(`{"event_id":"e"}`), Created: at(time.Minute)}); err != nil {
				return err
			}
		}
		return nil
	})
	view(t, s, func(tx store.Tx) error {
		sorted := func(cs []store.Call) []string {
			ids := callIDs(cs)
			slices.Sort(ids)
			return ids
		}
		wantPending := slices.Sorted(slices.Values(pending))
		if got, err := tx.PendingCalls("a"); err != nil || !slices.Equal(sorted(got), wantPending) {
			t.Errorf("PendingCalls = %v, %v; want %v", callIDs(got), err, wantPending)
		}
		if got, err := tx.DueCalls(at(2 * time.Hour)); err != nil || !slices.Equal(sorted(got), wantPending) {
			t.Errorf("DueCalls after every deadline = %v, %v; want %v", callIDs(got), err, wantPending)
		}
		if d, ok, err := tx.NextDeadline(); err != nil || !ok || !d.Equal(calls[1].Deadline) {
			t.Errorf("NextDeadline = %v, %v, %v; want the dispatched call's %v", d, ok, err, calls[1].Deadline)
		}
		for _, st := range states {
			if got, err := tx.CallsInState(st); err != nil || !slices.Equal(callIDs(got), []string{"c-" + string(st)}) {
				t.Errorf("CallsInState(%s) = %v, %v; want [c-%s]", st, callIDs(got), err, st)
			}
		}
		if got, err := tx.EndedHeldCalls(); err != nil || !slices.Equal(sorted(got), slices.Sorted(slices.Values(ended))) {
			t.Errorf("EndedHeldCalls = %v, %v; want %v", callIDs(got), err, ended)
		}
		return nil
	})
}
