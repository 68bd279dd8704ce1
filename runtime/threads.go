package runtime

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/gorap/gorap/rap"
	"github.com/gorap/gorap/runtime/api"
	"github.com/gorap/gorap/runtime/store"
)

// notifyTimeout bounds one /close_thread or /cancel_tool_call POST.
const notifyTimeout = 10 * time.Second

// interruptedText is the synthetic result of a call interrupted by a new
// user message.
const interruptedText = "Interrupted: the user sent a new message before this call finished, so it was cancelled and its result will not be used. Call the tool again if it is still needed."

// notifyServers POSTs body to path under every configured tool server,
// concurrently, once each, without blocking the caller (RAP TC-1, CA-1).
// Failures are logged; one does not stop the others.
func (r *Runtime) notifyServers(path string, body any) {
	b, err := json.Marshal(body)
	if err != nil {
		r.log.Error("encode tool server notification", "path", path, "err", err)
		return
	}
	for _, base := range r.cfg.ToolServers {
		r.mu.Lock()
		if r.stopping {
			r.mu.Unlock()
			return
		}
		r.wg.Add(1)
		r.mu.Unlock()
		go func() {
			defer r.wg.Done()
			url := strings.TrimRight(base, "/") + path
			status, _, err := r.postOnce(r.baseCtx, url, b, notifyTimeout)
			r.log.Info("rap notification", "audit", true, "path", path, "server", redact(base), "status", status, "error", errString(err))
		}()
	}
}

// interrupt closes every pending call of the thread that the batch does
// not answer with a synthetic "interrupted" result, in one transaction,
// before a new user input is added (so the history stays valid for every
// model API), and sends /cancel_tool_call for each (RAP CA-1). Late
// results of these calls are ignored (RAP CA-2).
//
// A call whose invocation the tool has not accepted yet (state new: its
// dispatch is on its way, or is redone after a restart) is left to finish:
// cancelling it would race its own invocation, which could reach the tool
// after the cancellation. The model sees a placeholder for it, and its
// result where it arrives.
func (r *Runtime) interrupt(ctx context.Context, threadID string, calls []store.Call, b *batch) error {
	answered := map[string]bool{}
	for _, res := range b.results {
		answered[res.CallID] = true
	}
	var pending []store.Call
	for _, c := range calls {
		if c.State == store.CallDispatched && !answered[c.CallID] {
			pending = append(pending, c)
		}
	}
	if len(pending) == 0 {
		return nil
	}
	var cancelled []store.Call
	var appended []store.Message
	err := r.store.Update(ctx, func(tx store.Tx) error {
		cancelled, appended = nil, nil
		var results []store.ToolResult
		for _, c := range pending {
			changed, err := tx.SetCallState(threadID, c.CallID, store.CallCancelled, store.CallDispatched)
			if err != nil {
				return err
			}
			if !changed {
				continue // its result arrived meanwhile; it comes with the next batch
			}
			if c.Toolset == builtinToolset {
				if err := tx.DeleteTimer(sleepTimerID(threadID, c.CallID)); err != nil {
					return err
				}
			}
			cancelled = append(cancelled, c)
			results = append(results, store.ToolResult{CallID: c.CallID, Name: c.ToolName, Text: interruptedText})
		}
		if len(results) == 0 {
			return nil
		}
		var err error
		appended, err = tx.AppendMessages(threadID, []store.Message{{Role: store.RoleTool, ToolResults: results}})
		return err
	})
	if err != nil {
		return fmt.Errorf("interrupt the pending calls of thread %s (RAP RT-4: nothing changed, the input stays queued): %w", threadID, err)
	}
	for _, c := range cancelled {
		r.log.Info("rap tool call interrupted", "audit", true, "operation", c.ToolName, "thread", threadID, "call_id", c.CallID, "outcome", "interrupted")
		if c.Toolset != builtinToolset {
			r.notifyServers(rap.CancelToolCallPath, rap.CancelToolCallRequest{ThreadID: threadID, ToolCallID: c.CallID})
		}
	}
	r.announce(threadID, appended)
	return nil
}

// fireTimers delivers the result of every sleep whose time has come. The
// timer's deletion, the call's completion and the result's inbox row are
// one transaction, so a sleep wakes its thread exactly once, across
// restarts too (RAP BT-1).
func (r *Runtime) fireTimers(ctx context.Context, due []store.Timer) {
	for _, tm := range due {
		var wake bool
		err := r.store.Update(ctx, func(tx store.Tx) error {
			wake = false
			if r.shared.on {
				// issue 14: exactly one process fires a due timer.
				now := time.Now()
				ok, err := tx.ClaimTimer(tm.ID, r.shared.owner, now, now.Add(r.shared.ttl))
				if err != nil || !ok {
					return err
				}
			}
			if err := tx.DeleteTimer(tm.ID); err != nil {
				return err
			}
			if tm.Kind == timerModelRetry {
				var err error
				wake, err = r.fireModelRetry(tx, tm) // issue 9 item 17
				return err
			}
			if tm.Kind != timerSleep {
				r.log.Error("dropping a timer of unknown kind", "timer", tm.ID, "kind", tm.Kind)
				return nil
			}
			var p sleepPayload
			if err := json.Unmarshal(tm.Payload, &p); err != nil {
				r.log.Error("dropping an undecodable timer", "timer", tm.ID, "err", err)
				return nil
			}
			c, err := tx.Call(tm.ThreadID, p.CallID)
			if err != nil {
				if errors.Is(err, store.ErrNotFound) {
					return nil
				}
				return err
			}
			changed, err := tx.SetCallState(tm.ThreadID, p.CallID, store.CallDone, store.CallNew, store.CallDispatched)
			if err != nil || !changed {
				return err
			}
			payload, _ := json.Marshal(store.ToolResult{CallID: p.CallID, Name: c.ToolName, Text: p.Text})
			wake, err = tx.Enqueue(store.InboxItem{ThreadID: tm.ThreadID, Kind: store.KindToolResult, Payload: payload,
				DedupKey: resultDedupKey(tm.ThreadID, p.CallID)})
			return err
		})
		if err != nil {
			if ctx.Err() == nil {
				r.log.Error("fire timer", "timer", tm.ID, "thread", tm.ThreadID, "err", err)
			}
			continue
		}
		if wake {
			r.wake(tm.ThreadID)
		}
	}
}

// inheritedCalls maps the id of every call in the part of a child thread's
// history inherited from its ancestors to the thread that made it. Such a
// call's result, if it ever comes, goes to that thread's history, never to
// the child's (issue 9 item 3). A root thread has none.
func inheritedCalls(threadID string, history []store.Message) map[string]string {
	var out map[string]string
	for i := range history {
		m := &history[i]
		if m.ThreadID == threadID || m.ThreadID == "" {
			break // the thread's own messages follow the inherited ones
		}
		for _, c := range m.ToolCalls {
			if out == nil {
				out = map[string]string{}
			}
			out[c.ID] = m.ThreadID
		}
	}
	return out
}

// inheritedCallText is the placeholder result, in a child thread, of a
// call its ancestor made that had no result when the child was started:
// the child's model must not wait for it (issue 9 item 3).
func inheritedCallText(owner string) string {
	return fmt.Sprintf("This call belongs to thread %s, from which this thread was started. Its result goes to that thread and will never arrive here: "+
		"do not wait for it. If you need it, call the tool again in this thread.", owner)
}

// eventThreadNote is the instruction a thread spawned for a subscription
// event starts with (RAP SU-6).
func eventThreadNote(childID, tool string) string {
	return fmt.Sprintf("[runtime] This thread (%s) was started to handle the subscription event of %s shown above. Handle it. "+
		"Then call close_thread with thread_id %q, giving report_to_parent with what the parent thread needs to know, "+
		"or without report_to_parent if nothing needs reporting.", childID, tool, childID)
}

// spawnEventThread creates the child thread that handles one
// non-associative subscription event (RAP SU-6): it inherits the parent's
// history so far, then the event as a synthetic call of the reserved tool
// (RAP SU-5), then an instruction to handle it and report or close.
func (r *Runtime) spawnEventThread(tx store.Tx, parent store.Thread, sub store.Call, ev *rap.SubscriptionEvent, fx *effects) error {
	child := store.Thread{ID: store.NewThreadID(), ParentID: parent.ID, RootID: parent.RootID, Status: store.ThreadActive,
		OriginCallID: sub.CallID, OriginTool: sub.ToolName, OriginArgs: sub.Arguments}
	if err := r.createChild(tx, child, parent.ID); err != nil {
		return err
	}
	pair := injectedPair("event_"+strings.ReplaceAll(uuid.NewString(), "-", ""), sub.ToolName, sub.CallID, sub.Arguments, ev.Text,
		fmt.Sprintf("event from %s", sub.ToolName))
	if _, err := tx.AppendMessages(child.ID, pair); err != nil {
		return err
	}
	payload, _ := json.Marshal(store.UserMessage{Text: eventThreadNote(child.ID, sub.ToolName)})
	if _, err := tx.Enqueue(store.InboxItem{ThreadID: child.ID, Kind: store.KindNote, Payload: payload, DedupKey: "wake:" + child.ID}); err != nil {
		return err
	}
	fx.wake = append(fx.wake, child.ID)
	fx.event(parent.ID, EventThreadSpawned, api.ThreadSpawned{ThreadID: child.ID, ParentID: parent.ID,
		OriginCallID: sub.CallID, OriginTool: sub.ToolName, Reason: api.SubscriptionEvent})
	return nil
}

// CloseThread closes a thread as close_thread does (RAP BT-4): it receives
// nothing more, its pending calls are cancelled, its subscriptions end, and
// every tool server gets /close_thread (RAP TC-1).
func (r *Runtime) CloseThread(ctx context.Context, threadID string) error {
	fx := &effects{}
	err := r.store.Update(ctx, func(tx store.Tx) error {
		*fx = effects{}
		th, err := tx.Thread(threadID)
		if err != nil {
			if errors.Is(err, store.ErrNotFound) {
				return fmt.Errorf("%w %q", ErrUnknownThread, threadID)
			}
			return err
		}
		if th.Status == store.ThreadClosed {
			return nil
		}
		if err := r.closeThreadTx(tx, th, fx); err != nil {
			return err
		}
		return r.reportShutdown(tx, th, fx) // issue 9 item 6
	})
	if err != nil {
		return err
	}
	r.apply(fx)
	return nil
}

// ErrNoChoice is returned (wrapped) by AnswerChoice when the thread has no
// user choice waiting for that call.
var ErrNoChoice = errors.New("no user choice is waiting for this call")

// ErrChoiceDelivery is returned (wrapped) by AnswerChoice when the tool
// did not accept the answer; the choice stays open.
var ErrChoiceDelivery = errors.New("the tool did not accept the answer")

// PendingChoices returns the user choices of the thread that wait for an
// answer (RAP UC-1).
func (r *Runtime) PendingChoices(ctx context.Context, threadID string) ([]store.Choice, error) {
	var out []store.Choice
	err := r.store.View(ctx, func(tx store.Tx) error {
		if _, err := tx.Thread(threadID); err != nil {
			if errors.Is(err, store.ErrNotFound) {
				return fmt.Errorf("%w %q", ErrUnknownThread, threadID)
			}
			return err
		}
		var err error
		out, err = tx.ThreadChoices(threadID)
		return err
	})
	return out, err
}

// AnswerChoice answers the user choice of a call (RAP UC-2): it POSTs
// {id, selected} to the choice's response_url. A nil selected is a
// dismissal and sends the choice's default. The choice is answered at most
// once: a second answer gets ErrNoChoice. If the tool refuses the answer
// the choice stays open and the error wraps ErrChoiceDelivery.
func (r *Runtime) AnswerChoice(ctx context.Context, threadID, callID string, selected *int) (int, error) {
	var ch store.Choice
	var confirmCall *store.Call // a runtime confirmation (confirm.go)
	err := r.store.Update(ctx, func(tx store.Tx) error {
		var err error
		ch, err = tx.TakeChoice(threadID, callID)
		if errors.Is(err, store.ErrNotFound) {
			if _, terr := tx.Thread(threadID); errors.Is(terr, store.ErrNotFound) {
				return fmt.Errorf("%w %q", ErrUnknownThread, threadID)
			}
			return fmt.Errorf("%w: thread %s, call %s (it was answered already, or never asked); see GET /v1/threads/%s/choices", ErrNoChoice, threadID, callID, threadID)
		}
		if err != nil {
			return err
		}
		if selected != nil && (*selected < 0 || *selected >= len(ch.Choices)) {
			return fmt.Errorf("%w: selected is %d; give an index from 0 to %d, or dismiss to send the default", ErrBadInput, *selected, len(ch.Choices)-1)
		}
		// issue 9 item 19: POST only to the tool's own host (checked when
		// the choice arrived too; this covers choices stored before).
		call, err := tx.Call(threadID, callID)
		if err != nil {
			return err
		}
		if ch.ResponseURL == runtimeConfirmURL { // issue 12 item 7
			confirmCall = &call
			return nil
		}
		if problem := r.checkResponseURL(call, ch.ResponseURL); problem != "" {
			r.log.Warn("user choice not sent: response_url refused", "thread", threadID, "call_id", callID, "problem", problem)
			return fmt.Errorf("%w: the tool's response_url %s; the choice is still open", ErrChoiceDelivery, problem)
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	sel := ch.Default
	if selected != nil {
		sel = *selected
	}
	if confirmCall != nil {
		r.answerConfirmation(ctx, *confirmCall, sel, selected == nil)
		return sel, nil
	}
	// Announced before the POST: the tool may send its result before the
	// POST returns, and clients should see the answer before the result.
	r.emit(threadID, EventChoiceAnswered, api.ChoiceAnswered{CallID: callID, Selected: sel, Dismissed: selected == nil})
	body, _ := json.Marshal(rap.UserChoiceResponse{ID: callID, Selected: sel})
	status, err := r.postChoice(ctx, ch.ResponseURL, body)
	r.log.Info("user choice answered", "audit", true, "thread", threadID, "call_id", callID, "selected", sel,
		"dismissed", selected == nil, "status", status, "error", errString(err))
	if err != nil {
		// Put it back so the user can answer again.
		if perr := r.store.Update(ctx, func(tx store.Tx) error { return tx.PutChoice(ch) }); perr != nil {
			r.log.Error("restore user choice", "thread", threadID, "call_id", callID, "err", perr)
		} else {
			r.emit(threadID, EventUserChoice, choiceEvent(ch)) // asked again: the answer did not arrive
		}
		return sel, fmt.Errorf("%w: %v; the choice is still open, answer again later", ErrChoiceDelivery, err)
	}
	return sel, nil
}

// postChoice POSTs an answer once. The URL may hold a key: errors name
// only its redacted form.
func (r *Runtime) postChoice(ctx context.Context, url string, body []byte) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, notifyTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, fmt.Errorf("response_url %s is not usable: %v", redact(url), err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := r.http.Do(req)
	if err != nil {
		return 0, fmt.Errorf("POST %s failed", redact(url))
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode != http.StatusOK {
		return resp.StatusCode, fmt.Errorf("POST %s: the tool answered %s", redact(url), resp.Status)
	}
	return resp.StatusCode, nil
}
