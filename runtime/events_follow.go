package runtime

// This file owns following a thread's events as a client does (GET
// /v1/threads/{id}/events, served by runtime/httpapi): one of the event
// stream slots, the replay of the thread's state or the resume after a
// Last-Event-ID, then the live events.

import (
	"context"
	"encoding/json"
	"strconv"
	"sync"

	"github.com/gorap/gorap/runtime/api"
	"github.com/gorap/gorap/runtime/store"
)

// LastEventIDParam is the query parameter that may carry the Last-Event-ID
// of GET /v1/threads/{id}/events, for clients that cannot set the header.
const LastEventIDParam = api.LastEventIDParam

// FollowEvents opens a stream of the thread's events for a client that
// last saw lastEventID. A client without one first gets the thread's state
// (api.EventStream.Replay: see replayEvents), then a replay_done marker,
// then live events; a client whose lastEventID is still in the thread's
// log gets exactly the events it missed, then the marker, from Next; any
// other lastEventID gets a reset event and a full replay. Live events carry
// an ID. The stream takes one of the slots of StreamLimits: past
// StreamLimits.PerThread the error wraps api.ErrTooManyStreams, past
// StreamLimits.Total api.ErrStreamsFull. A stream that falls
// StreamLimits.BufferBytes behind is dropped. Close the stream when done.
// Like the other thread methods it answers for the Caller of ctx.
func (r *Runtime) FollowEvents(ctx context.Context, threadID, lastEventID string) (api.EventStream, error) {
	if _, scoped := api.ScopedUser(ctx); scoped {
		if err := r.CheckThread(ctx, threadID); err != nil {
			return nil, err
		}
	}
	release, err := r.hub.openStream(threadID)
	if err != nil {
		return nil, err
	}
	sub, cancel, att, err := r.coord.attach(ctx, threadID, lastEventID)
	if err != nil {
		release()
		return nil, err
	}
	s := &eventStream{sub: sub, stop: func() { cancel(); release() }, replayedSeq: -1}
	if !att.resumed {
		replay, seq, err := r.replayEvents(ctx, threadID, att)
		if err != nil {
			cancel()
			r.coord.forget(threadID)
			release()
			return nil, err
		}
		s.replay, s.replayedSeq = toAPIEvents(replay, -1), seq
	}
	return s, nil
}

// eventStream is FollowEvents' api.EventStream: a subscriber of the hub
// and its stream slot.
type eventStream struct {
	sub    *subscriber
	stop   func()
	once   sync.Once
	replay []api.Event
	// replayedSeq is the Seq of the last history message replayed: live
	// events of messages up to it were replayed already. -1: none.
	replayedSeq int64
}

// Replay implements api.EventStream.
func (s *eventStream) Replay() []api.Event {
	out := s.replay
	s.replay = nil
	return out
}

// Ready implements api.EventStream.
func (s *eventStream) Ready() <-chan struct{} { return s.sub.ready }

// Next implements api.EventStream; it skips the live events of messages
// the replay held.
func (s *eventStream) Next() ([]api.Event, bool) {
	events, closed := s.sub.take()
	if closed {
		return nil, true
	}
	return toAPIEvents(events, s.replayedSeq), false
}

// OnDrop implements api.EventStream.
func (s *eventStream) OnDrop(f func()) { s.sub.setKick(f) }

// Closed implements api.EventStream.
func (s *eventStream) Closed() bool { return s.sub.isClosed() }

// DropReason implements api.EventStream.
func (s *eventStream) DropReason() string { return s.sub.dropReason() }

// Close implements api.EventStream: it ends the subscription, then gives
// the slot back.
func (s *eventStream) Close() { s.once.Do(s.stop) }

// toAPIEvents converts events for a client, leaving out those that
// announce a message of Seq up to skipSeq, and clears events (so that
// their payloads go with the returned copies).
func toAPIEvents(events []Event, skipSeq int64) []api.Event {
	out := make([]api.Event, 0, len(events))
	for i, e := range events {
		if e.msgSeq > 0 && e.msgSeq <= skipSeq {
			events[i] = Event{}
			continue // replayed from the history already
		}
		out = append(out, api.Event{ID: e.ID, Type: e.Type, Data: e.Data})
		events[i] = Event{}
	}
	return out
}

// replayEvents returns the thread's state as the events a client that
// starts afresh receives before live ones: a reset event
// when its Last-Event-ID could not be resumed; the session's toolsets; the
// thread's state (thread); the history as the message, tool_call and
// tool_result events it was announced with; every current view (RAP VU-2);
// every user choice waiting for an answer; every oauth link of a call still
// waiting for authorization; the text the running completion streamed so
// far as one text_delta; and the replay_done marker. It also returns the
// Seq of the last history message replayed.
func (r *Runtime) replayEvents(ctx context.Context, id string, att attachment) ([]Event, int64, error) {
	var info api.ThreadInfo
	var history []store.Message
	var views []store.View
	err := r.store.View(ctx, func(tx store.Tx) error {
		th, err := visibleThread(ctx, tx, id)
		if err != nil {
			return err
		}
		if info, err = r.readThreadInfo(tx, th); err != nil {
			return err
		}
		if history, err = tx.History(id); err != nil {
			return err
		}
		views, err = tx.ThreadViews(id)
		return err
	})
	if err != nil {
		return nil, 0, err
	}
	lastSeq := lastSeqOf(history)
	var out []Event
	add := func(typ string, data any) {
		b, _ := json.Marshal(data)
		out = append(out, Event{Type: typ, ThreadID: id, Data: b})
	}
	if att.reset != "" {
		add(EventReset, api.Reset{Reason: att.reset})
	}
	if s, err := r.sessionOf(ctx, info.RootID); err == nil {
		add(EventToolsets, s.toolsets())
	}
	add(EventThread, info)
	for _, m := range history {
		out = append(out, messageEvents(id, apiMessage(m))...)
	}
	for _, v := range views {
		add(EventView, api.View{ViewType: v.ViewType, Content: v.Content})
	}
	for _, c := range info.Choices {
		add(EventUserChoice, choiceEvent(c))
	}
	for _, in := range info.Inputs {
		add(EventUserInput, inputEvent(in))
	}
	links, err := r.coord.authEvents(ctx, id)
	if err != nil {
		return nil, 0, err
	}
	out = append(out, links...)
	// The inputs the running completion answers, unless they were saved
	// (and so replayed above) between the attach and the read.
	shown := map[string]bool{}
	for _, e := range att.inputs {
		key := e.Type + "\x00" + string(e.Data)
		if e.msgSeq > lastSeq && !shown[key] {
			shown[key] = true
			out = append(out, Event{Type: e.Type, ThreadID: id, Data: e.Data})
		}
	}
	// The running completion's text, unless its turn was saved (and so
	// replayed above) between the attach and the read.
	if att.hasTurn && att.turn != "" && att.base == lastSeq {
		add(EventTextDelta, api.TextDelta{Text: att.turn})
	}
	mode := api.ReplayFull
	if att.reset != "" {
		mode = api.ReplayReset
	}
	// Replayed events have ids of their own, so that a client cut off
	// during the replay (a browser's EventSource reconnects with the last
	// id it saw) is recognised and starts afresh.
	for i := range out {
		out[i].ID = att.mark + replayIDSep + strconv.Itoa(i+1)
	}
	out = append(out, replayDone(id, att.mark, mode, lastSeq))
	return out, lastSeq, nil
}
