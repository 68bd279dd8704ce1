package runtime

import (
	"context"
	"testing"

	"github.com/gorap/gorap/model/scripted"
	"github.com/gorap/gorap/runtime/store"
)

// runtimeCallState reads a call's state through the runtime's store.
func runtimeCallState(e *env, thread, id string) (store.CallState, error) {
	var c store.Call
	err := e.rt.store.View(context.Background(), func(tx store.Tx) error {
		var err error
		c, err = tx.Call(thread, id)
		return err
	})
	return c.State, err
}

// TestSharedStoreDispatchedMarkWritten: on a shared store a call whose
// tool accepted it and sends no result yet is recorded as dispatched by the
// time its thread is idle (the marks wait, but Idle waits for them), and
// a result that arrives afterwards ends it as usual.
func TestSharedStoreDispatchedMarkWritten(t *testing.T) {
	ts := newToolServer(t, "clock", tool("get_time"))
	e := newEnv(t, envOptions{postgres: true, servers: []string{ts.URL()}, turns: []scripted.Turn{
		{ToolCalls: []scripted.Call{call("get_time", `{}`)}},
		{Text: "It is {{last_result}}."},
	}})
	th := e.newThread()
	e.post(th, "what time is it?")
	inv := ts.next()
	e.idle(th)
	if got, err := runtimeCallState(e, th, inv.ID); err != nil || got != store.CallDispatched {
		t.Fatalf("after the tool's 200 and Idle the call is %q (%v), want %q", got, err, store.CallDispatched)
	}
	reply(t, inv, "12:00 UTC")
	e.waitHistory(th, "the final answer", func(h []store.Message) bool { return hasText(h, store.RoleAssistant, "It is 12:00 UTC.") })
	e.idle(th)
	if got, err := runtimeCallState(e, th, inv.ID); err != nil || got != store.CallDone {
		t.Fatalf("after its result the call is %q (%v), want %q", got, err, store.CallDone)
	}
}
