package runtime

// This file owns the background loops of client events on a shared store
// (see coord_shared_events.go): the writer that appends events to the
// store, the listener and tailer that bring other processes' events to
// this one's subscribers, and the pruner of old events and oauth links.

import (
	"context"
	"time"

	"github.com/gorap/gorap/runtime/store"
)

// start starts the writer, the tailer, its listener, the pruner and the
// text delta relay (coord_shared_deltas.go) of a runtime on a shared
// store.
func (se *sharedEvents) start() {
	r := se.r
	r.wg.Add(3)
	go se.eventWriter()
	go se.eventTailer()
	go se.eventPruner()
	if l, ok := r.cfg.Store.(store.EventListener); ok {
		r.wg.Add(1)
		go se.eventListener(l)
	}
	se.startDeltaRelay()
}

// eventWriter stores the events that no transaction of the runtime
// carried (coord_shared_events_carry.go): while the process is busy, an
// event published waits up to eventLinger for one, then the writer stores
// it in a transaction of its own, with the others waiting. When the
// process runs no thread and dispatches nothing (no such transaction is
// coming), or a completion's clients in this process wait for its inputs
// to be stored (waitStored), it stores them at once.
func (se *sharedEvents) eventWriter() {
	r := se.r
	defer r.wg.Done()
	for {
		urgent := false
		select {
		case <-se.flush:
		case <-se.urgent:
			urgent = true
		case <-r.baseCtx.Done():
			se.writeAtShutdown()
			return
		}
		// While busy, wait until the oldest pending event waited
		// eventLinger (those before it were carried meanwhile).
		for !urgent && r.baseCtx.Err() == nil && se.busy() {
			wait := se.lingerLeft()
			if wait <= 0 {
				break
			}
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-se.urgent:
				urgent = true
			case <-r.baseCtx.Done():
			}
			t.Stop()
		}
		if r.baseCtx.Err() != nil {
			se.writeAtShutdown()
			return
		}
		se.writeEvents(r.baseCtx)
	}
}

// lingerLeft returns how long the oldest pending event has yet to wait
// for a transaction to carry it; 0 or less when none is pending.
func (se *sharedEvents) lingerLeft() time.Duration {
	se.h.mu.Lock()
	defer se.h.mu.Unlock()
	if len(se.pending) == 0 {
		return 0
	}
	return eventLinger - time.Since(se.pendingSince)
}

// busy reports whether this process runs a thread or dispatches a call:
// then a transaction that can carry the events is likely to come soon.
func (se *sharedEvents) busy() bool {
	r := se.r
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.threads) > 0 || len(r.inflight) > 0
}

// writeAtShutdown stores what the last slices published, waiting (a
// bounded time) for a transaction carrying events to end first.
func (se *sharedEvents) writeAtShutdown() {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(se.r.baseCtx), 5*time.Second)
	defer cancel()
	for ctx.Err() == nil {
		se.h.mu.Lock()
		busy, n := se.storing, len(se.pending)
		se.h.mu.Unlock()
		if n == 0 {
			return
		}
		if !busy {
			se.writeEvents(ctx)
			continue
		}
		select {
		case <-se.flush:
		case <-time.After(10 * time.Millisecond):
		case <-ctx.Done():
		}
	}
}

// writeEvents stores the pending events, unless a transaction carrying
// events is under way (it kicks the writer when it ends).
func (se *sharedEvents) writeEvents(ctx context.Context) {
	evs := se.takeBatch(0)
	if len(evs) == 0 {
		return
	}
	se.finishBatch(evs, se.storeEvents(ctx, evs))
}

// storeEvents stores evs in a transaction of their own, retrying a
// failed write a few times, and returns them as stored; nil when they
// could not be stored: they are lost for live clients (a client that
// connects later replays the thread's state from the store).
func (se *sharedEvents) storeEvents(ctx context.Context, evs []Event) []store.ThreadEvent {
	r := se.r
	in := threadEvents(evs)
	var out []store.ThreadEvent
	var err error
	for attempt := range 5 {
		err = r.store.Update(ctx, func(tx store.Tx) error {
			var err error
			out, err = tx.AppendThreadEvents(in)
			return err
		})
		if err == nil || ctx.Err() != nil {
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Duration(attempt+1) * 100 * time.Millisecond):
		}
	}
	if err != nil {
		r.log.Error("store client events; clients streaming these threads miss them until they reconnect", "events", len(in), "err", err)
		return nil
	}
	return out
}

// threadEvents returns evs as the store keeps them.
func threadEvents(evs []Event) []store.ThreadEvent {
	in := make([]store.ThreadEvent, len(evs))
	for i, e := range evs {
		in[i] = store.ThreadEvent{ThreadID: e.ThreadID, Type: e.Type, Data: e.Data, MsgSeq: e.msgSeq}
	}
	return in
}

// eventListener feeds the store's notifications of appended events to the
// hub, listening again after a failure.
func (se *sharedEvents) eventListener(l store.EventListener) {
	r := se.r
	defer r.wg.Done()
	for r.baseCtx.Err() == nil {
		err := l.ListenThreadEvents(r.baseCtx, se.noteHead)
		if r.baseCtx.Err() != nil {
			return
		}
		r.log.Warn("listen for client events of other processes; polling meanwhile", "err", err)
		kick(se.tail) // a notification may have been lost
		select {
		case <-r.baseCtx.Done():
		case <-time.After(time.Second):
		}
	}
}

// eventTailer reads from the store the events subscribers miss: of the
// stale threads when woken, of every streamed thread at each poll.
func (se *sharedEvents) eventTailer() {
	r := se.r
	defer r.wg.Done()
	t := time.NewTicker(eventPollEvery)
	defer t.Stop()
	for {
		all := false
		select {
		case <-r.baseCtx.Done():
			return
		case <-se.tail:
		case <-t.C:
			all = true
		}
		se.tailEvents(r.baseCtx, se.takeStale(all))
	}
}

// tailEvents reads the events after each thread's cursor and delivers
// them.
func (se *sharedEvents) tailEvents(ctx context.Context, cursors map[string]int64) {
	r := se.r
	if len(cursors) == 0 {
		return
	}
	read := map[string][]store.ThreadEvent{}
	heads := map[string]int64{}
	err := r.store.View(ctx, func(tx store.Tx) error {
		for id, after := range cursors {
			head, err := tx.LastThreadEventID(id)
			if err != nil {
				return err
			}
			heads[id] = head
			if head <= after {
				continue
			}
			if read[id], err = tx.ThreadEventsAfter(id, after, eventReadLimit); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		if ctx.Err() == nil {
			r.log.Warn("read client events; retrying at the next poll", "err", err)
		}
		return
	}
	for id, evs := range read {
		se.deliverRead(id, cursors[id], heads[id], evs)
		if len(evs) == eventReadLimit {
			se.h.mu.Lock()
			se.markStale(id)
			se.h.mu.Unlock()
		}
	}
}

// eventPruner deletes old events and expired oauth links.
func (se *sharedEvents) eventPruner() {
	r := se.r
	defer r.wg.Done()
	t := time.NewTicker(eventPruneEvery)
	defer t.Stop()
	for {
		select {
		case <-r.baseCtx.Done():
			return
		case <-t.C:
		}
		now := time.Now()
		err := r.store.Update(r.baseCtx, func(tx store.Tx) error {
			if _, err := tx.PruneThreadEvents(now.Add(-eventKeepAge), eventKeepCount); err != nil {
				return err
			}
			_, err := tx.DeleteExpiredOAuthLinks(now)
			return err
		})
		if err != nil && r.baseCtx.Err() == nil {
			r.log.Warn("prune client events and oauth links; retrying later", "err", err)
		}
	}
}
