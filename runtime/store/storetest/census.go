package storetest

import (
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/gorap/gorap/runtime/store"
)

// censusQuery is the query testCensus runs: the engine's meanings of
// timers, keys and toolsets, in names of the test's own.
func censusQuery(now time.Time) store.CensusQuery {
	return store.CensusQuery{Now: now, RetryTimerKind: "retry", SleepTimerKind: "nap", AuthKeyPrefix: "auth:",
		LocalToolset: "local", Ages: []time.Duration{0, time.Minute, time.Hour}}
}

// A census (store.Censuses, when the store's transactions implement it)
// counts closed threads, and every other thread once by its facts: input
// queued, a retry timer, a question to the user (a choice, or a pending
// call marked with the auth key), pending calls beyond its sleep timers
// or an active subscription, a sleep timer, its session moving out, and a
// busy descendant reached through threads that are not closed. It counts
// the pending calls of tool servers (not of the local toolset, not ended
// ones) and the threads that have one, made at least each age ago.
func testCensus(t *testing.T, s store.Store) {
	var ok bool
	view(t, s, func(tx store.Tx) error {
		_, ok = tx.(store.Censuses)
		return nil
	})
	if !ok {
		t.Skip("the store's transactions do not implement store.Censuses")
	}
	now := time.Now().UTC().Truncate(time.Microsecond)
	call := func(thread, id, toolset string, state store.CallState, age time.Duration) store.Call {
		return store.Call{ThreadID: thread, CallID: id, ToolName: "tool", Toolset: toolset, Endpoint: "http://tools.example/invoke",
			TurnSeq: 1, State: state, Created: now.Add(-age)}
	}
	update(t, s, func(tx store.Tx) error {
		for _, th := range []store.Thread{
			{ID: "quiet"}, {ID: "closed", Status: store.ThreadClosed}, {ID: "queued"}, {ID: "retry"}, {ID: "choice"},
			{ID: "auth"}, {ID: "tools"}, {ID: "sub"}, {ID: "sleep"}, {ID: "moving"},
			{ID: "gp"}, {ID: "p", ParentID: "gp"}, {ID: "c", ParentID: "p"},
			{ID: "p3"}, {ID: "c3", ParentID: "p3", Status: store.ThreadClosed}, {ID: "g3", ParentID: "c3"},
			{ID: "p4"}, {ID: "c4", ParentID: "p4"},
		} {
			if th.Status == "" {
				th.Status = store.ThreadActive
			}
			th.Created = now
			if err := tx.CreateThread(th); err != nil {
				return err
			}
		}
		for _, it := range []store.InboxItem{
			{ThreadID: "queued", Kind: store.KindUserMessage, Payload: []byte(`{"text":"hi"}`), DedupKey: "q1"},
			{ThreadID: "retry", Kind: store.KindUserMessage, Payload: []byte(`{"text":"hi"}`), DedupKey: "r1"},
			{ThreadID: "c4", Kind: store.KindUserMessage, Payload: []byte(`{"text":"hi"}`), DedupKey: "c4"},
		} {
			if _, err := tx.Enqueue(it); err != nil {
				return err
			}
		}
		for _, tm := range []store.Timer{
			{ID: "retry-timer", ThreadID: "retry", Kind: "retry", Due: now.Add(time.Minute)},
			{ID: "nap-timer", ThreadID: "sleep", Kind: "nap", Due: now.Add(time.Minute)},
		} {
			if err := tx.PutTimer(tm); err != nil {
				return err
			}
		}
		if err := tx.PutChoice(store.Choice{ThreadID: "choice", CallID: "ask", ToolName: "tool", Prompt: "?", Choices: []string{"a", "b"},
			ResponseURL: "http://tools.example/answer", Created: now}); err != nil {
			return err
		}
		if err := tx.PutCalls([]store.Call{
			call("auth", "a1", "ts", store.CallDispatched, 30*time.Second),
			call("tools", "t1", "ts", store.CallDispatched, 2*time.Hour),
			call("tools", "t2", "ts", store.CallNew, 2*time.Minute),
			call("tools", "t3", "ts", store.CallDone, 3*time.Hour),
			call("sub", "s1", "ts", store.CallDone, 3*time.Hour),
			call("sleep", "n1", "local", store.CallDispatched, 2*time.Hour),
			call("c", "c1", "ts", store.CallCancelled, 2*time.Hour),
			call("c", "c2", "ts", store.CallDispatched, 5*time.Second),
			call("g3", "g1", "ts", store.CallDispatched, 5*time.Second),
		}); err != nil {
			return err
		}
		if _, err := tx.MarkKeySeen("auth", "auth:auth:a1"); err != nil {
			return err
		}
		if err := tx.PutSubscription(store.Subscription{ThreadID: "sub", CallID: "s1", ToolName: "tool", State: store.SubscriptionActive}); err != nil {
			return err
		}
		return tx.PutMove(store.Move{RootID: "moving", Direction: store.MoveOut, ID: "m1", State: store.MoveLeaving,
			Peer: "http://other.example", Created: now, Updated: now})
	})
	var got store.Census
	view(t, s, func(tx store.Tx) error {
		var err error
		got, err = tx.(store.Censuses).Census(censusQuery(now))
		return err
	})
	want := map[store.ThreadFacts]int64{
		{}:                             2, // quiet, p3 (its only busy descendant is under a closed child)
		{Queued: true}:                 2, // queued, c4
		{Queued: true, Retrying: true}: 1,
		{Asking: true}:                 1,
		{Asking: true, Tools: true}:    1,
		{Tools: true}:                  4, // tools, sub, c, g3
		{Sleeping: true}:               1,
		{Moving: true}:                 1,
		{BusyBelow: true}:              3, // gp, p, p4 (c4 has input)
	}
	if got.Closed != 2 {
		t.Errorf("Closed = %d, want 2 (closed, c3)", got.Closed)
	}
	if !maps.Equal(got.Open, want) {
		t.Errorf("open threads by facts:\n got  %v\n want %v", got.Open, want)
	}
	// Pending calls of tool servers: a1 (30s), t1 (2h), t2 (2m), c2 (5s),
	// g1 (5s); threads: auth, tools, c, g3.
	if wantCalls := []int64{5, 2, 1}; !slices.Equal(got.PendingCalls, wantCalls) {
		t.Errorf("PendingCalls = %v, want %v (ages 0, 1m, 1h)", got.PendingCalls, wantCalls)
	}
	if wantThreads := []int64{4, 1, 1}; !slices.Equal(got.WaitingThreads, wantThreads) {
		t.Errorf("WaitingThreads = %v, want %v (ages 0, 1m, 1h)", got.WaitingThreads, wantThreads)
	}
}
