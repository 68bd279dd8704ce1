package runtime

// This file owns the claims that let several processes share one store:
// on a store.Shared store a thread's worker holds the thread's
// lease in the store, renewed while it works and handed back when it goes
// idle or the runtime shuts down; timers are claimed before they fire; and
// a sweep wakes the threads other processes left with queued inputs (a
// process died, or a message arrived while another held the thread). The
// hold of a lease, checked before each step of the work, is in
// leasehold.go. On a
// store held by one process (SQLite) none of this runs: the in-process
// worker map is the claim.

import (
	"context"
	"errors"
	"time"

	"github.com/google/uuid"

	"github.com/gorap/gorap/runtime/store"
)

// Defaults of Config.LeaseTTL and Config.SweepEvery.
const (
	DefaultLeaseTTL   = 15 * time.Second
	DefaultSweepEvery = time.Second
)

// sharedState is the runtime's part in a shared store.
type sharedState struct {
	on    bool
	owner string // this process's unique lease owner id
	ttl   time.Duration
	every time.Duration
}

func newSharedState(cfg Config) sharedState {
	sh, ok := cfg.Store.(store.Shared)
	s := sharedState{on: ok && sh.SharedByProcesses(), owner: "rap-" + uuid.NewString(), ttl: cfg.LeaseTTL, every: cfg.SweepEvery}
	if s.ttl <= 0 {
		s.ttl = DefaultLeaseTTL
	}
	if s.every <= 0 {
		s.every = DefaultSweepEvery
	}
	return s
}

// errNoLeases is the error of a lease operation on a shared store whose
// transactions cannot hold leases.
var errNoLeases = errors.New("the store is shared by processes but its transactions do not implement store.Leases")

// leasesOf returns the lease methods of a transaction of the shared store.
func leasesOf(tx store.Tx) (store.Leases, error) {
	l, ok := tx.(store.Leases)
	if !ok {
		return nil, errNoLeases
	}
	return l, nil
}

// tryClaim takes (or renews) the thread's lease for this process and
// reports whether it holds it; err is a failure to ask the store.
func (r *Runtime) tryClaim(ctx context.Context, threadID string) (bool, error) {
	var ok bool
	err := r.store.Update(ctx, func(tx store.Tx) error {
		l, err := leasesOf(tx)
		if err != nil {
			return err
		}
		now := time.Now()
		ok, err = l.ClaimThread(threadID, r.shared.owner, now, now.Add(r.shared.ttl))
		return err
	})
	if err != nil {
		if ctx.Err() == nil {
			r.log.Error("claim thread", "thread", threadID, "err", err)
		}
		return false, err
	}
	return ok, nil
}

// releaseLease hands the thread's lease back.
func (r *Runtime) releaseLease(threadID string) {
	// Also at shutdown: graceful shutdown hands the threads back.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.baseCtx), 5*time.Second)
	defer cancel()
	if err := r.store.Update(ctx, func(tx store.Tx) error {
		l, err := leasesOf(tx)
		if err != nil {
			return err
		}
		return l.ReleaseThread(threadID, r.shared.owner)
	}); err != nil {
		r.log.Warn("release thread (another process takes it once the lease expires)", "thread", threadID, "err", err)
	}
}

// hasQueued reports whether the thread has queued inputs.
func (r *Runtime) hasQueued(threadID string) bool {
	var n int
	err := r.store.View(r.baseCtx, func(tx store.Tx) error {
		q, err := tx.Queued(threadID)
		n = len(q)
		return err
	})
	return err == nil && n > 0
}

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
func (r *Runtime) redispatchOrphans() {
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
			ok, err := l.ClaimThread("dispatch:"+c.ThreadID+"/"+c.CallID, r.shared.owner, now, now.Add(orphanAfter))
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
func (r *Runtime) sweepLoop() {
	defer r.wg.Done()
	t := time.NewTicker(r.shared.every)
	defer t.Stop()
	for n := 1; ; n++ {
		select {
		case <-r.baseCtx.Done():
			return
		case <-t.C:
		}
		if n%orphanEvery == 0 {
			r.redispatchOrphans()
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
			resident := r.threads[id] != nil
			r.mu.Unlock()
			if !resident {
				r.wake(id)
			}
		}
		r.kickTimer()
	}
}
