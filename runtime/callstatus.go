package runtime

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
	"sync"
	"time"

	"github.com/gorap/gorap/rap"
	"github.com/gorap/gorap/runtime/store"
)

// DefaultCallStatusAfter is how long a call may stay silent before the
// runtime asks its tool server about it, when Config.CallStatusAfter is
// zero.
const DefaultCallStatusAfter = 10 * time.Minute

// Limits of the call status sweep.
const (
	// callStatusBatch is how many due checks one round of the sweep reads.
	callStatusBatch = 256
	// callStatusWorkers bounds the status requests in flight at once.
	callStatusWorkers = 8
	// callStatusTimeout bounds one status request.
	callStatusTimeout = 10 * time.Second
	// maxCallStatusBackoff caps the wait between asks that got no usable
	// answer.
	maxCallStatusBackoff = 6 * time.Hour
	// unsupportedRecheck is when a call whose tool server does not
	// implement tool_call_status is looked at again by this process (it is
	// not asked: the server is remembered); a restart asks once anew.
	unsupportedRecheck = 24 * time.Hour
	// maxCallStatusSleep bounds how long the sweep sleeps without looking
	// at the store, so checks written by another process are noticed.
	maxCallStatusSleep = time.Minute
)

// lostCallText is the result of a call whose tool server no longer knows
// it (RAP RE-4: an error result that says what to do next).
const lostCallText = "Error: the tool server lost this call of %s: asked whether it still knew the call, it answered that it does not (it may have restarted and lost its state), so no result will ever arrive. Call %s again if you still need it."

// lostSubscriptionText tells the model that a subscription ended because
// its tool server no longer knows it.
const lostSubscriptionText = "The subscription of %s (call %s) has ended: its tool server answered that it no longer knows it (it may have restarted and lost its state), so no more events will come from it. Call %s again to subscribe anew if you still need its events."

// statusChecker is the in-memory state of the call status sweep.
type statusChecker struct {
	kick chan struct{} // a check was scheduled: look at the store again

	mu sync.Mutex
	// wakeAt is when the sweep wakes next by itself: a check due later
	// needs no kick.
	wakeAt time.Time
	// unsupported holds the tool server base URLs that answered a plain
	// 404 to /tool_call_status: they are not asked again by this process.
	unsupported map[string]bool
}

func (s *statusChecker) isUnsupported(base string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.unsupported[base]
}

// markUnsupported records base and reports whether it was new.
func (s *statusChecker) markUnsupported(base string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.unsupported[base] {
		return false
	}
	if s.unsupported == nil {
		s.unsupported = map[string]bool{}
	}
	s.unsupported[base] = true
	return true
}

// callStatusOn reports whether call status checks are on.
func (r *Runtime) callStatusOn() bool { return r.cfg.CallStatusAfter > 0 }

// scheduleCallCheck schedules the status check of a call just accepted by
// its tool, inside the transaction that records the acceptance, and
// returns when it is due (zero when checks are off).
func (r *Runtime) scheduleCallCheck(tx store.Tx, threadID, callID string) (time.Time, error) {
	if !r.callStatusOn() {
		return time.Time{}, nil
	}
	due := time.Now().Add(r.cfg.CallStatusAfter)
	return due, tx.PutCallCheck(store.CallCheck{ThreadID: threadID, CallID: callID, Due: due})
}

// kickCallStatus tells the sweep that a check due at `due` was scheduled,
// unless the sleeping sweep wakes by then anyway (the common case:
// dispatches then cost the sweep nothing). While the sweep is awake
// (wakeAt has passed) it may have read the store before this check was
// committed, so it is kicked to read again.
func (r *Runtime) kickCallStatus(due time.Time) {
	r.checks.mu.Lock()
	wakeAt := r.checks.wakeAt
	r.checks.mu.Unlock()
	if !due.Before(wakeAt) && time.Now().Before(wakeAt) {
		return
	}
	select {
	case r.checks.kick <- struct{}{}:
	default:
	}
}

// startCallStatus makes every scheduled check due now, so that each call
// pending at start is asked about once (its tool server may have lost it
// while the runtime was down), and starts the sweep.
func (r *Runtime) startCallStatus(ctx context.Context) error {
	if !r.callStatusOn() {
		return nil
	}
	var n int64
	err := r.store.Update(ctx, func(tx store.Tx) error {
		var err error
		n, err = tx.AdvanceCallChecks(time.Now())
		return err
	})
	if err != nil {
		return fmt.Errorf("runtime start: schedule the status checks of pending calls: %w", err)
	}
	r.log.Info("call status checks", "after", r.cfg.CallStatusAfter, "asked_at_start", n)
	r.wg.Add(1)
	go r.callStatusLoop()
	return nil
}

// callStatusLoop is the sweep: it sleeps until the earliest scheduled
// check (an indexed read), asks the tool servers about the due calls, a
// bounded number at a time, and sleeps again. Nothing runs per call while
// no check is due.
func (r *Runtime) callStatusLoop() {
	defer r.wg.Done()
	ctx := r.baseCtx
	for {
		var due []store.CallCheck
		var next time.Time
		var ok bool
		err := r.store.View(ctx, func(tx store.Tx) error {
			var err error
			if due, err = tx.DueCallChecks(time.Now(), callStatusBatch); err != nil {
				return err
			}
			next, ok, err = tx.NextCallCheck()
			return err
		})
		if ctx.Err() != nil {
			return
		}
		wait := maxCallStatusSleep
		switch {
		case err != nil:
			r.log.Error("read the call status checks", "err", err)
			wait = time.Second
		case len(due) > 0:
			if r.checkCalls(ctx, due) {
				continue // more may be due
			}
			wait = time.Second // a store failure: do not spin
		case ok:
			wait = min(max(time.Until(next), time.Millisecond), maxCallStatusSleep)
		}
		r.checks.mu.Lock()
		r.checks.wakeAt = time.Now().Add(wait)
		r.checks.mu.Unlock()
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-r.checks.kick:
			t.Stop()
		case <-t.C:
		}
	}
}

// checkCalls handles a batch of due checks and reports whether every one
// was rescheduled or removed. One read classifies the batch and one write
// settles the checks that need no question (most of them: calls that ended
// long ago); only calls still waiting are asked about, callStatusWorkers
// at a time.
func (r *Runtime) checkCalls(ctx context.Context, due []store.CallCheck) bool {
	var ask []waitingCall
	var drop, later []store.CallCheck
	err := r.store.View(ctx, func(tx store.Tx) error {
		ask, drop, later = nil, nil, nil
		for _, chk := range due {
			w, err := classifyCheck(tx, chk)
			if err != nil {
				return err
			}
			switch w.action {
			case checkDrop:
				drop = append(drop, chk)
			case checkLater:
				later = append(later, chk)
			default:
				ask = append(ask, w)
			}
		}
		return nil
	})
	if err != nil {
		if ctx.Err() == nil {
			r.log.Error("read the calls of due status checks", "err", err)
		}
		return false
	}
	if len(drop) > 0 || len(later) > 0 {
		err := r.store.Update(ctx, func(tx store.Tx) error {
			for _, chk := range drop {
				if err := tx.DeleteCallCheck(chk.ThreadID, chk.CallID); err != nil {
					return err
				}
			}
			for _, chk := range later {
				// Its invocation is on its way (or is redone at the next
				// start): look again later.
				chk.Due = time.Now().Add(r.cfg.CallStatusAfter)
				if err := tx.PutCallCheck(chk); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			if ctx.Err() == nil {
				r.log.Error("settle due status checks", "err", err)
			}
			return false
		}
	}
	sem := make(chan struct{}, callStatusWorkers)
	var wg sync.WaitGroup
	var mu sync.Mutex
	allOK := true
	for _, w := range ask {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := r.checkCall(ctx, w); err != nil {
				if ctx.Err() == nil {
					r.log.Error("call status check failed", "thread", w.chk.ThreadID, "call_id", w.chk.CallID, "err", err)
				}
				mu.Lock()
				allOK = false
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return allOK
}

// checkAction says what a due check needs.
type checkAction int

const (
	checkAsk   checkAction = iota // the call waits: ask its tool server
	checkDrop                     // the call has ended: delete the check
	checkLater                    // not accepted yet: look again later
)

// waitingCall is a due check with what classifyCheck found.
type waitingCall struct {
	chk    store.CallCheck
	action checkAction
	call   store.Call
	rootID string
	isSub  bool // an active subscription rather than a pending call
}

// classifyCheck finds out whether the call of chk still waits: a
// dispatched call of a tool server, or an active subscription, in a thread
// that is not closed.
func classifyCheck(tx store.Tx, chk store.CallCheck) (waitingCall, error) {
	w := waitingCall{chk: chk, action: checkDrop}
	c, err := tx.Call(chk.ThreadID, chk.CallID)
	if errors.Is(err, store.ErrNotFound) {
		return w, nil
	}
	if err != nil {
		return w, err
	}
	if c.Toolset == builtinToolset {
		return w, nil
	}
	switch c.State {
	case store.CallNew:
		w.action = checkLater
		return w, nil
	case store.CallDispatched:
	case store.CallDone:
		sub, err := tx.Subscription(c.ThreadID, c.CallID)
		if errors.Is(err, store.ErrNotFound) {
			return w, nil
		}
		if err != nil {
			return w, err
		}
		if sub.State != store.SubscriptionActive {
			return w, nil
		}
		w.isSub = true
	default:
		return w, nil
	}
	th, err := tx.Thread(c.ThreadID)
	if err != nil {
		return w, err
	}
	if th.Status == store.ThreadClosed {
		w.isSub = false
		return w, nil
	}
	w.action, w.call, w.rootID = checkAsk, c, th.RootID
	return w, nil
}

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
