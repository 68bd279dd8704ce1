package conformance

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"time"
)

// The delivery checks: how the server copes when the callback endpoint
// fails, refuses, stalls or answers too much (RAP TR-2, TR-6).
func (r *toolRun) addDelivery(s *Suite) {
	s.Add(Check{
		ID: "tool.callback.retry-5xx", Level: Should, Rule: "RAP TR-6",
		Title: "a callback answered 503 is retried",
		Fix:   "retry a callback answered 5xx (or not answered) with exponential backoff, keeping the same body",
	}, func(t *T) {
		t.Requires("tool.result.delivered")
		c := r.goodCall(t)
		inv, ib := r.invocation(t, c.Tool, c.Args)
		ib.setPlan(func(n int) answer {
			if n == 1 {
				return answer{status: http.StatusServiceUnavailable}
			}
			return answer{status: http.StatusOK}
		})
		r.invoke(t, inv)
		first := r.awaitResult(t, ib, c.Tool)
		second, ok := ib.next(t.Context(), r.cfg.RetryWait)
		if !ok {
			t.Failf("the kit answered the result 503 and no retry came within %s (if the server's backoff is longer, raise --retry-wait)", r.cfg.RetryWait)
		}
		if !bytes.Equal(first.body, second.body) {
			t.Logf("the retry's body differs from the first attempt's")
		}
		t.Logf("retried after %s", second.at.Sub(first.at).Round(time.Millisecond))
	})
	s.Add(Check{
		ID: "tool.callback.idempotency-key", Level: Extension, Rule: "gorap Idempotency-Key (docs/sdk.md), RAP RE-6",
		Title: "where callbacks carry an Idempotency-Key, a retry carries the same key",
		Fix:   "fix a callback's Idempotency-Key when it is first queued and send the same key with every retry",
	}, func(t *T) {
		t.Requires("tool.callback.retry-5xx")
		c := r.goodCall(t)
		inv, ib := r.invocation(t, c.Tool, c.Args)
		ib.setPlan(func(n int) answer {
			if n == 1 {
				return answer{status: http.StatusServiceUnavailable}
			}
			return answer{status: http.StatusOK}
		})
		r.invoke(t, inv)
		first := r.awaitResult(t, ib, c.Tool)
		key := first.header.Get("Idempotency-Key")
		second, ok := ib.next(t.Context(), r.cfg.RetryWait)
		if key == "" {
			t.Skipf("not offered: the callback carries no Idempotency-Key")
		}
		if !ok {
			t.Failf("no retry came within %s", r.cfg.RetryWait)
		}
		if got := second.header.Get("Idempotency-Key"); got != key {
			t.Failf("the retry's Idempotency-Key is %q, the first attempt's %q", got, key)
		}
	})
	s.Add(Check{
		ID: "tool.callback.traceparent", Level: Extension, Rule: "gorap trace context (docs/observability.md)",
		Title: "where callbacks carry a traceparent, it is in the invocation's trace",
		Fix:   "send the invocation's traceparent (or a child in the same trace) and tracestate with every callback of the call",
	}, func(t *T) {
		t.Requires("tool.result.delivered")
		c := r.goodCall(t)
		inv, ib := r.invocation(t, c.Tool, c.Args)
		traceID := randomToken(16)
		parent := "00-" + traceID + "-" + randomToken(8) + "-01"
		body, _ := json.Marshal(inv)
		rep, err := r.post(t, r.endpointURL(t), body, false, "Traceparent", parent, "Tracestate", "conformance=1")
		if err != nil || rep.status != http.StatusOK {
			t.Failf("the invocation with a traceparent was not acknowledged (%d, %v)", rep.status, err)
		}
		rec := r.awaitResult(t, ib, c.Tool)
		got := rec.header.Get("Traceparent")
		if got == "" {
			t.Skipf("not offered: the result carries no traceparent")
		}
		if parts := strings.Split(got, "-"); len(parts) != 4 || parts[1] != traceID {
			t.Failf("the result's traceparent %q is not in the invocation's trace %s", got, traceID)
		}
	})
	s.Add(Check{
		ID: "tool.callback.no-retry-4xx", Level: Should, Rule: "RAP TR-6",
		Title: "a callback answered 400 is not retried",
		Fix:   "do not retry a callback answered 4xx: the same bytes will be refused again",
	}, func(t *T) {
		t.Requires("tool.result.delivered")
		c := r.goodCall(t)
		inv, ib := r.invocation(t, c.Tool, c.Args)
		ib.setPlan(func(int) answer { return answer{status: http.StatusBadRequest} })
		r.invoke(t, inv)
		first := r.awaitResult(t, ib, c.Tool)
		if again, ok := ib.next(t.Context(), r.cfg.QuietWait); ok && bytes.Equal(again.body, first.body) {
			t.Failf("the same callback was sent again %s after the kit answered 400", again.at.Sub(first.at).Round(time.Millisecond))
		}
	})
	s.Add(Check{
		ID: "tool.callback.slow-endpoint", Level: Must, Rule: "RAP TR-2",
		Title: "while a callback endpoint stalls, the server still acknowledges new invocations",
		Fix:   "deliver callbacks outside the request handlers, with a timeout, so a slow runtime never holds up acknowledgements",
	}, func(t *T) {
		// A server that delivers before acknowledging also stalls here.
		t.Requires("tool.ack.before-work")
		c := r.goodCall(t)
		inv, ib := r.invocation(t, c.Tool, c.Args)
		stall := make(chan struct{})
		timer := time.AfterFunc(r.cfg.StallFor, func() { close(stall) })
		defer func() {
			if timer.Stop() {
				close(stall)
			}
		}()
		ib.setPlan(func(int) answer { return answer{status: http.StatusOK, hold: stall} })
		r.invoke(t, inv)
		r.awaitResult(t, ib, c.Tool)
		// The result's answer is stalled now; a new invocation must still
		// be acknowledged.
		inv2, ib2 := r.invocation(t, c.Tool, c.Args)
		rep := r.postJSON(t, r.endpointURL(t), inv2)
		if rep.status != http.StatusOK {
			t.Failf("while the kit stalled a callback, a new invocation was answered %d", rep.status)
		}
		select {
		case <-stall:
			t.Failf("the acknowledgement came only after the stalled callback was answered (%s later)", r.cfg.StallFor)
		default:
		}
		// Let the stall end before the result of the second call is
		// awaited: a server may deliver its callbacks one at a time.
		if timer.Stop() {
			close(stall)
		}
		r.awaitResult(t, ib2, c.Tool)
	})
	s.Add(Check{
		ID: "tool.callback.oversized-answer", Level: Should, Rule: "RAP TR-6",
		Title: "a callback endpoint whose answer's body never ends does not hold up the server's results",
		Fix:   "read at most a few KiB of a callback's answer, with a timeout, then close it",
	}, func(t *T) {
		t.Requires("tool.result.delivered")
		c := r.goodCall(t)
		inv, ib := r.invocation(t, c.Tool, c.Args)
		// The answer's body goes on until the check ends (at most 1 GiB).
		stop := make(chan struct{})
		defer close(stop)
		ib.setPlan(func(int) answer { return answer{status: http.StatusOK, hugeBody: 1 << 30, stop: stop} })
		r.invoke(t, inv)
		r.awaitResult(t, ib, c.Tool)
		r.stillServing(t)
		inv2, ib2 := r.invocation(t, c.Tool, c.Args)
		r.invoke(t, inv2)
		r.awaitResult(t, ib2, c.Tool)
	})
}
