package runtime

// This file owns the sweep of a runtime on a shared store (coord_shared.go):
// every SweepEvery it wakes the threads with queued inputs no process
// holds and makes the timeout loop look at the store, and now and then it
// dispatches the calls a dead process left undispatched, each claimed
// first so that one process dispatches it.

import (
	"time"

	"github.com/gorap/gorap/runtime/store"
)

// orphanAfter is how old a call still in state "new" must be for the
// sweep to dispatch it: its process died between saving the turn and the
// tool's 200 (a live dispatch ends, retries included, well before).
const orphanAfter = 5 * time.Minute

// orphanEvery is how many sweeps pass between two looks for orphaned
// calls.
const orphanEvery = 10

// redispatchOrphans dispatches the calls that stayed in state "new" longer
// than orphanAfter, each claimed first (a lease named for the call, left
// to expire) so that one process dispatches it.
func (s *sharedCoord) redispatchOrphans() {
	r := s.r
	var orphans []store.Call
	err := r.store.Update(r.baseCtx, func(tx store.Tx) error {
		orphans = orphans[:0]
		l, err := leasesOf(tx)
		if err != nil {
			return err
		}
		calls, err := tx.CallsInState(store.CallNew)
		if err != nil {
			return err
		}
		now := time.Now()
		for _, c := range calls {
			if now.Sub(c.Created) < orphanAfter {
				continue
			}
			ok, err := l.ClaimThread("dispatch:"+c.ThreadID+"/"+c.CallID, s.owner, now, now.Add(orphanAfter))
			if err != nil {
				return err
			}
			if ok {
				orphans = append(orphans, c)
			}
		}
		return nil
	})
	if err != nil {
		if r.baseCtx.Err() == nil {
			r.log.Warn("sweep for undispatched calls", "err", err)
		}
		return
	}
	for _, c := range orphans {
		r.log.Info("dispatching a call its process left undispatched", "thread", c.ThreadID, "call_id", c.CallID, "tool", c.ToolName)
		r.dispatchAsync(c, nil)
	}
}

// sweepLoop wakes, every SweepEvery, the threads with queued inputs that
// no process holds, and makes the timeout loop look at the store (for
// deadlines and timers written by other processes); every orphanEvery
// sweeps it dispatches the calls a dead process left undispatched.
func (s *sharedCoord) sweepLoop() {
	r := s.r
	defer r.wg.Done()
	t := time.NewTicker(s.every)
	defer t.Stop()
	for n := 1; ; n++ {
		select {
		case <-r.baseCtx.Done():
			return
		case <-t.C:
		}
		if n%orphanEvery == 0 {
			s.redispatchOrphans()
		}
		var free []string
		err := r.store.View(r.baseCtx, func(tx store.Tx) error {
			l, err := leasesOf(tx)
			if err != nil {
				return err
			}
			queued, err := tx.QueuedThreads()
			if err != nil {
				return err
			}
			now := time.Now()
			for _, id := range queued {
				_, until, err := l.ThreadLease(id)
				if err == nil && until.After(now) {
					continue // held, by this process or another
				}
				free = append(free, id)
			}
			return nil
		})
		if err != nil {
			if r.baseCtx.Err() == nil {
				r.log.Warn("sweep for queued threads", "err", err)
			}
			continue
		}
		for _, id := range free {
			r.mu.Lock()
			// A thread its session's budget stopped waits for a new
			// input, which wakes it (sessionbudget.go).
			resident := r.threads[id] != nil || stoppedByBudget(r.failed[id])
			r.mu.Unlock()
			if !resident {
				r.wake(id)
			}
		}
		r.kickTimer()
	}
}
