package runtime

// This file owns the events clients see: the event types, Subscribe, emit
// (one event to the hub, hub.go) and announce, which turns the messages a
// commit saved into message, tool_call and tool_result events; the model's
// text deltas go out through deltaStream.

import (
	"encoding/json"
	"sync"

	"github.com/gorap/gorap/runtime/api"
	"github.com/gorap/gorap/runtime/store"
)

// Event types streamed to clients (see docs/api.md); their payloads are
// the types of package api.
const (
	EventTextDelta      = api.EventTextDelta      // api.TextDelta
	EventMessage        = api.EventMessage        // api.Message
	EventToolCall       = api.EventToolCall       // api.ToolCallEvent
	EventToolResult     = api.EventToolResult     // api.ToolResultEvent
	EventError          = api.EventError          // api.Error
	EventUsage          = api.EventUsage          // api.Usage
	EventCompacted      = api.EventCompacted      // api.Compaction
	EventStatus         = api.EventStatus         // api.Status
	EventTurnEnded      = api.EventTurnEnded      // api.TurnEnded
	EventView           = api.EventView           // api.View
	EventToolsets       = api.EventToolsets       // api.Toolsets
	EventOAuth          = api.EventOAuth          // api.OAuth
	EventUserChoice     = api.EventUserChoice     // api.UserChoice
	EventChoiceAnswered = api.EventChoiceAnswered // api.ChoiceAnswered
	EventThreadSpawned  = api.EventThreadSpawned  // api.ThreadSpawned
	EventThreadClosed   = api.EventThreadClosed   // api.ThreadClosed
	EventThread         = api.EventThread         // api.ThreadInfo, in a replay
	EventReset          = api.EventReset          // api.Reset
	EventReplayDone     = api.EventReplayDone     // api.ReplayDone
)

// Event is one live event of a thread.
type Event struct {
	// ID identifies the event for a client that resumes (Last-Event-ID);
	// ids increase within a thread. Opaque: compare only for equality.
	ID string `json:"id,omitempty"`
	// Type is one of the Event* constants.
	Type string `json:"type"`
	// ThreadID is the thread the event belongs to.
	ThreadID string `json:"thread_id"`
	// Data is the event's JSON payload.
	Data json.RawMessage `json:"data"`

	// n is the number in ID.
	n uint64
	// msgSeq is the Seq of the saved message a message, tool_call or
	// tool_result event announces; a stream that replayed the history up to
	// a Seq skips the live events of messages it already replayed.
	msgSeq int64
}

// Subscribe returns the thread's live events, each with its ID, and a
// function that ends the subscription (and closes the channel). The
// channel is also closed at Shutdown, or when the subscriber falls more
// than StreamLimits.BufferBytes behind (it can subscribe again and read the
// history). It replays nothing: clients of the HTTP event stream get the
// replay and resume by id (see FollowEvents).
func (r *Runtime) Subscribe(threadID string) (events <-chan Event, cancel func()) {
	s, stop, _, err := r.coord.attach(r.baseCtx, threadID, "")
	if err != nil {
		r.log.Error("subscribe to thread events", "thread", threadID, "err", err)
		s, stop = r.hub.attachBare(threadID)
	}
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
	if typ == EventError {
		r.hub.endTurn(threadID) // the failed turn's text is not the reply
	}
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

// announce publishes appended messages and their calls and results,
// leaving out the inputs announceInputs published before the commit.
func (r *Runtime) announce(threadID string, msgs []store.Message) {
	if len(msgs) == 0 {
		return
	}
	r.hub.endTurn(threadID) // the turn is saved: its text is in the history
	h := r.hub
	watched := h.watched(threadID) // else skip the encoding
	h.mu.Lock()
	defer h.mu.Unlock()
	watched = watched && !h.goneLocked(threadID)
	for _, m := range msgs {
		if h.announcedLocked(threadID, m) || !watched {
			continue
		}
		for _, e := range messageEvents(threadID, apiMessage(m)) {
			h.ev.publishLocked(e)
		}
	}
}

// turnEvents returns the events announce would publish for msgs, just
// saved, without publishing them or changing what the hub keeps: for a
// commit that stores them itself (commitRelease), then tells the hub with
// announceStored.
func (h *hub) turnEvents(threadID string, msgs []store.Message) []Event {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.goneLocked(threadID) {
		return nil
	}
	in := h.inflight[threadID]
	var out []Event
	for _, m := range msgs {
		if in != nil && m.Seq > in.base && m.Seq <= in.base+int64(len(in.msgs)) && len(in.keys) > 0 && in.has(m.Seq, inputKey(m)) {
			continue // announced before the commit
		}
		out = append(out, messageEvents(threadID, apiMessage(m))...)
	}
	return out
}

// announceStored is announce for msgs whose events (turnEvents) the
// commit that saved them stored: the hub forgets the thread's running turn
// and announced inputs as announce does, and publishes nothing.
func (r *Runtime) announceStored(threadID string, msgs []store.Message) {
	r.hub.endTurn(threadID)
	h := r.hub
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, m := range msgs {
		h.announcedLocked(threadID, m)
	}
}

// messageEvents are the events that announce a saved message: the message,
// then one per tool call and one per tool result. A full replay sends the
// history as the same events.
func messageEvents(threadID string, m api.Message) []Event {
	ev := func(typ string, data any) Event {
		b, _ := json.Marshal(data)
		return Event{Type: typ, ThreadID: threadID, Data: b, msgSeq: m.Seq}
	}
	out := []Event{ev(EventMessage, m)}
	for _, c := range m.ToolCalls {
		out = append(out, ev(EventToolCall, api.ToolCallEvent{CallID: c.ID, Name: c.Name, Arguments: c.Arguments, Display: c.Display}))
	}
	for _, res := range m.ToolResults {
		out = append(out, ev(EventToolResult, resultEvent(res)))
	}
	return out
}

func resultEvent(res api.ToolResult) api.ToolResultEvent {
	return api.ToolResultEvent{CallID: res.CallID, Name: res.Name, Text: res.Text, Content: res.Content,
		DisplayAs: res.DisplayAs, IsError: res.IsError}
}

// lastSeqOf returns the Seq of the last message of a history, 0 if empty.
func lastSeqOf(history []store.Message) int64 {
	if len(history) == 0 {
		return 0
	}
	return history[len(history)-1].Seq
}

// deltaStream forwards text deltas to the thread's subscribers.
type deltaStream struct {
	r        *Runtime
	threadID string
}

// TextDelta implements model.Stream.
func (d deltaStream) TextDelta(text string) {
	d.r.hub.delta(d.threadID, text)
}
