package runtime

import (
	"fmt"
	"time"

	"github.com/gorap/gorap/runtime/store"
)

// kickTimer tells the timeout loop that a new deadline may exist.
func (r *Runtime) kickTimer() {
	select {
	case r.timerKick <- struct{}{}:
	default:
	}
}

// maxTimerSleep bounds how long the timeout loop sleeps without looking at
// the store, so a deadline written by another process is noticed too.
const maxTimerSleep = time.Minute

// timeoutLoop records a synthetic error result for every pending call whose
// deadline passed (RAP RT-5), and fires due timers (sleep, sleep_until:
// RAP BT-1). Deadlines and timers live in the store, so they survive a
// restart: the loop looks at the store when it starts.
func (r *Runtime) timeoutLoop() {
	defer r.wg.Done()
	for {
		now := time.Now()
		var due []store.Call
		var timers []store.Timer
		var next, nextTimer time.Time
		var ok, okTimer bool
		err := r.store.View(r.baseCtx, func(tx store.Tx) error {
			var err error
			if due, err = tx.DueCalls(now); err != nil {
				return err
			}
			if next, ok, err = tx.NextDeadline(); err != nil {
				return err
			}
			if timers, err = tx.DueTimers(now); err != nil {
				return err
			}
			nextTimer, okTimer, err = tx.NextTimer()
			return err
		})
		if r.baseCtx.Err() != nil {
			return
		}
		if err != nil {
			r.log.Error("read call deadlines", "err", err)
		}
		for _, c := range due {
			d := r.timeoutFor(c.ToolName)
			if d <= 0 { // the configuration changed since the call was made
				d = c.Deadline.Sub(c.Created).Round(time.Second)
			}
			r.log.Warn("rap tool call timed out", "audit", true, "operation", c.ToolName, "thread", c.ThreadID,
				"call_id", c.CallID, "timeout", d, "outcome", "timed out")
			r.deliverSynthetic(r.baseCtx, c, fmt.Sprintf("Error: tool %s timed out after %v without sending its result. It may still be working; try again or use another tool.", c.ToolName, d))
		}
		r.fireTimers(r.baseCtx, timers)
		wait := maxTimerSleep
		if ok {
			wait = min(max(time.Until(next), time.Millisecond), maxTimerSleep)
		}
		if okTimer {
			wait = min(wait, max(time.Until(nextTimer), time.Millisecond))
		}
		if len(due) > 0 || len(timers) > 0 {
			wait = min(wait, 10*time.Millisecond) // look again at once
		}
		t := time.NewTimer(wait)
		select {
		case <-r.baseCtx.Done():
			t.Stop()
			return
		case <-r.timerKick:
			t.Stop()
		case <-t.C:
		}
	}
}
