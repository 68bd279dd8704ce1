package runtime

// This file owns a worker's hold of its thread's lease on a shared store
// (the claim of coord_shared.go): what tells the worker, before each step,
// whether this process still holds the thread. A process that stalled (SIGSTOP, a long GC or swap
// pause, a slow store) may find, when it runs again, that its lease ran
// out and another process took the thread. Its timers fire late then and
// its renewal may not even have been tried, so the hold is judged from the
// clock first: a lease known to last until T counts as lost from
// T − leaseMargin on, whatever the renewer did. Once lost, a hold stays
// lost (a later renewal could take back a lease another process held
// meanwhile), its context is cancelled (a completion streaming under it
// is cut), and the worker starts nothing more for the thread: no
// completion, no commit (the store's transaction checks the lease too:
// sharedCoord.fence), no dispatch.

import (
	"context"
	"errors"
	"sync"
	"time"
)

// errLeaseLost is the cause of a hold's end when this process no longer
// holds the thread's lease.
var errLeaseLost = errors.New("this process no longer holds the thread's lease (it stalled or could not renew the lease in time); another process takes the thread")

// errHoldEnded is the cause of a hold's context once the worker handed
// the thread back.
var errHoldEnded = errors.New("the worker handed the thread back")

// leaseMargin is how long before a lease's known expiry its holder stops
// acting on it: it covers the time between a check and the act it allows
// (the request being written, the commit reaching the store) and a small
// clock difference between the processes, which compare their own clocks
// with the expiry the holder wrote.
func leaseMargin(ttl time.Duration) time.Duration { return ttl / 5 }

// leaseHold is one claim of a thread's lease by this process.
type leaseHold struct {
	threadID string
	ttl      time.Duration
	margin   time.Duration
	now      func() time.Time
	// ctx is cancelled (cause errLeaseLost) once the hold is lost, and
	// (cause errHoldEnded) when the worker stops it.
	ctx    context.Context
	cancel context.CancelCauseFunc
	// onLost is called once, when the hold is lost, outside mu.
	onLost func(cause error)

	mu sync.Mutex
	// until is a lower bound of the lease's expiry in the store, read on
	// this process's clock: the time before the claim or renewal that set
	// it was sent, plus the lease time. time.Now keeps a monotonic
	// reading, so a wall clock step does not lengthen it.
	until time.Time
	lost  error
	ended bool // the worker handed the thread back
	// released says a slice's last commit released the lease
	// (leaseRelease): the renewer renews it no more.
	released bool
	// renewMu is held by a renewal, and by a slice's last commit that
	// releases the lease, so that no renewal takes the lease again after
	// that commit.
	renewMu sync.Mutex
	timer   *time.Timer
	// done is closed when the renewer stopped (nil: no renewer).
	done chan struct{}
}

// newLeaseHold returns the hold of a lease claimed by a request sent at
// sent (the claim committed). It is lost once now() reaches
// sent + ttl − margin without a renewal, or when lose is called.
func newLeaseHold(parent context.Context, threadID string, ttl time.Duration, now func() time.Time, sent time.Time, onLost func(error)) *leaseHold {
	h := &leaseHold{threadID: threadID, ttl: ttl, margin: leaseMargin(ttl), now: now, until: sent.Add(ttl), onLost: onLost}
	h.ctx, h.cancel = context.WithCancelCause(parent)
	// The timer cuts a completion in progress at the expiry; after a stall
	// it fires late, which is why Err looks at the clock itself. It may
	// fire at once (a claim that took the whole lease): mu orders it after
	// the assignment.
	h.mu.Lock()
	h.timer = time.AfterFunc(h.deadline().Sub(now()), func() { _ = h.Err() })
	h.mu.Unlock()
	return h
}

// deadline is the time from which the hold counts as lost.
func (h *leaseHold) deadline() time.Time { return h.until.Add(-h.margin) }

// expiredAt reports whether the hold counts as lost at t. Both the
// monotonic and the wall clock readings must be before the deadline: the
// monotonic clock ignores wall clock steps, the wall clock counts time
// the machine was suspended (other processes' clocks ran on).
func (h *leaseHold) expiredAt(t time.Time) bool {
	d := h.deadline()
	return !t.Before(d) || !t.Round(0).Before(d.Round(0))
}

// Err returns nil while this process holds the lease, and errLeaseLost
// (wrapped) from the moment it may not: its expiry is near or past on
// the clock, a renewal found it taken, or lose was called; once the
// worker ended the hold, errHoldEnded. Call it right
// before each step taken for the thread. A nil hold (a store one process
// holds) is always held.
func (h *leaseHold) Err() error {
	if h == nil {
		return nil
	}
	h.mu.Lock()
	if h.lost != nil {
		err := h.lost
		h.mu.Unlock()
		return err
	}
	if h.ended {
		h.mu.Unlock()
		return errHoldEnded
	}
	if !h.expiredAt(h.now()) {
		h.mu.Unlock()
		return nil
	}
	return h.loseLocked(errors.New("its expiry passed without a renewal"))
}

// lose ends the hold: this process no longer holds the lease (why says
// how it learnt so). It returns the hold's error.
func (h *leaseHold) lose(why error) error {
	h.mu.Lock()
	if h.lost != nil || h.ended {
		err := h.lost
		if err == nil {
			err = errHoldEnded
		}
		h.mu.Unlock()
		return err
	}
	return h.loseLocked(why)
}

// loseLocked records the loss, unlocks mu, and cancels the hold's
// context.
func (h *leaseHold) loseLocked(why error) error {
	h.lost = errors.Join(errLeaseLost, why)
	err := h.lost
	h.timer.Stop()
	h.mu.Unlock()
	h.cancel(err)
	if h.onLost != nil {
		h.onLost(err)
	}
	return err
}

// renewed records a renewal sent at sent and answered at answered: ok
// says whether the store still gave this process the lease, err whether
// the renewal failed (then only the clock decides). A renewal answered
// after the hold's deadline may have reached the store after the lease
// expired (another process may have held the thread in between), so it
// ends the hold rather than extend it.
func (h *leaseHold) renewed(sent, answered time.Time, ok bool, err error) {
	h.mu.Lock()
	switch {
	case h.lost != nil || h.ended:
		h.mu.Unlock()
	case err != nil:
		h.mu.Unlock()
	case !ok:
		h.loseLocked(errors.New("another process took it"))
	case h.expiredAt(answered):
		h.loseLocked(errors.New("its renewal came too late"))
	default:
		if until := sent.Add(h.ttl); until.After(h.until) {
			h.until = until
			h.timer.Reset(h.deadline().Sub(h.now()))
		}
		h.mu.Unlock()
	}
}

// end stops the hold's timer and cancels its context: the worker handed
// the thread back.
func (h *leaseHold) end() {
	h.mu.Lock()
	h.ended = true
	h.timer.Stop()
	h.mu.Unlock()
	h.cancel(errHoldEnded)
}

// markReleased records that a slice's last commit released the lease.
func (h *leaseHold) markReleased() {
	h.mu.Lock()
	h.released = true
	h.mu.Unlock()
}

// isReleased reports whether a slice's last commit released the lease.
func (h *leaseHold) isReleased() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.released
}

// holdKey is the context key of the hold a slice runs under.
type holdKey struct{}

// withHold returns ctx carrying the hold (its values, not its
// cancellation: a store transaction started under the hold must not be
// cut half-way, and is fenced by sharedCoord.fence instead).
func withHold(ctx context.Context, h *leaseHold) context.Context {
	return context.WithValue(ctx, holdKey{}, h)
}

// holdOf returns the hold ctx carries, or nil.
func holdOf(ctx context.Context) *leaseHold {
	h, _ := ctx.Value(holdKey{}).(*leaseHold)
	return h
}

// holdLease claims the thread's lease and returns the hold, renewed every
// third of the lease time until stop is called, or nil when another
// process holds the thread (or the claim failed).
//
// A claim taken with the thread's input (coord_shared_inputclaim.go) is
// used instead when it is still good and young enough that the renewer
// renews it well before its deadline.
func (s *sharedCoord) holdLease(threadID string) *leaseHold {
	if k, ok := s.claims.takeKept(threadID); ok && time.Since(k.sent) < s.ttl/3 {
		return s.startHold(threadID, k.sent)
	}
	sent := time.Now()
	ok, err := s.tryClaim(s.r.baseCtx, threadID)
	if err != nil || !ok {
		return nil
	}
	return s.startHold(threadID, sent)
}

// startHold returns the hold of the thread's lease claimed by a request
// sent at sent, and starts its renewer.
func (s *sharedCoord) startHold(threadID string, sent time.Time) *leaseHold {
	r := s.r
	h := newLeaseHold(r.baseCtx, threadID, s.ttl, time.Now, sent, func(cause error) {
		if r.baseCtx.Err() == nil {
			r.log.Warn("lost the lease of a thread while working on it; this process stops working on it and another takes it",
				"thread", threadID, "err", cause)
		}
	})
	h.done = make(chan struct{})
	go s.renewLoop(h)
	return h
}

// renewLoop renews the hold's lease every third of its lifetime until the
// hold ends. It stops for good once the hold is lost: renewing a lapsed
// lease could take back a thread another process worked on meanwhile.
func (s *sharedCoord) renewLoop(h *leaseHold) {
	defer close(h.done)
	t := time.NewTicker(h.ttl / 3)
	defer t.Stop()
	for {
		select {
		case <-h.ctx.Done():
			return
		case <-t.C:
		}
		h.renewMu.Lock()
		if h.Err() != nil || h.isReleased() {
			h.renewMu.Unlock()
			return
		}
		sent := time.Now()
		ok, err := s.tryClaim(h.ctx, h.threadID)
		h.renewed(sent, time.Now(), ok, err)
		h.renewMu.Unlock()
		if err != nil && h.ctx.Err() == nil {
			s.r.log.Warn("renew the lease of a thread (its work stops if the lease runs out first)", "thread", h.threadID, "err", err)
		}
	}
}

// stop ends the hold and waits for its renewer to stop; the worker then
// hands the lease back (releaseLease) or leaves it to expire.
func (h *leaseHold) stop() {
	h.end()
	if h.done != nil {
		<-h.done
	}
}
