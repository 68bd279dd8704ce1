package runtime

// This file owns the seam between the two ways a runtime runs: as the only
// process on its store (SQLite: coord_local*.go) or as one of several
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
//
// Events: see eventCoord.
type coord interface {
	// start starts the mode's background work; Start calls it once
	// recovery is under way. Local: nothing. Shared: the sweep, the
	// listener of other processes' wake-ups, and the loops that store,
	// follow and prune client events and relay text deltas (it returns
	// once the listeners listen, or after a bounded wait).
	start()

	// claimThread claims the thread for this process's worker, which wake
	// registered in the worker map, and returns the claim; nil when
	// another process holds the thread (it answers the inputs).
	claimThread(threadID string) threadClaim
	// inputClaim returns the claim of the thread to take in the
	// transaction that commits an input for it (a tool's result), which
	// wakes the thread in this process: shared, its worker then need not
	// claim the thread's lease in a transaction of its own
	// (coord_shared_inputclaim.go); local, nothing to claim.
	inputClaim(threadID string) inputClaim
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

	// update runs fn in a read-write transaction of the store
	// (store.Store.Update), for the runtime's own work: a tool's result
	// received, a slice's turn, dispatched marks. Local: nothing more.
	// Shared: the transaction also stores the client events waiting to be
	// stored, so that they cost no commit of their own
	// (coord_shared_events_carry.go).
	update(ctx context.Context, fn func(store.Tx) error) error
	// markDispatched records that c's tool accepted its invocation (the
	// call goes from state new to dispatched) and returns once the mark is
	// written, or moot. Local: a transaction of its own (the store's group
	// commit shares the sync of concurrent marks). Shared: the marks wait up
	// to markDelay and are written together in one transaction; a mark
	// whose call's result this process recorded meanwhile (callEnded) is
	// dropped, as the call is no longer new.
	markDispatched(ctx context.Context, c store.Call) error
	// callEnded is told, after the commit, that a call still in state new
	// got its result: its dispatched mark would change nothing. Local:
	// nothing.
	callEnded(threadID, callID string)

	// releaseInCommit, for the last commit of a slice running under ctx
	// (its worker goes idle after it unless an input came meanwhile),
	// returns what hands the thread back in that commit's transaction; nil
	// when there is nothing to hand back (local) or the worker runs the
	// thread again (an input woke it already). The worker then claims the
	// thread anew before it runs it again (threadClaim.handedBack).
	releaseInCommit(ctx context.Context, threadID string) commitRelease

	// claimTimer reports, in the transaction that fires the timer,
	// whether this process is to fire it. Local: always. Shared: when its
	// claim in the store is this process's.
	claimTimer(tx store.Tx, timerID string) (bool, error)
	// exportsStoreGauges reports whether this process is the one to
	// export the gauges that count the whole store (metrics.go), so that
	// processes sharing it do not count it twice. Local: always. Shared:
	// while it holds the metrics lease in the store, taken or renewed by
	// the call.
	exportsStoreGauges(ctx context.Context) (bool, error)

	eventCoord
}

// eventCoord is how a runtime's client events are numbered, kept for
// clients that resume, and brought to the subscribers of this process
// (hub.go fans them out; hub.mu guards the implementations' state).
//
// Local: each event is numbered in memory and kept in its thread's
// bounded resume log (coord_local_events.go); oauth links stay in memory.
// Shared: every event but text_delta is stored, numbered per thread by the
// store, and followed from the store by every process whose clients
// stream the thread (coord_shared_events*.go); text deltas reach the other
// processes through the store's notifications, never stored
// (coord_shared_deltas.go); oauth links are kept in the store.
//
// Both number events with the ids of eventid.go, and answer a
// Last-Event-ID they cannot resume with a reset.
type eventCoord interface {
	// watched reports whether the thread's events are wanted, so worth
	// encoding: local, when it has a subscriber or a resume log; shared,
	// always (clients of other processes may stream it).
	watched(threadID string) bool
	// anyKeptLocked reports whether events of a thread without a
	// subscriber in this process may still be wanted: local, when a
	// resume log is kept of any thread; shared, always. hub.mu is held.
	anyKeptLocked() bool
	// publishLocked numbers e, keeps it for clients that resume, and
	// queues it on the thread's subscribers in this process (local: at
	// once; shared: once stored, but a text_delta at once). hub.mu is held.
	publishLocked(e Event)
	// deltaLocked passes a text delta of the thread's running completion
	// to the other processes (shared), and reports whether this process's
	// subscribers want it published. hub.mu is held.
	deltaLocked(threadID, text string) bool
	// attach registers a subscriber of the thread's events. With lastID
	// (the client's Last-Event-ID) still resumable, the events after it
	// and the replay_done marker are queued on the subscriber before any
	// live event (att.resumed); otherwise the caller replays the thread's
	// state from the store, after a reset event when lastID was given
	// (att.reset says why).
	attach(ctx context.Context, threadID, lastID string) (_ *subscriber, cancel func(), att attachment, _ error)
	// forget drops what attach kept for a thread whose replay failed
	// (one that does not exist) or that was deleted, and the oauth links
	// kept in memory of it (local; shared: nothing, the store keeps them).
	forget(threadID string)
	// completionStarted and completionEnded bracket a completion of the
	// thread streaming in this process. Shared: its text deltas are
	// relayed to the other processes meanwhile, and with sendRest the
	// last ones are sent before completionEnded returns (before the turn
	// is announced). Local: nothing.
	completionStarted(ctx context.Context, threadID string)
	completionEnded(threadID string, sendRest bool)

	// OAuth links (RAP OA-1) of calls waiting for authorization, shown to
	// clients that connect until the call's result arrives.
	//
	// keepAuthTx keeps a call's oauth event, in the transaction that
	// accepts it: shared, in the store (clients of any process see it);
	// local, nothing (authShown keeps it).
	keepAuthTx(tx store.Tx, threadID, callID string, data any) error
	// authShown is told of a call's oauth event as it is published:
	// local, it is kept in memory; shared, nothing.
	authShown(threadID, callID string, e Event)
	// forgetAuthTx, in the transaction that records the call's result,
	// and forgetAuth, after its commit, drop the call's link (shared: from
	// the store; local: from memory).
	forgetAuthTx(tx store.Tx, threadID, callID string) error
	forgetAuth(threadID, callID string)
	// authEvents returns the thread's oauth events still shown, for a
	// replay.
	authEvents(ctx context.Context, threadID string) ([]Event, error)
}

// commitRelease hands a thread back in a slice's last commit
// (coord.releaseInCommit).
type commitRelease interface {
	// commit runs fn, the slice's last commit, in a transaction that also
	// releases the thread and stores its client events waiting to be
	// stored, then those turn returns (the events of what fn saved; turn
	// is called once fn ran), so that whoever takes the thread next
	// stores its events after these. It reports whether it stored turn's
	// events; when not (their append failed), fn committed without them
	// and the caller publishes them. Call it once.
	commit(ctx context.Context, fn func(store.Tx) error, turn func() []Event) (stored bool, err error)
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
	// handedBack reports whether a slice's last commit handed the thread
	// back (coord.releaseInCommit): the claim holds no more in the store,
	// and the worker must claim the thread anew before it runs it again.
	handedBack() bool
	// end ends the claim. With handBack the thread is handed back at
	// once; without (after a failed slice) a shared lease is left to
	// expire, so that the sweep retries the thread later, not at once.
	end(handBack bool)
}
