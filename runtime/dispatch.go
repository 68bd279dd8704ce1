package runtime

// This file owns dispatching a call (RAP TR-2 to TR-4, IN-1): encoding the
// invocation, POSTing it with retries, and the synthetic error result of a
// call that could not be delivered; also the helpers every POST to a tool
// server uses.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/gorap/gorap/rap"
	"github.com/gorap/gorap/runtime/store"
)

// dispatchAsync sends the call's invocation in the background. The call is
// already persisted (RAP RT-1). ancestors are the thread's ancestors, root
// first (RAP IN-1); nil means they are looked up in the store.
func (r *Runtime) dispatchAsync(c store.Call, ancestors []string) {
	r.dispatchAsyncIn(trace.SpanContext{}, c, ancestors)
}

// dispatchAsyncIn is dispatchAsync for a call made in the span parent:
// the dispatch's span is its child (tracing.go).
func (r *Runtime) dispatchAsyncIn(parent trace.SpanContext, c store.Call, ancestors []string) {
	r.mu.Lock()
	if r.stopping {
		r.mu.Unlock()
		return // state "new" stays in the store; Start dispatches it
	}
	r.inflight[c.ThreadID]++
	r.wg.Add(1)
	r.mu.Unlock()
	r.workers.Go(func() {
		defer func() {
			r.mu.Lock()
			if r.inflight[c.ThreadID]--; r.inflight[c.ThreadID] <= 0 {
				delete(r.inflight, c.ThreadID)
			}
			r.signalLocked()
			r.mu.Unlock()
			r.wg.Done()
		}()
		ctx := r.baseCtx
		if r.tracer != nil {
			var span trace.Span
			ctx, span = r.startDispatch(ctx, parent, c.Toolset, c.ToolName, c.CallID, c.ThreadID)
			defer span.End() // ended before, with its outcome, unless interrupted
		}
		r.dispatch(ctx, c, ancestors)
	})
}

// resultDedupKey is the inbox dedup key of a call's result: a real result,
// a dispatch failure and a timeout share it. Which one wins is decided by
// the call's state: each moves it from pending to done with a conditional
// SetCallState and enqueues only if that moved it, so the first wins and
// any later one adds nothing (RAP RE-6); the key is therefore not kept
// once the result is consumed (store.InboxItem.Once).
func resultDedupKey(threadID, callID string) string {
	return "result:" + threadID + ":" + callID
}

// dispatch POSTs the invocation (RAP TR-2, IN-1, IN-2), retrying connection
// errors and 5xx answers with exponential backoff but never a 4xx
// (RAP TR-3). Any 2xx answer accepts the call; a final failure becomes an
// error result (RAP TR-4). Every
// invocation is logged for audit (RAP RT-6).
func (r *Runtime) dispatch(ctx context.Context, c store.Call, ancestors []string) {
	if r.awaitConfirmation(ctx, c, ancestors) { // destructive tools ask first
		return
	}
	if r.cfg.ConfirmDestructive {
		defer r.confirmRunning.Delete(c.ThreadID + "\x00" + c.CallID)
	}
	start := time.Now()
	inv, err := r.invocation(ctx, c, ancestors)
	var attempts int
	var status int
	if err == nil {
		attempts, status, err = r.post(ctx, c, inv)
	}
	if ctx.Err() != nil {
		// Shutting down: the call stays "new" and is dispatched at the next
		// Start.
		r.log.InfoContext(ctx, "rap invocation interrupted by shutdown", "audit", true, "operation", c.ToolName,
			"thread", c.ThreadID, "call_id", c.CallID, "started", start, "outcome", "interrupted")
		return
	}
	outcome := "accepted"
	if err != nil {
		outcome = "failed"
	}
	if r.metrics != nil {
		r.metrics.Invocation(c.Toolset, c.ToolName, invocationOutcome(status, err), time.Since(start))
	}
	if r.tracer != nil {
		endDispatch(trace.SpanFromContext(ctx), attempts, status, err) // tracing.go
	}
	if r.log.Enabled(ctx, slog.LevelInfo) {
		// Typed attributes: the same line as key-value arguments, without
		// boxing each value (a dozen allocations per invocation).
		r.log.LogAttrs(ctx, slog.LevelInfo, "rap invocation", slog.Bool("audit", true), slog.String("operation", c.ToolName),
			slog.String("toolset", c.Toolset), slog.String("endpoint", redactedEndpoint(c.Endpoint)), slog.String("thread", c.ThreadID),
			slog.String("call_id", c.CallID), slog.Time("started", start), slog.Duration("duration", time.Since(start)),
			slog.Int("attempts", attempts), slog.Int("status", status), slog.String("outcome", outcome),
			slog.String("error", errString(err)))
	}
	if err == nil {
		// Concurrent marks share a transaction and a sync (coord.go). The
		// call's status check is not written here: the sweep adds one if
		// the call is still dispatched a while later (adoptSilentCalls,
		// callstatus.go), so that the many calls that end quickly cost no
		// check row.
		if err := r.coord.markDispatched(ctx, c); err != nil {
			r.log.Error("record dispatched call", "thread", c.ThreadID, "call_id", c.CallID, "err", err)
		}
		return
	}
	text := fmt.Sprintf("Error: the tool %s could not be invoked: %v. The tool server may be down or refused the call; try again later or use another tool.", c.ToolName, err)
	r.deliverSynthetic(ctx, c, text)
}

// deliverSynthetic records a runtime-made error result for a pending call
// and wakes its thread. It adds nothing if the call already has a result.
func (r *Runtime) deliverSynthetic(ctx context.Context, c store.Call, text string) {
	res := store.ToolResult{CallID: c.CallID, Name: c.ToolName, Text: text, IsError: true}
	payload, _ := json.Marshal(res)
	var added bool
	err := r.store.Update(ctx, func(tx store.Tx) error {
		changed, err := tx.SetCallState(c.ThreadID, c.CallID, store.CallDone, store.CallNew, store.CallDispatched)
		if err != nil || !changed {
			return err
		}
		// A choice the user did not answer is moot once the result is in.
		if _, err := tx.TakeChoice(c.ThreadID, c.CallID); err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		if err := r.coord.forgetAuthTx(tx, c.ThreadID, c.CallID); err != nil {
			return err
		}
		added, err = tx.Enqueue(store.InboxItem{ThreadID: c.ThreadID, Kind: store.KindToolResult, Payload: payload,
			DedupKey: resultDedupKey(c.ThreadID, c.CallID), Once: true})
		return err
	})
	if err != nil {
		r.log.Error("record synthetic tool result", "thread", c.ThreadID, "call_id", c.CallID, "err", err)
		return
	}
	if added {
		r.coord.forgetAuth(c.ThreadID, c.CallID)
		r.wake(c.ThreadID)
	}
}

// invocation builds the message for c. The thread's ancestors are looked up
// when not given (RAP IN-1), and the session's user id is looked up too.
func (r *Runtime) invocation(ctx context.Context, c store.Call, ancestors []string) ([]byte, error) {
	if ancestors == nil {
		var user string
		err := r.store.View(ctx, func(tx store.Tx) error {
			ancestors = ancestors[:0]
			th, err := tx.Thread(c.ThreadID)
			if err != nil {
				return err
			}
			user = th.UserID
			for p := th.ParentID; p != ""; {
				ancestors = append([]string{p}, ancestors...)
				pt, err := tx.Thread(p)
				if err != nil {
					return err
				}
				user = pt.UserID
				p = pt.ParentID
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("load thread %s for the invocation: %w", c.ThreadID, err)
		}
		// user is now the root thread's: the session's user.
		return r.encodeInvocation(c, ancestors, user)
	}
	root := c.ThreadID
	if len(ancestors) > 0 {
		root = ancestors[0]
	}
	user, err := r.sessionUser(ctx, root)
	if err != nil {
		return nil, err
	}
	return r.encodeInvocation(c, ancestors, user)
}

// encodeInvocation encodes the invocation message of c for the session's
// user userID (empty: none).
func (r *Runtime) encodeInvocation(c store.Call, ancestors []string, userID string) ([]byte, error) {
	if len(ancestors) == 0 {
		ancestors = nil // a root thread's invocation has no thread_ancestors
	}
	inv := rap.Invocation{
		Operation:       c.ToolName,
		Arguments:       c.Arguments,
		ID:              c.CallID,
		CallbackURL:     r.callbackURL(c.ThreadID, c.CallID),
		GroupID:         c.ThreadID,
		UserID:          userID,
		ThreadAncestors: ancestors,
		Extensions:      runtimeExtensions,
	}
	return json.Marshal(inv)
}

// post sends body to the call's endpoint with retries.
func (r *Runtime) post(ctx context.Context, c store.Call, body []byte) (attempts, status int, err error) {
	p := r.retry
	backoff := p.Initial
	for attempts = 1; ; attempts++ {
		var retry bool
		status, retry, err = r.postOnce(ctx, c.Endpoint, body, p.AttemptTimeout)
		if err == nil || !retry || attempts >= p.Attempts {
			if err != nil && retry {
				err = fmt.Errorf("gave up after %d attempts: %w", attempts, err)
			}
			return attempts, status, err
		}
		wait := backoff + time.Duration(rand.Int64N(int64(backoff)/5+1))
		r.log.WarnContext(ctx, "rap invocation retry", "operation", c.ToolName, "thread", c.ThreadID, "call_id", c.CallID,
			"attempt", attempts, "wait", wait, "error", err.Error())
		select {
		case <-ctx.Done():
			return attempts, status, ctx.Err()
		case <-time.After(wait):
		}
		backoff = min(backoff*2, p.Max)
	}
}

// postOnce POSTs body once and says whether a failure may be retried.
func (r *Runtime) postOnce(ctx context.Context, endpoint string, body []byte, timeout time.Duration) (status int, retry bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, bytes.NewReader(body))
	if err != nil {
		return 0, false, fmt.Errorf("bad endpoint %s: %w", redact(endpoint), err)
	}
	req.Header.Set("Content-Type", "application/json")
	r.injectTrace(ctx, req.Header) // traceparent, tracestate (tracing.go)
	resp, err := r.http.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // url.Error repeats the URL
		}
		return 0, true, fmt.Errorf("POST %s: %w", redact(endpoint), err)
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) // the body is ignored (RAP TR-2)
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		// Any 2xx acknowledges the invocation (202 Accepted and 204 No
		// Content included), as the reference runtime accepts; the result
		// comes later by callback (RAP TR-2, TR-4).
		return resp.StatusCode, false, nil
	case resp.StatusCode >= 500:
		return resp.StatusCode, true, fmt.Errorf("POST %s: server answered %s", redact(endpoint), resp.Status)
	default:
		return resp.StatusCode, false, fmt.Errorf("POST %s: server answered %s; only a 2xx answer is an acceptance (RAP TR-4)", redact(endpoint), resp.Status)
	}
}

// redact hides credentials and query strings of a URL for logs.
func redact(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return "<invalid URL>"
	}
	p.RawQuery = ""
	return p.Redacted()
}

// redactedEndpoints holds redact's answer for the tool endpoints of the
// audit log, up to maxRedactedEndpoints of them: every invocation logs its
// endpoint, and there are few.
var (
	redactedEndpoints     sync.Map // endpoint → redact(endpoint)
	redactedEndpointCount atomic.Int64
)

const maxRedactedEndpoints = 1024

// redactedEndpoint is redact(endpoint), parsed once per endpoint.
func redactedEndpoint(endpoint string) string {
	if v, ok := redactedEndpoints.Load(endpoint); ok {
		return v.(string)
	}
	red := redact(endpoint)
	if redactedEndpointCount.Add(1) <= maxRedactedEndpoints {
		redactedEndpoints.Store(endpoint, red)
	}
	return red
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
