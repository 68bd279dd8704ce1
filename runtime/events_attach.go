package runtime

// This file owns what attaching a subscriber means in either mode: the
// attachment a new subscriber catches up with, the reasons of a reset, the
// replay_done marker, and the text of a thread's running completion kept
// for a client that connects mid-reply. How events are numbered and kept
// is the seam's (eventCoord: coord_local_events.go, coord_shared_events.go).

import (
	"encoding/json"
	"strings"

	"github.com/gorap/gorap/runtime/api"
)

// attachment is what a new subscriber needs to catch up.
type attachment struct {
	// resumed says the events missed since the client's Last-Event-ID,
	// and the replay_done marker after them, are queued on the subscriber.
	resumed bool
	// reset says why the client's Last-Event-ID could not be resumed;
	// empty on a first connect and on a resume.
	reset string
	// mark is the id of the replay_done marker: every event of the thread
	// numbered below it is replayed or queued, every later one is live.
	mark string
	// turn is the text the thread's running completion streamed so far,
	// and base the Seq it started after (see turnText); hasTurn says
	// there is one.
	turn    string
	base    int64
	hasTurn bool
	// inputs are events announcing inputs of the running completion,
	// announced before their commit (events_inputs.go); the replay keeps
	// those of messages the history it read does not hold yet.
	inputs []Event
}

// Reasons for a reset (the "reason" of the reset event).
const (
	resetMalformed = "the Last-Event-ID is not an event id of this runtime"
	resetRestarted = "the Last-Event-ID was made by another run of a runtime (this one restarted since, or another runtime made it); its events are not here"
	resetTooOld    = "the events after that id are no longer kept"
	resetInReplay  = "the connection was lost during the replay, which cannot be resumed"
)

// replayIDSep separates the replay_done marker's id from the number of an
// event of the replay in the replay event's id ("MARK:N"): a client that
// reconnects with one was cut off during the replay and starts afresh.
const replayIDSep = ":"

// turnText is the text a thread's running completion has streamed so far
// (its text_delta events), for a client that connects mid-reply.
type turnText struct {
	// base is the Seq of the thread's last saved message when the
	// completion started: once the store holds a later message, the turn
	// was saved and its text is in the history.
	base int64
	text strings.Builder
}

// beginTurn starts collecting the text of a thread's completion; base is
// the Seq of the thread's last saved message.
func (h *hub) beginTurn(threadID string, base int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.turns[threadID] = &turnText{base: base}
}

// endTurn forgets the text of a thread's completion: it was saved, failed
// or the thread went idle.
func (h *hub) endTurn(threadID string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.turns, threadID)
}

// delta adds text to the thread's running turn and publishes it as a
// text_delta event, both at once so that a client attaching in between
// sees the text either in the turn so far or as a live event, never both.
func (h *hub) delta(threadID, text string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if t := h.turns[threadID]; t != nil {
		t.text.WriteString(text)
	}
	if !h.ev.deltaLocked(threadID, text) {
		return
	}
	b, _ := json.Marshal(api.TextDelta{Text: text})
	h.ev.publishLocked(Event{Type: EventTextDelta, ThreadID: threadID, Data: b})
}

// replayDone makes the replay_done marker.
func replayDone(threadID, id, mode string, lastSeq int64) Event {
	b, _ := json.Marshal(api.ReplayDone{Mode: mode, LastSeq: lastSeq})
	return Event{Type: EventReplayDone, ThreadID: threadID, ID: id, Data: b}
}

// joinLocked adds s to the subscribers of threadID once its replayed or
// resumed events are queued: a resumed stream gets replay_done at once;
// a new one gets the text of the turn streaming now, if any (att is
// filled in). h.mu is held.
func (h *hub) joinLocked(threadID string, s *subscriber, att *attachment, resumed bool) {
	if resumed {
		done := replayDone(threadID, att.mark, api.ReplayResume, 0)
		s.queue = append(s.queue, done)
		s.bytes += eventCost(done)
	} else {
		if t := h.turns[threadID]; t != nil {
			att.turn, att.base, att.hasTurn = t.text.String(), t.base, true
		}
		att.inputs = append(att.inputs, h.inflightLocked(threadID)...)
	}
	h.queued.Add(int64(s.bytes))
	if len(s.queue) > 0 {
		s.signal()
	}
	m := h.subs[threadID]
	if m == nil {
		m = map[*subscriber]struct{}{}
		h.subs[threadID] = m
	}
	m[s] = struct{}{}
}

// detacher returns the function that ends s's subscription of the thread.
func (h *hub) detacher(threadID string, s *subscriber) func() {
	return func() {
		h.mu.Lock()
		h.remove(threadID, s)
		h.mu.Unlock()
		s.close()
	}
}

// attachBare registers a subscriber of the thread's live events that
// catches up with nothing: for when attach failed.
func (h *hub) attachBare(threadID string) (*subscriber, func()) {
	s := newSubscriber(h.limits.BufferBytes, &h.queued)
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		s.close()
		return s, func() {}
	}
	var att attachment
	h.joinLocked(threadID, s, &att, false)
	return s, h.detacher(threadID, s)
}

// pushLocked queues e on s, a subscriber of e's thread; a subscriber that
// fell too far behind is dropped instead. h.mu is held.
func (h *hub) pushLocked(s *subscriber, e Event) bool {
	if !s.push(e) {
		h.remove(e.ThreadID, s)
		h.dropped++
		return false
	}
	return true
}
