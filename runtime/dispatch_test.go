package runtime

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gorap/gorap/model/scripted"
	"github.com/gorap/gorap/rap"
	"github.com/gorap/gorap/runtime/store"
)

// waitInvocations polls the tool server until it has seen n invocations
// (whatever it answered).
func waitInvocations(t *testing.T, ts *toolServer, n int) []rap.Invocation {
	t.Helper()
	deadline := time.Now().Add(waitFor)
	for {
		invs := ts.invocations()
		if len(invs) >= n {
			return invs
		}
		if time.Now().After(deadline) {
			t.Fatalf("tool server %s saw %d invocations, want %d", ts.name, len(invs), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Any 2xx answer acknowledges an invocation, as the
// reference runtime accepts (RAP TR-2, TR-4). A tool that answers 202 or
// 204 and then sends its result gets that result to the model exactly
// once, with no error result and no "duplicate" refusal.
func TestTR4Any2xxAcceptsInvocation(t *testing.T) {
	ts := newToolServer(t, "jobs", tool("accepted_job"), tool("nocontent_job"))
	ts.onInvoke = func(inv rap.Invocation) int {
		if inv.Operation == "accepted_job" {
			return http.StatusAccepted
		}
		return http.StatusNoContent
	}
	e := newEnv(t, envOptions{servers: []string{ts.URL()}, turns: []scripted.Turn{
		{ToolCalls: []scripted.Call{call("accepted_job", `{}`), call("nocontent_job", `{}`)}},
		{Text: "both done", Repeat: true},
	}})
	th := e.newThread()
	e.post(th, "run both")
	invs := waitInvocations(t, ts, 2)
	// Both calls must be recorded as accepted before the results come:
	// a refused call would already have its error result.
	for _, inv := range invs {
		deadline := time.Now().Add(waitFor)
		for {
			st, err := callState(e, th, inv.ID)
			if err != nil {
				t.Fatal(err)
			}
			if st == store.CallDispatched {
				break
			}
			if st != store.CallNew || time.Now().After(deadline) {
				t.Fatalf("call %s (%s) is %q after a 2xx answer, want dispatched; history:\n%s", inv.ID, inv.Operation, st, dump(e.history(th)))
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	for _, inv := range invs {
		status, body := callback(t, inv.CallbackURL, rap.ToolResult{GroupID: inv.GroupID, ID: inv.ID, Text: "result of " + inv.Operation})
		if status != http.StatusOK || strings.Contains(body, "duplicate") {
			t.Fatalf("result of %s: status %d, body %s; want it accepted", inv.Operation, status, body)
		}
	}
	h := e.waitHistory(th, "the final answer", func(h []store.Message) bool { return hasText(h, store.RoleAssistant, "both done") })
	rs := results(h)
	if len(rs) != 2 {
		t.Fatalf("results = %+v, want exactly the two real ones", rs)
	}
	for _, r := range rs {
		if r.IsError || !strings.HasPrefix(r.Text, "result of ") {
			t.Fatalf("result %+v is not the tool's real result", r)
		}
	}
	// The model saw each real result exactly once.
	reqs := e.model.requests()
	last := reqs[len(reqs)-1]
	for _, inv := range invs {
		want := "result of " + inv.Operation
		n := 0
		for _, m := range last.Messages {
			n += strings.Count(m.Text, want)
			for _, r := range m.ToolResults {
				if r.CallID == inv.ID && r.IsError {
					t.Fatalf("the model saw an error result for %s: %q", inv.Operation, r.Text)
				}
				n += strings.Count(r.Text, want)
			}
		}
		if n != 1 {
			t.Fatalf("the model saw the result of %s %d times, want once", inv.Operation, n)
		}
	}
}

// The audit log's endpoint is redact's answer, the first time and when
// it comes from the cache.
func TestRedactedEndpointIsRedact(t *testing.T) {
	for _, u := range []string{"http://user:secret@tools.example:8080/rap?key=abc", "http://127.0.0.1:9/x", "::bad"} {
		for range 2 {
			if got, want := redactedEndpoint(u), redact(u); got != want {
				t.Errorf("redactedEndpoint(%q) = %q, want %q", u, got, want)
			}
		}
	}
}
