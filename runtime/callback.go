package runtime

// This file owns accepting a callback (RAP TR-5 to TR-7, RE-6):
// DeliverCallback, which runtime/httpapi calls for a POST under
// CallbackPath, checks the token (callbackkeys.go), applies
// the message to the call in one transaction — a result or a subscription
// event becomes an inbox row of the thread, an oauth link or a user
// choice is shown to clients — and wakes the thread (claim.go).
// Subscription events held before their subscription is confirmed are in
// callback_events.go, the checks of the URLs a tool hands over in
// callback_urls.go.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/gorap/gorap/rap"
	"github.com/gorap/gorap/runtime/api"
	"github.com/gorap/gorap/runtime/httpapi"
	"github.com/gorap/gorap/runtime/store"
)

// CallbackPath is the path prefix of callback URLs; the token follows it.
const CallbackPath = httpapi.CallbackPath

// callbackOutcome is what handling a callback did, for the answer and logs.
type callbackOutcome struct {
	status int
	msg    string
	wake   bool
	// retryAfter, when positive, is sent as Retry-After (seconds) with a
	// 503: the tool should send the same message again later.
	retryAfter int
	// commit keeps the transaction's writes although status is not 200
	// (a refused oauth or user_choice that ends its call). Other refusals
	// are rolled back, so a retry is judged afresh.
	commit bool
	// after runs once the transaction committed (to publish events).
	after func()
	// fx are effects to apply once the transaction committed.
	fx *effects
}

// errRollback makes a callback's transaction roll back without an error.
var errRollback = errors.New("callback refused: roll back")

// errTokenRefused is the answer to a callback whose token the runtime did not
// issue (or whose key it no longer accepts).
var errTokenRefused = errors.New("invalid callback token; use the callback_url of the invocation unchanged")

// DeliverCallback applies a callback message (RAP TR-5 to TR-7) that a
// tool sent to the callback URL with token, with the Idempotency-Key
// header idempotencyKey ("" for none), and wakes the thread when the
// message gave it work. The token is checked before body is read, so a
// forged token costs no read: the result then has TokenRefused set. body
// is read up to MaxCallbackBytes; pass an http.MaxBytesReader of that
// size to have an HTTP server stop reading there too. The result is the
// answer to the tool: 200 accepted (or a duplicate, or ignored); 400 an
// invalid message; 403 a forged token or a body for another call; 404 a
// call the runtime never had (RAP RE-5); 410 a subscription or thread that
// ended, or a view of a closed thread; 413 a body over MaxCallbackBytes;
// 503 with RetryAfter when an early event cannot be held now (retry
// later); 500 when the store failed.
func (r *Runtime) DeliverCallback(ctx context.Context, token string, body io.Reader, idempotencyKey string) api.CallbackResult {
	if r.metrics == nil && r.tracer == nil {
		return r.deliverCallback(ctx, token, body, idempotencyKey, nil)
	}
	kind := CallbackKindUnknown
	ctx, span := r.startCallback(ctx) // tracing.go
	res := r.deliverCallback(ctx, token, body, idempotencyKey, &kind)
	endCallback(span, kind, res.Status)
	if r.metrics != nil {
		r.observeCallback(kind, res)
	}
	return res
}

// deliverCallback is DeliverCallback; it sets *kind (when not nil) to
// the message's type once the body is decoded.
func (r *Runtime) deliverCallback(ctx context.Context, token string, body io.Reader, idempotencyKey string, kind *string) api.CallbackResult {
	threadID, callID, err := r.verifyToken(token)
	if err != nil {
		// RAP RE-5, TR-7: forged or mangled tokens change nothing. The
		// caller logs the refusal, with where it came from.
		return api.CallbackResult{Status: http.StatusForbidden, Message: errTokenRefused.Error(), TokenRefused: true}
	}
	if res, moved := r.movedCallback(ctx, threadID, callID, body, idempotencyKey); moved {
		return res
	}
	release, err := r.admitInput(threadID)
	if err != nil {
		// The session started being sent since: the tool retries.
		return api.CallbackResult{Status: http.StatusServiceUnavailable, Message: "the session is moving to another runtime; retry in a moment", RetryAfter: 2}
	}
	defer release()
	data, err := io.ReadAll(io.LimitReader(body, MaxCallbackBytes+1))
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe) || (err == nil && len(data) > MaxCallbackBytes):
		return api.CallbackResult{Status: http.StatusRequestEntityTooLarge, Message: fmt.Sprintf("callback body is larger than %d bytes", MaxCallbackBytes)}
	case err != nil:
		return api.CallbackResult{Status: http.StatusBadRequest, Message: "reading the callback body: " + err.Error()}
	}
	msg, err := rap.DecodeCallback(data)
	if err == nil {
		err = checkEventID(msg)
	} else if bad := asInvalidUserInput(data, err); bad != nil {
		msg, err = bad, nil // refused below, ending the call
	}
	if err != nil {
		// RAP TR-5: the body must be a valid callback message.
		r.log.WarnContext(ctx, "callback refused: invalid body", "thread", threadID, "call_id", callID, "err", err)
		return api.CallbackResult{Status: http.StatusBadRequest, Message: "invalid callback message: " + err.Error()}
	}
	if kind != nil {
		*kind = string(msg.MessageType())
	}
	r.traceCallback(ctx, threadID, callID) // tracing.go
	out := r.handleCallback(ctx, threadID, callID, msg, idempotencyKey)
	if out.wake {
		r.linkSlice(ctx, threadID) // tracing.go
		r.wake(threadID)
	}
	return api.CallbackResult{Status: out.status, Message: out.msg, RetryAfter: out.retryAfter}
}

// handleCallback routes an authenticated, decoded callback.
func (r *Runtime) handleCallback(ctx context.Context, threadID, callID string, msg rap.Callback, idemKey string) callbackOutcome {
	// The call's attributes are added to each line, not by Logger.With,
	// which formats them for a handler of their own on every callback.
	logAttrs := func(more ...any) []any {
		return append([]any{"thread", threadID, "call_id", callID, "type", string(msg.MessageType())}, more...)
	}
	if msg.Thread() != threadID {
		r.log.WarnContext(ctx, "callback refused: group_id does not match the callback URL", logAttrs()...)
		return callbackOutcome{status: http.StatusForbidden, msg: "group_id does not match the callback URL; send the group_id of the invocation"}
	}
	var out callbackOutcome
	// A message that wakes the thread claims it in the same transaction,
	// when nobody holds it, for the worker the wake-up starts.
	claim := r.coord.inputClaim(threadID)
	err := r.coord.update(ctx, func(tx store.Tx) error {
		out = callbackOutcome{}
		call, err := tx.Call(threadID, callID)
		if errors.Is(err, store.ErrNotFound) {
			// RAP RE-5: an unknown (group, id) pair is logged and discarded.
			out = callbackOutcome{status: http.StatusNotFound, msg: "no such tool call in this thread; the runtime never had it, do not send it again"}
			return nil
		}
		if err != nil {
			return err
		}
		if idemKey != "" {
			fresh, err := tx.MarkKeySeen(threadID, "idem:"+threadID+":"+callID+":"+idemKey)
			if err != nil {
				return err
			}
			if !fresh {
				out = callbackOutcome{status: http.StatusOK, msg: "duplicate"}
				return nil
			}
		}
		out, err = r.applyCallback(tx, call, msg)
		if err == nil && out.wake && out.status == http.StatusOK {
			err = claim.take(tx)
		}
		if err != nil || out.status == http.StatusOK || out.commit {
			return err
		}
		// Nothing of a refused message stays, its Idempotency-Key
		// included: the same message sent again is judged afresh.
		return errRollback
	})
	if errors.Is(err, errRollback) {
		err = nil
		out.after, out.fx, out.wake = nil, nil, false
	}
	if err != nil {
		r.log.Error("callback failed", logAttrs("err", err)...)
		return callbackOutcome{status: http.StatusInternalServerError, msg: "the runtime could not record the callback; retry later"}
	}
	if out.wake {
		claim.committed()
	}
	if out.after != nil {
		out.after()
	}
	r.apply(out.fx)
	switch {
	case out.status == http.StatusNotFound:
		r.log.WarnContext(ctx, "callback discarded: unknown tool call (RAP RE-5)", logAttrs()...)
	case out.status == http.StatusServiceUnavailable:
		r.log.WarnContext(ctx, "callback deferred: the tool is asked to retry", logAttrs("reason", out.msg, "retry_after", out.retryAfter)...)
	case out.status != http.StatusOK:
		r.log.WarnContext(ctx, "callback refused", logAttrs("status", out.status, "reason", out.msg)...)
	default: // every cycle: typed attributes, the same line without boxing
		r.log.LogAttrs(ctx, slog.LevelInfo, "callback received", slog.String("thread", threadID), slog.String("call_id", callID),
			slog.String("type", string(msg.MessageType())), slog.String("outcome", out.msg))
	}
	return out
}

// applyCallback applies one callback inside a transaction.
func (r *Runtime) applyCallback(tx store.Tx, call store.Call, msg rap.Callback) (callbackOutcome, error) {
	ok := func(s string, wake bool) (callbackOutcome, error) {
		return callbackOutcome{status: http.StatusOK, msg: s, wake: wake}, nil
	}
	switch m := msg.(type) {
	case *rap.ToolResult:
		if m.ID != call.CallID {
			return callbackOutcome{status: http.StatusForbidden, msg: "id does not match the callback URL; send the id of the invocation"}, nil
		}
		switch call.State {
		case store.CallCancelled:
			return ok("ignored: the call was cancelled", false) // RAP CA-2
		case store.CallDone:
			return ok("duplicate", false) // RAP RE-6
		}
		// The call leaves pending only if it still is: of two
		// transactions delivering a result for it (two processes on a
		// shared store), one moves it and enqueues the result, the other
		// finds nothing to move and it is a duplicate (RAP RE-6). This is
		// what makes the result unique (store.InboxItem.Once).
		moved, err := tx.SetCallState(call.ThreadID, call.CallID, store.CallDone, store.CallNew, store.CallDispatched)
		if err != nil {
			return callbackOutcome{}, err
		}
		if !moved {
			return ok("duplicate", false)
		}
		res := store.ToolResult{CallID: call.CallID, Name: call.ToolName, Text: m.Text, Content: m.Content,
			DisplayAs: m.DisplayAs, Subscription: m.Subscription, IsError: strings.HasPrefix(m.ModelText(), "Error:")}
		var fx effects
		subscribed := false
		var checkDue time.Time
		if m.Subscription {
			active, err := countActiveSubscriptions(tx, call.ThreadID)
			if err != nil {
				return callbackOutcome{}, err
			}
			if limit := r.cfg.MaxSubscriptionsPerThread; active >= limit {
				// RAP SU-8: over the limit the subscription is not tracked;
				// the tool is told to cancel it and the model why.
				res = store.ToolResult{CallID: call.CallID, Name: call.ToolName, IsError: true,
					Text: fmt.Sprintf("Error: this thread already has %d active subscriptions, the most allowed; this new subscription was cancelled. "+
						"Cancel one you no longer need with cancel_subscription, then subscribe again.", active)}
				fx.notices = append(fx.notices, notice{path: rap.CancelToolCallPath, body: rap.CancelToolCallRequest{ThreadID: call.ThreadID, ToolCallID: call.CallID}})
				r.log.Warn("subscription refused: per-thread limit reached (RAP SU-8)", "thread", call.ThreadID, "call_id", call.CallID, "limit", limit)
			} else {
				// RAP SU-3: record the call as an active subscription.
				if err := tx.PutSubscription(store.Subscription{ThreadID: call.ThreadID, CallID: call.CallID,
					ToolName: call.ToolName, State: store.SubscriptionActive}); err != nil {
					return callbackOutcome{}, err
				}
				// Ask the tool about it if it stays silent for long.
				if checkDue, err = r.scheduleCallCheck(tx, call.ThreadID, call.CallID); err != nil {
					return callbackOutcome{}, err
				}
				subscribed = true
			}
		}
		payload, err := json.Marshal(res)
		if err != nil {
			return callbackOutcome{}, err
		}
		// A choice the user did not answer is moot once the result is in.
		if _, err := tx.TakeChoice(call.ThreadID, call.CallID); err != nil && !errors.Is(err, store.ErrNotFound) {
			return callbackOutcome{}, err
		}
		if err := r.coord.forgetAuthTx(tx, call.ThreadID, call.CallID); err != nil {
			return callbackOutcome{}, err
		}
		added, err := tx.Enqueue(store.InboxItem{ThreadID: call.ThreadID, Kind: store.KindToolResult, Payload: payload,
			DedupKey: resultDedupKey(call.ThreadID, call.CallID), Once: true})
		if err != nil {
			return callbackOutcome{}, err
		}
		if !added {
			return ok("duplicate", false)
		}
		// Events that came before this result: applied after it, in
		// arrival order, when it confirmed the subscription; discarded
		// otherwise (RAP SU-4).
		if subscribed {
			if err := r.applyHeldEvents(tx, call, &fx); err != nil {
				return callbackOutcome{}, err
			}
		} else if r.heldSince.Load() {
			if _, err := r.discardHeldEvents(tx, call, "the call ended without confirming a subscription"); err != nil {
				return callbackOutcome{}, err
			}
		}
		out, _ := ok("accepted", true)
		out.fx = &fx
		out.after = func() {
			if call.State == store.CallNew {
				r.coord.callEnded(call.ThreadID, call.CallID) // its dispatched mark is moot
			}
			r.observeResult(call, res.IsError)
			r.coord.forgetAuth(call.ThreadID, call.CallID)
			if !checkDue.IsZero() {
				r.kickCallStatus(checkDue)
			}
		}
		return out, nil
	case *rap.SubscriptionEvent:
		return r.applyEvent(tx, call, m)
	case *rap.ViewUpdate:
		th, err := tx.Thread(call.ThreadID)
		if err != nil {
			return callbackOutcome{}, err
		}
		if th.Status == store.ThreadClosed {
			// A closed thread's views no longer change.
			return callbackOutcome{status: http.StatusGone, msg: "the thread is closed; its views no longer change, stop sending view_update for it"}, nil
		}
		// RAP VU-2: keep the latest content per (thread, view type).
		if err := tx.PutView(store.View{ThreadID: call.ThreadID, ViewType: m.ViewType, Content: m.Content}); err != nil {
			return callbackOutcome{}, err
		}
		out, _ := ok("accepted", false)
		out.after = func() {
			r.emit(call.ThreadID, EventView, api.View{ViewType: m.ViewType, Content: m.Content})
		}
		return out, nil
	case *rap.OAuth:
		if m.ID != call.CallID {
			return callbackOutcome{status: http.StatusForbidden, msg: "id does not match the callback URL"}, nil
		}
		if problem := rap.CheckAuthURL(m.AuthURL); problem != "" {
			// Never show a link that is not http(s).
			return r.refuseInteraction(tx, call, "auth_url "+problem,
				fmt.Sprintf("Error: the tool %s asked the user to authorize at a link that is not an http(s) URL, so the runtime refused to show it and ended this call. "+
					"The tool may be misconfigured; try again later or use another tool.", call.ToolName))
		}
		if !call.State.Pending() {
			return ok("ignored: the call is no longer pending", false)
		}
		// Shown to the user; the call stays pending until its tool_result
		// (RAP OA-1). The auth URL is neither logged nor stored: the store
		// only notes that authorization is in progress, for the model.
		if _, err := tx.MarkKeySeen(call.ThreadID, oauthKey(call.ThreadID, call.CallID)); err != nil {
			return callbackOutcome{}, err
		}
		// Tell the model, once per call, without the link.
		note, _ := json.Marshal(store.UserMessage{Text: fmt.Sprintf("[runtime] The tool %s (call %s) asked the user to authorize it; "+
			"they were shown a link. The call stays pending and its result arrives once they have authorized it.", call.ToolName, call.CallID)})
		noted, err := tx.Enqueue(store.InboxItem{ThreadID: call.ThreadID, Kind: store.KindNote, Payload: note,
			DedupKey: "note:" + oauthKey(call.ThreadID, call.CallID)})
		if err != nil {
			return callbackOutcome{}, err
		}
		link := map[string]any{"call_id": call.CallID, "name": call.ToolName, "auth_url": m.AuthURL}
		// On a shared store the link is kept there, briefly, for clients
		// of every process.
		if err := r.coord.keepAuthTx(tx, call.ThreadID, call.CallID, link); err != nil {
			return callbackOutcome{}, err
		}
		out, _ := ok("accepted: the call stays pending until its tool_result", noted)
		out.after = func() { r.showAuth(call.ThreadID, call.CallID, link) }
		return out, nil
	case *rap.UserChoice:
		if m.ID != call.CallID {
			return callbackOutcome{status: http.StatusForbidden, msg: "id does not match the callback URL"}, nil
		}
		if problem := r.checkResponseURL(call, m.ResponseURL); problem != "" {
			// Answers go only to the tool's own host.
			return r.refuseInteraction(tx, call, "response_url "+problem,
				fmt.Sprintf("Error: the tool %s asked the user a question whose answer would go to an address the runtime does not allow, so the question was not shown and this call ended. "+
					"Try again later or use another tool.", call.ToolName))
		}
		if !call.State.Pending() {
			return ok("ignored: the call is no longer pending", false)
		}
		// RAP UC-1, UC-2: kept until answered, then POSTed to response_url.
		if err := tx.PutChoice(store.Choice{ThreadID: call.ThreadID, CallID: call.CallID, ToolName: call.ToolName,
			Prompt: m.Prompt, Choices: m.Choices, Default: m.Default, ResponseURL: m.ResponseURL}); err != nil {
			return callbackOutcome{}, err
		}
		out, _ := ok("accepted: the call stays pending until its tool_result", false)
		out.after = func() {
			r.emit(call.ThreadID, EventUserChoice, choiceEvent(api.Choice{CallID: call.CallID, ToolName: call.ToolName,
				Prompt: m.Prompt, Choices: m.Choices, Default: m.Default}))
		}
		return out, nil
	case *rap.UserInput:
		return r.acceptUserInput(tx, call, m)
	case *invalidUserInput:
		return r.refuseUserInput(tx, call, m)
	default:
		return callbackOutcome{status: http.StatusBadRequest, msg: fmt.Sprintf("unsupported callback type %q", msg.MessageType())}, nil
	}
}

func countActiveSubscriptions(tx store.Tx, threadID string) (int, error) {
	subs, err := tx.ThreadSubscriptions(threadID)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, s := range subs {
		if s.State == store.SubscriptionActive {
			n++
		}
	}
	return n, nil
}

// showAuth publishes an oauth event, kept until the call's result arrives
// for clients that connect meanwhile (RAP OA-1): in memory, or in a shared
// store since keepAuthTx (see eventCoord).
func (r *Runtime) showAuth(threadID, callID string, data map[string]any) {
	b, _ := json.Marshal(data)
	e := Event{Type: EventOAuth, ThreadID: threadID, Data: b}
	r.coord.authShown(threadID, callID, e)
	r.hub.publish(e)
}

// oauthKey marks a call whose tool asked for authorization (RAP OA-1);
// the key holds no part of the auth URL.
func oauthKey(threadID, callID string) string { return oauthKeyPrefix + threadID + ":" + callID }

// oauthKeyPrefix begins every oauthKey.
const oauthKeyPrefix = "oauth:"
