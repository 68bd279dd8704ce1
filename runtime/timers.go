package runtime

// This file owns durable timers and deadlines (RAP RT-5, BT-1): the loop
// that sleeps until the earliest timer or call deadline in the store, and
// the firing of due timers — a sleep's result, a model retry — exactly
// once, across restarts and processes.

import (
	"fmt"
	"time"

	"context"
	"encoding/json"
	"errors"

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

// fireTimers delivers the result of every sleep whose time has come. The
// timer's deletion, the call's completion and the result's inbox row are
// one transaction, so a sleep wakes its thread exactly once, across
// restarts too (RAP BT-1).
func (r *Runtime) fireTimers(ctx context.Context, due []store.Timer) {
	for _, tm := range due {
		var wake bool
		err := r.store.Update(ctx, func(tx store.Tx) error {
			wake = false
			// Exactly one process fires a due timer.
			if ok, err := r.coord.claimTimer(tx, tm.ID); err != nil || !ok {
				return err
			}
			if err := tx.DeleteTimer(tm.ID); err != nil {
				return err
			}
			if tm.Kind == timerModelRetry {
				var err error
				wake, err = r.fireModelRetry(tx, tm)
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
				DedupKey: resultDedupKey(tm.ThreadID, p.CallID), Once: true})
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

const timerSleep = "sleep"

type sleepPayload struct {
	CallID string `json:"call_id"`
	Text   string `json:"text"`
}

func sleepTimerID(threadID, callID string) string { return "sleep:" + threadID + ":" + callID }
