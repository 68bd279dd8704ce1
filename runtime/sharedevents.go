package runtime

// This file owns client events across processes sharing a store, described
// below; its background loops are in sharedevents_loops.go.

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
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
// filled from the store. Event ids are "db-N" for stored event N of the
// thread; a text_delta, a replay_done marker and replayed events get
// "db-N.K" (K a number of this process): resuming from either means
// resuming after stored event N. OAuth links are kept in the store (store.OAuthLinks)
// until their call's result arrives, for clients that connect meanwhile to
// any process. On a store one process holds (SQLite) none of this runs:
// events stay in memory (eventlog.go). Text deltas reach the clients of
// other processes through the store's notifications, not stored
// (sharedeltas.go).

// Bounds of the shared event path.
const (
	// sharedEpoch is the "epoch" of shared event ids.
	sharedEpoch = "db"
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

// sharedEvents is the hub's state on a shared store; hub.mu guards it.
type sharedEvents struct {
	// pending are the events waiting for the writer; flush wakes it.
	pending []Event
	flush   chan struct{}
	// stale are the threads whose subscribers may be missing stored
	// events; tail wakes the tailer.
	stale map[string]bool
	tail  chan struct{}
	// relay is the state of text deltas across processes
	// (sharedeltas.go).
	relay relayState
}

func newSharedEvents() *sharedEvents {
	return &sharedEvents{flush: make(chan struct{}, 1), stale: map[string]bool{}, tail: make(chan struct{}, 1), relay: newRelayState()}
}

func kick(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// sharedID formats the id of stored event n, or with k > 0 that of an
// event after it that is not stored.
func sharedID(n int64, k uint64) string {
	id := sharedEpoch + "-" + strconv.FormatInt(n, 10)
	if k > 0 {
		id += "." + strconv.FormatUint(k, 10)
	}
	return id
}

// parseSharedID returns the stored event number of an id made by
// sharedID.
func parseSharedID(s string) (int64, bool) {
	rest, ok := strings.CutPrefix(s, sharedEpoch+"-")
	if !ok {
		return 0, false
	}
	rest, _, _ = strings.Cut(rest, ".")
	n, err := strconv.ParseInt(rest, 10, 64)
	return n, err == nil && n >= 0
}

// publishShared queues a stored event for the writer, or hands a
// text_delta to this process's subscribers; h.mu is held.
func (h *hub) publishShared(e Event) {
	if e.Type != EventTextDelta {
		h.sh.pending = append(h.sh.pending, e)
		h.sh.relay.unstored[e.ThreadID]++
		kick(h.sh.flush)
		return
	}
	for s := range h.subs[e.ThreadID] {
		h.seq++
		e.ID = sharedID(s.cursor, h.seq)
		if !s.push(e) {
			h.remove(e.ThreadID, s)
			h.dropped++
		}
	}
}

// takePending returns the events waiting for the writer.
func (h *hub) takePending() []Event {
	h.mu.Lock()
	defer h.mu.Unlock()
	evs := h.sh.pending
	h.sh.pending = nil
	return evs
}

// deliver queues stored events of one thread, in id order, on the
// subscribers whose cursor they follow; a subscriber they do not follow
// marks its thread stale for the tailer.
func (h *hub) deliver(evs []store.ThreadEvent) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.deliverLocked(evs)
}

// deliverWritten is deliver for the events this process stored, written
// as the events pending; nil out says they could not be stored.
func (h *hub) deliverWritten(written []Event, out []store.ThreadEvent) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, e := range written {
		if h.sh.relay.unstored[e.ThreadID]--; h.sh.relay.unstored[e.ThreadID] <= 0 {
			delete(h.sh.relay.unstored, e.ThreadID)
		}
	}
	// One thread's events are consecutive within a batch.
	for i := 0; i < len(out); {
		j := i + 1
		for j < len(out) && out[j].ThreadID == out[i].ThreadID {
			j++
		}
		h.deliverLocked(out[i:j])
		i = j
	}
}

// deliverRead is deliver for the events a read found after `after` in a
// snapshot whose last event id was head: a subscriber at or past `after`
// whose next event the read did not find was pruned past, and is dropped
// (it reconnects and is reset) rather than left with a gap.
func (h *hub) deliverRead(threadID string, after, head int64, evs []store.ThreadEvent) {
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
	h.deliverLocked(evs)
}

// deliverLocked is deliver; h.mu is held.
func (h *hub) deliverLocked(evs []store.ThreadEvent) {
	for _, se := range evs {
		e := Event{ID: sharedID(se.ID, 0), Type: se.Type, ThreadID: se.ThreadID, Data: se.Data, msgSeq: se.MsgSeq}
		h.noteStored(se.ThreadID, se.ID)
		for s := range h.subs[se.ThreadID] {
			switch {
			case se.ID == s.cursor+1:
				s.cursor = se.ID
				if !s.push(e) {
					h.remove(e.ThreadID, s)
					h.dropped++
					continue
				}
				if len(s.relay.held) > 0 {
					h.releaseHeld(s)
				}
			case se.ID > s.cursor+1:
				h.sh.stale[se.ThreadID] = true
				kick(h.sh.tail)
			}
		}
	}
	if h.queued.Load() > int64(h.limits.TotalBufferBytes) {
		h.evict()
	}
}

// noteHead marks the thread stale when a subscriber of it has not seen
// its stored event last.
func (h *hub) noteHead(threadID string, last int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.noteStored(threadID, last)
	for s := range h.subs[threadID] {
		if s.cursor < last {
			h.sh.stale[threadID] = true
			kick(h.sh.tail)
			return
		}
	}
}

// takeStale returns, for the stale threads (or with all, every streamed
// thread), the lowest cursor of their subscribers.
func (h *hub) takeStale(all bool) map[string]int64 {
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
	for id := range h.sh.stale {
		add(id)
	}
	clear(h.sh.stale)
	return out
}

// attach registers a subscriber of the thread's events (see hub.attach);
// on a shared store its catch-up comes from the store.
func (r *Runtime) attach(ctx context.Context, threadID, lastID string) (*subscriber, func(), attachment, error) {
	if r.hub.sh == nil {
		s, cancel, att := r.hub.attach(threadID, lastID)
		return s, cancel, att, nil
	}
	return r.attachShared(ctx, threadID, lastID)
}

// attachShared is attach on a shared store: with lastID a stored event
// still kept, the stored events after it and the replay_done marker are
// queued on the subscriber; otherwise the caller replays the thread's
// state, and the subscriber takes the events stored after the head read
// here.
func (r *Runtime) attachShared(ctx context.Context, threadID, lastID string) (*subscriber, func(), attachment, error) {
	h := r.hub
	var att attachment
	var from int64
	resume := false
	if lastID != "" {
		n, ok := parseSharedID(lastID)
		switch {
		case strings.Contains(lastID, replayIDSep):
			att.reset = resetInReplay
		case !ok:
			att.reset = resetMalformed
		default:
			from, resume = n, true
		}
	}
	var head int64
	var missed []store.ThreadEvent
	err := r.store.View(ctx, func(tx store.Tx) error {
		var err error
		if head, err = tx.LastThreadEventID(threadID); err != nil || !resume {
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
		return s, func() {}, attachment{mark: sharedID(0, 1)}, nil
	}
	s.cursor = head
	if resume {
		att.resumed = true
		s.cursor = from
		for _, se := range missed {
			if se.ID == s.cursor+1 {
				e := Event{ID: sharedID(se.ID, 0), Type: se.Type, ThreadID: threadID, Data: se.Data, msgSeq: se.MsgSeq}
				s.queue = append(s.queue, e)
				s.bytes += eventCost(e)
				s.cursor = se.ID
			}
		}
	}
	h.seq++
	att.mark = sharedID(s.cursor, h.seq)
	h.joinLocked(threadID, s, &att, resume)
	// Events stored between the read above and now: the tailer fetches
	// them.
	h.sh.stale[threadID] = true
	kick(h.sh.tail)
	h.mu.Unlock()
	cancel := func() {
		h.mu.Lock()
		h.remove(threadID, s)
		h.mu.Unlock()
		s.close()
	}
	return s, cancel, att, nil
}

// sharedOAuthLinks returns the thread's oauth links kept in the store, as
// events, for a replay.
func (r *Runtime) sharedOAuthLinks(ctx context.Context, threadID string) ([]Event, error) {
	var links []store.OAuthLink
	err := r.store.View(ctx, func(tx store.Tx) error {
		var err error
		links, err = tx.ThreadOAuthLinks(threadID, time.Now())
		return err
	})
	out := make([]Event, 0, len(links))
	for _, l := range links {
		out = append(out, Event{Type: EventOAuth, ThreadID: threadID, Data: json.RawMessage(l.Event)})
	}
	return out, err
}

// keepOAuthLinkTx, on a shared store, keeps the oauth event of a call in
// the store, in the transaction that accepts it, for clients connecting to
// any process until the call's result arrives (forgetAuthTx deletes it) or
// oauthLinkTTL passed.
func (r *Runtime) keepOAuthLinkTx(tx store.Tx, threadID, callID string, data any) error {
	if r.hub.sh == nil {
		return nil
	}
	b, err := json.Marshal(data)
	if err != nil {
		return err
	}
	now := time.Now()
	return tx.PutOAuthLink(store.OAuthLink{ThreadID: threadID, CallID: callID, Event: b, Created: now, Expires: now.Add(oauthLinkTTL)})
}
