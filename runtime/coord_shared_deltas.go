package runtime

// This file owns text deltas across processes sharing a store (part of
// the shared events, coord_shared_events.go): the process
// running a completion coalesces the thread's text deltas and relays them
// through the store's notifications (never storing them); the other processes
// queue them on their subscribers of the thread that are still at the stored
// event the deltas follow.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"strings"
	"sync"
	"time"

	"github.com/gorap/gorap/runtime/api"
	"github.com/gorap/gorap/runtime/store"
)

// Text deltas across processes.
//
// Sender. While a completion streams, its deltas are buffered per thread
// and sent at most once per deltaFlushEvery, coalesced (one notification
// per thread and flush, more only for a text past the payload limit), and
// the rest right after the completion ends, before its turn is committed
// and announced. Each carries the turn's id, its byte offset in the
// turn's text and After, the stored event it follows: the last stored
// event of the thread this process knows of, taken only while every event
// this process published for the thread is stored. A delta streamed while
// some are not waits in the buffer until they are (or is dropped at the
// turn's end). So After is always below the id of the turn's message,
// which is published after the last delta is sent.
//
// Receiver. A subscriber whose cursor (its last stored event) is After
// takes the delta; one past After drops it (the events after After,
// perhaps the turn's message, are already queued); one behind holds it
// (deltaHoldBytes at most) until its cursor reaches After. Within a turn a
// subscriber takes offsets in sequence: a piece before the next offset is
// a duplicate and dropped; a piece after it, or a turn first seen past
// offset 0 (a client that connected mid-reply, a lost notification),
// stops the turn's deltas for that subscriber, and the client gets the
// turn's text with its message.

// Bounds of the delta relay.
const (
	// deltaFlushEvery is the least time between two sends of a process's
	// buffered deltas.
	deltaFlushEvery = 75 * time.Millisecond
	// deltaHoldBytes bounds the deltas a subscriber holds for a stored
	// event it has not yet received.
	deltaHoldBytes = 64 << 10
	// deltaEndWait bounds the send of a turn's last deltas.
	deltaEndWait = 5 * time.Second
)

// deltaRelay is a store that relays text deltas between processes
// (PostgreSQL); the SQLite store, held by one process, is not.
type deltaRelay interface {
	// SendTextDeltas sends deltas, in order, to the other processes.
	SendTextDeltas(ctx context.Context, deltas []store.TextDelta) error
	// ListenTextDeltas calls ready once it listens, then deliver with each
	// delta another process sent. It returns when ctx ends, or with an
	// error when its connection fails (then it may be called again).
	ListenTextDeltas(ctx context.Context, ready func(), deliver func(store.TextDelta)) error
}

// relayTurn is a completion running in this process whose deltas are
// relayed; hub.mu guards it.
type relayTurn struct {
	id   string
	head int64 // the last stored event of the thread known
	next int   // the offset of the next delta
	// batch are the deltas not sent yet, in order; After is -1 while not
	// known (see above).
	batch []store.TextDelta
}

// relayState is the sender's and the receivers' state in the hub; hub.mu
// guards it but for sendMu.
type relayState struct {
	on bool
	// turns are the relayed completions by thread.
	turns map[string]*relayTurn
	// unstored counts per thread the events published and not yet stored.
	unstored map[string]int
	// stored is closed, and replaced, whenever unstored events were
	// stored (or dropped).
	stored chan struct{}
	kick   chan struct{}
	// sendMu keeps sends in order.
	sendMu sync.Mutex
}

// subRelay is a subscriber's state of relayed deltas; hub.mu guards it.
type subRelay struct {
	turn    string
	next    int
	stopped bool
	held    []store.TextDelta
	bytes   int
}

func newRelayState() relayState {
	return relayState{turns: map[string]*relayTurn{}, unstored: map[string]int{}, stored: make(chan struct{}), kick: make(chan struct{}, 1)}
}

// unstoredDone decrements the count of the thread's unstored events and
// wakes those waiting for it; h.mu is held.
func (rs *relayState) unstoredDone(threadID string) {
	if rs.unstored[threadID]--; rs.unstored[threadID] <= 0 {
		delete(rs.unstored, threadID)
	}
	close(rs.stored)
	rs.stored = make(chan struct{})
}

// inputsStoredWait bounds how long a completion waits for the events
// published before it (its inputs, announced) to be stored.
const inputsStoredWait = 2 * time.Second

// waitStored waits, up to inputsStoredWait, until the events published
// for the thread are stored, having the writer store them at once.
func (se *sharedEvents) waitStored(ctx context.Context, threadID string) {
	deadline := time.NewTimer(inputsStoredWait)
	defer deadline.Stop()
	for {
		se.h.mu.Lock()
		n, ch := se.relay.unstored[threadID], se.relay.stored
		se.h.mu.Unlock()
		if n == 0 {
			return
		}
		kick(se.urgent)
		select {
		case <-ch:
		case <-ctx.Done():
			return
		case <-deadline.C:
			return
		}
	}
}

// startDeltaRelay starts the sender and the listener of text deltas when
// the store relays them, and waits (a bounded time) until it listens.
func (se *sharedEvents) startDeltaRelay() {
	r := se.r
	dr, ok := r.cfg.Store.(deltaRelay)
	if !ok {
		return
	}
	se.h.mu.Lock()
	se.relay.on = true
	se.h.mu.Unlock()
	r.wg.Add(1)
	go se.deltaSender(dr)
	r.keepListening(func(ctx context.Context, ready func()) error {
		return dr.ListenTextDeltas(ctx, ready, se.relayIn)
	}, "listening for text deltas of other processes failed; retrying (their clients get the messages meanwhile)",
		"not yet listening for text deltas of other processes; continuing")
}

// completionStarted starts relaying the deltas of a completion of the
// thread.
//
// Its clients in this process get the events published before it (its
// inputs, announced) before any of its text deltas, which reach them at
// once: so it waits for those events to be stored while the thread has a
// subscriber here (one attaching later waits itself: attach). The other
// processes' clients get the deltas only once those events are stored
// (takeSendable), so that nothing need wait for them.
func (se *sharedEvents) completionStarted(ctx context.Context, threadID string) {
	h := se.h
	h.mu.Lock()
	watched := len(h.subs[threadID]) > 0
	h.mu.Unlock()
	if watched {
		se.waitStored(ctx, threadID)
	}
	b := make([]byte, 8)
	rand.Read(b)
	t := &relayTurn{id: hex.EncodeToString(b)}
	h.mu.Lock()
	if !se.relay.on {
		h.mu.Unlock()
		return
	}
	se.relay.turns[threadID] = t
	h.mu.Unlock()
	// Registered first, read after: an event stored meanwhile is in the
	// read or raises head when delivered.
	var head int64
	err := se.r.readOne(ctx, func(tx store.Tx) error {
		var err error
		head, err = tx.LastThreadEventID(threadID)
		return err
	})
	if err != nil {
		return // head stays low: receivers past it drop the deltas
	}
	h.mu.Lock()
	t.head = max(t.head, head)
	h.mu.Unlock()
}

// completionEnded stops relaying the thread's completion; with sendRest
// its buffered deltas are sent first (before the turn is announced).
func (se *sharedEvents) completionEnded(threadID string, sendRest bool) {
	r, h := se.r, se.h
	dr, _ := r.cfg.Store.(deltaRelay)
	se.relay.sendMu.Lock()
	defer se.relay.sendMu.Unlock()
	h.mu.Lock()
	t := se.relay.turns[threadID]
	delete(se.relay.turns, threadID)
	var out []store.TextDelta
	if t != nil && sendRest {
		out = se.takeSendable(threadID, t)
	}
	h.mu.Unlock()
	if len(out) > 0 && dr != nil {
		ctx, cancel := context.WithTimeout(r.baseCtx, deltaEndWait)
		defer cancel()
		if err := dr.SendTextDeltas(ctx, out); err != nil && r.baseCtx.Err() == nil {
			r.log.Warn("send text deltas to other processes", "thread", threadID, "err", err)
		}
	}
}

// deltaSender sends the buffered deltas at most every deltaFlushEvery.
func (se *sharedEvents) deltaSender(dr deltaRelay) {
	r := se.r
	defer r.wg.Done()
	for {
		select {
		case <-r.baseCtx.Done():
			return
		case <-se.relay.kick:
		}
		// Send, then wait the interval while deltas remain.
		for se.sendDeltas(dr) {
			select {
			case <-r.baseCtx.Done():
				return
			case <-time.After(deltaFlushEvery):
			}
		}
	}
}

// sendDeltas sends what can be sent and reports whether anything was
// buffered.
func (se *sharedEvents) sendDeltas(dr deltaRelay) bool {
	r, h := se.r, se.h
	se.relay.sendMu.Lock()
	defer se.relay.sendMu.Unlock()
	h.mu.Lock()
	var out []store.TextDelta
	buffered := false
	for id, t := range se.relay.turns {
		if len(t.batch) > 0 {
			buffered = true
			out = append(out, se.takeSendable(id, t)...)
		}
	}
	h.mu.Unlock()
	if len(out) > 0 {
		if err := dr.SendTextDeltas(r.baseCtx, out); err != nil && r.baseCtx.Err() == nil {
			r.log.Warn("send text deltas to other processes", "deltas", len(out), "err", err)
		}
	}
	return buffered
}

// takeSendable resolves the turn's buffered deltas whose stored position
// is now known and takes those that can go, in order; h.mu is held.
func (se *sharedEvents) takeSendable(threadID string, t *relayTurn) []store.TextDelta {
	if se.relay.unstored[threadID] == 0 {
		for i := range t.batch {
			if t.batch[i].After < 0 {
				t.batch[i].After = t.head
			}
		}
	}
	n := 0
	for n < len(t.batch) && t.batch[n].After >= 0 {
		n++
	}
	out := t.batch[:n:n]
	t.batch = t.batch[n:]
	if len(t.batch) == 0 {
		t.batch = nil
	}
	return out
}

// relayDelta buffers a delta of the thread's relayed completion; h.mu is
// held.
func (se *sharedEvents) relayDelta(threadID, text string) {
	t := se.relay.turns[threadID]
	if t == nil || text == "" {
		return
	}
	// A notification carries valid UTF-8 without NUL.
	text = strings.ReplaceAll(strings.ToValidUTF8(text, "\uFFFD"), "\x00", "\uFFFD")
	after := int64(-1)
	if se.relay.unstored[threadID] == 0 {
		after = t.head
	}
	if n := len(t.batch); n > 0 && t.batch[n-1].After == after {
		t.batch[n-1].Text += text
	} else {
		t.batch = append(t.batch, store.TextDelta{ThreadID: threadID, After: after, Turn: t.id, Offset: t.next, Text: text})
	}
	t.next += len(text)
	kick(se.relay.kick)
}

// noteStored raises the known head of the thread's relayed completion;
// h.mu is held.
func (se *sharedEvents) noteStored(threadID string, id int64) {
	if t := se.relay.turns[threadID]; t != nil && id > t.head {
		t.head = id
	}
}

// relayIn queues a delta from another process on the thread's
// subscribers that are at its stored event, holds it for those behind.
func (se *sharedEvents) relayIn(d store.TextDelta) {
	h := se.h
	h.mu.Lock()
	defer h.mu.Unlock()
	for s := range h.subs[d.ThreadID] {
		switch {
		case s.cursor > d.After:
			// Past it: later events, perhaps the turn's message, are queued.
		case s.cursor < d.After:
			if s.relay.bytes+len(d.Text) <= deltaHoldBytes {
				s.relay.held = append(s.relay.held, d)
				s.relay.bytes += len(d.Text)
			}
		default:
			se.applyDelta(s, d)
		}
	}
	if h.queued.Load() > int64(h.limits.TotalBufferBytes) {
		h.evict()
	}
}

// releaseHeld, after s's cursor moved, queues the held deltas at it and
// forgets those it passed; h.mu is held.
func (se *sharedEvents) releaseHeld(s *subscriber) {
	held := s.relay.held
	s.relay.held, s.relay.bytes = nil, 0
	for _, d := range held {
		switch {
		case d.After == s.cursor:
			se.applyDelta(s, d)
		case d.After > s.cursor:
			s.relay.held = append(s.relay.held, d)
			s.relay.bytes += len(d.Text)
		}
	}
}

// applyDelta queues d on s if it is the next piece of its turn; h.mu is
// held.
func (se *sharedEvents) applyDelta(s *subscriber, d store.TextDelta) {
	st := &s.relay
	if d.Turn != st.turn {
		st.turn, st.next, st.stopped = d.Turn, 0, false
		if d.Offset != 0 {
			st.stopped = true // joined mid-turn: the message brings the text
		}
	}
	switch {
	case st.stopped || d.Offset < st.next:
		return // stopped, or a duplicate
	case d.Offset > st.next:
		st.stopped = true // a lost piece: the message brings the text
		return
	}
	st.next += len(d.Text)
	b, _ := json.Marshal(api.TextDelta{Text: d.Text})
	se.seq++
	e := Event{ID: se.afterID(s.cursor, se.seq), Type: EventTextDelta, ThreadID: d.ThreadID, Data: b}
	se.h.pushLocked(s, e)
}
