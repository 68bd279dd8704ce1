package runtime

// This file owns the seam between the two ways a runtime runs: as the only
// process on its store (SQLite: coord_local.go) or as one of several
// processes sharing a store (PostgreSQL: coord_shared*.go). New picks the
// implementation once, from the store; the engine (the worker loop of
// claim.go, slice.go, timers.go, the event stream) calls the seam and never
// asks which mode it runs in.

import (
	"context"

	"github.com/gorap/gorap/runtime/store"
)

// coord is what differs between one process and several.
//
// Threads. Within a process, wake and the worker map (claim.go) give a
// thread at most one worker. Local: that map is the whole claim, and every
// input committed wakes the worker, since this process committed it.
// Shared: the worker also holds the thread's lease in the store, renewed
// while it works and checked on the clock before each step and in each
// commit (leasehold: a process that stalled past its lease acts no more);
// inputs other processes commit wake this one through the store's
// notifications, and a sweep takes the work nobody holds (a dead process's
// threads, timers and undispatched calls).
//
// Timers. Local: this process fires every due timer. Shared: a timer is
// claimed in the transaction that fires it, so that one process fires it.
type coord interface {
	// start starts the mode's background work; Start calls it once
	// recovery is under way. Local: nothing. Shared: the sweep, and the
	// listener of other processes' wake-ups (it returns once that listens,
	// or after a bounded wait).
	start()

	// claimThread claims the thread for this process's worker, which wake
	// registered in the worker map, and returns the claim; nil when
	// another process holds the thread (it answers the inputs).
	claimThread(threadID string) threadClaim
	// handBack ends c, the claim of a worker that ran its thread's inbox
	// empty, handing the thread back. It returns a new claim when the
	// worker must run the thread again although nothing woke it: shared,
	// inputs another process committed while this one held the thread
	// (and left to it); local, never (nil).
	handBack(threadID string, c threadClaim) threadClaim
	// held returns nil while this process may act for the thread whose
	// slice runs under ctx (the context of a threadClaim); once it may
	// not, why. Local: always nil. Call it right before each step taken
	// for the thread: a model request, a commit, a dispatch.
	held(ctx context.Context) error
	// bounded returns ctx also cancelled, with the claim's cause, when the
	// claim ctx carries is lost, so that a completion streaming under it
	// is cut; stop releases it. Local: ctx itself.
	bounded(ctx context.Context) (_ context.Context, stop func())
	// fence makes a transaction of the slice running under ctx commit
	// only while this process holds the thread: shared, it checks the
	// hold and renews the lease in tx (failing if another process took
	// it); local, nothing.
	fence(ctx context.Context, tx store.Tx, threadID string) error

	// claimTimer reports, in the transaction that fires the timer,
	// whether this process is to fire it. Local: always. Shared: when its
	// claim in the store is this process's.
	claimTimer(tx store.Tx, timerID string) (bool, error)
}

// threadClaim is a worker's claim of its thread, from claimThread until
// end (or handBack).
type threadClaim interface {
	// context returns the context the thread's slices run under; held,
	// bounded and fence find the claim there.
	context() context.Context
	// lost returns nil while the claim holds, and why once it does not;
	// a lost claim stays lost, and its worker starts nothing more.
	lost() error
	// end ends the claim. With handBack the thread is handed back at
	// once; without (after a failed slice) a shared lease is left to
	// expire, so that the sweep retries the thread later, not at once.
	end(handBack bool)
}
