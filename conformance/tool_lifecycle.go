package conformance

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// hostileIDs are ids a runtime, or an attacker posing as one, may send to
// /close_thread and /cancel_tool_call: each must be answered 200 and used
// safely (RAP TC-2).
func hostileIDs() []struct{ name, id string } {
	return []struct{ name, id string }{
		{"a path traversal", "../../etc/passwd"},
		{"a NUL byte", "conformance\x00thread"},
		{"a 10 KB string", strings.Repeat("x", 10<<10)},
		{"an empty string", ""},
		{"a control character and a slash", "a/b\r\nc"},
	}
}

// The thread and call lifecycle checks: /cancel_tool_call, /close_thread,
// authentication, subscriptions, /migrate and /tool_call_status.
func (r *toolRun) addLifecycle(s *Suite) {
	s.Add(Check{
		ID: "tool.cancel.unknown", Level: Must, Rule: "RAP CA-1, CA-2",
		Title: "POST /cancel_tool_call for an unknown call, and again, is answered 200",
		Fix:   "answer POST /cancel_tool_call 200 always, whether or not the call is known",
	}, func(t *T) {
		body := map[string]any{"thread_id": "conformance-thread-" + randomToken(6), "tool_call_id": "conformance-call-" + randomToken(6)}
		for i := 1; i <= 2; i++ {
			if rep := r.postJSON(t, r.cfg.BaseURL+"/cancel_tool_call", body); rep.status != http.StatusOK {
				t.Failf("attempt %d was answered %d (%s)", i, rep.status, snippet(rep.body))
			}
		}
	})
	s.Add(Check{
		ID: "tool.cancel.hostile-ids", Level: Must, Rule: "RAP CA-2, TC-2",
		Title: "/cancel_tool_call answers 200 to hostile ids and bodies, and the server keeps serving",
		Fix:   "answer 200 whatever the body holds; validate ids before any use (no paths, bounded length) and never crash on them",
	}, func(t *T) {
		t.Requires("tool.discovery.document", "tool.cancel.unknown")
		r.hostile(t, "/cancel_tool_call", func(id string) any {
			return map[string]any{"thread_id": id, "tool_call_id": id}
		})
	})
	s.Add(Check{
		ID: "tool.close.unknown", Level: Must, Rule: "RAP TC-1, TC-2",
		Title: "POST /close_thread for an unknown thread, and again, is answered 200",
		Fix:   "answer POST /close_thread 200 always: unknown and repeated thread ids included",
	}, func(t *T) {
		body := map[string]any{"thread_id": "conformance-thread-" + randomToken(6)}
		for i := 1; i <= 2; i++ {
			if rep := r.postJSON(t, r.cfg.BaseURL+"/close_thread", body); rep.status != http.StatusOK {
				t.Failf("attempt %d was answered %d (%s)", i, rep.status, snippet(rep.body))
			}
		}
	})
	s.Add(Check{
		ID: "tool.close.empty-body", Level: Should, Rule: "RAP TC-2",
		Title: "/close_thread answers with an empty body",
		Fix:   "answer POST /close_thread 200 with no body",
	}, func(t *T) {
		t.Requires("tool.close.unknown")
		rep := r.postJSON(t, r.cfg.BaseURL+"/close_thread", map[string]any{"thread_id": "conformance-thread-" + randomToken(6)})
		if len(strings.TrimSpace(string(rep.body))) > 0 {
			t.Failf("the answer has a body: %s", snippet(rep.body))
		}
	})
	s.Add(Check{
		ID: "tool.close.hostile-ids", Level: Must, Rule: "RAP TC-2",
		Title: "/close_thread answers 200 to hostile ids and bodies, and the server keeps serving",
		Fix:   "answer 200 whatever the body holds; validate thread_id before any use (no paths, bounded length) and never crash on it",
	}, func(t *T) {
		t.Requires("tool.discovery.document", "tool.close.unknown")
		r.hostile(t, "/close_thread", func(id string) any { return map[string]any{"thread_id": id} })
	})
	s.Add(Check{
		ID: "tool.auth.required", Level: Must, Rule: "RAP CA-3, TR-8",
		Title: "with a token configured, invocations, /cancel_tool_call and /close_thread without it are refused",
		Fix:   "require the same credentials on invocations, /cancel_tool_call and /close_thread, answering 401 without them",
	}, func(t *T) {
		if r.cfg.Token == "" {
			t.Skipf("the kit was not given the server's token (--auth); a server without authentication must sit in a trusted network (RAP TR-8)")
		}
		t.Requires("tool.discovery.document")
		inv, ib := r.invocation(t, "conformance_no_such_tool", nil)
		paths := map[string]any{
			r.endpointURL(t):                    inv,
			r.cfg.BaseURL + "/cancel_tool_call": map[string]any{"thread_id": "conformance-thread", "tool_call_id": "conformance-call"},
			r.cfg.BaseURL + "/close_thread":     map[string]any{"thread_id": "conformance-thread"},
		}
		for u, body := range paths {
			b, _ := json.Marshal(body)
			rep, err := r.post(t, u, b, true)
			if err != nil {
				t.Failf("POST %s: %v", u, err)
			}
			if rep.status != http.StatusUnauthorized && rep.status != http.StatusForbidden {
				t.Failf("POST %s without the token was answered %d, not 401 or 403", u, rep.status)
			}
		}
		if rec, ok := ib.next(t.Context(), r.cfg.QuietWait); ok {
			t.Failf("the unauthenticated invocation was run: a %s callback arrived", jsonText(rec.msg["type"]))
		}
	})
	r.addSubscription(s)
	s.Add(Check{
		ID: "tool.migrate.endpoint", Level: Must, Rule: "RAP MI-1",
		Title: "a toolset with needsMigration serves POST /migrate, refusing a request without a session with an error and a message",
		Fix:   "serve POST /migrate {session_id, destination_url}: 200 only once the destination holds the state, else an error status with a message",
	}, func(t *T) {
		t.Requires("tool.discovery.document")
		r.mu.Lock()
		nm := r.needsMigration
		r.mu.Unlock()
		if !nm {
			t.Skipf("the toolset does not declare needsMigration")
		}
		rep := r.postJSON(t, r.cfg.BaseURL+"/migrate", map[string]any{"destination_url": "http://127.0.0.1:9/"})
		if rep.status == http.StatusOK || rep.status == http.StatusNotFound && len(rep.body) == 0 {
			t.Failf("a /migrate request without session_id was answered %d", rep.status)
		}
		if len(strings.TrimSpace(string(rep.body))) == 0 {
			t.Failf("the refusal (%d) carries no message", rep.status)
		}
		r.stillServing(t)
	})
	s.Add(Check{
		ID: "tool.status.unknown", Level: Extension, Rule: "gorap /tool_call_status (docs/sdk.md)",
		Title: `where offered, /tool_call_status answers 404 {"status":"unknown"} for a call it never had`,
		Fix:   `answer POST /tool_call_status for an unknown call 404 with {"tool_call_id":…,"status":"unknown"}`,
	}, func(t *T) {
		id := "conformance-call-" + randomToken(6)
		rep := r.postJSON(t, r.cfg.BaseURL+"/tool_call_status", map[string]any{"thread_id": "conformance-thread-" + randomToken(6), "tool_call_id": id})
		var st map[string]any
		if json.Unmarshal(rep.body, &st) != nil || st["status"] == nil {
			t.Skipf("not offered: the answer was %d without a JSON status", rep.status)
		}
		if rep.status != http.StatusNotFound || st["status"] != "unknown" {
			t.Failf("answered %d with status %s, not 404 \"unknown\"", rep.status, jsonText(st["status"]))
		}
	})
	s.Add(Check{
		ID: "tool.status.pending", Level: Extension, Rule: "gorap /tool_call_status (docs/sdk.md)",
		Title: "where offered, /tool_call_status reports a call whose result awaits delivery as running or delivering",
		Fix:   `answer /tool_call_status for a call whose result is not yet delivered with "running" or "delivering", never "unknown"`,
	}, func(t *T) {
		// The held retry would also hold up the acknowledgement of a
		// server that delivers before acknowledging, and a server that
		// does not retry holds nothing to report.
		t.Requires("tool.status.unknown", "tool.result.delivered", "tool.ack.before-work", "tool.callback.retry-5xx")
		c := r.goodCall(t)
		inv, ib := r.invocation(t, c.Tool, c.Args)
		release := make(chan struct{})
		released := false
		defer func() {
			if !released {
				close(release)
			}
		}()
		ib.setPlan(func(n int) answer {
			if n == 1 {
				return answer{status: http.StatusServiceUnavailable}
			}
			return answer{status: http.StatusOK, hold: release}
		})
		r.invoke(t, inv)
		r.awaitResult(t, ib, c.Tool)
		rep := r.postJSON(t, r.cfg.BaseURL+"/tool_call_status", map[string]any{"thread_id": inv["group_id"], "tool_call_id": inv["id"]})
		var st map[string]any
		_ = json.Unmarshal(rep.body, &st)
		// Let the result land, so that the server holds nothing of the
		// kit's when the run ends.
		close(release)
		released = true
		if _, ok := ib.next(t.Context(), r.cfg.RetryWait); !ok {
			t.Logf("the result was not retried within %s", r.cfg.RetryWait)
		}
		if s := st["status"]; rep.status != http.StatusOK || (s != "running" && s != "delivering") {
			t.Failf("a call whose result the kit refused once (503) was reported %d %s", rep.status, jsonText(s))
		}
	})
}

// hostile posts each hostile id, a non-JSON body, a body without ids and
// ids of the wrong type to path; each must be answered 200, and the
// server must still serve afterwards.
func (r *toolRun) hostile(t *T, path string, body func(id string) any) {
	u := r.cfg.BaseURL + path
	var bad []string
	send := func(name string, b []byte) {
		rep, err := r.post(t, u, b, false)
		switch {
		case err != nil:
			bad = append(bad, fmt.Sprintf("%s: no answer (%v)", name, err))
		case rep.status != http.StatusOK:
			bad = append(bad, fmt.Sprintf("%s: answered %d", name, rep.status))
		}
	}
	for _, h := range hostileIDs() {
		b, _ := json.Marshal(body(h.id))
		send(h.name, b)
		send(h.name+" (again)", b)
	}
	num, _ := json.Marshal(body("x"))
	send("ids of the wrong type", []byte(strings.ReplaceAll(string(num), `"x"`, "12345")))
	send("an empty object", []byte(`{}`))
	send("a body that is not JSON", []byte(`{"thread_id": `))
	r.stillServing(t)
	if _, err := r.post(t, u, []byte(`{"thread_id":"conformance-after"}`), false); err != nil {
		bad = append(bad, fmt.Sprintf("after the hostile requests, %s no longer answers: %v", path, err))
	}
	r.mu.Lock()
	hasGood := r.good != nil
	r.mu.Unlock()
	if hasGood {
		c := r.goodCall(t)
		inv, ib := r.invocation(t, c.Tool, c.Args)
		r.invoke(t, inv)
		r.awaitResult(t, ib, c.Tool)
	}
	if len(bad) > 0 {
		t.Failf("%s", strings.Join(bad, "; "))
	}
	t.Logf("sent %d hostile requests", 2*len(hostileIDs())+3)
}

// addSubscription adds the subscription checks (RAP SU-1, SU-2, SU-4,
// CA-1). They need an allowed call whose result confirms a subscription.
func (r *toolRun) addSubscription(s *Suite) {
	subs := func(t *T) []*subscriptionCall {
		t.Requires("tool.result.delivered")
		r.mu.Lock()
		defer r.mu.Unlock()
		if len(r.subs) == 0 {
			t.Skipf("no allowed call started a subscription (allow one with --call NAME=JSON)")
		}
		for _, sc := range r.subs {
			sc.ib.setT(t)
		}
		return r.subs
	}
	s.Add(Check{
		ID: "tool.subscription.confirm", Level: Must, Rule: "RAP SU-1",
		Title: "a subscription is confirmed by a tool_result with subscription: true",
		Fix:   `confirm a subscription with one tool_result {"subscription": true, "text": "… subscription id …"}`,
	}, func(t *T) {
		for _, sc := range subs(t) {
			if p := routeProblems(sc.confirm, sc.inv); p != "" {
				t.Failf("%s: %s", sc.call.Tool, p)
			}
			if v := sc.confirm.msg["subscription"]; v != true {
				t.Failf("%s: \"subscription\" is %s, not the boolean true", sc.call.Tool, jsonText(v))
			}
			if !strings.Contains(resultText(sc.confirm.msg), fmt.Sprint(sc.inv["id"])) {
				t.Logf("%s: the confirmation does not name the subscription id (RAP SU-1 recommends it)", sc.call.Tool)
			}
		}
	})
	s.Add(Check{
		ID: "tool.subscription.events", Level: Must, Rule: "RAP SU-2",
		Title: "subscription events carry type, group_id, tool_call_id, text and boolean associative/final",
		Fix:   `send events as {"type":"subscription_event","group_id":…,"tool_call_id":<the subscribing call's id>,"text":…}`,
	}, func(t *T) {
		seen := 0
		for _, sc := range subs(t) {
			rec, ok := sc.ib.next(t.Context(), r.cfg.ResultWait)
			if !ok {
				t.Logf("%s: no event within %s", sc.call.Tool, r.cfg.ResultWait)
				continue
			}
			seen++
			sc.events = append(sc.events, rec)
			if p := eventProblems(rec, sc.inv); p != "" {
				t.Failf("%s: %s", sc.call.Tool, p)
			}
		}
		if seen == 0 {
			t.Skipf("no event came within %s (events come when what the tool watches changes)", r.cfg.ResultWait)
		}
	})
	s.Add(Check{
		ID: "tool.subscription.final", Level: Must, Rule: "RAP SU-4",
		Title: "nothing follows a final event",
		Fix:   "after sending an event with final: true, send nothing more for that subscription",
	}, func(t *T) {
		checked := 0
		for _, sc := range subs(t) {
			if sc.finalSeen() < 0 {
				deadline := time.Now().Add(r.cfg.QuietWait)
				for time.Now().Before(deadline) && sc.finalSeen() < 0 {
					rec, ok := sc.ib.next(t.Context(), time.Until(deadline))
					if !ok {
						break
					}
					sc.events = append(sc.events, rec)
				}
			}
			at := sc.finalSeen()
			if at < 0 {
				continue
			}
			checked++
			sc.ended = true
			if rec, ok := sc.ib.next(t.Context(), r.cfg.QuietWait); ok {
				sc.events = append(sc.events, rec)
			}
			if n := len(sc.events) - at - 1; n > 0 {
				t.Failf("%s: %d messages followed the final event", sc.call.Tool, n)
			}
		}
		if checked == 0 {
			t.Skipf("no final event was seen within %s", r.cfg.QuietWait)
		}
	})
	s.Add(Check{
		ID: "tool.subscription.cancel", Level: Should, Rule: "RAP CA-1, CA-2, SU-4",
		Title: "after /cancel_tool_call for a subscription, no more events are sent",
		Fix:   "on /cancel_tool_call for a subscription, stop it and send nothing more (not even a final event)",
	}, func(t *T) {
		// A server that refuses every /cancel_tool_call fails
		// tool.cancel.unknown; this check is about subscriptions.
		t.Requires("tool.cancel.unknown")
		var sc *subscriptionCall
		for _, c := range subs(t) {
			if !c.ended {
				sc = c
				break
			}
		}
		if sc == nil {
			t.Skipf("every subscription already ended with a final event")
		}
		rep := r.postJSON(t, r.cfg.BaseURL+"/cancel_tool_call", map[string]any{"thread_id": sc.inv["group_id"], "tool_call_id": sc.inv["id"]})
		if rep.status != http.StatusOK {
			t.Failf("/cancel_tool_call was answered %d", rep.status)
		}
		sc.ended = true
		// Messages already on their way may still land; after a grace of
		// QuietWait, nothing more may.
		grace := time.Now().Add(r.cfg.QuietWait)
		for {
			if _, ok := sc.ib.next(t.Context(), time.Until(grace)); !ok {
				break
			}
		}
		if rec, ok := sc.ib.next(t.Context(), r.cfg.QuietWait); ok {
			t.Failf("a %s came more than %s after the subscription was cancelled", jsonText(rec.msg["type"]), r.cfg.QuietWait)
		}
	})
}

// finalSeen returns the index of the subscription's final event, or -1.
func (sc *subscriptionCall) finalSeen() int {
	for i, e := range sc.events {
		if f, _ := e.msg["final"].(bool); f {
			return i
		}
	}
	return -1
}

// eventProblems says what is wrong with a callback meant as an event of
// the subscription started by inv, or "".
func eventProblems(rec received, inv map[string]any) string {
	if rec.msg == nil {
		return fmt.Sprintf("the event's body is not a JSON object: %v", rec.decErr)
	}
	m := rec.msg
	var p []string
	if m["type"] != "subscription_event" {
		p = append(p, fmt.Sprintf(`"type" is %s, not "subscription_event"`, jsonText(m["type"])))
	}
	if m["group_id"] != inv["group_id"] {
		p = append(p, fmt.Sprintf(`"group_id" is %s, not the subscribing invocation's`, jsonText(m["group_id"])))
	}
	if m["tool_call_id"] != inv["id"] {
		p = append(p, fmt.Sprintf(`"tool_call_id" is %s, not the subscribing invocation's id %s`, jsonText(m["tool_call_id"]), jsonText(inv["id"])))
	}
	if _, ok := m["text"].(string); !ok {
		p = append(p, `"text" is missing or not a string`)
	}
	for _, k := range []string{"associative", "final"} {
		if v, present := m[k]; present {
			if _, ok := v.(bool); !ok {
				p = append(p, fmt.Sprintf("%q is not a boolean", k))
			}
		}
	}
	return strings.Join(p, "; ")
}
