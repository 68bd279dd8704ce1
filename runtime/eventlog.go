package runtime

// This file owns the event ids and each thread's resume buffer in this
// process, and attaching a subscriber so that it resumes
// after Last-Event-ID or gets a reset.

import (
	"cmp"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"slices"
	"strconv"
	"strings"

	"github.com/gorap/gorap/runtime/api"
)

// Event ids and the per-thread resume buffer.
//
// Every event the hub publishes gets an id "EPOCH-N": EPOCH is random per
// process, N counts the events of the whole process, so ids increase within
// each thread and an id from before a restart (another epoch) or from before
// a buffer was forgotten (below its floor) is recognised as one that cannot
// be resumed. The wire contract is only that ids are opaque strings a client
// echoes back in Last-Event-ID; where the events are kept may change.

// newEpoch returns a random process epoch for event ids.
func newEpoch() string {
	var b [6]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// eventID formats the id of the hub's event number n.
func (h *hub) eventID(n uint64) string { return h.epoch + "-" + strconv.FormatUint(n, 10) }

// parseEventID splits an id made by eventID.
func parseEventID(s string) (epoch string, n uint64, ok bool) {
	i := strings.LastIndexByte(s, '-')
	if i <= 0 {
		return "", 0, false
	}
	n, err := strconv.ParseUint(s[i+1:], 10, 64)
	return s[:i], n, err == nil
}

// threadLog is one thread's recent events, kept for clients that resume.
type threadLog struct {
	events []Event // oldest first
	bytes  int
	// floor is the number of the newest event that is no longer kept (or
	// the hub's count when the log started): a client that saw an event
	// numbered below it missed events the log no longer has.
	floor uint64
	// used is the hub's count when the log was last written or read, to
	// forget the least recently used logs first.
	used uint64
}

// turnText is the text a thread's running completion has streamed so far
// (its text_delta events), for a client that connects mid-reply.
type turnText struct {
	// base is the Seq of the thread's last saved message when the
	// completion started: once the store holds a later message, the turn
	// was saved and its text is in the history.
	base int64
	text strings.Builder
}

// record appends e to the thread's log and forgets what passes the
// bounds; h.mu is held.
func (h *hub) record(l *threadLog, e Event) {
	c := eventCost(e)
	l.events = append(l.events, e)
	l.bytes += c
	h.logBytes += c
	l.used = h.seq
	for l.bytes > h.limits.ResumeBytes && len(l.events) > 1 {
		h.dropOldest(l)
	}
	if h.logBytes > h.limits.ResumeTotalBytes {
		h.forgetLogs()
	}
}

// dropOldest forgets the oldest event of l; h.mu is held.
func (h *hub) dropOldest(l *threadLog) {
	old := l.events[0]
	l.events[0] = Event{}
	l.events = l.events[1:]
	c := eventCost(old)
	l.bytes -= c
	h.logBytes -= c
	l.floor = old.n
}

// forgetLogs brings the logs under 3/4 of ResumeTotalBytes: first by
// forgetting the least recently used logs of threads nobody streams, then
// by cutting the others down to their last event; h.mu is held.
func (h *hub) forgetLogs() {
	target := h.limits.ResumeTotalBytes / 4 * 3
	type entry struct {
		id string
		l  *threadLog
	}
	var all []entry
	for id, l := range h.logs {
		all = append(all, entry{id, l})
	}
	slices.SortFunc(all, func(a, b entry) int { return cmp.Compare(a.l.used, b.l.used) })
	for _, e := range all {
		if h.logBytes <= target {
			return
		}
		if len(h.subs[e.id]) == 0 {
			h.logBytes -= e.l.bytes
			delete(h.logs, e.id)
		}
	}
	for _, e := range all {
		if h.logBytes <= target {
			return
		}
		if h.logs[e.id] == e.l {
			for len(e.l.events) > 1 {
				h.dropOldest(e.l)
			}
		}
	}
}

// publishLocked numbers e, records it in the thread's log and queues it for
// the thread's subscribers; h.mu is held.
func (h *hub) publishLocked(e Event) {
	if h.sh != nil {
		h.publishShared(e)
		return
	}
	l := h.logs[e.ThreadID]
	m := h.subs[e.ThreadID]
	if l == nil && len(m) == 0 {
		return
	}
	h.seq++
	e.n = h.seq
	e.ID = h.eventID(h.seq)
	if l != nil {
		h.record(l, e)
	}
	for s := range m {
		if !s.push(e) {
			h.remove(e.ThreadID, s)
			h.dropped++
		}
	}
	if h.queued.Load() > int64(h.limits.TotalBufferBytes) {
		h.evict()
	}
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
	if h.sh != nil {
		h.relayDelta(threadID, text)
	}
	if h.logs[threadID] == nil && len(h.subs[threadID]) == 0 {
		return
	}
	b, _ := json.Marshal(api.TextDelta{Text: text})
	h.publishLocked(Event{Type: EventTextDelta, ThreadID: threadID, Data: b})
}

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
}

// Reasons for a reset (the "reason" of the reset event).
const (
	resetMalformed = "the Last-Event-ID is not an event id of this runtime"
	resetRestarted = "the runtime restarted since that event; its events are gone"
	resetTooOld    = "the events after that id are no longer kept"
	resetInReplay  = "the connection was lost during the replay, which cannot be resumed"
)

// replayIDSep separates the replay_done marker's id from the number of an
// event of the replay in the replay event's id ("MARK:N"): a client that
// reconnects with one was cut off during the replay and starts afresh.
const replayIDSep = ":"

// attach registers a subscriber of the thread's events. With lastID (the
// client's Last-Event-ID) still in the thread's log, the events after it
// and the replay_done marker are queued on the subscriber before any live
// event; otherwise the caller replays the thread's state from the store.
// The thread gets a log from now on, so that this client can resume.
func (h *hub) attach(threadID, lastID string) (*subscriber, func(), attachment) {
	s := newSubscriber(h.limits.BufferBytes, &h.queued)
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		s.close()
		return s, func() {}, attachment{mark: h.eventID(0)}
	}
	var att attachment
	l := h.logs[threadID]
	if lastID != "" {
		epoch, n, ok := parseEventID(lastID)
		switch {
		case strings.Contains(lastID, replayIDSep):
			att.reset = resetInReplay
		case !ok:
			att.reset = resetMalformed
		case epoch != h.epoch:
			att.reset = resetRestarted
		case l == nil || n < l.floor || n > h.seq:
			att.reset = resetTooOld
		default:
			att.resumed = true
			i, _ := slices.BinarySearchFunc(l.events, n+1, func(e Event, n uint64) int { return cmp.Compare(e.n, n) })
			for _, e := range l.events[i:] {
				s.queue = append(s.queue, e)
				s.bytes += eventCost(e)
			}
		}
	}
	if l == nil {
		l = &threadLog{floor: h.seq}
		h.logs[threadID] = l
	}
	// The marker takes a number of its own, so that every id a client sees
	// is new; resuming from it is resuming from here.
	h.seq++
	l.used = h.seq
	att.mark = h.eventID(h.seq)
	h.joinLocked(threadID, s, &att, att.resumed)
	h.mu.Unlock()
	cancel := func() {
		h.mu.Lock()
		h.remove(threadID, s)
		h.mu.Unlock()
		s.close()
	}
	return s, cancel, att
}

// forget drops the log of a thread nobody streams (one that does not
// exist, after a failed attach).
func (h *hub) forget(threadID string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if l := h.logs[threadID]; l != nil && len(h.subs[threadID]) == 0 {
		h.logBytes -= l.bytes
		delete(h.logs, threadID)
	}
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
	} else if t := h.turns[threadID]; t != nil {
		att.turn, att.base, att.hasTurn = t.text.String(), t.base, true
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
