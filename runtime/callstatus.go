package runtime

// This file owns the call status sweep (RAP tool_call_status): scheduling
// a check for each dispatched call (adoptSilentCalls) and active
// subscription (scheduleCallCheck) that stays silent, and the loop that
// runs the due checks (one check is in callstatus_ask.go).

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

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
	// adoptBatch bounds the calls one round of adoptSilentCalls reads.
	adoptBatch = 512
)

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

// scheduleCallCheck schedules the status check of a subscription just
// confirmed, inside the transaction that records it, unless its call
// has one already, and returns when it is due (zero when checks are off
// or none was added).
func (r *Runtime) scheduleCallCheck(tx store.Tx, threadID, callID string) (time.Time, error) {
	if !r.callStatusOn() {
		return time.Time{}, nil
	}
	due := time.Now().Add(r.cfg.CallStatusAfter)
	added, err := tx.AddCallCheck(store.CallCheck{ThreadID: threadID, CallID: callID, Due: due})
	if err != nil || !added {
		return time.Time{}, err
	}
	return due, nil
}

// kickCallStatus tells the sweep that a check due at `due` was scheduled
// (a subscription's), unless the sleeping sweep wakes by then anyway. While the sweep is awake
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

// startCallStatus makes every scheduled check due now and adds one, due
// now, for every dispatched call that has none, so that each call pending
// at start is asked about once (its tool server may have lost it while the
// runtime was down), and starts the sweep.
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
	adopted, err := r.adoptSilentCalls(ctx, time.Now(), true)
	if err != nil {
		return fmt.Errorf("runtime start: schedule the status checks of pending calls: %w", err)
	}
	r.log.Info("call status checks", "after", r.cfg.CallStatusAfter, "asked_at_start", n+int64(adopted))
	r.wg.Add(1)
	go r.callStatusLoop()
	return nil
}

// adoptEvery is how often the sweep looks for calls that stayed
// dispatched: every half silence, or every maxCallStatusSleep if sooner.
func (r *Runtime) adoptEvery() time.Duration {
	return min(max(r.cfg.CallStatusAfter/2, time.Millisecond), maxCallStatusSleep)
}

// adoptSilentCalls adds a status check for each dispatched call last
// updated at or before `before` that has none, due CallStatusAfter past
// that update, or at once when now is true (at start), and reports how
// many it added. Checks are not written when calls are dispatched: most
// calls end long before their silence would be asked about, and a call is
// adopted here, by its due time, only if it is still dispatched after
// half of it. Reading runs apart from the writes.
func (r *Runtime) adoptSilentCalls(ctx context.Context, before time.Time, now bool) (int, error) {
	total := 0
	for {
		var calls []store.Call
		err := r.store.View(ctx, func(tx store.Tx) error {
			var err error
			calls, err = tx.UncheckedCalls(before, builtinToolset, adoptBatch)
			return err
		})
		if err != nil || len(calls) == 0 {
			return total, err
		}
		checks := make([]store.CallCheck, len(calls))
		for i, c := range calls {
			due := c.Updated.Add(r.cfg.CallStatusAfter)
			if now {
				due = time.Now()
			}
			checks[i] = store.CallCheck{ThreadID: c.ThreadID, CallID: c.CallID, Due: due}
		}
		added := 0
		err = r.store.Update(ctx, func(tx store.Tx) error {
			// Another process may have added some meanwhile: those stay
			// as that one wrote them.
			var err error
			added, err = tx.AddCallChecks(checks)
			return err
		})
		if err != nil {
			return total, err
		}
		total += added
		if len(calls) < adoptBatch {
			return total, nil
		}
	}
}

// callStatusLoop is the sweep: it adopts the calls that stayed dispatched
// (adoptSilentCalls), sleeps until the earliest scheduled check (an
// indexed read) or the next adoption, asks the tool servers about the due
// calls, a bounded number at a time, and sleeps again. Nothing runs per
// call while no check is due.
func (r *Runtime) callStatusLoop() {
	defer r.wg.Done()
	ctx := r.baseCtx
	nextAdopt := time.Now().Add(r.adoptEvery())
	for {
		if now := time.Now(); !now.Before(nextAdopt) {
			if _, err := r.adoptSilentCalls(ctx, now.Add(-r.cfg.CallStatusAfter/2), false); err != nil && ctx.Err() == nil {
				r.log.Error("schedule the status checks of silent calls", "err", err)
			}
			nextAdopt = time.Now().Add(r.adoptEvery())
		}
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
		wait = min(wait, max(time.Until(nextAdopt), time.Millisecond))
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
