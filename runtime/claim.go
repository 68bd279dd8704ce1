package runtime

// This file owns a thread's claim in this process: wake gives a thread
// whose inbox got a row a worker (at most one per thread, RAP RT-2), and
// work runs its slices (slice.go) while it holds the claim — with the
// seam's claim too (coord.go: on a shared store, the thread's lease) — and
// hands it back when the inbox is empty.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gorap/gorap/runtime/api"
	"github.com/gorap/gorap/runtime/store"
)

// wake makes sure the thread has a worker. It is called after an inbox row
// of the thread was committed. If a worker is running it is told to look
// again before it exits, so no wake-up is lost.
func (r *Runtime) wake(threadID string) {
	if r.moves.paused(threadID) {
		return // the session is moving; its rows wait (move_out.go)
	}
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
	// The worker claims the thread through the seam (coord.go): on a
	// shared store another process may hold it, and then answers the
	// inputs (and looks at the inbox once more when it hands the thread
	// back). Each slice runs under the claim, and stops when it is lost.
	c := r.coord.claimThread(threadID)
	if c == nil {
		r.mu.Lock()
		delete(r.threads, threadID)
		r.signalLocked()
		r.mu.Unlock()
		return
	}
	var failed bool
	defer func() {
		if c != nil {
			// After a failed slice a shared lease is left to expire: the
			// sweep retries the thread then, not at once.
			c.end(!failed)
		}
	}()
	r.emit(threadID, EventStatus, api.Status{State: api.StateRunning})
	for {
		r.mu.Lock()
		st := r.threads[threadID]
		st.again = false
		r.mu.Unlock()

		var start time.Time
		if r.metrics != nil {
			start = time.Now()
		}
		progressed, drained, err := r.slice(c.context(), threadID)
		lost := c.lost() != nil
		if r.metrics != nil && (progressed || err != nil || lost) {
			r.observeSlice(start, err, lost)
		}
		if lost {
			// The slice stopped where the claim was found lost; what it
			// did not commit is another process's to do (the inputs stay
			// queued, or slice queued a wake-up to resume the turn), and
			// so is announcing its inputs.
			progressed, drained, err = false, false, nil
			r.hub.dropInflight(threadID)
		}
		if err != nil && r.baseCtx.Err() == nil && r.threadDeleted(threadID) {
			// Its session was deleted while the slice ran (delete.go):
			// nothing is left to retry or to tell.
			r.log.Info("slice dropped: its thread was deleted", "thread", threadID)
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
		// A slice whose last commit handed the thread back (it went idle
		// then) runs again only through the hand-back below, which claims
		// the thread anew.
		if !lost && r.baseCtx.Err() == nil && !c.handedBack() && (st.again || (progressed && !drained && err == nil)) {
			r.mu.Unlock()
			continue
		}
		failed = err != nil && !progressed && r.baseCtx.Err() == nil // not a shutdown
		if !failed && r.baseCtx.Err() == nil {
			// Hand the thread back; the seam says whether inputs this
			// process was not woken for wait (committed by another process
			// while this one held the thread).
			r.mu.Unlock()
			if c = r.coord.handBack(threadID, c); c != nil {
				continue
			}
			r.mu.Lock()
			if st.again && r.baseCtx.Err() == nil {
				// Woken while handing the thread back (an input committed
				// since): take it again, unless another process took it
				// (it sees the input).
				r.mu.Unlock()
				if c = r.coord.claimThread(threadID); c != nil {
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
		r.turnEnded(threadID)
		return
	}
}

// ErrSliceFailed is returned (wrapped) by Idle when the thread's last
// slice failed and its inputs stay queued until the next message.
var ErrSliceFailed = errors.New("the thread's last slice failed; its inputs stay queued until the next message")

// reasonLeaseLost marks the wake-up inbox row a slice leaves when it lost
// its claim of the thread after saving part of a turn (resumeElsewhere).
const reasonLeaseLost = "lease_lost"

// resumeElsewhere ends a slice that found its claim of the thread lost
// (only a shared store's lease is ever lost; lost is the claim's error,
// returned). When the slice had already saved its
// inputs with a turn whose calls were all answered at once (consumed), no
// input is left queued to make the next holder ask the model: a wake-up
// row asks it, once for that point of the history (afterSeq). An
// enqueue is what any process does for any thread; the claim only says
// who answers it.
func (r *Runtime) resumeElsewhere(threadID string, consumed bool, afterSeq int64, lost error) error {
	if !consumed {
		return lost // the inputs stay queued: the next holder answers them
	}
	ctx, cancel := context.WithTimeout(r.baseCtx, 10*time.Second)
	defer cancel()
	err := r.store.Update(ctx, func(tx store.Tx) error {
		_, err := tx.Enqueue(store.InboxItem{ThreadID: threadID, Kind: store.KindWake,
			Payload:  []byte(`{"reason":"` + reasonLeaseLost + `"}`),
			DedupKey: fmt.Sprintf("lease-lost:%s:%d", threadID, afterSeq)})
		return err
	})
	if err != nil && r.baseCtx.Err() == nil {
		r.log.Error("queue the resumption of a turn whose lease was lost; the thread's next message resumes it", "thread", threadID, "err", err)
	}
	return lost
}
