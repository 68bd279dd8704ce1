package runtime

// This file owns one call status check (RAP tool_call_status): asking the
// call's tool server whether it still knows a silent call or subscription,
// and acting on the verdict — a lost call gets an error result, a lost
// subscription ends, a live one is asked again later. The sweep that picks
// the calls is in callstatus.go.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/gorap/gorap/rap"
	"github.com/gorap/gorap/runtime/store"
)

// lostCallText is the result of a call whose tool server no longer knows
// it (RAP RE-4: an error result that says what to do next).
const lostCallText = "Error: the tool server lost this call of %s: asked whether it still knew the call, it answered that it does not (it may have restarted and lost its state), so no result will ever arrive. Call %s again if you still need it."

// lostSubscriptionText tells the model that a subscription ended because
// its tool server no longer knows it.
const lostSubscriptionText = "The subscription of %s (call %s) has ended: its tool server answered that it no longer knows it (it may have restarted and lost its state), so no more events will come from it. Call %s again to subscribe anew if you still need its events."

// callVerdict is what a tool server's answer to /tool_call_status means.
type callVerdict int

const (
	verdictUnknown     callVerdict = iota // no usable answer: ask again later
	verdictAlive                          // the server knows the call
	verdictDead                           // the server does not know the call
	verdictUnsupported                    // the server has no /tool_call_status
)

func (v callVerdict) String() string {
	return [...]string{"unknown", "alive", "dead", "unsupported"}[v]
}

// checkCall asks the tool server of a waiting call about it and acts on
// the answer.
func (r *Runtime) checkCall(ctx context.Context, w waitingCall) error {
	chk, c, isSub := w.chk, w.call, w.isSub
	base, ok, err := r.toolsetBase(ctx, w.rootID, c.Toolset)
	if err != nil {
		return err
	}
	if !ok {
		r.log.Warn("call status not asked: the session has no toolset of this name", "thread", c.ThreadID, "call_id", c.CallID, "toolset", c.Toolset)
		return r.dropCallCheck(ctx, chk)
	}
	if !r.takenHere(ctx, w.rootID, c) {
		// The call went to a server this session no longer uses (the
		// session moved here from another runtime): the server the
		// session has now would rightly not know it. Its result still
		// comes, through the runtime it moved from.
		r.log.Info("call status not asked: the call was taken by another tool server than the session's toolset now names", "thread", c.ThreadID, "call_id", c.CallID, "toolset", c.Toolset)
		return r.dropCallCheck(ctx, chk)
	}
	if r.checks.isUnsupported(base) {
		return r.rescheduleCallCheck(ctx, chk, unsupportedRecheck, chk.Failures)
	}
	verdict, status, detail := r.askCallStatus(ctx, base, c)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	log := r.log.With("thread", c.ThreadID, "call_id", c.CallID, "operation", c.ToolName, "server", redact(base),
		"subscription", isSub, "status", status, "verdict", verdict.String())
	switch verdict {
	case verdictAlive:
		log.Debug("rap call status")
		return r.rescheduleCallCheck(ctx, chk, r.cfg.CallStatusAfter, 0)
	case verdictUnsupported:
		if r.checks.markUnsupported(base) {
			log.Info("rap call status: the tool server does not implement tool_call_status; not asking it again until restart")
		}
		return r.rescheduleCallCheck(ctx, chk, unsupportedRecheck, chk.Failures)
	case verdictDead:
		log.Warn("rap call status: the tool server no longer knows the call; ending it", "audit", true)
		if isSub {
			if err := r.endLostSubscription(ctx, c); err != nil {
				return err
			}
		} else {
			r.deliverSynthetic(ctx, c, fmt.Sprintf(lostCallText, c.ToolName, c.ToolName))
		}
		return r.dropCallCheck(ctx, chk)
	default:
		backoff := r.cfg.CallStatusAfter
		for i := 0; i < chk.Failures && backoff < maxCallStatusBackoff; i++ {
			backoff *= 2
		}
		backoff = min(backoff, maxCallStatusBackoff)
		log.Info("rap call status: no usable answer; still waiting for the call", "error", detail, "next_ask_in", backoff)
		return r.rescheduleCallCheck(ctx, chk, backoff, chk.Failures+1)
	}
}

// takenHere reports whether call c was dispatched to the endpoint the
// session's catalog names for its tool now.
func (r *Runtime) takenHere(ctx context.Context, rootID string, c store.Call) bool {
	s, err := r.sessionOf(ctx, rootID)
	if err != nil || s.catalog == nil {
		return true // cannot tell: ask as before
	}
	tool, ok := s.catalog.Lookup(c.ToolName)
	return !ok || tool.Endpoint == c.Endpoint
}

// dropCallCheck deletes a check whose call no longer waits.
func (r *Runtime) dropCallCheck(ctx context.Context, chk store.CallCheck) error {
	return r.store.Update(ctx, func(tx store.Tx) error { return tx.DeleteCallCheck(chk.ThreadID, chk.CallID) })
}

// rescheduleCallCheck makes the check due again after d.
func (r *Runtime) rescheduleCallCheck(ctx context.Context, chk store.CallCheck, d time.Duration, failures int) error {
	return r.store.Update(ctx, func(tx store.Tx) error {
		return tx.PutCallCheck(store.CallCheck{ThreadID: chk.ThreadID, CallID: chk.CallID, Due: time.Now().Add(d), Failures: failures})
	})
}

// askCallStatus POSTs {thread_id, tool_call_id} to {base}/tool_call_status
// with the invocations' client (so with their authentication) and says
// what the answer means: a 2xx is alive (unless its body says "unknown"); a
// 404 or 410 whose JSON body says the call is unknown is dead; a 404, 405
// or 501 without that body means the server has no such endpoint;
// anything else (5xx, other 4xx, a timeout, a connection error) says
// nothing about the call.
func (r *Runtime) askCallStatus(ctx context.Context, base string, c store.Call) (callVerdict, int, string) {
	body, _ := json.Marshal(rap.ToolCallStatusRequest{ThreadID: c.ThreadID, ToolCallID: c.CallID})
	ctx, cancel := context.WithTimeout(ctx, callStatusTimeout)
	defer cancel()
	endpoint := strings.TrimRight(base, "/") + rap.ToolCallStatusPath
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, bytes.NewReader(body))
	if err != nil {
		return verdictUnknown, 0, fmt.Sprintf("bad tool server URL %s: %v", redact(base), err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := r.http.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return verdictUnknown, 0, err.Error()
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var st rap.ToolCallStatus
	said := json.Unmarshal(raw, &st) == nil && st.Status != "" && (st.ToolCallID == "" || st.ToolCallID == c.CallID)
	code := resp.StatusCode
	switch {
	case code >= 200 && code < 300:
		if said && st.Status == rap.CallUnknown {
			return verdictDead, code, ""
		}
		return verdictAlive, code, ""
	case (code == http.StatusNotFound || code == http.StatusGone) && said:
		if st.Status == rap.CallUnknown {
			return verdictDead, code, ""
		}
		return verdictUnknown, code, fmt.Sprintf("answered %s with status %q", resp.Status, st.Status)
	case code == http.StatusNotFound, code == http.StatusMethodNotAllowed, code == http.StatusNotImplemented:
		return verdictUnsupported, code, ""
	default:
		return verdictUnknown, code, "answered " + resp.Status
	}
}

// endLostSubscription ends an active subscription whose tool server no
// longer knows it and tells the model, through a note that wakes the
// thread, that no more events will come.
func (r *Runtime) endLostSubscription(ctx context.Context, c store.Call) error {
	note, _ := json.Marshal(store.UserMessage{Text: fmt.Sprintf(lostSubscriptionText, c.ToolName, c.CallID, c.ToolName)})
	var added bool
	err := r.store.Update(ctx, func(tx store.Tx) error {
		added = false
		sub, err := tx.Subscription(c.ThreadID, c.CallID)
		if err != nil {
			return err
		}
		if sub.State != store.SubscriptionActive {
			return nil // it ended meanwhile
		}
		sub.State = store.SubscriptionCancelled
		if err := tx.PutSubscription(sub); err != nil {
			return err
		}
		added, err = tx.Enqueue(store.InboxItem{ThreadID: c.ThreadID, Kind: store.KindNote, Payload: note,
			DedupKey: "subscription-lost:" + c.ThreadID + ":" + c.CallID})
		return err
	})
	if err != nil {
		return fmt.Errorf("end the lost subscription %s of thread %s: %w", c.CallID, c.ThreadID, err)
	}
	if added {
		r.wake(c.ThreadID)
	}
	return nil
}
