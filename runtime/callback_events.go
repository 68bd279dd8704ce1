package runtime

// This file owns the subscription events a callback brings (RAP SU-3 to
// SU-6): an event of an active subscription becomes an inbox row (injected
// inline) or a child thread, one that arrives before its subscription is
// confirmed is held, and one of an ended subscription is answered 410.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/google/uuid"

	"github.com/gorap/gorap/rap"
	"github.com/gorap/gorap/runtime/store"
)

// Bounds on the subscription events held for a call whose subscription is
// not confirmed yet. Past them an event is answered 503
// with Retry-After, so its tool sends it again instead of losing it.
const (
	// MaxHeldEventsPerCall bounds the events held for one call.
	MaxHeldEventsPerCall = 64
	// MaxHeldBytesPerCall bounds the bytes held for one call; a first
	// event is held whatever its size (it is at most MaxCallbackBytes).
	MaxHeldBytesPerCall = 4 << 20
	// MaxHeldBytesTotal bounds the bytes held for every call together.
	MaxHeldBytesTotal = 64 << 20
	// heldRetryAfter is the Retry-After, in seconds, of a deferred event.
	heldRetryAfter = 1
)

// maxEventIDLen bounds a subscription event's event_id.
const maxEventIDLen = 512

// checkEventID bounds the gorap event_id extension of a subscription
// event, which rap.DecodeCallback reads.
func checkEventID(msg rap.Callback) error {
	if ev, ok := msg.(*rap.SubscriptionEvent); ok && len(ev.EventID) > maxEventIDLen {
		return fmt.Errorf("event_id: has %d bytes, the limit is %d", len(ev.EventID), maxEventIDLen)
	}
	return nil
}

// eventKey is the dedup key of a subscription event with an event_id:
// per call, so ids of other calls never collide.
func eventKey(threadID, callID, eventID string) string {
	return "event-id:" + threadID + ":" + callID + ":" + eventID
}

// gone answers an event of a subscription that ended: the
// tool should stop sending events for it.
func gone(msg string) (callbackOutcome, error) {
	return callbackOutcome{status: http.StatusGone, msg: msg}, nil
}

// goneDiscarding answers 410 and drops the events still held for call,
// which can no longer be confirmed; the drop is committed.
func (r *Runtime) goneDiscarding(tx store.Tx, call store.Call, msg string) (callbackOutcome, error) {
	n, err := r.discardHeldEvents(tx, call, "the call ended without confirming a subscription")
	if err != nil {
		return callbackOutcome{}, err
	}
	return callbackOutcome{status: http.StatusGone, msg: msg, commit: n > 0}, nil
}

// applyEvent handles a subscription event inside the callback's
// transaction: a redelivered event (same event_id) is a duplicate; an
// event of an active subscription is delivered; one for a call still
// pending is held until its tool_result says whether it subscribed; one
// for a subscription, call or thread that ended is answered 410.
func (r *Runtime) applyEvent(tx store.Tx, call store.Call, m *rap.SubscriptionEvent) (callbackOutcome, error) {
	if m.ToolCallID != call.CallID {
		return callbackOutcome{status: http.StatusForbidden, msg: "tool_call_id does not match the callback URL; send the id of the subscribing invocation"}, nil
	}
	var key string
	if m.EventID != "" {
		// An event_id already taken is a redelivery.
		key = eventKey(call.ThreadID, call.CallID, m.EventID)
		seen, err := tx.SeenKey(key)
		if err != nil {
			return callbackOutcome{}, err
		}
		if seen {
			return callbackOutcome{status: http.StatusOK, msg: "duplicate"}, nil
		}
	}
	th, err := tx.Thread(call.ThreadID)
	if err != nil {
		return callbackOutcome{}, err
	}
	if th.Status == store.ThreadClosed {
		// RAP SU-9: events for a closed thread are logged and discarded.
		r.log.Warn("subscription event discarded: the thread is closed (RAP SU-9)", "thread", call.ThreadID, "call_id", call.CallID)
		return r.goneDiscarding(tx, call, "the thread is closed (RAP SU-9); stop this subscription")
	}
	sub, err := tx.Subscription(call.ThreadID, call.CallID)
	switch {
	case errors.Is(err, store.ErrNotFound) && call.State.Pending():
		return r.holdEvent(tx, call, m, key)
	case errors.Is(err, store.ErrNotFound):
		r.log.Warn("subscription event discarded: the call ended without a subscription (RAP SU-4)", "thread", call.ThreadID, "call_id", call.CallID)
		return r.goneDiscarding(tx, call, "this call ended without a subscription (RAP SU-4); stop sending events for it")
	case err != nil:
		return callbackOutcome{}, err
	case sub.State != store.SubscriptionActive:
		r.log.Warn("subscription event discarded: the subscription ended (RAP SU-4)", "thread", call.ThreadID, "call_id", call.CallID, "state", string(sub.State))
		return gone(fmt.Sprintf("the subscription is %s (RAP SU-4, SU-7); stop sending events for it", sub.State))
	}
	if key != "" {
		if _, err := tx.MarkKeySeen(call.ThreadID, key); err != nil {
			return callbackOutcome{}, err
		}
	}
	fx := &effects{}
	wake, err := r.deliverEvent(tx, th, call, &sub, m, fx)
	if err != nil {
		return callbackOutcome{}, err
	}
	msg := "accepted"
	if !m.Associative {
		msg = "accepted: handled in a child thread"
	}
	return callbackOutcome{status: http.StatusOK, msg: msg, wake: wake, fx: fx}, nil
}

// deliverEvent applies one event of the active subscription sub: a child
// thread handles it, or it is queued inline for an associative one
// (RAP SU-5, SU-6); a final event ends the subscription (RAP SU-4). It
// reports whether the subscribing thread has a new inbox row.
func (r *Runtime) deliverEvent(tx store.Tx, th store.Thread, call store.Call, sub *store.Subscription, m *rap.SubscriptionEvent, fx *effects) (bool, error) {
	if m.Final {
		sub.State = store.SubscriptionFinal
		if err := tx.PutSubscription(*sub); err != nil {
			return false, err
		}
	}
	if !m.Associative {
		// RAP SU-6: a child thread per event; the parent sees only its
		// report.
		return false, r.spawnEventThread(tx, th, call, m, fx)
	}
	payload, _ := json.Marshal(m)
	// An event without event_id is a new event on every delivery unless
	// its sender gives an Idempotency-Key (checked by handleCallback).
	return tx.Enqueue(store.InboxItem{ThreadID: call.ThreadID, Kind: store.KindSubscriptionEvent, Payload: payload,
		DedupKey: "event:" + uuid.NewString()})
}

// holdEvent keeps an event that arrived before the tool_result that
// confirms its subscription, within the bounds; past them
// the tool is asked to retry (503, Retry-After).
func (r *Runtime) holdEvent(tx store.Tx, call store.Call, m *rap.SubscriptionEvent, key string) (callbackOutcome, error) {
	if err := r.sweepHeldEvents(tx); err != nil {
		return callbackOutcome{}, err
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(m); err != nil {
		return callbackOutcome{}, err
	}
	payload := bytes.TrimSpace(buf.Bytes())
	st, err := tx.HeldEventStats(call.ThreadID, call.CallID)
	if err != nil {
		return callbackOutcome{}, err
	}
	size := int64(len(payload))
	switch {
	case st.Count >= MaxHeldEventsPerCall || (st.Count > 0 && st.Bytes+size > MaxHeldBytesPerCall):
		return callbackOutcome{status: http.StatusServiceUnavailable, retryAfter: heldRetryAfter,
			msg: fmt.Sprintf("this call's subscription is not confirmed yet and %d of its events (%d bytes) already wait for it; send this event again later", st.Count, st.Bytes)}, nil
	case st.TotalBytes > 0 && st.TotalBytes+size > MaxHeldBytesTotal:
		return callbackOutcome{status: http.StatusServiceUnavailable, retryAfter: heldRetryAfter,
			msg: "the runtime holds too many events of unconfirmed subscriptions; send this event again later"}, nil
	}
	r.heldSince.Store(true) // before the write: a rollback leaves it true, which is safe
	if err := tx.HoldEvent(store.HeldEvent{ThreadID: call.ThreadID, CallID: call.CallID, Payload: payload}); err != nil {
		return callbackOutcome{}, err
	}
	if key != "" {
		if _, err := tx.MarkKeySeen(call.ThreadID, key); err != nil {
			return callbackOutcome{}, err
		}
	}
	r.log.Info("subscription event held until the subscription is confirmed", "thread", call.ThreadID, "call_id", call.CallID, "held", st.Count+1)
	return callbackOutcome{status: http.StatusOK, msg: "accepted: held until the tool_result confirms the subscription"}, nil
}

// applyHeldEvents delivers the events held for call, whose subscription
// was just confirmed, in arrival order. Events after a final one are
// discarded (RAP SU-4).
func (r *Runtime) applyHeldEvents(tx store.Tx, call store.Call, fx *effects) error {
	held, err := tx.TakeHeldEvents(call.ThreadID, call.CallID)
	if err != nil || len(held) == 0 {
		return err
	}
	th, err := tx.Thread(call.ThreadID)
	if err != nil {
		return err
	}
	sub, err := tx.Subscription(call.ThreadID, call.CallID)
	if err != nil {
		return err
	}
	applied := 0
	for i, h := range held {
		if sub.State != store.SubscriptionActive {
			r.log.Warn("held subscription events discarded: they came after the final event (RAP SU-4)", "thread", call.ThreadID, "call_id", call.CallID, "events", len(held)-i)
			break
		}
		var ev rap.SubscriptionEvent
		if err := json.Unmarshal(h.Payload, &ev); err != nil {
			r.log.Error("held subscription event discarded: it cannot be decoded", "thread", call.ThreadID, "call_id", call.CallID, "err", err)
			continue
		}
		if _, err := r.deliverEvent(tx, th, call, &sub, &ev, fx); err != nil {
			return err
		}
		applied++
	}
	r.log.Info("held subscription events applied", "thread", call.ThreadID, "call_id", call.CallID, "events", applied)
	return nil
}

// discardHeldEvents drops the events held for call, logging how many, and
// returns that number.
func (r *Runtime) discardHeldEvents(tx store.Tx, call store.Call, why string) (int, error) {
	held, err := tx.TakeHeldEvents(call.ThreadID, call.CallID)
	if err != nil || len(held) == 0 {
		return 0, err
	}
	r.log.Warn("held subscription events discarded (RAP SU-4)", "thread", call.ThreadID, "call_id", call.CallID, "events", len(held), "reason", why)
	return len(held), nil
}

// sweepHeldEvents discards the held events of every call that ended
// without confirming a subscription through a path that does not look at
// held events (a timeout, a dispatch failure, an interruption, a closed
// thread).
func (r *Runtime) sweepHeldEvents(tx store.Tx) error {
	ended, err := tx.EndedHeldCalls()
	if err != nil {
		return err
	}
	for _, c := range ended {
		why := "the call ended without confirming a subscription"
		if _, err := tx.Subscription(c.ThreadID, c.CallID); err == nil {
			// Not expected: a confirmation applies them at once.
			why = "the call has a subscription but its held events were left behind"
		}
		if _, err := r.discardHeldEvents(tx, c, why); err != nil {
			return err
		}
	}
	return nil
}
