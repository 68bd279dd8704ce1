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

// eventWriter appends the hub's pending events to the store, in batches,
// and delivers them with their ids to this process's subscribers.
func (se *sharedEvents) eventWriter() {
	r := se.r
	defer r.wg.Done()
	for {
		select {
		case <-se.flush:
			se.writeEvents(r.baseCtx)
		case <-r.baseCtx.Done():
			// Shutdown: store what the last slices published.
			ctx, cancel := context.WithTimeout(context.WithoutCancel(r.baseCtx), 5*time.Second)
			se.writeEvents(ctx)
			cancel()
			return
		}
	}
}

// writeEvents stores the pending events, retrying a failed write a few
// times: an event that cannot be stored is lost for live clients (a client
// that connects later replays the thread's state from the store).
func (se *sharedEvents) writeEvents(ctx context.Context) {
	r := se.r
	evs := se.takePending()
	if len(evs) == 0 {
		return
	}
	in := make([]store.ThreadEvent, len(evs))
	for i, e := range evs {
		in[i] = store.ThreadEvent{ThreadID: e.ThreadID, Type: e.Type, Data: e.Data, MsgSeq: e.msgSeq}
	}
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
		se.deliverWritten(evs, nil)
		return
	}
	se.deliverWritten(evs, out)
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
