package runtime

// This file owns the hub that fans a thread's live events out to its
// subscribers in this process: each subscriber's queue bounded in bytes,
// the count of event streams per thread and in total (StreamLimits). How
// events are numbered, kept for clients that resume and brought to the
// hub is the seam's (eventCoord, coord.go); what attaching means in
// either mode is in events_attach.go.

import (
	"cmp"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/gorap/gorap/runtime/api"
)

// hub fans events out to the subscribers of each thread. Every subscriber
// has its own queue, bounded in bytes (StreamLimits.BufferBytes): a
// subscriber that falls that far behind is dropped and its queue freed (it
// can reconnect, be primed afresh and read the history). The hub also
// counts the client API's event streams, per thread and in total, against
// StreamLimits.
type hub struct {
	limits StreamLimits
	mu     sync.Mutex
	subs   map[string]map[*subscriber]struct{}
	// streams counts the HTTP event streams per thread; total is their sum.
	streams map[string]int
	total   int
	closed  bool
	// dropped counts the subscribers dropped for falling behind.
	dropped int
	// queued is the bytes queued over every subscriber, bounded by
	// limits.TotalBufferBytes.
	queued atomic.Int64

	// turns holds the text of each thread's running completion.
	turns map[string]*turnText
	// inflight holds each thread's inputs announced before their commit
	// (events_inputs.go).
	inflight map[string]*inflightInputs
	// ev numbers, keeps and brings the events (the seam's events half,
	// set by the coord's constructor); hub.mu guards its state.
	ev eventCoord

	// gone holds the threads deleted (tombstones), whose events are
	// dropped; graves keeps their order, to forget the oldest first
	// (delete_forget.go).
	gone   map[string]struct{}
	graves []string
}

// subscriber is one consumer's queue of events.
type subscriber struct {
	mu     sync.Mutex
	queue  []Event
	bytes  int
	max    int // the queue's bound in bytes
	peak   int // the most bytes the queue ever held (for tests)
	closed bool
	// ending: the queue holds the subscriber's last event (finish, in
	// delete_forget.go); once it is taken the subscriber is closed.
	ending bool
	// dropped says why the subscriber was dropped; "" if it was not.
	dropped string
	// total is the hub's count of bytes queued over all subscribers.
	total *atomic.Int64
	// kick, when set, is called when the subscriber is dropped for falling
	// behind: an event stream uses it to end a write blocked on its client
	// at once rather than at the write deadline. It must not block.
	kick func()
	// ready has a token while the queue is not empty or the subscriber
	// is closed.
	ready chan struct{}
	// cursor, on a shared store, is the number of the last stored event
	// of the thread queued (coord_shared_events.go); hub.mu guards it.
	cursor int64
	// relay, on a shared store, is the subscriber's state of text deltas
	// from other processes (coord_shared_deltas.go); hub.mu guards it.
	relay subRelay
}

// eventOverhead is what one queued event costs beyond its payload: the
// Event value, its type and thread id, the SSE framing.
const eventOverhead = 128

func eventCost(e Event) int { return len(e.Data) + len(e.Type) + len(e.ThreadID) + eventOverhead }

func newSubscriber(max int, total *atomic.Int64) *subscriber {
	return &subscriber{max: max, total: total, ready: make(chan struct{}, 1)}
}

func (s *subscriber) signal() {
	select {
	case s.ready <- struct{}{}:
	default:
	}
}

// push queues e; it reports false, and closes the subscriber, when the
// subscriber is behind (its queue is not empty) and e would take its queue
// past its bound.
func (s *subscriber) push(e Event) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	c := eventCost(e)
	if len(s.queue) > 0 && s.bytes+c > s.max {
		s.dropLocked(fmt.Sprintf("the client fell more than %d bytes behind the events", s.max))
		return false
	}
	s.queue = append(s.queue, e)
	s.bytes += c
	s.total.Add(int64(c))
	s.peak = max(s.peak, s.bytes)
	s.signal()
	return true
}

// take returns the queued events and empties the queue; closed is true
// when the subscriber was closed and nothing more will come.
func (s *subscriber) take() (events []Event, closed bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.total.Add(-int64(s.bytes))
	events, s.queue, s.bytes = s.queue, nil, 0
	if len(events) > 0 {
		if s.ending {
			s.signal() // the next take closes it
		}
		return events, false
	}
	if s.ending {
		s.closed = true
	}
	return nil, s.closed
}

func (s *subscriber) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closeLocked()
}

// closeLocked marks the subscriber closed and frees its queue.
func (s *subscriber) closeLocked() {
	if s.closed {
		return
	}
	s.closed = true
	s.total.Add(-int64(s.bytes))
	s.queue, s.bytes = nil, 0
	s.signal()
}

// dropLocked closes a subscriber that fell behind, noting why, and kicks
// its consumer.
func (s *subscriber) dropLocked(why string) {
	if s.closed {
		return
	}
	s.dropped = why
	s.closeLocked()
	if s.kick != nil {
		s.kick()
	}
}

// dropReason says why the subscriber was dropped; "" if it was not.
func (s *subscriber) dropReason() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.dropped
}

// isClosed reports whether the subscriber was closed or dropped.
func (s *subscriber) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// setKick sets the function called if the subscriber is dropped. A
// subscriber dropped before its kick was set (the publisher may outrun the
// stream's handler right after it subscribed) is kicked at once.
func (s *subscriber) setKick(f func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.kick = f
	if s.closed {
		f()
	}
}

// queued returns the bytes queued now and the most ever queued.
func (s *subscriber) queued() (now, peak int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.bytes, s.peak
}

func newHub(l StreamLimits) *hub {
	return &hub{limits: l.withDefaults(), subs: map[string]map[*subscriber]struct{}{}, streams: map[string]int{},
		turns: map[string]*turnText{}, inflight: map[string]*inflightInputs{}}
}

// streamsError is a refusal of openStream: it wraps api.ErrTooManyStreams
// or api.ErrStreamsFull, and its text is the answer to the client.
type streamsError struct {
	kind error
	msg  string
}

func (e *streamsError) Error() string { return e.msg }
func (e *streamsError) Unwrap() error { return e.kind }

// openStream counts one more event stream of the thread, or refuses it
// past the per-thread (api.ErrTooManyStreams) or total
// (api.ErrStreamsFull) limit. The returned function gives the slot back.
func (h *hub) openStream(threadID string) (func(), error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.streams[threadID] >= h.limits.PerThread {
		return nil, &streamsError{api.ErrTooManyStreams, fmt.Sprintf("thread %q already has its maximum of %d event streams; close one or retry later", threadID, h.limits.PerThread)}
	}
	if h.total >= h.limits.Total {
		return nil, &streamsError{api.ErrStreamsFull, fmt.Sprintf("the runtime serves its maximum of %d event streams; retry later", h.limits.Total)}
	}
	h.streams[threadID]++
	h.total++
	var once sync.Once
	return func() {
		once.Do(func() {
			h.mu.Lock()
			defer h.mu.Unlock()
			h.total--
			if h.streams[threadID]--; h.streams[threadID] <= 0 {
				delete(h.streams, threadID)
			}
		})
	}, nil
}

// remove unregisters s; h.mu is held.
func (h *hub) remove(threadID string, s *subscriber) {
	if m := h.subs[threadID]; m != nil {
		delete(m, s)
		if len(m) == 0 {
			delete(h.subs, threadID)
		}
	}
}

// watched reports whether the thread's events are wanted (see
// eventCoord.watched).
func (h *hub) watched(threadID string) bool { return h.ev.watched(threadID) }

// anyWatched reports whether the events of some thread may be wanted: it
// has a subscriber in this process, or the seam keeps events (see
// eventCoord.anyKeptLocked).
func (h *hub) anyWatched() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.subs) > 0 || h.ev.anyKeptLocked()
}

// publish numbers e and queues it for the thread's subscribers without
// blocking (see eventCoord.publishLocked); a subscriber whose queue would
// pass its bound is dropped and its memory freed. When the bytes queued
// over all subscribers pass TotalBufferBytes, the subscribers furthest
// behind are dropped until they no longer do. The events of a deleted
// thread (a tombstone, delete_forget.go) are dropped.
func (h *hub) publish(e Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.goneLocked(e.ThreadID) {
		return // its session was deleted
	}
	h.ev.publishLocked(e)
}

// evict drops the subscribers with the most bytes queued until the total
// is under TotalBufferBytes; h.mu is held.
func (h *hub) evict() {
	type behind struct {
		thread string
		s      *subscriber
		bytes  int
	}
	var all []behind
	for id, m := range h.subs {
		for s := range m {
			if now, _ := s.queued(); now > 0 {
				all = append(all, behind{id, s, now})
			}
		}
	}
	slices.SortFunc(all, func(a, b behind) int { return cmp.Compare(b.bytes, a.bytes) })
	for _, b := range all {
		if h.queued.Load() <= int64(h.limits.TotalBufferBytes) {
			return
		}
		b.s.mu.Lock()
		b.s.dropLocked(fmt.Sprintf("the event streams together held more than %d bytes and this client was among those furthest behind", h.limits.TotalBufferBytes))
		b.s.mu.Unlock()
		h.remove(b.thread, b.s)
		h.dropped++
	}
}

func (h *hub) closeAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	for id, m := range h.subs {
		for s := range m {
			s.close()
		}
		delete(h.subs, id)
	}
}
