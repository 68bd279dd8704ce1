package runtime

// This file owns a thread's claim in this process: wake gives a thread
// whose inbox got a row a worker (at most one per thread, RAP RT-2), and
// work runs its slices (slice.go) while it holds the claim — on a shared
// store also the thread's lease (leases.go) — and hands it back when the
// inbox is empty.

import (
	"errors"
	"time"

	"github.com/gorap/gorap/runtime/api"
)

// wake makes sure the thread has a worker. It is called after an inbox row
// of the thread was committed. If a worker is running it is told to look
// again before it exits, so no wake-up is lost.
func (r *Runtime) wake(threadID string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.started || r.stopping {
		return // the row is durable; Start picks it up
	}
	if st := r.threads[threadID]; st != nil {
		st.again = true
		return
	}
	r.threads[threadID] = &threadState{}
	delete(r.failed, threadID)
	r.signalLocked()
	r.workers.Go(func() { r.work(threadID) })
}

// workerLinger is how long a slice worker or dispatcher that finished waits
// for the next job before it exits (see lingerPool).
const workerLinger = 100 * time.Millisecond

// work runs slices of the thread while it has inbox rows and returns when
// it has none.
func (r *Runtime) work(threadID string) {
	// On a shared store the worker holds the thread's lease, or
	// another process works on it (and looks at the inbox once more when
	// it hands the thread back; the sweep catches the rest). Each slice
	// runs under the hold (leasehold.go), and stops when it is lost.
	var hold *leaseHold
	var failed bool
	ctx := r.baseCtx
	if r.shared.on {
		if hold = r.holdLease(threadID); hold == nil {
			r.mu.Lock()
			delete(r.threads, threadID)
			r.signalLocked()
			r.mu.Unlock()
			return
		}
		ctx = withHold(r.baseCtx, hold)
		defer func() {
			if hold != nil {
				hold.stop()
				if !failed {
					// After a failed slice the lease is left to expire: the
					// sweep retries the thread then, not at once.
					r.releaseLease(threadID)
				}
			}
		}()
	}
	r.emit(threadID, EventStatus, api.Status{State: api.StateRunning})
	for {
		r.mu.Lock()
		st := r.threads[threadID]
		st.again = false
		r.mu.Unlock()

		progressed, drained, err := r.slice(ctx, threadID)
		lost := hold.Err() != nil
		if lost {
			// The slice stopped where the hold was found lost; what it
			// did not commit is another process's to do (the inputs stay
			// queued, or slice queued a wake-up to resume the turn).
			progressed, drained, err = false, false, nil
		}
		if err != nil && r.baseCtx.Err() == nil {
			r.log.Error("slice failed", "thread", threadID, "err", r.redact(err.Error()))
			r.emit(threadID, EventError, r.errorEvent(err))
		}

		r.mu.Lock()
		// Run again if new rows were committed meanwhile (every commit of
		// an inbox row wakes its thread, which sets st.again while a worker
		// runs it), or if the slice made progress but left rows it loaded;
		// after a failure, only the former (RAP RT-4: the next message
		// retries). A slice that drained what it loaded is not followed by
		// one that would only find the inbox empty: that read was one of
		// the two a tool-call cycle made on the store's writer.
		if !lost && r.baseCtx.Err() == nil && (st.again || (progressed && !drained && err == nil)) {
			r.mu.Unlock()
			continue
		}
		failed = err != nil && !progressed && r.baseCtx.Err() == nil // not a shutdown
		if hold != nil && !failed && r.baseCtx.Err() == nil {
			// Hand the thread back, then look at its inbox once more:
			// another process that committed an input meanwhile found the
			// thread held and left it to this one. A lost hold is handed
			// back too (the lease is released only if still this
			// process's), and the thread claimed anew only through the
			// store, like any other.
			r.mu.Unlock()
			hold.stop()
			r.releaseLease(threadID)
			hold = nil
			if r.hasQueued(threadID) {
				if hold = r.holdLease(threadID); hold != nil {
					ctx = withHold(r.baseCtx, hold)
					continue
				}
			}
			r.mu.Lock()
			if st.again && r.baseCtx.Err() == nil {
				// Woken after that look (an input committed since): take the
				// thread again, unless another process took it (it sees
				// the input).
				r.mu.Unlock()
				if hold = r.holdLease(threadID); hold != nil {
					ctx = withHold(r.baseCtx, hold)
					continue
				}
				r.mu.Lock()
			}
		}
		delete(r.threads, threadID)
		if err != nil && !progressed {
			r.failed[threadID] = err
		}
		r.signalLocked()
		r.mu.Unlock()
		r.hub.endTurn(threadID)
		r.emit(threadID, EventStatus, api.Status{State: api.StateIdle})
		return
	}
}

// ErrSliceFailed is returned (wrapped) by Idle when the thread's last
// slice failed and its inputs stay queued until the next message.
var ErrSliceFailed = errors.New("the thread's last slice failed; its inputs stay queued until the next message")
