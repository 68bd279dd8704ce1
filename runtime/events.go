package runtime

import (
	"encoding/json"
	"sync"
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

// subscriberBuffer is how many events a subscriber may lag behind before it
// is disconnected (it can reconnect and read the history).
const subscriberBuffer = 1024

// hub fans events out to the subscribers of each thread.
type hub struct {
	mu     sync.Mutex
	subs   map[string]map[*subscriber]struct{}
	closed bool
}

type subscriber struct {
	ch   chan Event
	once sync.Once
}

func (s *subscriber) close() { s.once.Do(func() { close(s.ch) }) }

func newHub() *hub { return &hub{subs: map[string]map[*subscriber]struct{}{}} }

// subscribe registers a subscriber, optionally priming it with events that
// are delivered before any live event.
func (h *hub) subscribe(threadID string, prime []Event) (<-chan Event, func()) {
	s := &subscriber{ch: make(chan Event, subscriberBuffer+len(prime))}
	for _, e := range prime {
		s.ch <- e
	}
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		s.close()
		return s.ch, func() {}
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
		if m := h.subs[threadID]; m != nil {
			delete(m, s)
			if len(m) == 0 {
				delete(h.subs, threadID)
			}
		}
		h.mu.Unlock()
		s.close()
	}
	return s.ch, cancel
}

// watched reports whether the thread has a subscriber now.
func (h *hub) watched(threadID string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.subs[threadID]) > 0
}

// publish sends e to the thread's subscribers without blocking; a
// subscriber whose buffer is full is disconnected.
func (h *hub) publish(e Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for s := range h.subs[e.ThreadID] {
		select {
		case s.ch <- e:
		default:
			delete(h.subs[e.ThreadID], s)
			s.close()
		}
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
// Shutdown, or when the subscriber falls more than 1024 events behind.
func (r *Runtime) Subscribe(threadID string) (events <-chan Event, cancel func()) {
	return r.hub.subscribe(threadID, nil)
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
