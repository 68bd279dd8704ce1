package runtime

// This file owns the shared implementation of the events half of the seam
// (eventCoord, coord.go): client events across processes sharing a store,
// described below. Its background loops are in coord_shared_events_loops.go,
// text deltas across processes in coord_shared_deltas.go.

import (
	"context"
	"encoding/json"
	"math"
	"time"

	"github.com/gorap/gorap/runtime/store"
)

// Client events across processes sharing a store.
//
// On a shared store (PostgreSQL) every event but text_delta is appended to
// the store's per-thread event table (store.ThreadEvents) by one writer
// goroutine per process, right after the transaction that produced it, in
// batches; the store numbers them 1, 2, 3… per thread in commit order and
// NOTIFYs the other processes. Each process tails the events of the
// threads its clients stream: on a notification, on a local append, and by
// a poll as the safety net. A subscriber has a cursor, the number of the
// last stored event queued on it, and takes event n only when its cursor
// is n-1: whatever the order events reach it (its own appends, the
// tailer), a client sees each stored event once, in order, and a gap is
// filled from the store. Event ids (eventid.go) are "v2.sSTORE.N" for
// stored event N of the thread, STORE the store's id; a text_delta, a
// replay_done marker and replayed events get "v2.sSTORE.N.K" (K a number
// of this process): resuming from either means resuming after stored
// event N. OAuth links are kept in the store
// (store.OAuthLinks) until their call's result arrives, for clients that
// connect meanwhile to any process. Text deltas reach the clients of other
// processes through the store's notifications, not stored
// (coord_shared_deltas.go).

// Bounds of the shared event path.
const (
	// eventKeepAge and eventKeepCount bound the events kept per thread: a
	// client can resume after a disconnect within them.
	eventKeepAge   = time.Hour
	eventKeepCount = 1000
	// eventPruneEvery is how often a process prunes kept events and
	// expired oauth links.
	eventPruneEvery = time.Minute
	// eventPollEvery is how often a process reads the events of the threads
	// its clients stream even without a notification.
	eventPollEvery = time.Second
	// eventReadLimit bounds the events read at once.
	eventReadLimit = 500
	// oauthLinkTTL is how long an oauth link is kept at most when its
	// call's result never arrives.
	oauthLinkTTL = time.Hour
)

// sharedEvents is the events state of a runtime on a shared store; hub.mu
// guards it.
type sharedEvents struct {
	h *hub
	r *Runtime // its store, logger and loops; nil in tests of the hub alone
	// source is the events' source ("s" and the store's id) and prefix the
	// start of their ids.
	source, prefix string
	// seq numbers the events this process gives an id of its own (the K
	// of "N.K").
	seq uint64
	// pending are the events waiting to be stored; flush wakes the
	// writer, which stores them after eventLinger unless a transaction
	// carried them (coord_shared_events_carry.go), urgent at once.
	pending       []Event
	flush, urgent chan struct{}
	// pendingSince is when the oldest pending event was published, or
	// taken back (a batch over carryLimit).
	pendingSince time.Time
	// storing says that a batch of events is being stored, by the writer
	// or a transaction carrying it: one at a time, to keep their order.
	// batchDone is closed, and replaced, when a batch was stored.
	storing   bool
	batchDone chan struct{}
	// stale are the threads whose subscribers may be missing stored
	// events; tail wakes the tailer.
	stale map[string]bool
	tail  chan struct{}
	// relay is the state of text deltas across processes
	// (coord_shared_deltas.go).
	relay relayState
}

// newSharedEvents returns the events state of r on the shared store
// storeID names, whose subscribers h has.
func newSharedEvents(h *hub, r *Runtime, storeID string) *sharedEvents {
	source := string(sourceShared) + storeID
	return &sharedEvents{h: h, r: r, source: source, prefix: eventIDPrefix(source),
		flush: make(chan struct{}, 1), urgent: make(chan struct{}, 1), batchDone: make(chan struct{}), stale: map[string]bool{}, tail: make(chan struct{}, 1), relay: newRelayState()}
}

func kick(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// storedID formats the id of stored event n.
func (se *sharedEvents) storedID(n int64) string { return formatEventID(se.prefix, uint64(n)) }

// afterID formats the id of this process's k-th unstored event, after
// stored event n.
func (se *sharedEvents) afterID(n int64, k uint64) string { return formatEventIDAfter(se.prefix, n, k) }

// watched is always true: clients of other processes may stream the
// thread.
func (se *sharedEvents) watched(string) bool { return true }

// anyKeptLocked is always true: clients of other processes may stream
// any thread.
func (se *sharedEvents) anyKeptLocked() bool { return true }

// publishLocked queues a stored event for the writer, or hands a
// text_delta to this process's subscribers; h.mu is held.
func (se *sharedEvents) publishLocked(e Event) {
	h := se.h
	if e.Type != EventTextDelta {
		if len(se.pending) == 0 {
			se.pendingSince = time.Now()
		}
		se.pending = append(se.pending, e)
		se.relay.unstored[e.ThreadID]++
		kick(se.flush)
		return
	}
	for s := range h.subs[e.ThreadID] {
		se.seq++
		e.ID = se.afterID(s.cursor, se.seq)
		h.pushLocked(s, e)
	}
}

// deltaLocked buffers the delta for the other processes and reports
// whether this process's subscribers want it; h.mu is held.
func (se *sharedEvents) deltaLocked(threadID, text string) bool {
	se.relayDelta(threadID, text)
	return len(se.h.subs[threadID]) > 0
}

// takePending returns the events waiting for the writer, less those of
// threads deleted since they were published (never stored again).
func (se *sharedEvents) takePending() []Event {
	se.h.mu.Lock()
	defer se.h.mu.Unlock()
	return se.takePendingLocked(0)
}

// takePendingLocked is takePending for at most limit events (all when
// limit is not positive); se.h.mu is held.
func (se *sharedEvents) takePendingLocked(limit int) []Event {
	evs := se.pending
	se.pending = nil
	if limit > 0 && len(evs) > limit {
		se.pending = append([]Event(nil), evs[limit:]...)
		evs = evs[:limit:limit]
	}
	if len(se.h.gone) == 0 {
		return evs
	}
	kept := evs[:0]
	for _, e := range evs {
		if !se.h.goneLocked(e.ThreadID) {
			kept = append(kept, e)
		} else {
			se.relay.unstoredDone(e.ThreadID)
		}
	}
	return kept
}

// deliver queues stored events of one thread, in id order, on the
// subscribers whose cursor they follow; a subscriber they do not follow
// marks its thread stale for the tailer.
func (se *sharedEvents) deliver(evs []store.ThreadEvent) {
	se.h.mu.Lock()
	defer se.h.mu.Unlock()
	se.deliverLocked(evs)
}

// deliverWritten is deliver for the events this process stored, written
// as the events pending; nil out says they could not be stored.
func (se *sharedEvents) deliverWritten(written []Event, out []store.ThreadEvent) {
	se.h.mu.Lock()
	defer se.h.mu.Unlock()
	for _, e := range written {
		se.relay.unstoredDone(e.ThreadID)
	}
	// One thread's events are consecutive within a batch.
	for i := 0; i < len(out); {
		j := i + 1
		for j < len(out) && out[j].ThreadID == out[i].ThreadID {
			j++
		}
		se.deliverLocked(out[i:j])
		i = j
	}
}

// deliverRead is deliver for the events a read found after `after` in a
// snapshot whose last event id was head: a subscriber at or past `after`
// whose next event the read did not find was pruned past, and is dropped
// (it reconnects and is reset) rather than left with a gap.
func (se *sharedEvents) deliverRead(threadID string, after, head int64, evs []store.ThreadEvent) {
	h := se.h
	h.mu.Lock()
	defer h.mu.Unlock()
	for s := range h.subs[threadID] {
		if s.cursor < after || s.cursor >= head {
			continue
		}
		if len(evs) == 0 || s.cursor+1 < evs[0].ID {
			s.mu.Lock()
			s.dropLocked("the events it had not yet received were pruned from the store before it read them")
			s.mu.Unlock()
			h.remove(threadID, s)
			h.dropped++
		}
	}
	se.deliverLocked(evs)
}

// deliverLocked is deliver; h.mu is held.
func (se *sharedEvents) deliverLocked(evs []store.ThreadEvent) {
	h := se.h
	for _, te := range evs {
		e := Event{ID: se.storedID(te.ID), Type: te.Type, ThreadID: te.ThreadID, Data: te.Data, msgSeq: te.MsgSeq}
		se.noteStored(te.ThreadID, te.ID)
		for s := range h.subs[te.ThreadID] {
			switch {
			case te.ID == s.cursor+1:
				s.cursor = te.ID
				if !h.pushLocked(s, e) {
					continue
				}
				if len(s.relay.held) > 0 {
					se.releaseHeld(s)
				}
			case te.ID > s.cursor+1:
				se.markStale(te.ThreadID)
			}
		}
	}
	if h.queued.Load() > int64(h.limits.TotalBufferBytes) {
		h.evict()
	}
}

// markStale has the tailer read the thread's events; h.mu is held.
func (se *sharedEvents) markStale(threadID string) {
	se.stale[threadID] = true
	kick(se.tail)
}

// noteHead marks the thread stale when a subscriber of it has not seen
// its stored event last.
func (se *sharedEvents) noteHead(threadID string, last int64) {
	h := se.h
	h.mu.Lock()
	defer h.mu.Unlock()
	se.noteStored(threadID, last)
	for s := range h.subs[threadID] {
		if s.cursor < last {
			se.markStale(threadID)
			return
		}
	}
}

// takeStale returns, for the stale threads (or with all, every streamed
// thread), the lowest cursor of their subscribers.
func (se *sharedEvents) takeStale(all bool) map[string]int64 {
	h := se.h
	h.mu.Lock()
	defer h.mu.Unlock()
	out := map[string]int64{}
	add := func(id string) {
		for s := range h.subs[id] {
			if c, ok := out[id]; !ok || s.cursor < c {
				out[id] = s.cursor
			}
		}
	}
	if all {
		for id := range h.subs {
			add(id)
		}
	}
	for id := range se.stale {
		add(id)
	}
	clear(se.stale)
	return out
}

// attach registers a subscriber of the thread's events: with lastID a
// stored event still kept, the stored events after it and the replay_done
// marker are queued on the subscriber; otherwise the caller replays the
// thread's state, and the subscriber takes the events stored after the
// head read here.
// inflightScan is how many of a thread's latest stored events a new
// client's replay looks through for the inputs of a running completion.
const inflightScan = 64

func (se *sharedEvents) attach(ctx context.Context, threadID, lastID string) (*subscriber, func(), attachment, error) {
	h := se.h
	var att attachment
	var from int64
	resume := false
	if lastID != "" {
		id, reset := readEventID(lastID, se.source)
		switch {
		case reset != "":
			att.reset = reset
		case id.n > math.MaxInt64:
			att.reset = resetMalformed
		default:
			from, resume = int64(id.n), true
		}
	}
	// The events this process published for the thread are stored first,
	// so that the read below finds them: a completion's inputs, announced
	// before its commit, are then replayed once, not replayed and sent
	// again once stored.
	se.waitStored(ctx, threadID)
	var head int64
	var missed []store.ThreadEvent
	err := se.r.store.View(ctx, func(tx store.Tx) error {
		var err error
		if head, err = tx.LastThreadEventID(threadID); err != nil {
			return err
		}
		if !resume {
			// The inputs of a completion running in any process were
			// announced before their commit: among the latest events.
			recent, err := tx.ThreadEventsAfter(threadID, max(head-inflightScan, 0), inflightScan)
			for _, te := range recent {
				if te.MsgSeq > 0 {
					att.inputs = append(att.inputs, Event{Type: te.Type, ThreadID: threadID, Data: te.Data, msgSeq: te.MsgSeq})
				}
			}
			return err
		}
		missed, err = tx.ThreadEventsAfter(threadID, from, eventKeepCount)
		return err
	})
	if err != nil {
		return nil, nil, att, err
	}
	if resume {
		switch {
		case from > head:
			att.reset, resume = resetMalformed, false
		case from < head && (len(missed) == 0 || missed[0].ID != from+1 || missed[len(missed)-1].ID < head && len(missed) == eventKeepCount):
			att.reset, resume = resetTooOld, false
		}
	}
	s := newSubscriber(h.limits.BufferBytes, &h.queued)
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		s.close()
		return s, func() {}, attachment{mark: se.afterID(0, 1)}, nil
	}
	s.cursor = head
	if resume {
		att.resumed = true
		s.cursor = from
		for _, te := range missed {
			if te.ID == s.cursor+1 {
				e := Event{ID: se.storedID(te.ID), Type: te.Type, ThreadID: threadID, Data: te.Data, msgSeq: te.MsgSeq}
				s.queue = append(s.queue, e)
				s.bytes += eventCost(e)
				s.cursor = te.ID
			}
		}
	}
	se.seq++
	att.mark = se.afterID(s.cursor, se.seq)
	h.joinLocked(threadID, s, &att, resume)
	// Events stored between the read above and now: the tailer fetches
	// them.
	se.markStale(threadID)
	h.mu.Unlock()
	return s, h.detacher(threadID, s), att, nil
}

// forget does nothing: attach keeps nothing for a thread but its
// subscriber.
func (se *sharedEvents) forget(string) {}

// authEvents returns the thread's oauth links kept in the store, as
// events, for a replay.
func (se *sharedEvents) authEvents(ctx context.Context, threadID string) ([]Event, error) {
	var links []store.OAuthLink
	err := se.r.store.View(ctx, func(tx store.Tx) error {
		var err error
		links, err = tx.ThreadOAuthLinks(threadID, time.Now())
		return err
	})
	if err != nil {
		return nil, err
	}
	out := make([]Event, 0, len(links))
	for _, l := range links {
		out = append(out, Event{Type: EventOAuth, ThreadID: threadID, Data: json.RawMessage(l.Event)})
	}
	return out, nil
}

// keepAuthTx keeps the oauth event of a call in the store, in the
// transaction that accepts it, for clients connecting to any process until
// the call's result arrives (forgetAuthTx deletes it) or oauthLinkTTL
// passed.
func (se *sharedEvents) keepAuthTx(tx store.Tx, threadID, callID string, data any) error {
	b, err := json.Marshal(data)
	if err != nil {
		return err
	}
	now := time.Now()
	return tx.PutOAuthLink(store.OAuthLink{ThreadID: threadID, CallID: callID, Event: b, Created: now, Expires: now.Add(oauthLinkTTL)})
}

// authShown does nothing: keepAuthTx kept the link in the store.
func (se *sharedEvents) authShown(string, string, Event) {}

// forgetAuthTx deletes, in the transaction that records a call's result,
// the oauth link kept in the store for the call.
func (se *sharedEvents) forgetAuthTx(tx store.Tx, threadID, callID string) error {
	return tx.DeleteOAuthLink(threadID, callID)
}

// forgetAuth does nothing: forgetAuthTx deleted the link.
func (se *sharedEvents) forgetAuth(string, string) {}
