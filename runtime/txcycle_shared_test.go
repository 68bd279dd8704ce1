package runtime

import (
	"context"
	"errors"
	"testing"

	"github.com/gorap/gorap/model/scripted"
	"github.com/gorap/gorap/runtime/store"
)

// A tool-call cycle on a shared store: what it leaves in the store once
// its thread is idle.

// TestSharedStoreCycleHandsBackAndStoresEvents: after a tool's result is
// answered on a shared store, the thread's lease is handed back (by the
// slice's last commit) and the client events of the cycle are stored, in
// order, although nothing else commits after them (the writer stores them
// once no transaction carried them).
func TestSharedStoreCycleHandsBackAndStoresEvents(t *testing.T) {
	ts := newToolServer(t, "clock", tool("get_time"))
	e := newEnv(t, envOptions{postgres: true, servers: []string{ts.URL()}, turns: []scripted.Turn{
		{ToolCalls: []scripted.Call{call("get_time", `{}`)}},
		{Text: "It is {{last_result}}."},
	}})
	th := e.newThread()
	e.post(th, "what time is it?")
	reply(t, ts.next(), "12:00 UTC")
	e.waitHistory(th, "the final answer", func(h []store.Message) bool { return hasText(h, store.RoleAssistant, "It is 12:00 UTC.") })
	e.idle(th)
	var evs []store.ThreadEvent
	poll(t, "the lease handed back and the answer's events stored", func() bool {
		var lease error
		evs = nil
		e.rt.store.View(context.Background(), func(tx store.Tx) error {
			_, _, lease = leases(tx).ThreadLease(th)
			evs, _ = tx.ThreadEventsAfter(th, 0, 1000)
			return nil
		})
		if !errors.Is(lease, store.ErrNotFound) {
			return false
		}
		results := 0
		for _, ev := range evs {
			switch {
			case ev.Type == EventToolResult:
				results++
			case ev.Type == EventMessage && results > 0:
				return true
			}
		}
		return false
	})
	var calls, results, answers int
	for i, ev := range evs {
		if ev.ID != int64(i+1) {
			t.Fatalf("stored event %d has id %d, want %d: the ids have a gap", i, ev.ID, i+1)
		}
		switch ev.Type {
		case EventToolCall:
			calls++
		case EventToolResult:
			if calls == 0 {
				t.Errorf("the tool's result was stored before its call")
			}
			results++
		case EventMessage:
			if results > 0 {
				answers++
			}
		}
	}
	if calls != 1 || results != 1 || answers == 0 {
		t.Errorf("stored %d tool calls, %d results and %d messages after the result, want 1, 1 and some", calls, results, answers)
	}
}
