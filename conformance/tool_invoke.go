package conformance

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// pendingCall is an allowed call the suite made, waiting for its result.
type pendingCall struct {
	call allowedCall
	inv  map[string]any
	ib   *inbox
}

// The invocation checks: acknowledgement, the result callback and how the
// server treats each invocation field (RAP TR-2, IN-1 to IN-4, RE-1, RE-4).
func (r *toolRun) addInvocation(s *Suite) {
	var pending []pendingCall
	var results []struct {
		inv map[string]any
		rec received
	}
	s.Add(Check{
		ID: "tool.ack.status", Level: Must, Rule: "RAP TR-2, IN-3",
		Title: "an invocation of each allowed tool is answered 200",
		Fix:   "answer every well-formed invocation 200 at once, then do the work",
	}, func(t *T) {
		t.Requires("tool.discovery.document")
		pending = nil
		r.mu.Lock()
		calls := r.calls
		r.mu.Unlock()
		if len(calls) == 0 {
			t.Skipf("no tool may be called: allow calls with --call NAME=JSON or --calls FILE (read-only tools with no required arguments are called by default)")
		}
		r.endpointURL(t)
		for _, c := range calls {
			inv, ib := r.invocation(t, c.Tool, c.Args)
			r.invoke(t, inv)
			pending = append(pending, pendingCall{c, inv, ib})
		}
	})
	s.Add(Check{
		ID: "tool.result.delivered", Level: Must, Rule: "RAP IN-4, TR-5",
		Title: "each acknowledged invocation ends in a callback to its callback_url",
		Fix:   "after acknowledging, always POST a tool_result (an Error: one when the work failed) to the invocation's callback_url",
	}, func(t *T) {
		t.Requires("tool.ack.status")
		results = nil
		deadline := time.Now().Add(r.cfg.ResultWait)
		var missing []string
		for _, p := range pending {
			p.ib.setT(t)
			rec, ok := p.ib.next(t.Context(), time.Until(deadline))
			// Progress (view_update) may come before the result.
			for ok && rec.msg != nil && rec.msgType() != "tool_result" && rec.msgType() != "oauth" && rec.msgType() != "user_choice" {
				rec, ok = p.ib.next(t.Context(), time.Until(deadline))
			}
			switch {
			case !ok:
				missing = append(missing, p.call.Tool)
				continue
			case rec.msgType() == "oauth" || rec.msgType() == "user_choice":
				t.Logf("%s asked the user (%s); its result waits for them, so it is not used further", p.call.Tool, rec.msgType())
				continue
			}
			results = append(results, struct {
				inv map[string]any
				rec received
			}{p.inv, rec})
			if rec.msg == nil {
				continue
			}
			if sub, present := rec.msg["subscription"]; present && sub != false && sub != nil && rec.msgType() == "tool_result" {
				r.mu.Lock()
				r.subs = append(r.subs, &subscriptionCall{call: p.call, inv: p.inv, ib: p.ib, confirm: rec})
				r.mu.Unlock()
				continue
			}
			if rec.msgType() == "tool_result" {
				c := p.call
				r.mu.Lock()
				isErr := strings.HasPrefix(resultText(rec.msg), "Error")
				if r.good == nil || (!isErr && r.goodErr) {
					r.good, r.goodErr = &c, isErr
				}
				r.mu.Unlock()
			}
		}
		if len(missing) > 0 {
			t.Failf("no callback within %s for: %s (RAP IN-4: every invocation ends in a tool_result; raise --result-wait if the tool is slow)", r.cfg.ResultWait, strings.Join(missing, ", "))
		}
	})
	s.Add(Check{
		ID: "tool.callback.shape", Level: Must, Rule: "RAP TR-1, TR-5, RE-1, RE-2",
		Title: "the result is a JSON POST with type, the invocation's group_id and id, and text or content",
		Fix:   `POST the result with Content-Type: application/json as {"type":"tool_result","group_id":…,"id":…,"text":…} (group_id and id copied from the invocation)`,
	}, func(t *T) {
		t.Requires("tool.result.delivered")
		if len(results) == 0 {
			t.Skipf("no result arrived to check")
		}
		var problems []string
		for _, res := range results {
			if sub, present := res.rec.msg["subscription"]; present && sub != false && sub != nil {
				continue // a subscription's confirmation: tool.subscription.confirm
			}
			if p := resultProblems(res.rec, res.inv); p != "" {
				problems = append(problems, fmt.Sprintf("%s: %s", res.inv["operation"], p))
			}
		}
		if len(problems) > 0 {
			t.Failf("%s", strings.Join(problems, "; "))
		}
	})
	s.Add(Check{
		ID: "tool.callback.url", Level: Must, Rule: "RAP TR-5",
		Title: "callbacks go to the callback_url exactly as given (an opaque URL, query included)",
		Fix:   "POST to the invocation's callback_url byte for byte: keep its query string, do not rebuild it from parts",
	}, func(t *T) {
		t.Requires("tool.result.delivered")
		r.mu.Lock()
		sink := r.sink
		r.mu.Unlock()
		if sink == nil {
			t.Skipf("no callback was expected")
		}
		for _, st := range sink.strayList() {
			t.Failf("a callback reached %s%s with query %q: the callback_url was not used as given", sink.public, st.path, st.query.Encode())
		}
	})
	s.Add(Check{
		ID: "tool.callback.single-result", Level: Must, Rule: "RAP IN-4, SU-5",
		Title: "an invocation gets exactly one tool_result",
		Fix:   "send one tool_result per invocation; retry only a delivery that failed (5xx or no answer)",
	}, func(t *T) {
		t.Requires("tool.result.delivered")
		c := r.goodCall(t)
		inv, ib := r.invocation(t, c.Tool, c.Args)
		r.invoke(t, inv)
		first := r.awaitResult(t, ib, c.Tool)
		if rec, ok := ib.next(t.Context(), r.cfg.QuietWait); ok && rec.msgType() == "tool_result" {
			t.Failf("a second tool_result arrived %s after the first, which the kit answered %d", rec.at.Sub(first.at).Round(time.Millisecond), first.status)
		}
	})
	s.Add(Check{
		ID: "tool.ack.time", Level: Should, Rule: "RAP TR-2",
		Title: "an invocation is acknowledged at once (within --ack-within)",
		Fix:   "answer 200 before doing any work; run the tool after the answer is sent",
	}, func(t *T) {
		t.Requires("tool.result.delivered")
		c := r.goodCall(t)
		inv, ib := r.invocation(t, c.Tool, c.Args)
		rep := r.invoke(t, inv)
		r.awaitResult(t, ib, c.Tool)
		if rep.took > r.cfg.AckWithin {
			t.Failf("the acknowledgement took %s, more than %s", rep.took.Round(time.Millisecond), r.cfg.AckWithin)
		}
		t.Logf("acknowledged in %s", rep.took.Round(time.Millisecond))
	})
	s.Add(Check{
		ID: "tool.ack.before-work", Level: Must, Rule: "RAP TR-2, IN-3",
		Title: "the acknowledgement does not wait for the result's delivery",
		Fix:   "send the 200 answer first; deliver the result afterwards, outside the request that carried the invocation",
	}, func(t *T) {
		t.Requires("tool.result.delivered")
		c := r.goodCall(t)
		inv, ib := r.invocation(t, c.Tool, c.Args)
		release := make(chan struct{})
		var once bool
		releaseOnce := func() {
			if !once {
				once = true
				close(release)
			}
		}
		defer releaseOnce()
		ib.setPlan(func(int) answer { return answer{status: http.StatusOK, hold: release} })
		body, _ := json.Marshal(inv)
		u := r.endpointURL(t)
		type ackResult struct {
			rep reply
			err error
		}
		acked := make(chan ackResult, 1)
		go func() {
			rep, err := r.post(t, u, body, false)
			acked <- ackResult{rep, err}
		}()
		var ack ackResult
		select {
		case ack = <-acked:
		case rec := <-ib.ch:
			// The result came first: it is held unanswered. A server that
			// acknowledges independently of its delivery answers now.
			wait := max(r.cfg.AckWithin, r.cfg.QuietWait)
			select {
			case ack = <-acked:
			case <-time.After(wait):
				releaseOnce()
				t.Failf("the result arrived before the acknowledgement, and no acknowledgement came while the kit held the result's answer for %s: the server did the work and delivered the result before answering the invocation", wait)
			case <-t.Context().Done():
				return
			}
			ib.ch <- rec
		case <-t.Context().Done():
			return
		}
		releaseOnce()
		if ack.err != nil {
			t.Failf("the invocation got no answer: %v", ack.err)
		}
		if ack.rep.status != http.StatusOK {
			t.Failf("the invocation was answered %d", ack.rep.status)
		}
		r.awaitResult(t, ib, c.Tool)
	})
	s.Add(Check{
		ID: "tool.callback.call-id", Level: Must, Rule: "RAP RE-1, IN-1",
		Title: "the result echoes the invocation's call_id, and sends none when it was null",
		Fix:   `copy the invocation's "call_id" into the result when it is a string; send null or nothing when it was null`,
	}, func(t *T) {
		t.Requires("tool.result.delivered")
		c := r.goodCall(t)
		inv, ib := r.invocation(t, c.Tool, c.Args)
		r.invoke(t, inv)
		rec := r.awaitResult(t, ib, c.Tool)
		if got, _ := rec.msg["call_id"].(string); got != inv["call_id"] {
			t.Failf("call_id %s was sent as %s", jsonText(inv["call_id"]), jsonText(rec.msg["call_id"]))
		}
		inv, ib = r.invocation(t, c.Tool, c.Args)
		inv["call_id"] = nil
		r.invoke(t, inv)
		rec = r.awaitResult(t, ib, c.Tool)
		if v, present := rec.msg["call_id"]; present && v != nil {
			t.Failf("the invocation's call_id was null, the result's is %s", jsonText(v))
		}
	})
	s.Add(Check{
		ID: "tool.invoke.user-id", Level: Must, Rule: "RAP IN-1, IN-5",
		Title: "invocations with a user_id string, null or absent are all served",
		Fix:   `accept "user_id" as a string, null or missing`,
	}, func(t *T) {
		t.Requires("tool.result.delivered")
		c := r.goodCall(t)
		for _, uid := range []any{"conformance-user-" + randomToken(4), nil, "absent"} {
			inv, ib := r.invocation(t, c.Tool, c.Args)
			inv["user_id"] = uid
			if uid == "absent" {
				delete(inv, "user_id")
			}
			r.invoke(t, inv)
			rec := r.awaitResult(t, ib, fmt.Sprintf("an invocation with user_id %s", jsonText(inv["user_id"])))
			if p := routeProblems(rec, inv); p != "" {
				t.Failf("with user_id %s: %s", jsonText(inv["user_id"]), p)
			}
		}
	})
	s.Add(Check{
		ID: "tool.invoke.thread-ancestors", Level: Must, Rule: "RAP IN-1",
		Title: "an invocation from a child thread (thread_ancestors) is served, the result routed to its group_id",
		Fix:   `accept "thread_ancestors" (an array of thread ids) and send the result with the invocation's own group_id`,
	}, func(t *T) {
		t.Requires("tool.result.delivered")
		c := r.goodCall(t)
		inv, ib := r.invocation(t, c.Tool, c.Args)
		inv["thread_ancestors"] = []string{"conformance-root-" + randomToken(4), "conformance-parent-" + randomToken(4)}
		r.invoke(t, inv)
		rec := r.awaitResult(t, ib, "an invocation with thread_ancestors")
		if p := routeProblems(rec, inv); p != "" {
			t.Failf("%s", p)
		}
	})
	s.Add(Check{
		ID: "tool.invoke.unknown-operation", Level: Must, Rule: "RAP IN-3, IN-4",
		Title: "an unknown operation is answered 200, then an error tool_result",
		Fix:   "answer 200 to an invocation of a tool you do not have, then send an Error: tool_result naming the tools you do have",
	}, func(t *T) {
		t.Requires("tool.discovery.document")
		r.endpointURL(t)
		inv, ib := r.invocation(t, "conformance_no_such_tool_"+randomToken(3), json.RawMessage(`{}`))
		r.invoke(t, inv)
		rec := r.awaitResult(t, ib, "the unknown operation")
		if p := routeProblems(rec, inv); p != "" {
			t.Failf("%s", p)
		}
		if !looksLikeError(resultText(rec.msg)) {
			t.Failf("the result does not say the call failed: %q (an unknown operation must end in an error result)", cut(resultText(rec.msg), 200))
		}
		r.mu.Lock()
		r.errorResults = append(r.errorResults, "unknown operation: "+resultText(rec.msg))
		r.mu.Unlock()
	})
	s.Add(Check{
		ID: "tool.invoke.invalid-arguments", Level: Must, Rule: "RAP IN-3, TS-10",
		Title: "arguments that do not fit the tool's schema are answered 200, then an error tool_result",
		Fix:   "validate arguments against the inputSchema after answering 200, and send an Error: tool_result saying what is wrong",
	}, func(t *T) {
		t.Requires("tool.result.delivered")
		r.mu.Lock()
		calls, tools := r.nonSubscriptionCalls(), r.tools
		r.mu.Unlock()
		for _, c := range calls {
			for _, td := range tools {
				if td.Name != c.Tool {
					continue
				}
				args, how := invalidArgs(td.Schema)
				if args == nil {
					continue
				}
				inv, ib := r.invocation(t, c.Tool, args)
				r.invoke(t, inv)
				rec := r.awaitResult(t, ib, fmt.Sprintf("%s with %s", c.Tool, how))
				if p := routeProblems(rec, inv); p != "" {
					t.Failf("%s", p)
				}
				if !looksLikeError(resultText(rec.msg)) {
					t.Failf("called with %s, the tool answered as if it succeeded: %q", how, cut(resultText(rec.msg), 200))
				}
				r.mu.Lock()
				r.errorResults = append(r.errorResults, fmt.Sprintf("%s with %s: %s", c.Tool, how, resultText(rec.msg)))
				r.mu.Unlock()
				t.Logf("called %s with %s", c.Tool, how)
				return
			}
		}
		t.Skipf("no allowed tool has a schema that arguments can violate (required or typed properties, or additionalProperties false)")
	})
	s.Add(Check{
		ID: "tool.result.error-prefix", Level: Should, Rule: "RAP RE-4",
		Title: `results of failed calls start with "Error: " and say what to do`,
		Fix:   `start the text of every error result with "Error: " and say what the caller should do next`,
	}, func(t *T) {
		t.Requires("tool.invoke.unknown-operation")
		r.mu.Lock()
		texts := r.errorResults
		r.mu.Unlock()
		for _, s := range texts {
			_, text, _ := strings.Cut(s, ": ")
			if !strings.HasPrefix(text, "Error: ") || len(strings.TrimSpace(strings.TrimPrefix(text, "Error: "))) == 0 {
				t.Failf("the result of a failed call does not start with \"Error: \" and a reason: %s", s)
			}
		}
	})
	s.Add(Check{
		ID: "tool.invoke.malformed", Level: Must, Rule: "RAP IN-3, IN-4, TR-4",
		Title: "an invocation whose arguments are not an object is refused (4xx) or answered 200 then a tool_result",
		Fix:   `answer 400 to an invocation whose "arguments" is not an object, or answer 200 and send an Error: tool_result`,
	}, func(t *T) {
		t.Requires("tool.discovery.document")
		// An unknown tool: a server that runs tools with such arguments
		// must not run a real one.
		inv, ib := r.invocation(t, "conformance_no_such_tool_"+randomToken(3), nil)
		inv["arguments"] = "not an object"
		rep := r.postJSON(t, r.endpointURL(t), inv)
		switch {
		case rep.status >= 400 && rep.status < 500:
			t.Logf("refused with %d", rep.status)
		case rep.status == http.StatusOK:
			rec := r.awaitResult(t, ib, "the malformed invocation")
			if p := routeProblems(rec, inv); p != "" {
				t.Failf("%s", p)
			}
		default:
			t.Failf("answered %d: a 5xx makes the runtime retry an invocation that cannot succeed (%s)", rep.status, snippet(rep.body))
		}
	})
	s.Add(Check{
		ID: "tool.invoke.not-json", Level: Should, Rule: "RAP TR-1, TR-4",
		Title: "a body that is not JSON is refused with a 4xx, and the server keeps serving",
		Fix:   "answer 400 to a body that does not parse as a JSON object",
	}, func(t *T) {
		t.Requires("tool.discovery.document")
		rep, err := r.post(t, r.endpointURL(t), []byte(`{"operation": "conformance", "arguments": {`), false)
		if err != nil {
			t.Failf("the server did not answer a body that is not JSON: %v", err)
		}
		r.stillServing(t)
		if rep.status < 400 || rep.status >= 500 {
			t.Failf("a body that is not JSON was answered %d, not 4xx", rep.status)
		}
	})
}
