package runtime

// This file owns the shared implementation of the seam (coord.go): a
// runtime that is one of several processes sharing a store (store.Shared,
// PostgreSQL). A thread's worker holds the thread's lease in the store,
// renewed while it works and handed back when it goes idle or the runtime
// shuts down (the hold, checked before each step of the work, is in
// coord_shared_leasehold.go); timers are claimed before they fire; wake-ups
// other processes send are heard in coord_shared_wakeups.go; and a sweep
// (coord_shared_sweep.go) wakes the threads other processes left with
// queued inputs (a process died, or a message arrived while another held
// the thread) and dispatches the calls a dead process left undispatched.

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

// sharedCoord is the coord of a runtime sharing its store with other
// processes; its events half is sharedEvents (coord_shared_events.go).
type sharedCoord struct {
	*sharedEvents
	r     *Runtime
	owner string // this process's unique lease owner id
	ttl   time.Duration
	every time.Duration
	// claims are the claims of threads taken with their inputs
	// (coord_shared_inputclaim.go).
	claims inputClaims
	// marks are the dispatched marks waiting to be written
	// (coord_shared_marks.go).
	marks dispatchMarks
}

// newSharedCoord returns the coord of r on the store other processes
// share that storeID names, and gives r's hub its events; r.baseCtx is
// set.
func newSharedCoord(r *Runtime, cfg Config, storeID string) *sharedCoord {
	s := &sharedCoord{sharedEvents: newSharedEvents(r.hub, r, storeID), r: r, owner: "rap-" + uuid.NewString(), ttl: cfg.LeaseTTL, every: cfg.SweepEvery}
	r.hub.ev = s.sharedEvents
	if s.ttl <= 0 {
		s.ttl = DefaultLeaseTTL
	}
	if s.every <= 0 {
		s.every = DefaultSweepEvery
	}
	return s
}

// start starts the sweep for work other processes left, the listener of
// their wake-ups, and the loops of client events.
func (s *sharedCoord) start() {
	s.r.wg.Add(1)
	go s.sweepLoop()
	s.startWakeListener()
	s.sharedEvents.start()
}

// claimThread claims the thread's lease: another process may hold it.
func (s *sharedCoord) claimThread(threadID string) threadClaim {
	h := s.holdLease(threadID)
	if h == nil {
		return nil
	}
	return &leaseClaim{s: s, hold: h, ctx: withHold(s.r.baseCtx, h)}
}

// handBack ends c and hands the lease back, then looks at the thread's
// inbox once more: another process that committed an input meanwhile
// found the thread held and left it to this one. A lost claim is handed
// back too (the lease is released only if still this process's), and the
// thread claimed anew only through the store, like any other.
func (s *sharedCoord) handBack(threadID string, c threadClaim) threadClaim {
	c.end(true)
	if !s.hasQueued(threadID) {
		return nil
	}
	return s.claimThread(threadID)
}

// held returns the error of the hold ctx carries.
func (s *sharedCoord) held(ctx context.Context) error { return holdOf(ctx).Err() }

// bounded returns a context derived from ctx that is also cancelled,
// with the hold's cause, when the hold ctx carries ends.
func (s *sharedCoord) bounded(ctx context.Context) (context.Context, func()) {
	h := holdOf(ctx)
	if h == nil {
		return ctx, noop
	}
	ctx, cancel := context.WithCancelCause(ctx)
	unhook := context.AfterFunc(h.ctx, func() { cancel(context.Cause(h.ctx)) })
	return ctx, func() { unhook(); cancel(nil) }
}

// fence checks the hold ctx carries, then renews the lease in the
// transaction itself, which fails if another process took it (the lease
// row is locked until the transaction ends, so no other process can take
// it in between).
func (s *sharedCoord) fence(ctx context.Context, tx store.Tx, threadID string) error {
	h := holdOf(ctx)
	if h == nil {
		return nil
	}
	if err := h.Err(); err != nil {
		return err
	}
	l, err := leasesOf(tx)
	if err != nil {
		return err
	}
	now := time.Now()
	ok, err := l.ClaimThread(threadID, s.owner, now, now.Add(s.ttl))
	if err != nil {
		return err
	}
	if !ok {
		return h.lose(errors.New("another process took it"))
	}
	return nil
}

// update runs fn in a read-write transaction of the store that also
// stores the client events waiting to be stored (carry).
func (s *sharedCoord) update(ctx context.Context, fn func(store.Tx) error) error {
	return s.carry(ctx, fn)
}

// claimTimer claims the timer for this process: exactly one process fires
// a due timer.
func (s *sharedCoord) claimTimer(tx store.Tx, timerID string) (bool, error) {
	l, err := leasesOf(tx)
	if err != nil {
		return false, err
	}
	now := time.Now()
	return l.ClaimTimer(timerID, s.owner, now, now.Add(s.ttl))
}

// leaseClaim is a worker's claim on a shared store: the hold of the
// thread's lease.
type leaseClaim struct {
	s    *sharedCoord
	hold *leaseHold
	ctx  context.Context // carries hold
}

func (c *leaseClaim) context() context.Context { return c.ctx }

func (c *leaseClaim) lost() error { return c.hold.Err() }

func (c *leaseClaim) handedBack() bool { return c.hold.isReleased() }

// end stops the hold and its renewer; with handBack the lease is
// released, unless a slice's last commit released it.
func (c *leaseClaim) end(handBack bool) {
	c.hold.stop()
	if handBack && !c.hold.isReleased() {
		c.s.releaseLease(c.hold.threadID)
	}
}

// releaseInCommit returns the release of the lease held under ctx in the
// slice's last commit, unless an input woke the thread already. It keeps
// the renewer from renewing the lease until the commit is done (a renewal
// after the release would take the thread again), and counts as a release
// for the claims taken with inputs (coord_shared_inputclaim.go).
func (s *sharedCoord) releaseInCommit(ctx context.Context, threadID string) commitRelease {
	h := holdOf(ctx)
	if h == nil {
		return nil
	}
	s.r.mu.Lock()
	st := s.r.threads[threadID]
	again := st != nil && st.again
	s.r.mu.Unlock()
	if again {
		return nil
	}
	h.renewMu.Lock()
	if h.Err() != nil {
		h.renewMu.Unlock()
		return nil // the commit's fence fails
	}
	s.claims.releasing(threadID)
	return &leaseRelease{s: s, hold: h}
}

// leaseRelease is the release of a lease in a slice's last commit.
type leaseRelease struct {
	s    *sharedCoord
	hold *leaseHold
}

func (lr *leaseRelease) commit(ctx context.Context, fn func(store.Tx) error, turn func() []Event) (bool, error) {
	s, threadID := lr.s, lr.hold.threadID
	stored, err := s.carryWith(ctx, func(tx store.Tx) error {
		if err := fn(tx); err != nil {
			return err
		}
		l, err := leasesOf(tx)
		if err != nil {
			return err
		}
		return l.ReleaseThread(threadID, s.owner)
	}, turn)
	s.claims.released(threadID)
	if err == nil {
		lr.hold.markReleased()
	}
	lr.hold.renewMu.Unlock()
	return stored, err
}

// errNoLeases is the error of a lease operation on a shared store whose
// transactions cannot hold leases.
var errNoLeases = errors.New("the store is shared by processes but its transactions do not implement store.Leases")

// storeGaugesLease names the lease, among the threads' leases, whose
// holder exports the gauges that count the whole store (metrics.go); it
// is no thread's id. storeGaugesTTL is how long it lasts without being
// renewed by a scrape: after that, another process's scrape takes it.
const (
	storeGaugesLease = "rap-metrics:store-gauges"
	storeGaugesTTL   = time.Minute
)

// exportsStoreGauges takes or renews the metrics lease and reports
// whether this process holds it.
func (s *sharedCoord) exportsStoreGauges(ctx context.Context) (bool, error) {
	var ok bool
	err := s.r.store.Update(ctx, func(tx store.Tx) error {
		l, err := leasesOf(tx)
		if err != nil {
			return err
		}
		now := time.Now()
		ok, err = l.ClaimThread(storeGaugesLease, s.owner, now, now.Add(storeGaugesTTL))
		return err
	})
	return ok, err
}

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
func (s *sharedCoord) tryClaim(ctx context.Context, threadID string) (bool, error) {
	var ok bool
	err := s.update(ctx, func(tx store.Tx) error {
		l, err := leasesOf(tx)
		if err != nil {
			return err
		}
		now := time.Now()
		ok, err = l.ClaimThread(threadID, s.owner, now, now.Add(s.ttl))
		return err
	})
	if err != nil {
		if ctx.Err() == nil {
			s.r.log.Error("claim thread", "thread", threadID, "err", err)
		}
		return false, err
	}
	return ok, nil
}

// releaseLease hands the thread's lease back.
func (s *sharedCoord) releaseLease(threadID string) {
	s.claims.releasing(threadID)
	defer s.claims.released(threadID)
	// Also at shutdown: graceful shutdown hands the threads back.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(s.r.baseCtx), 5*time.Second)
	defer cancel()
	err := s.update(ctx, func(tx store.Tx) error {
		l, err := leasesOf(tx)
		if err != nil {
			return err
		}
		return l.ReleaseThread(threadID, s.owner)
	})
	if err != nil {
		s.r.log.Warn("release thread (another process takes it once the lease expires)", "thread", threadID, "err", err)
	}
}

// oneReader is a store that can run a single read outside a transaction
// (PostgreSQL), sparing the exchanges with the database that begin and
// end one.
type oneReader interface {
	ReadOne(ctx context.Context, fn func(store.Tx) error) error
}

// readOne runs fn, which makes one read, the cheapest way the store
// offers: outside a transaction where it can, else in a View.
func (r *Runtime) readOne(ctx context.Context, fn func(store.Tx) error) error {
	o, ok := r.cfg.Store.(oneReader)
	switch {
	case !ok:
		return r.store.View(ctx, fn)
	case r.cfg.Metrics != nil:
		return timedStore{Store: r.cfg.Store, m: r.cfg.Metrics}.timedRun(ctx, TxView, o.ReadOne, fn)
	}
	return o.ReadOne(ctx, fn)
}

// hasQueued reports whether the thread has queued inputs.
func (s *sharedCoord) hasQueued(threadID string) bool {
	var n int
	err := s.r.readOne(s.r.baseCtx, func(tx store.Tx) error {
		q, err := tx.Queued(threadID)
		n = len(q)
		return err
	})
	return err == nil && n > 0
}
