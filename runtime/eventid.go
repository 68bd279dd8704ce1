package runtime

// This file owns the one format of client event ids both implementations
// of the seam speak (coord_local_events.go, coord_shared_events.go), and
// the reading of a Last-Event-ID.

import (
	"strconv"
	"strings"
)

// Event ids.
//
// Every event id a client sees is
//
//	v2.SOURCE.N     or, shared only,     v2.SOURCE.N.K
//
// "v2" is the format's version: ids of earlier releases ("EPOCH-N" alone
// on a store, "db-N" and "db-N.K" on a shared one) had none. SOURCE names
// what numbered the event: "p" and a random epoch of the runtime process,
// for a runtime alone on its store, whose events live in its memory; "s"
// and the store's id (its StoreID), for runtimes sharing a store,
// which numbers each thread's events. N is the event's number: in the
// process, or the thread's stored event number. K numbers an event a
// process sends without storing it (a text delta, a replay_done marker)
// after stored event N: resuming from it resumes after N. A replayed
// event's id is the replay_done marker's id, replayIDSep and its position
// in the replay.
//
// A runtime resumes only the ids of its own source. Any other Last-Event-ID
// — of an earlier release, of another process or store, of the other mode,
// of the middle of a replay, or no id at all — gets a reset event saying
// why, then a full replay: never a misread or a silent wrong resume. The
// wire contract is that ids are opaque strings a client echoes back.

// eventIDVersion starts every event id.
const eventIDVersion = "v2"

// The first byte of an id's SOURCE: which mode numbered it.
const (
	sourceLocal  = 'p' // a runtime process alone on its store
	sourceShared = 's' // the processes sharing a store
)

// Reasons for a reset (the "reason" of the reset event) that depend on
// the id only; the others are in events_attach.go.
const (
	resetOldFormat  = "the Last-Event-ID has the format of an earlier release; its events cannot be resumed"
	resetFromShared = "the Last-Event-ID was made by runtimes sharing a store; this runtime keeps its events alone"
	resetFromLocal  = "the Last-Event-ID was made by a runtime alone on its store; this runtime's events are in a shared store"
	resetOtherStore = "the Last-Event-ID was made by runtimes sharing another store; its events are not in this one"
)

// eventIDPrefix returns "v2.SOURCE.", the start of the ids source makes.
func eventIDPrefix(source string) string { return eventIDVersion + "." + source + "." }

// formatEventID returns the id prefix+n, with one allocation.
func formatEventID(prefix string, n uint64) string {
	var b [64]byte
	return string(strconv.AppendUint(append(b[:0], prefix...), n, 10))
}

// formatEventIDAfter returns the id prefix+n+"."+k of the k-th unstored
// event after stored event n.
func formatEventIDAfter(prefix string, n int64, k uint64) string {
	var b [64]byte
	out := strconv.AppendInt(append(b[:0], prefix...), n, 10)
	out = append(out, '.')
	return string(strconv.AppendUint(out, k, 10))
}

// eventID is a parsed event id.
type eventID struct {
	source string
	n      uint64
	// k is the K of "N.K", 0 when the id has none.
	k uint64
}

// parseEventID reads a Last-Event-ID. reset is empty when it is an event
// id of the current format, and otherwise why no runtime resumes it.
func parseEventID(s string) (id eventID, reset string) {
	if strings.Contains(s, replayIDSep) {
		return id, resetInReplay
	}
	rest, ok := strings.CutPrefix(s, eventIDVersion+".")
	if !ok {
		if oldEventID(s) {
			return id, resetOldFormat
		}
		return id, resetMalformed
	}
	parts := strings.Split(rest, ".")
	if len(parts) < 2 || len(parts) > 3 || !validSource(parts[0]) {
		return id, resetMalformed
	}
	id.source = parts[0]
	var err error
	if id.n, err = parseIDNumber(parts[1]); err != nil {
		return id, resetMalformed
	}
	if len(parts) == 3 {
		if id.k, err = parseIDNumber(parts[2]); err != nil || id.k == 0 {
			return id, resetMalformed
		}
	}
	return id, ""
}

// parseIDNumber reads a number of an id: decimal digits only.
func parseIDNumber(s string) (uint64, error) {
	if s == "" || s[0] == '+' {
		return 0, strconv.ErrSyntax
	}
	return strconv.ParseUint(s, 10, 64)
}

// validSource reports whether s can be an id's SOURCE: a mode byte, then
// lowercase letters and digits.
func validSource(s string) bool {
	if len(s) < 2 || (s[0] != sourceLocal && s[0] != sourceShared) {
		return false
	}
	for i := 1; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'z') {
			return false
		}
	}
	return true
}

// oldEventID reports whether s is an event id of an earlier release:
// "EPOCH-N" (EPOCH 12 hex digits) or "db-N", "db-N.K".
func oldEventID(s string) bool {
	head, num, ok := strings.Cut(s, "-")
	if !ok {
		return false
	}
	switch {
	case head == "db":
		n, k, hasK := strings.Cut(num, ".")
		_, err := parseIDNumber(n)
		if hasK && err == nil {
			_, err = parseIDNumber(k)
		}
		return err == nil
	case len(head) == 12 && validSource("p"+head):
		_, err := parseIDNumber(num)
		return err == nil
	}
	return false
}

// readEventID reads a Last-Event-ID for a runtime whose events source
// numbers: reset is empty when the id is of source's events (they may
// still be kept), and otherwise why it cannot be resumed here.
func readEventID(lastID, source string) (id eventID, reset string) {
	id, reset = parseEventID(lastID)
	switch {
	case reset != "" || id.source == source:
		return id, reset
	case id.source[0] != source[0] && source[0] == sourceLocal:
		return id, resetFromShared
	case id.source[0] != source[0]:
		return id, resetFromLocal
	case source[0] == sourceLocal:
		return id, resetRestarted
	default:
		return id, resetOtherStore
	}
}
