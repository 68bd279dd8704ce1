package runtime

// This file owns the events that ride the runtime's own transactions on a
// shared store (see coord_shared_events.go). Storing a batch of client
// events is a commit, a WAL flush on the database server; the runtime
// commits anyway for the work that causes the events (a tool's result
// received, a slice's turn, dispatched marks). So such a transaction
// (sharedCoord.update) takes the events waiting to be stored and appends
// them after its own writes: they cost no commit of their own. The writer
// (eventWriter) stores those no transaction took within eventLinger.
//
// Order. Stored events are numbered per thread in commit order. Only one
// batch is being stored at a time (storing), by the writer or by one
// transaction, and a batch is every event pending when it is taken, so
// batches are taken and committed in the order the events were published,
// as with the writer alone. A transaction that finds a batch being stored
// carries none.

import (
	"context"
	"time"

	"github.com/gorap/gorap/runtime/store"
)

// eventLinger is how long a published event waits, while the process is
// busy, for a transaction of the runtime to carry it before the writer
// stores it: what storing an event may add to the time its clients see it.
// A tool that answers at once sends its result within it, mostly.
const eventLinger = 50 * time.Millisecond

// carryLimit bounds the events one transaction carries, so that the work
// that causes them is not held up by a large batch; the writer stores the
// rest.
const carryLimit = 256

// takeBatch takes the pending events (up to limit of them when limit is
// positive) unless a batch is being stored, and marks the batch being
// stored; nil when there is none to take. finishBatch ends it.
func (se *sharedEvents) takeBatch(limit int) []Event {
	h := se.h
	h.mu.Lock()
	defer h.mu.Unlock()
	if se.storing {
		return nil
	}
	evs := se.takePendingLocked(limit)
	se.storing = len(evs) > 0
	return evs
}

// finishBatch delivers the batch taken by takeBatch, as stored (out; nil
// when it could not be), ends it, and has the writer look at the events
// published meanwhile.
func (se *sharedEvents) finishBatch(evs []Event, out []store.ThreadEvent) {
	se.deliverWritten(evs, out)
	se.h.mu.Lock()
	se.storing = false
	close(se.batchDone)
	se.batchDone = make(chan struct{})
	more := len(se.pending) > 0
	se.h.mu.Unlock()
	if more {
		kick(se.flush)
	}
}

// carryWith is carry for a slice's last commit (leaseRelease.commit): it
// waits for a batch being stored to be stored, takes every pending event,
// and appends them, then the events turn returns, after fn's writes. So
// the thread's events published before fn and the events of what fn saved
// are stored with it, before another process can take the thread (fn
// releases it) and store events of its own. It reports whether turn's
// events were stored; when only the append failed the transaction, fn
// runs again without the events, and the pending ones go back to the
// writer.
func (se *sharedEvents) carryWith(ctx context.Context, fn func(store.Tx) error, turn func() []Event) (bool, error) {
	h := se.h
	var evs []Event
	for {
		h.mu.Lock()
		if !se.storing {
			evs = se.takePendingLocked(0)
			se.storing = true
			h.mu.Unlock()
			break
		}
		ch := se.batchDone
		h.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return false, ctx.Err()
		}
	}
	st := se.r.store
	var out []store.ThreadEvent
	appendFailed := false
	err := st.Update(ctx, func(tx store.Tx) error {
		appendFailed, out = false, nil
		if err := fn(tx); err != nil {
			return err
		}
		all := threadEvents(append(append([]Event(nil), evs...), turn()...))
		if len(all) == 0 {
			return nil
		}
		var err error
		if out, err = tx.AppendThreadEvents(all); err != nil {
			appendFailed = true
		}
		return err
	})
	if err != nil {
		se.requeue(evs)
		if appendFailed {
			err = st.Update(ctx, fn)
		}
		return false, err
	}
	// This batch's events first, then the turn's, as stored.
	se.deliverWritten(evs, out[:len(evs)])
	se.deliver(out[len(evs):])
	se.finishBatch(nil, nil)
	return true, nil
}

// carry runs fn in a read-write transaction of the store that also
// stores the events waiting to be stored, when no batch is being stored.
// When the transaction fails, the events go back to the writer (and fn's
// error is returned); when only their append failed it, fn runs again
// without them.
func (se *sharedEvents) carry(ctx context.Context, fn func(store.Tx) error) error {
	st := se.r.store
	evs := se.takeBatch(carryLimit)
	if len(evs) == 0 {
		return st.Update(ctx, fn)
	}
	in := threadEvents(evs)
	var out []store.ThreadEvent
	appendFailed := false
	err := st.Update(ctx, func(tx store.Tx) error {
		appendFailed = false
		if err := fn(tx); err != nil {
			return err
		}
		var err error
		if out, err = tx.AppendThreadEvents(in); err != nil {
			appendFailed = true
		}
		return err
	})
	if err != nil {
		se.requeue(evs)
		if appendFailed {
			err = st.Update(ctx, fn)
		}
		return err
	}
	se.finishBatch(evs, out)
	return nil
}

// requeue gives back a batch that a failed transaction took, ahead of the
// events published since, and ends the batch: the writer stores them at
// once (less those of threads deleted meanwhile: a slice's commit that
// failed because its thread was deleted leaves nothing of it).
func (se *sharedEvents) requeue(evs []Event) {
	h := se.h
	h.mu.Lock()
	if len(evs) > 0 {
		se.pending = append(evs, se.pending...)
		se.pendingSince = time.Now().Add(-eventLinger)
	}
	se.storing = false
	close(se.batchDone)
	se.batchDone = make(chan struct{})
	more := len(se.pending) > 0
	h.mu.Unlock()
	if more {
		kick(se.flush)
	}
}
