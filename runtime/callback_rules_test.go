package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorap/gorap/model/scripted"
	"github.com/gorap/gorap/rap"
	"github.com/gorap/gorap/runtime/store"
)

// subscribe confirms inv as a subscription and waits until the thread
// answered it.
func subscribe(t *testing.T, e *env, th string, inv rap.Invocation) {
	t.Helper()
	if status, body := callback(t, inv.CallbackURL, rap.ToolResult{GroupID: th, ID: inv.ID, Text: "subscribed", Subscription: true}); status != http.StatusOK {
		t.Fatalf("confirming result: %d %s", status, body)
	}
	e.waitHistory(th, "the confirmation", func(h []store.Message) bool { return countResults(h, "subscribed") == 1 })
	e.idle(th)
}

// inlineEvents returns the texts of the events injected inline in h.
func inlineEvents(h []store.Message) []string {
	_, res := injected(h)
	var out []string
	for _, r := range res {
		out = append(out, r.Text)
	}
	return out
}

// eventChildren returns, per child thread of th, the event text it was
// spawned for.
func eventChildren(t *testing.T, e *env, th string) []string {
	t.Helper()
	var out []string
	for _, c := range e.children(th) {
		ev := inlineEvents(e.history(c.ID))
		if len(ev) == 0 {
			t.Fatalf("child %s has no event", c.ID)
		}
		out = append(out, ev[len(ev)-1])
	}
	return out
}

// RAP SU-1, SU-3, SU-5, SU-6: events that arrive while the
// subscribing call is still pending are held (durably: across a restart),
// answered 200, and applied once, in arrival order, when the confirming
// tool_result arrives: the
// associative ones inline after the result, the others in child threads.
func TestEarlyEventsHeldUntilSubscriptionConfirmed(t *testing.T) {
	e, th, inv := pendingCall(t)
	evs := []rap.SubscriptionEvent{
		{GroupID: th, ToolCallID: inv.ID, Text: `{"n":1}`, Associative: true},
		{GroupID: th, ToolCallID: inv.ID, Text: `{"n":2}`},
		{GroupID: th, ToolCallID: inv.ID, Text: `{"n":3}`, Associative: true},
	}
	for i, ev := range evs {
		status, body := callback(t, inv.CallbackURL, ev)
		if status != http.StatusOK || !strings.Contains(body, "held") {
			t.Fatalf("early event %d: %d %s, want 200 held", i+1, status, body)
		}
	}
	e.idle(th)
	if got := inlineEvents(e.history(th)); len(got) != 0 || len(e.children(th)) != 0 {
		t.Fatalf("an event was applied before its subscription was confirmed: %v", got)
	}
	e.restart() // held durably
	subscribe(t, e, th, inv)
	e.waitHistory(th, "the held events", func(h []store.Message) bool { return len(inlineEvents(h)) >= 2 })
	poll(t, "the event's child thread", func() bool { return len(e.children(th)) >= 1 })
	e.idle(th)
	h := e.history(th)
	if got := strings.Join(inlineEvents(h), ","); got != `{"n":1},{"n":3}` {
		t.Fatalf("inline events = %s, want {\"n\":1},{\"n\":3} once each, in order", got)
	}
	// The result that confirmed the subscription comes first.
	for i, m := range h {
		for _, r := range m.ToolResults {
			if r.Name == InjectedToolName {
				if countResults(h[:i], "subscribed") != 1 {
					t.Fatalf("an event came before the confirming result:\n%s", dump(h))
				}
			}
		}
	}
	if got := eventChildren(t, e, th); len(got) != 1 || got[0] != `{"n":2}` {
		t.Fatalf("child threads handle %v, want one for {\"n\":2}", got)
	}
	// Nothing stays held.
	e.st.View(context.Background(), func(tx store.Tx) error {
		st, err := tx.HeldEventStats(th, inv.ID)
		if err != nil || st.Count != 0 || st.TotalBytes != 0 {
			t.Errorf("held after confirmation: %+v %v", st, err)
		}
		return nil
	})
}

// RAP SU-4: events held for a call that ends without
// confirming a subscription are discarded (and logged), never applied;
// later events for the call are answered 410.
func TestEarlyEventsDiscardedWithoutSubscription(t *testing.T) {
	e, th, inv := pendingCall(t)
	for _, text := range []string{"a", "b"} {
		if status, body := callback(t, inv.CallbackURL, rap.SubscriptionEvent{GroupID: th, ToolCallID: inv.ID, Text: text, Associative: true}); status != http.StatusOK {
			t.Fatalf("early event: %d %s", status, body)
		}
	}
	reply(t, inv, "plain result")
	e.waitHistory(th, "the answer", func(h []store.Message) bool { return hasText(h, store.RoleAssistant, "got plain result") })
	e.idle(th)
	if got := inlineEvents(e.history(th)); len(got) != 0 || len(e.children(th)) != 0 {
		t.Fatalf("events of a call without subscription were applied: %v", got)
	}
	recs := e.logs.records("held subscription events discarded (RAP SU-4)")
	if len(recs) != 1 || recs[0]["events"] != float64(2) {
		t.Fatalf("discard log = %v", recs)
	}
	if status, body := callback(t, inv.CallbackURL, rap.SubscriptionEvent{GroupID: th, ToolCallID: inv.ID, Text: "c"}); status != http.StatusGone {
		t.Fatalf("event after the call ended: %d %s, want 410", status, body)
	}
}

// At most MaxHeldEventsPerCall events are held per call;
// one more is answered 503 with Retry-After (a sender retries it; a 4xx
// would be final) and none is lost once the subscription is confirmed.
func TestHeldEventsBoundedByCount(t *testing.T) {
	e, th, inv := pendingCall(t)
	ev := func(i int) rap.SubscriptionEvent {
		b, _ := json.Marshal(map[string]int{"n": i})
		return rap.SubscriptionEvent{GroupID: th, ToolCallID: inv.ID, Text: string(b), Associative: true}
	}
	for i := range MaxHeldEventsPerCall {
		if status, body := callback(t, inv.CallbackURL, ev(i)); status != http.StatusOK {
			t.Fatalf("event %d: %d %s", i, status, body)
		}
	}
	req, _ := http.NewRequest(http.MethodPost, inv.CallbackURL, strings.NewReader(mustJSON(t, ev(MaxHeldEventsPerCall))))
	req.Header.Set(rap.IdempotencyKeyHeader, "key-of-the-deferred-event")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("event past the bound: %d, Retry-After %q; want 503 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	subscribe(t, e, th, inv)
	// The sender retries the deferred event with the same key; the refusal
	// kept nothing, so it is delivered now, not taken for a duplicate.
	if status, body := callback(t, inv.CallbackURL, ev(MaxHeldEventsPerCall), rap.IdempotencyKeyHeader, "key-of-the-deferred-event"); status != http.StatusOK || strings.Contains(body, "duplicate") {
		t.Fatalf("retried event: %d %s", status, body)
	}
	h := e.waitHistory(th, "every event", func(h []store.Message) bool { return len(inlineEvents(h)) >= MaxHeldEventsPerCall+1 })
	got := inlineEvents(h)
	for i, text := range got {
		if text != ev(i).Text {
			t.Fatalf("event %d is %s, want %s (arrival order)", i, text, ev(i).Text)
		}
	}
	if len(got) != MaxHeldEventsPerCall+1 {
		t.Fatalf("%d events, want %d", len(got), MaxHeldEventsPerCall+1)
	}
}

// The bytes held per call are bounded too; a first event
// is held whatever its size.
func TestHeldEventsBoundedByBytes(t *testing.T) {
	e, th, inv := pendingCall(t)
	big := strings.Repeat("x", 3<<20)
	if status, body := callback(t, inv.CallbackURL, rap.SubscriptionEvent{GroupID: th, ToolCallID: inv.ID, Text: big, Associative: true}); status != http.StatusOK {
		t.Fatalf("first event: %d %s", status, body)
	}
	status, body := callback(t, inv.CallbackURL, rap.SubscriptionEvent{GroupID: th, ToolCallID: inv.ID, Text: big[:2<<20], Associative: true})
	if status != http.StatusServiceUnavailable {
		t.Fatalf("event past the byte bound: %d %s, want 503", status, body)
	}
	if status, _ := callback(t, inv.CallbackURL, rap.SubscriptionEvent{GroupID: th, ToolCallID: inv.ID, Text: "small", Associative: true}); status != http.StatusOK {
		t.Fatalf("a small event within the bound: %d", status)
	}
	subscribe(t, e, th, inv)
	h := e.waitHistory(th, "both events", func(h []store.Message) bool { return len(inlineEvents(h)) >= 2 })
	if got := inlineEvents(h); len(got) != 2 || len(got[0]) != len(big) || got[1] != "small" {
		t.Fatalf("got %d events", len(got))
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// RAP RE-5, SU-4, SU-9: an event for a call the runtime
// never had is 404; one for a subscription that ended (final event
// received, call ended without subscription, thread closed) is 410 Gone,
// and changes nothing; token checks still come first (403). (Cancelled
// through cancel_subscription: TestSU7CancelSubscription.)
func TestEventStatusGoneAndUnknown(t *testing.T) {
	e, th, inv := pendingCall(t)
	subscribe(t, e, th, inv)
	ev := func(text string) rap.SubscriptionEvent {
		return rap.SubscriptionEvent{GroupID: th, ToolCallID: inv.ID, Text: text, Associative: true}
	}
	if status, body := callback(t, inv.CallbackURL, rap.SubscriptionEvent{GroupID: th, ToolCallID: inv.ID, Text: "last", Associative: true, Final: true}); status != http.StatusOK {
		t.Fatalf("final event: %d %s", status, body)
	}
	e.waitHistory(th, "the final event", func(h []store.Message) bool { return len(inlineEvents(h)) == 1 })
	e.idle(th)
	before := snapshot(t, e, th)
	cases := []struct {
		name   string
		url    string
		body   any
		status int
	}{
		{"after the final event", inv.CallbackURL, ev("after final"), http.StatusGone},
		{"a call the runtime never had", e.rt.callbackURL(th, "call_never"), rap.SubscriptionEvent{GroupID: th, ToolCallID: "call_never", Text: "x"}, http.StatusNotFound},
		{"a forged token", e.srv.URL + CallbackPath + forgeToken(th, inv.ID), ev("forged"), http.StatusForbidden},
		{"another call's id in the body", inv.CallbackURL, rap.SubscriptionEvent{GroupID: th, ToolCallID: "call_other", Text: "x"}, http.StatusForbidden},
	}
	for _, c := range cases {
		if status, body := callback(t, c.url, c.body); status != c.status {
			t.Errorf("%s: %d %s, want %d", c.name, status, body, c.status)
		}
	}
	e.idle(th)
	if after := snapshot(t, e, th); after != before {
		t.Fatalf("a refused event changed the store")
	}

	// A call that finished without subscribing.
	e2, th2, inv2 := pendingCall(t)
	reply(t, inv2, "done")
	e2.waitHistory(th2, "the answer", func(h []store.Message) bool { return hasText(h, store.RoleAssistant, "got done") })
	if status, body := callback(t, inv2.CallbackURL, rap.SubscriptionEvent{GroupID: th2, ToolCallID: inv2.ID, Text: "x"}); status != http.StatusGone {
		t.Errorf("event of a call finished without subscription: %d %s, want 410", status, body)
	}

	// A closed thread, with the subscription still active at the tool.
	e3, th3, inv3 := pendingCall(t)
	subscribe(t, e3, th3, inv3)
	if err := e3.rt.CloseThread(context.Background(), th3); err != nil {
		t.Fatal(err)
	}
	if status, body := callback(t, inv3.CallbackURL, rap.SubscriptionEvent{GroupID: th3, ToolCallID: inv3.ID, Text: "x"}); status != http.StatusGone {
		t.Errorf("event of a closed thread: %d %s, want 410", status, body)
	}
}

// A redelivered event (same event_id) is applied once,
// whatever its Idempotency-Key, across a restart too, whether it arrived
// before or after the subscription was confirmed; events without event_id
// keep their behaviour (each delivery is a new event).
func TestEventIDDeduplicated(t *testing.T) {
	e, th, inv := pendingCall(t)
	ev := func(id, text string, assoc bool) string {
		return mustJSON(t, rap.SubscriptionEvent{GroupID: th, ToolCallID: inv.ID, Text: text, Associative: assoc, EventID: id})
	}
	// Held, then redelivered while held.
	for _, key := range []string{"k-early-1", "k-early-2"} {
		if status, body := callback(t, inv.CallbackURL, ev("ev-early", "early", true), rap.IdempotencyKeyHeader, key); status != http.StatusOK {
			t.Fatalf("early event: %d %s", status, body)
		}
	}
	subscribe(t, e, th, inv)
	// A child-thread event, delivered three times: two keys, then none.
	for _, key := range []string{"k1", "k2", ""} {
		var hdr []string
		if key != "" {
			hdr = []string{rap.IdempotencyKeyHeader, key}
		}
		if status, body := callback(t, inv.CallbackURL, ev("ev-1", "child event", false), hdr...); status != http.StatusOK {
			t.Fatalf("event: %d %s", status, body)
		}
	}
	e.restart()
	if status, body := callback(t, inv.CallbackURL, ev("ev-1", "child event", false)); status != http.StatusOK || !strings.Contains(body, "duplicate") {
		t.Fatalf("redelivery after a restart: %d %s, want 200 duplicate", status, body)
	}
	// An inline event, twice.
	for range 2 {
		if status, body := callback(t, inv.CallbackURL, ev("ev-2", "inline event", true)); status != http.StatusOK {
			t.Fatalf("event: %d %s", status, body)
		}
	}
	e.waitHistory(th, "the inline events", func(h []store.Message) bool { return len(inlineEvents(h)) >= 2 })
	e.idle(th)
	if got := strings.Join(inlineEvents(e.history(th)), ","); got != "early,inline event" {
		t.Fatalf("inline events = %s, want each once", got)
	}
	if got := eventChildren(t, e, th); len(got) != 1 || got[0] != "child event" {
		t.Fatalf("child threads = %v, want one", got)
	}
	// Without event_id (and without key) each delivery is a new event.
	for range 2 {
		if status, body := callback(t, inv.CallbackURL, ev("", "no id", true)); status != http.StatusOK {
			t.Fatalf("event: %d %s", status, body)
		}
	}
	e.waitHistory(th, "both id-less events", func(h []store.Message) bool { return len(inlineEvents(h)) >= 4 })
	// A malformed event_id is refused.
	bad := strings.Replace(ev("x", "bad id", true), `"event_id":"x"`, `"event_id":5`, 1)
	if status, body := callback(t, inv.CallbackURL, bad); status != http.StatusBadRequest || !strings.Contains(body, "event_id") {
		t.Fatalf("numeric event_id: %d %s, want 400", status, body)
	}
}

// interactionEnv is a thread whose model called tool "job" on a tool
// server that reports every /cancel_tool_call; the call is pending.
func interactionEnv(t *testing.T, tweak func(*Config)) (*env, *toolServer, string, rap.Invocation, chan rap.CancelToolCallRequest) {
	t.Helper()
	ts := newToolServer(t, "jobs", tool("job"))
	cancels := make(chan rap.CancelToolCallRequest, 10)
	ts.onOther = func(r *http.Request, body []byte) {
		if r.URL.Path == rap.CancelToolCallPath {
			if req, err := rap.DecodeCancelToolCall(body); err == nil {
				cancels <- *req
			}
		}
	}
	e := newEnv(t, envOptions{servers: []string{ts.URL()}, tweak: tweak, turns: []scripted.Turn{
		{AfterUser: "go", ToolCalls: []scripted.Call{call("job", `{}`)}},
		{Text: "got {{last_result}}", Repeat: true},
	}})
	th := e.newThread()
	e.post(th, "go")
	inv := ts.next()
	e.idle(th)
	return e, ts, th, inv, cancels
}

// wantEnded checks that the call ended with an Error result the model saw
// (containing want), that the tool was told to cancel it, and that its
// late tool_result is ignored.
func wantEnded(t *testing.T, e *env, th string, inv rap.Invocation, cancels chan rap.CancelToolCallRequest, want string) {
	t.Helper()
	h := e.waitHistory(th, "the error result", func(h []store.Message) bool { return hasText(h, store.RoleAssistant, "got Error:") })
	if rs := results(h); len(rs) != 1 || !rs[0].IsError || !strings.Contains(rs[0].Text, want) {
		t.Fatalf("results = %+v, want one error mentioning %q", rs, want)
	}
	select {
	case req := <-cancels:
		if req.ToolCallID != inv.ID {
			t.Fatalf("cancel_tool_call for %s, want %s", req.ToolCallID, inv.ID)
		}
	case <-time.After(waitFor):
		t.Fatal("the tool was not told to cancel the call")
	}
	if status, body := callback(t, inv.CallbackURL, rap.ToolResult{GroupID: th, ID: inv.ID, Text: "late"}); status != http.StatusOK || !strings.Contains(body, "duplicate") {
		t.Fatalf("late result: %d %s", status, body)
	}
	e.idle(th)
	if rs := results(e.history(th)); len(rs) != 1 {
		t.Fatalf("%d results after the late one, want 1", len(rs))
	}
}

// RAP OA-1: an oauth message whose auth_url is not
// http(s) is refused with 400 naming the problem; it is never shown; the
// call ends with an Error result the model sees (so it is not pending for
// ever) and the tool is told to cancel it.
func TestOAuthNonHTTPURLRefusedAndCallEnded(t *testing.T) {
	for _, authURL := range []string{"javascript:alert(document.cookie)", "file:///etc/passwd", "/relative/login"} {
		t.Run(authURL, func(t *testing.T) {
			e, _, th, inv, cancels := interactionEnv(t, nil)
			events, cancel := e.rt.Subscribe(th)
			defer cancel()
			status, body := callback(t, inv.CallbackURL, rap.OAuth{GroupID: th, ID: inv.ID, AuthURL: authURL})
			if status != http.StatusBadRequest || !strings.Contains(body, "auth_url must be an http:// or https:// URL") {
				t.Fatalf("oauth with %q: %d %s, want 400 naming auth_url", authURL, status, body)
			}
			wantEnded(t, e, th, inv, cancels, "not an http(s) URL")
			for {
				select {
				case ev := <-events:
					if ev.Type == EventOAuth {
						t.Fatalf("the refused link was shown: %s", ev.Data)
					}
					continue
				default:
				}
				break
			}
			prime, _ := e.rt.primeEvents(context.Background(), th)
			for _, p := range prime {
				if p.Type == EventOAuth {
					t.Fatal("the refused link is shown to clients that connect")
				}
			}
		})
	}
}

// RAP UC-2: the runtime POSTs a user's answer only to an
// http(s) response_url on the tool's own host (the host and port of the
// endpoint the call was dispatched to), or on a host the operator listed
// in Config.ChoiceResponseHosts. Another one is refused with 400 and the
// call ends with an Error result; a choice stored with such a URL (before
// this check existed) is never POSTed.
func TestUserChoiceResponseURLOnToolHostOnly(t *testing.T) {
	var elsewhere atomic.Int32
	other := newHTTPServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { elsewhere.Add(1) }))
	choice := func(th string, inv rap.Invocation, url string) rap.UserChoice {
		return rap.UserChoice{GroupID: th, ID: inv.ID, Prompt: "which?", Choices: []string{"a", "b"}, ResponseURL: url}
	}

	t.Run("another host", func(t *testing.T) {
		e, _, th, inv, cancels := interactionEnv(t, nil)
		status, body := callback(t, inv.CallbackURL, choice(th, inv, other+"/answer"))
		if status != http.StatusBadRequest || !strings.Contains(body, "response_url must be on the tool's own host") {
			t.Fatalf("%d %s, want 400 naming response_url", status, body)
		}
		if cs, _ := e.rt.PendingChoices(context.Background(), th); len(cs) != 0 {
			t.Fatalf("the refused choice is shown: %+v", cs)
		}
		wantEnded(t, e, th, inv, cancels, "address the runtime does not allow")
	})
	t.Run("not http", func(t *testing.T) {
		e, ts, th, inv, _ := interactionEnv(t, nil)
		u := strings.Replace(ts.URL(), "http://", "ftp://", 1) + "/answer"
		if status, body := callback(t, inv.CallbackURL, choice(th, inv, u)); status != http.StatusBadRequest || !strings.Contains(body, "http") {
			t.Fatalf("%d %s, want 400", status, body)
		}
		e.waitHistory(th, "the error result", func(h []store.Message) bool { return hasText(h, store.RoleAssistant, "got Error:") })
	})
	t.Run("the tool's own host", func(t *testing.T) {
		answered := make(chan string, 1)
		e, ts, th, inv, _ := interactionEnv(t, nil)
		ts.onOther = func(r *http.Request, body []byte) {
			if r.URL.Path == "/answer" {
				answered <- string(body)
			}
		}
		if status, body := callback(t, inv.CallbackURL, choice(th, inv, ts.URL()+"/answer?key=k")); status != http.StatusOK {
			t.Fatalf("%d %s", status, body)
		}
		if _, err := e.rt.AnswerChoice(context.Background(), th, inv.ID, nil); err != nil {
			t.Fatal(err)
		}
		select {
		case b := <-answered:
			if !strings.Contains(b, `"selected":0`) {
				t.Fatalf("answer = %s", b)
			}
		case <-time.After(waitFor):
			t.Fatal("the answer was not POSTed to the tool")
		}
	})
	t.Run("a host the operator allowed", func(t *testing.T) {
		host := strings.TrimPrefix(other, "http://")
		e, _, th, inv, _ := interactionEnv(t, func(c *Config) { c.ChoiceResponseHosts = []string{host} })
		if status, body := callback(t, inv.CallbackURL, choice(th, inv, other+"/answer")); status != http.StatusOK {
			t.Fatalf("%d %s", status, body)
		}
		n := elsewhere.Load()
		if _, err := e.rt.AnswerChoice(context.Background(), th, inv.ID, nil); err != nil {
			t.Fatal(err)
		}
		if elsewhere.Load() != n+1 {
			t.Fatal("the answer did not reach the allowed host")
		}
	})
	t.Run("stored before the check", func(t *testing.T) {
		e, _, th, inv, _ := interactionEnv(t, nil)
		err := e.st.Update(context.Background(), func(tx store.Tx) error {
			return tx.PutChoice(store.Choice{ThreadID: th, CallID: inv.ID, ToolName: "job", Prompt: "which?", Choices: []string{"a"}, ResponseURL: other + "/answer"})
		})
		if err != nil {
			t.Fatal(err)
		}
		n := elsewhere.Load()
		if _, err := e.rt.AnswerChoice(context.Background(), th, inv.ID, nil); !errors.Is(err, ErrChoiceDelivery) || !strings.Contains(err.Error(), "response_url") {
			t.Fatalf("answer = %v, want ErrChoiceDelivery naming response_url", err)
		}
		if elsewhere.Load() != n {
			t.Fatal("the answer was POSTed to a host that is not the tool's")
		}
	})
}

// RAP VU-2: a call's callback token updates views while
// its thread is open, also after the call finished; once the thread is
// closed a view_update is answered 410 and changes nothing.
func TestViewUpdateRefusedAfterThreadClosed(t *testing.T) {
	e, th, inv := pendingCall(t)
	view := func(v int) rap.ViewUpdate {
		return rap.ViewUpdate{GroupID: th, ViewType: "progress", Content: json.RawMessage(fmt.Sprintf(`{"v":%d}`, v))}
	}
	if status, body := callback(t, inv.CallbackURL, view(1)); status != http.StatusOK {
		t.Fatalf("%d %s", status, body)
	}
	reply(t, inv, "finished")
	e.waitHistory(th, "the answer", func(h []store.Message) bool { return hasText(h, store.RoleAssistant, "got finished") })
	if status, body := callback(t, inv.CallbackURL, view(2)); status != http.StatusOK {
		t.Fatalf("view of a finished call in an open thread: %d %s", status, body)
	}
	if err := e.rt.CloseThread(context.Background(), th); err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, e, th)
	if status, body := callback(t, inv.CallbackURL, view(3)); status != http.StatusGone || !strings.Contains(body, "closed") {
		t.Fatalf("view of a closed thread: %d %s, want 410", status, body)
	}
	if after := snapshot(t, e, th); after != before {
		t.Fatal("a view_update changed a closed thread")
	}
}

// RAP TR-5: a callback between 1 MiB (the old limit) and
// rap.MaxCallbackBytes is accepted, stored whole, and reaches whole a
// model whose context window holds it (a smaller one gets its start and
// end: TestLargeResultIsBoundedForTheModelOnly).
func TestCallbackBetween1And4MiBAccepted(t *testing.T) {
	m := scripted.New([]scripted.Turn{{ToolCalls: []scripted.Call{call("job", `{}`)}}, {Text: "got {{last_result}}", Repeat: true}})
	m.SetContextWindow(40_000_000) // a tenth of it holds the result (about 2.4M tokens by the estimate)
	ts := newToolServer(t, "jobs", tool("job"))
	e := newEnv(t, envOptions{servers: []string{ts.URL()}, model: m})
	th := e.newThread()
	e.post(th, "start")
	inv := ts.next()
	e.idle(th)
	text := strings.Repeat("0123456789abcdef", (3<<20+512<<10)/16) // 3.5 MiB
	body := mustJSON(t, rap.ToolResult{GroupID: th, ID: inv.ID, Text: text})
	if len(body) <= 1<<20 || len(body) > MaxCallbackBytes {
		t.Fatalf("body of %d bytes is not between 1 MiB and the limit", len(body))
	}
	if status, resp := callback(t, inv.CallbackURL, body); status != http.StatusOK {
		t.Fatalf("%d-byte result: %d %s", len(body), status, resp)
	}
	h := e.waitHistory(th, "the answer", func(h []store.Message) bool { return hasText(h, store.RoleAssistant, "got 0123") })
	if rs := results(h); len(rs) != 1 || rs[0].Text != text {
		t.Fatalf("the result did not arrive whole")
	}
	reqs := e.model.requests()
	if !requestHasResult(reqs[len(reqs)-1], inv.ID, text) {
		t.Fatal("the model did not get the whole result")
	}
}

// Events held for a call that ends another way (here a
// timeout's synthetic result) are discarded, logged, when the next event
// for it arrives (410) or when any event is held (the sweep).
func TestHeldEventsDiscardedWhenCallEndsOtherwise(t *testing.T) {
	e, _, th, inv, _ := interactionEnv(t, nil)
	for _, text := range []string{"a", "b"} {
		if status, body := callback(t, inv.CallbackURL, rap.SubscriptionEvent{GroupID: th, ToolCallID: inv.ID, Text: text}); status != http.StatusOK {
			t.Fatalf("early event: %d %s", status, body)
		}
	}
	e.rt.deliverSynthetic(context.Background(), store.Call{ThreadID: th, CallID: inv.ID, ToolName: "job"}, "Error: timed out")
	e.waitHistory(th, "the timeout", func(h []store.Message) bool { return hasText(h, store.RoleAssistant, "got Error: timed out") })
	if status, body := callback(t, inv.CallbackURL, rap.SubscriptionEvent{GroupID: th, ToolCallID: inv.ID, Text: "c"}); status != http.StatusGone {
		t.Fatalf("event after the timeout: %d %s, want 410", status, body)
	}
	held := func() int {
		var n int
		e.st.View(context.Background(), func(tx store.Tx) error {
			st, err := tx.HeldEventStats(th, inv.ID)
			n = st.Count
			return err
		})
		return n
	}
	if n := held(); n != 0 {
		t.Fatalf("%d events still held", n)
	}
	recs := e.logs.records("held subscription events discarded (RAP SU-4)")
	if len(recs) != 1 || recs[0]["events"] != float64(2) {
		t.Fatalf("discard log = %v", recs)
	}
	// The sweep finds what no later event of the call would.
	err := e.st.Update(context.Background(), func(tx store.Tx) error {
		return tx.HoldEvent(store.HeldEvent{ThreadID: th, CallID: inv.ID, Payload: json.RawMessage(`{"text":"left"}`)})
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.st.Update(context.Background(), e.rt.sweepHeldEvents); err != nil {
		t.Fatal(err)
	}
	if n := held(); n != 0 {
		t.Fatalf("the sweep left %d events", n)
	}
}

// The response_url rule in detail: scheme, host and
// port (a scheme's default port included) of the call's endpoint, or a
// configured host with any port or one port.
func TestCheckResponseURL(t *testing.T) {
	r := &Runtime{cfg: Config{ChoiceResponseHosts: []string{"choices.example", "proxy.example:8443", "[::1]:9000"}}}
	call := store.Call{Endpoint: "https://Tools.Example/rap/invoke"}
	for _, c := range []struct {
		url string
		ok  bool
	}{
		{"https://tools.example/choice?key=1", true},
		{"https://tools.example:443/choice", true},
		{"http://tools.example/choice", false}, // port 80, not 443
		{"https://tools.example:8443/choice", false},
		{"https://evil.example/choice", false},
		{"https://tools.example.evil.example/choice", false},
		{"ftp://tools.example/choice", false},
		{"javascript:alert(1)", false},
		{"/choice", false},
		{"https://choices.example:1234/x", true},
		{"https://proxy.example:8443/x", true},
		{"https://proxy.example/x", false},
		{"http://[::1]:9000/x", true},
		{"http://[::1]:9001/x", false},
	} {
		if got := r.checkResponseURL(call, c.url) == ""; got != c.ok {
			t.Errorf("%s: allowed = %v, want %v (%s)", c.url, got, c.ok, r.checkResponseURL(call, c.url))
		}
	}
	if p := (&Runtime{}).checkResponseURL(store.Call{}, "https://tools.example/x"); p == "" {
		t.Error("a call without an endpoint allowed a response_url")
	}
}
