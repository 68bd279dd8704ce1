package conformance

import (
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/gorap/gorap/runtime/api"
)

// The runtime checks of its callback endpoint.
var (
	checkRuntimeResult = Check{
		ID: "runtime.callback.result", Level: Must, Rule: "RAP RE-7, RE-1",
		Title: "a tool_result is answered 200 and reaches the model",
		Fix:   "answer 200 to a tool_result of a pending call and give its text to the model as the call's result",
	}
	checkRuntimeDuplicate = Check{
		ID: "runtime.callback.duplicate", Level: Must, Rule: "RAP RE-6",
		Title: "a redelivered tool_result does not appear twice",
		Fix:   "process callbacks idempotently: answer a second delivery of a result without adding it again",
	}
	checkRuntimeUnknownCall = Check{
		ID: "runtime.callback.unknown-call", Level: Must, Rule: "RAP RE-5",
		Title: "a result for an unknown group and id is not injected",
		Fix:   "route a result by group_id and id; discard (and log) one that matches no pending call",
	}
	checkRuntimeCallbackAuth = Check{
		ID: "runtime.callback.auth", Level: Should, Rule: "RAP TR-7",
		Title: "a tampered callback URL is refused",
		Fix:   "put a per-call secret (an HMAC token) in each callback_url and refuse callbacks whose token does not verify",
	}
	checkRuntimeUserChoice = Check{
		ID: "runtime.callback.user-choice", Level: Must, Rule: "RAP UC-1, UC-2",
		Title: "a user_choice is shown and its answer POSTed to response_url",
		Fix:   "accept user_choice with 200, show prompt and choices, POST {id, selected} to response_url, keep the call pending",
	}
	checkRuntimeOAuth = Check{
		ID: "runtime.callback.oauth", Level: Must, Rule: "RAP OA-1",
		Title: "an oauth callback is accepted and keeps the call pending",
		Fix:   "accept oauth with 200, show auth_url to the user, keep the call pending until its tool_result",
	}
	checkRuntimeViewUpdate = Check{
		ID: "runtime.callback.view-update", Level: Must, Rule: "RAP VU-1, VU-2",
		Title: "a view_update is accepted",
		Fix:   "accept view_update with 200 and keep its content per thread and view_type",
	}
	checkRuntimeEarlyEvent = Check{
		ID: "runtime.callback.early-event", Level: Should, Rule: "RAP SU-2, SU-3",
		Title: "an event that arrives before its subscription's confirming result is not lost",
		Fix:   "hold a subscription_event for a call still pending and apply it once the tool_result with subscription: true arrives",
	}
	checkRuntimeSubscriptionEvent = Check{
		ID: "runtime.callback.subscription-event", Level: Must, Rule: "RAP SU-2, SU-3, SU-5",
		Title: "a subscription_event of a confirmed subscription reaches the model",
		Fix:   "accept subscription_event with 200 for an active subscription and inject its text as a receive_event__injected call",
	}
)

func (r *runtimeRun) addCallbackChecks(s *Suite) {
	s.Add(checkRuntimeResult, func(t *T) {
		t.Requires(checkRuntimeInvocationFields.ID)
		c := r.fields
		text := "conformance result " + r.nonce
		c.sendOK(t, c.result(text))
		if !r.seen(t, c.conv, text, "the runtime accepted the result") {
			t.Logf("answered 200; whether the model got the result was not seen (no /v1 API)")
		}
	})
	s.Add(checkRuntimeDuplicate, func(t *T) {
		t.Requires(checkRuntimeResult.ID)
		c := r.fields
		text := "conformance result " + r.nonce
		status, answer := send(t, c.inv.CallbackURL, c.result(text))
		if status >= 500 {
			t.Failf("a redelivered result was answered %d (%.200s): the tool would retry it forever", status, answer)
		}
		n, ok := r.settledCount(t, c.conv, text)
		if !ok {
			t.Skipf("answered %d; whether the result appears twice cannot be seen without the /v1 API", status)
		}
		if n != 1 {
			t.Failf("the result appears %d times in the conversation after a redelivery", n)
		}
	})
	s.Add(checkRuntimeUnknownCall, func(t *T) {
		t.Requires(checkRuntimeInvocationFields.ID)
		c := r.fields
		text := "conformance stray result " + r.nonce
		status, _ := send(t, c.inv.CallbackURL, map[string]any{
			"type": "tool_result", "group_id": "conformance-unknown-group-" + r.nonce, "id": "conformance-unknown-call-" + r.nonce, "text": text,
		})
		n, ok := r.settledCount(t, c.conv, text)
		if !ok {
			t.Skipf("answered %d; whether it was injected cannot be seen without the /v1 API", status)
		}
		if n > 0 {
			t.Failf("a result for an unknown group_id and id (answered %d) was injected into the conversation", status)
		}
	})
	s.Add(checkRuntimeCallbackAuth, r.checkCallbackAuth)
	s.Add(checkRuntimeUserChoice, r.checkUserChoice)
	s.Add(checkRuntimeOAuth, func(t *T) {
		c := r.call(t, "oauth", EchoTool, false)
		msg := map[string]any{"type": "oauth", "group_id": c.inv.GroupID, "id": c.inv.ID, "auth_url": "https://example.com/conformance/authorize?state=" + r.nonce}
		c.sendOK(t, msg)
		if th, err := r.d.thread(t.Context(), c.conv); err == nil && !pending(th, c.inv.ID) {
			t.Failf("after the oauth callback the call is no longer pending; it must wait for its tool_result")
		}
		text := "authorized " + r.nonce
		c.sendOK(t, c.result(text))
		r.seen(t, c.conv, text, "the result that followed the oauth callback was accepted")
	})
	s.Add(checkRuntimeViewUpdate, func(t *T) {
		c := r.call(t, "view", EchoTool, false)
		c.sendOK(t, map[string]any{"type": "view_update", "group_id": c.inv.GroupID, "view_type": "conformance", "content": map[string]any{"nonce": r.nonce}})
		c.sendOK(t, c.result("view sent "+r.nonce))
	})
	s.Add(checkRuntimeEarlyEvent, func(t *T) {
		c := r.call(t, "subscribe", EchoTool, false)
		early := "early event " + r.nonce
		status, answer := send(t, c.inv.CallbackURL, map[string]any{
			"type": "subscription_event", "group_id": c.inv.GroupID, "tool_call_id": c.inv.ID, "text": early, "associative": true,
		})
		res := c.result("subscribed as conformance-" + r.nonce)
		res["subscription"] = true
		c.sendOK(t, res)
		r.sub = c
		if status != http.StatusOK {
			t.Failf("an event sent before the confirming result was answered %d (%.200s)", status, answer)
		}
		if !r.seen(t, c.conv, early, "the early event was answered 200") {
			t.Skipf("answered 200; whether the event reached the model cannot be seen without the /v1 API")
		}
	})
	s.Add(checkRuntimeSubscriptionEvent, func(t *T) {
		r.ready(t)
		if r.sub == nil {
			t.Skipf("needs the subscription of %s, which did not start", checkRuntimeEarlyEvent.ID)
		}
		c := r.sub
		text := "subscription event " + r.nonce
		c.sendOK(t, map[string]any{
			"type": "subscription_event", "group_id": c.inv.GroupID, "tool_call_id": c.inv.ID, "text": text, "associative": true, "final": true,
		})
		if !r.seen(t, c.conv, text, "the event was answered 200") {
			t.Skipf("answered 200; whether the event reached the model cannot be seen without the /v1 API")
		}
	})
}

func (r *runtimeRun) checkCallbackAuth(t *T) {
	c := r.call(t, "auth", EchoTool, false)
	for _, rec := range r.kit.Received() {
		if inv := rec.Invocation; inv != nil && inv.ID != c.inv.ID && inv.CallbackURL == c.inv.CallbackURL {
			t.Failf("two calls got the same callback_url %q: it carries no per-call secret, so anyone who can reach it can inject results", c.inv.CallbackURL)
		}
	}
	bad, ok := tamperURL(c.inv.CallbackURL)
	if !ok {
		t.Failf("the callback_url %q has no token (no path segment or query value of 16 characters or more)", c.inv.CallbackURL)
	}
	forged := "forged result " + r.nonce
	status, _ := send(t, bad, c.result(forged))
	if status >= 200 && status < 300 {
		t.Failf("a result sent to a tampered callback URL was answered %d", status)
	}
	if status >= 500 {
		t.Failf("a result sent to a tampered callback URL was answered %d; refuse it with 401, 403 or 404 so the sender does not retry", status)
	}
	c.sendOK(t, c.result("auth done "+r.nonce))
	if n, ok := r.settledCount(t, c.conv, forged); ok && n > 0 {
		t.Failf("a result sent to a tampered callback URL was injected")
	}
}

func (r *runtimeRun) checkUserChoice(t *T) {
	c := r.call(t, "choice", EchoTool, false)
	path := "choice-" + r.nonce
	prompt := "Conformance: pick the second option"
	from := r.kit.mark()
	c.sendOK(t, map[string]any{
		"type": "user_choice", "group_id": c.inv.GroupID, "id": c.inv.ID, "prompt": prompt,
		"choices": []string{"first", "second"}, "default": 0, "response_url": r.kit.URL() + "/choice/" + path,
	})
	callID := c.inv.ID
	if _, err := r.d.choices(t.Context(), c.conv); err != errNoAPI {
		ctx, cancel := nearDeadline(t.Context())
		defer cancel()
		found := false
		for !found {
			cs, err := r.d.choices(ctx, c.conv)
			if err != nil {
				t.Failf("reading the conversation's choices: %v", err)
			}
			for _, ch := range cs {
				if ch.Prompt == prompt {
					found, callID = true, ch.CallID
				}
			}
			if !found {
				select {
				case <-ctx.Done():
					t.Failf("the user_choice was answered 200 but never offered to the user")
				case <-time.After(100 * time.Millisecond):
				}
			}
		}
	}
	if err := r.d.answerChoice(t.Context(), c.conv, callID, prompt, 1); err != nil {
		t.Failf("answering the choice: %v", err)
	}
	rec, err := r.kit.await(t.Context(), from, func(rec Received) bool { return rec.Kind == "choice" && rec.Step == path })
	if err != nil {
		t.Failf("the answer to the choice was never POSTed to its response_url")
	}
	t.Record(rec.Exchange)
	if rec.Fields["id"] != c.inv.ID {
		t.Failf("the answer's id is %v, want the call's id %q", rec.Fields["id"], c.inv.ID)
	}
	if sel, ok := rec.Fields["selected"].(float64); !ok || sel != 1 {
		t.Failf("the answer's selected is %v, want 1 (the second option)", rec.Fields["selected"])
	}
	c.sendOK(t, c.result("chose "+r.nonce))
}

// pending reports whether the call id is among the thread's pending calls.
func pending(th *api.ThreadInfo, id string) bool {
	for _, c := range th.PendingCalls {
		if c.CallID == id {
			return true
		}
	}
	return false
}

// tamperURL changes one character in the middle of the longest path
// segment or query value of u, where a callback token would be; ok is
// false when none is 16 characters or more.
func tamperURL(u string) (string, bool) {
	p, err := url.Parse(u)
	if err != nil {
		return "", false
	}
	segs := strings.Split(p.EscapedPath(), "/")
	best, where := -1, ""
	for i, s := range segs {
		if len(s) >= 16 && (best < 0 || len(s) > len(segs[best])) {
			best, where = i, "path"
		}
	}
	q := p.Query()
	var bestKey string
	for k, vs := range q {
		for _, v := range vs {
			if len(v) >= 16 && (best < 0 || (where == "path" && len(v) > len(segs[best])) || (where == "query" && len(v) > len(q.Get(bestKey)))) {
				best, where, bestKey = 0, "query", k
			}
		}
	}
	switch where {
	case "path":
		segs[best] = flipMiddle(segs[best])
		p.RawPath = strings.Join(segs, "/")
		p.Path, _ = url.PathUnescape(p.RawPath)
	case "query":
		q.Set(bestKey, flipMiddle(q.Get(bestKey)))
		p.RawQuery = q.Encode()
	default:
		return "", false
	}
	return p.String(), true
}

// flipMiddle replaces the letter or digit nearest the middle of s with
// another one.
func flipMiddle(s string) string {
	b := []byte(s)
	for i := len(b) / 2; i < len(b); i++ {
		c := b[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' {
			if c == 'Q' {
				b[i] = 'w'
			} else {
				b[i] = 'Q'
			}
			return string(b)
		}
	}
	return s
}
