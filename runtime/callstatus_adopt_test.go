package runtime

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/gorap/gorap/model/scripted"
	"github.com/gorap/gorap/rap"
	"github.com/gorap/gorap/runtime/store"
)

// A dispatched call costs no status check row until it
// has stayed dispatched a while: the sweep adds one then (adoptSilentCalls),
// due a silence after the call was accepted; a call that ended first never
// gets one. The silence here is an hour, so the sweep adopts nothing by
// itself while the test runs and the test calls the adoption directly.
func TestCallStatusCheckOnlyForCallsThatStayDispatched(t *testing.T) {
	srv := newStatusToolServer(t, knows, tool("job"))
	e, th, first := statusEnv(t, srv, time.Hour,
		scripted.Turn{ToolCalls: []scripted.Call{call("job", `{}`)}},
		scripted.Turn{ToolCalls: []scripted.Call{call("job", `{}`)}},
		scripted.Turn{Text: "done", Repeat: true})
	waitDispatched(t, e, th, first.ID)
	if c, ok := callCheck(e, th, first.ID); ok {
		t.Fatalf("a check was written with the dispatch: %+v", c)
	}

	// The first call ends at once; the second stays dispatched.
	if status, body := callback(t, first.CallbackURL, rap.ToolResult{GroupID: th, ID: first.ID, Text: "one"}); status != http.StatusOK {
		t.Fatalf("result: %d %s", status, body)
	}
	second := srv.next()
	waitDispatched(t, e, th, second.ID)

	n, err := e.rt.adoptSilentCalls(context.Background(), time.Now(), false)
	if err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Fatalf("adopted %d calls, want 1 (the one still dispatched)", n)
	}
	if c, ok := callCheck(e, th, first.ID); ok {
		t.Fatalf("the call that ended got a check: %+v", c)
	}
	var accepted store.Call
	if err := e.st.View(context.Background(), func(tx store.Tx) error {
		var err error
		accepted, err = tx.Call(th, second.ID)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	c, ok := callCheck(e, th, second.ID)
	if want := accepted.Updated.Add(time.Hour); !ok || c.Due.Sub(want).Abs() > time.Millisecond {
		t.Fatalf("check of the dispatched call = %+v (found %v), want due at %v, an hour after it was accepted", c, ok, want)
	}
	// Adopting again adds nothing.
	if n, err := e.rt.adoptSilentCalls(context.Background(), time.Now(), false); err != nil || n != 0 {
		t.Fatalf("second adoption added %d, %v; want 0", n, err)
	}
	if len(srv.asked()) != 0 {
		t.Fatalf("%d status requests before any silence ended, want 0", len(srv.asked()))
	}
}

// A subscription confirmed by its tool_result gets its
// status check at once, even when its call ended before the sweep would
// have adopted it (RAP SU-3).
func TestCallStatusCheckForConfirmedSubscription(t *testing.T) {
	srv := newStatusToolServer(t, knows, tool("job"))
	e, th, inv := statusEnv(t, srv, time.Hour,
		scripted.Turn{ToolCalls: []scripted.Call{call("job", `{}`)}},
		scripted.Turn{Text: "watching", Repeat: true})
	waitDispatched(t, e, th, inv.ID)
	before := time.Now()
	if status, body := callback(t, inv.CallbackURL, rap.ToolResult{GroupID: th, ID: inv.ID, Text: "watching", Subscription: true}); status != http.StatusOK {
		t.Fatalf("subscription result: %d %s", status, body)
	}
	c, ok := callCheck(e, th, inv.ID)
	if !ok || c.Due.Before(before.Add(time.Hour)) || c.Due.After(time.Now().Add(time.Hour)) {
		t.Fatalf("check of the subscription = %+v (found %v), want one due an hour after its confirmation", c, ok)
	}
}
