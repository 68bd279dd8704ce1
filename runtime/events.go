package runtime

import (
	"cmp"
	"encoding/json"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
)

// Event types streamed to clients (see docs/api.md).
const (
	// EventTextDelta: {"text"} — a piece of assistant text as it streams.
	EventTextDelta = "text_delta"
	// EventMessage: a store.Message as JSON — a message added to the history.
	EventMessage = "message"
	// EventToolCall: {"call_id", "name", "arguments", "display"}.
	EventToolCall = "tool_call"
	// EventToolResult: {"call_id", "name", "text", "content", "display_as", "is_error"}.
	EventToolResult = "tool_result"
	// EventError: {"message"}.
	EventError = "error"
	// EventUsage: {"input_tokens", "cached_input_tokens",
	// "uncached_input_tokens", "cache_write_input_tokens", "output_tokens"}
	// — the tokens of one completion, as the provider reported them;
	// cached ones were read from its prompt cache (issue 11 item 3).
	EventUsage = "usage"
	// EventStatus: {"state": "running" | "idle"}.
	EventStatus = "status"
	// EventView: {"view_type", "content"} (RAP VU-2).
	EventView = "view"
	// EventToolsets: {"loaded": [names], "errors": [messages]}.
	EventToolsets = "toolsets"
	// EventOAuth: {"call_id", "name", "auth_url"} — show the link to the
	// user (RAP OA-1); the call stays pending.
	EventOAuth = "oauth"
	// EventUserChoice: {"call_id", "name", "prompt", "choices", "default"}
	// (RAP UC-1): show the prompt and answer with AnswerChoice or
	// POST /v1/threads/{id}/choices/{call_id}. The call stays pending.
	EventUserChoice = "user_choice"
	// EventChoiceAnswered: {"call_id", "selected", "dismissed"} — a choice
	// was answered (by any client).
	EventChoiceAnswered = "choice_answered"
	// EventThreadSpawned: {"thread_id", "parent_id", "origin_call_id",
	// "origin_tool", "reason"} on the parent — a child thread started,
	// for spawn_thread (reason "spawn_thread") or for a subscription event
	// (reason "subscription_event", RAP SU-6). Subscribe to the child's
	// own events to follow it.
	EventThreadSpawned = "thread_spawned"
	// EventThreadClosed: {"thread_id"} on the closed thread and on its
	// parent.
	EventThreadClosed = "thread_closed"
)

// Event is one live event of a thread.
type Event struct {
	// Type is one of the Event* constants.
	Type string `json:"type"`
	// ThreadID is the thread the event belongs to.
	ThreadID string `json:"thread_id"`
	// Data is the event's JSON payload.
	Data json.RawMessage `json:"data"`
}

// hub fans events out to the subscribers of each thread. Every subscriber
// has its own queue, bounded in bytes (StreamLimits.BufferBytes): a
// subscriber that falls that far behind is dropped and its queue freed (it
// can reconnect, be primed afresh and read the history). The hub also
// counts the client API's event streams, per thread and in total, against
// StreamLimits (issue 9 item 12).
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
}

// subscriber is one consumer's queue of events.
type subscriber struct {
	mu     sync.Mutex
	queue  []Event
	bytes  int
	max    int // the queue's bound in bytes
	peak   int // the most bytes the queue ever held (for tests)
	closed bool
	// total is the hub's count of bytes queued over all subscribers.
	total *atomic.Int64
	// kick, when set, is called when the subscriber is dropped for falling
	// behind: an event stream uses it to end a write blocked on its client
	// at once rather than at the write deadline. It must not block.
	kick func()
	// ready has a token while the queue is not empty or the subscriber
	// is closed.
	ready chan struct{}
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
		s.dropLocked()
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
		return events, false
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

// dropLocked closes a subscriber that fell behind and kicks its consumer.
func (s *subscriber) dropLocked() {
	if s.closed {
		return
	}
	s.closeLocked()
	if s.kick != nil {
		s.kick()
	}
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
	return &hub{limits: l.withDefaults(), subs: map[string]map[*subscriber]struct{}{}, streams: map[string]int{}}
}

// errTooManyStreams and errStreamsFull are the refusals of openStream.
var (
	errTooManyStreams = errors.New("too many event streams on this thread")
	errStreamsFull    = errors.New("too many event streams on this runtime")
)

// openStream counts one more event stream of the thread, or refuses it
// past the per-thread (errTooManyStreams) or total (errStreamsFull) limit.
// The returned function gives the slot back.
func (h *hub) openStream(threadID string) (func(), error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.streams[threadID] >= h.limits.PerThread {
		return nil, errTooManyStreams
	}
	if h.total >= h.limits.Total {
		return nil, errStreamsFull
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

// subscribe registers a subscriber primed with events that are delivered
// before any live event. Priming never drops: the prime is bounded by what
// the store holds for one thread.
func (h *hub) subscribe(threadID string, prime []Event) (*subscriber, func()) {
	s := newSubscriber(h.limits.BufferBytes, &h.queued)
	for _, e := range prime {
		s.queue = append(s.queue, e)
		s.bytes += eventCost(e)
	}
	h.queued.Add(int64(s.bytes))
	if len(s.queue) > 0 {
		s.signal()
	}
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		s.close()
		return s, func() {}
	}
	m := h.subs[threadID]
	if m == nil {
		m = map[*subscriber]struct{}{}
		h.subs[threadID] = m
	}
	m[s] = struct{}{}
	h.mu.Unlock()
	cancel := func() {
		h.mu.Lock()
		h.remove(threadID, s)
		h.mu.Unlock()
		s.close()
	}
	return s, cancel
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

// watched reports whether the thread has a subscriber now.
func (h *hub) watched(threadID string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.subs[threadID]) > 0
}

// publish queues e for the thread's subscribers without blocking; a
// subscriber whose queue would pass its bound is dropped and its memory
// freed. When the bytes queued over all subscribers pass
// TotalBufferBytes, the subscribers furthest behind are dropped until they
// no longer do.
func (h *hub) publish(e Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for s := range h.subs[e.ThreadID] {
		if !s.push(e) {
			h.remove(e.ThreadID, s)
			h.dropped++
		}
	}
	if h.queued.Load() > int64(h.limits.TotalBufferBytes) {
		h.evict()
	}
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
		b.s.dropLocked()
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

// Subscribe returns the thread's live events and a function that ends the
// subscription (and closes the channel). The channel is also closed at
// Shutdown, or when the subscriber falls more than StreamLimits.BufferBytes
// behind (it can subscribe again and read the history).
func (r *Runtime) Subscribe(threadID string) (events <-chan Event, cancel func()) {
	s, stop := r.hub.subscribe(threadID, nil)
	ch := make(chan Event)
	done := make(chan struct{})
	go func() {
		defer close(ch)
		for {
			select {
			case <-s.ready:
			case <-done:
				return
			}
			evs, closed := s.take()
			if closed {
				return
			}
			for _, e := range evs {
				select {
				case ch <- e:
				case <-done:
					return
				}
			}
		}
	}()
	var once sync.Once
	return ch, func() {
		once.Do(func() {
			stop()
			close(done)
		})
	}
}

// emit publishes an event with a JSON-encoded payload.
func (r *Runtime) emit(threadID, typ string, data any) {
	if !r.hub.watched(threadID) {
		return // nobody listens: skip the encoding
	}
	b, err := json.Marshal(data)
	if err != nil {
		r.log.Error("encode event", "type", typ, "thread", threadID, "err", err)
		return
	}
	r.hub.publish(Event{Type: typ, ThreadID: threadID, Data: b})
}
