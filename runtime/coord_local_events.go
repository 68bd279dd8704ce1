package runtime

// This file owns the local implementation of the events half of the seam
// (eventCoord, coord.go): a runtime alone on its store numbers its events
// in memory and keeps each streamed thread's recent events in a bounded
// resume log, and attaches a subscriber so that it resumes after
// Last-Event-ID or gets a reset. OAuth links shown to clients stay in
// memory too (never stored, RAP OA-1).

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"slices"
	"sync"

	"github.com/gorap/gorap/runtime/store"
)

// Event ids and the per-thread resume buffer.
//
// Every event the hub publishes gets an id "v2.pEPOCH.N" (eventid.go):
// EPOCH is random per process, N counts the events of the whole process, so
// ids increase within each thread and an id from before a restart (another
// epoch) or from before a buffer was forgotten (below its floor) is
// recognised as one that cannot be resumed.

// localEvents is the events state of a runtime alone on its store; hub.mu
// guards it but for the oauth links (authMu).
type localEvents struct {
	h *hub
	// source is the events' source ("p" and a random epoch) and prefix the
	// start of their ids; seq is the number of the last event published.
	source, prefix string
	seq            uint64
	// logs keeps each streamed thread's recent events for clients that
	// resume; logBytes is their size, bounded by limits.ResumeTotalBytes.
	logs     map[string]*threadLog
	logBytes int

	// shown holds the oauth events of calls still waiting for their
	// result, to show to clients that connect later.
	authMu sync.Mutex
	shown  *shownAuth
}

// maxShownAuth bounds the oauth events kept in memory for late clients;
// past it the oldest is forgotten.
const maxShownAuth = 10000

// newLocalEvents returns the events state of a runtime alone on its store,
// whose subscribers h has.
func newLocalEvents(h *hub) *localEvents {
	source := string(sourceLocal) + newEpoch()
	return &localEvents{h: h, source: source, prefix: eventIDPrefix(source), logs: map[string]*threadLog{}, shown: newShownAuth(maxShownAuth)}
}

// newEpoch returns a random process epoch for event ids.
func newEpoch() string {
	var b [6]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// eventID formats the id of the event number n.
func (l *localEvents) eventID(n uint64) string { return formatEventID(l.prefix, n) }

// threadLog is one thread's recent events, kept for clients that resume.
type threadLog struct {
	events []Event // oldest first
	bytes  int
	// floor is the number of the newest event that is no longer kept (or
	// the count when the log started): a client that saw an event
	// numbered below it missed events the log no longer has.
	floor uint64
	// used is the count when the log was last written or read, to forget
	// the least recently used logs first.
	used uint64
}

// watched reports whether the thread has a subscriber now, or a log for
// clients that may resume.
func (l *localEvents) watched(threadID string) bool {
	h := l.h
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.subs[threadID]) > 0 || l.logs[threadID] != nil
}

// anyKeptLocked reports whether a resume log is kept of any thread.
func (l *localEvents) anyKeptLocked() bool { return len(l.logs) > 0 }

// deltaLocked reports whether the thread's deltas are wanted.
func (l *localEvents) deltaLocked(threadID, _ string) bool {
	return l.logs[threadID] != nil || len(l.h.subs[threadID]) > 0
}

// publishLocked numbers e, records it in the thread's log and queues it for
// the thread's subscribers; h.mu is held.
func (l *localEvents) publishLocked(e Event) {
	h := l.h
	log := l.logs[e.ThreadID]
	m := h.subs[e.ThreadID]
	if log == nil && len(m) == 0 {
		return
	}
	l.seq++
	e.n = l.seq
	e.ID = l.eventID(l.seq)
	if log != nil {
		l.record(log, e)
	}
	for s := range m {
		h.pushLocked(s, e)
	}
	if h.queued.Load() > int64(h.limits.TotalBufferBytes) {
		h.evict()
	}
}

// record appends e to the thread's log and forgets what passes the
// bounds; h.mu is held.
func (l *localEvents) record(log *threadLog, e Event) {
	c := eventCost(e)
	log.events = append(log.events, e)
	log.bytes += c
	l.logBytes += c
	log.used = l.seq
	for log.bytes > l.h.limits.ResumeBytes && len(log.events) > 1 {
		l.dropOldest(log)
	}
	if l.logBytes > l.h.limits.ResumeTotalBytes {
		l.forgetLogs()
	}
}

// dropOldest forgets the oldest event of log; h.mu is held.
func (l *localEvents) dropOldest(log *threadLog) {
	old := log.events[0]
	log.events[0] = Event{}
	log.events = log.events[1:]
	c := eventCost(old)
	log.bytes -= c
	l.logBytes -= c
	log.floor = old.n
}

// forgetLogs brings the logs under 3/4 of ResumeTotalBytes: first by
// forgetting the least recently used logs of threads nobody streams, then
// by cutting the others down to their last event; h.mu is held.
func (l *localEvents) forgetLogs() {
	target := l.h.limits.ResumeTotalBytes / 4 * 3
	type entry struct {
		id  string
		log *threadLog
	}
	var all []entry
	for id, log := range l.logs {
		all = append(all, entry{id, log})
	}
	slices.SortFunc(all, func(a, b entry) int { return cmp.Compare(a.log.used, b.log.used) })
	for _, e := range all {
		if l.logBytes <= target {
			return
		}
		if len(l.h.subs[e.id]) == 0 {
			l.logBytes -= e.log.bytes
			delete(l.logs, e.id)
		}
	}
	for _, e := range all {
		if l.logBytes <= target {
			return
		}
		if l.logs[e.id] == e.log {
			for len(e.log.events) > 1 {
				l.dropOldest(e.log)
			}
		}
	}
}

// attach registers a subscriber of the thread's events. With lastID still
// in the thread's log, the events after it and the replay_done marker are
// queued on the subscriber before any live event. The thread gets a log
// from now on, so that this client can resume. It never fails.
func (l *localEvents) attach(_ context.Context, threadID, lastID string) (*subscriber, func(), attachment, error) {
	h := l.h
	s := newSubscriber(h.limits.BufferBytes, &h.queued)
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		s.close()
		return s, func() {}, attachment{mark: l.eventID(0)}, nil
	}
	var att attachment
	log := l.logs[threadID]
	if lastID != "" {
		id, reset := readEventID(lastID, l.source)
		n := id.n
		switch {
		case reset != "":
			att.reset = reset
		case id.k != 0: // this process stores nothing: no id has a K
			att.reset = resetMalformed
		case log == nil || n < log.floor || n > l.seq:
			att.reset = resetTooOld
		default:
			att.resumed = true
			i, _ := slices.BinarySearchFunc(log.events, n+1, func(e Event, n uint64) int { return cmp.Compare(e.n, n) })
			for _, e := range log.events[i:] {
				s.queue = append(s.queue, e)
				s.bytes += eventCost(e)
			}
		}
	}
	if log == nil {
		log = &threadLog{floor: l.seq}
		l.logs[threadID] = log
	}
	// The marker takes a number of its own, so that every id a client sees
	// is new; resuming from it is resuming from here.
	l.seq++
	log.used = l.seq
	att.mark = l.eventID(l.seq)
	h.joinLocked(threadID, s, &att, att.resumed)
	h.mu.Unlock()
	return s, h.detacher(threadID, s), att, nil
}

// forget drops the log of a thread nobody streams (one that does not
// exist, after a failed attach, or one that was deleted), and the oauth
// links kept of it.
func (l *localEvents) forget(threadID string) {
	h := l.h
	h.mu.Lock()
	if log := l.logs[threadID]; log != nil && len(h.subs[threadID]) == 0 {
		l.logBytes -= log.bytes
		delete(l.logs, threadID)
	}
	h.mu.Unlock()
	l.authMu.Lock()
	defer l.authMu.Unlock()
	l.shown.forgetThread(threadID)
}

// completionStarted does nothing: no other process streams the thread.
func (l *localEvents) completionStarted(context.Context, string) {}

// completionEnded does nothing: no other process streams the thread.
func (l *localEvents) completionEnded(string, bool) {}

// keepAuthTx does nothing: the link stays in memory (authShown).
func (l *localEvents) keepAuthTx(store.Tx, string, string, any) error { return nil }

// authShown keeps the oauth event in memory (only) until the call's
// result arrives, for clients that connect meanwhile.
func (l *localEvents) authShown(threadID, callID string, e Event) {
	l.authMu.Lock()
	defer l.authMu.Unlock()
	l.shown.put(threadID, callID, e)
}

// forgetAuthTx does nothing: nothing of the link is stored.
func (l *localEvents) forgetAuthTx(store.Tx, string, string) error { return nil }

// forgetAuth drops the call's oauth event from memory.
func (l *localEvents) forgetAuth(threadID, callID string) {
	l.authMu.Lock()
	defer l.authMu.Unlock()
	l.shown.forget(threadID, callID)
}

// authEvents returns the oauth events kept in memory for the thread.
func (l *localEvents) authEvents(_ context.Context, threadID string) ([]Event, error) {
	l.authMu.Lock()
	defer l.authMu.Unlock()
	return l.shown.thread(threadID), nil
}
