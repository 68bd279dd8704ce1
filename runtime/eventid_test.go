package runtime

import (
	"strings"
	"testing"
)

// Every Last-Event-ID is read as an id of the current format or refused
// with the reason a client is shown: an id of an earlier release, of the
// middle of a replay, or no id at all is never misread as a number.
func TestParseEventID(t *testing.T) {
	for _, c := range []struct {
		in    string
		want  eventID
		reset string
	}{
		{"v2.p0123456789ab.17", eventID{source: "p0123456789ab", n: 17}, ""},
		{"v2.s0123456789ab.42", eventID{source: "s0123456789ab", n: 42}, ""},
		{"v2.s0123456789ab.42.3", eventID{source: "s0123456789ab", n: 42, k: 3}, ""},
		{"v2.s0123456789ab.0.1", eventID{source: "s0123456789ab", n: 0, k: 1}, ""},
		{"v2.p0123456789ab.18:5", eventID{}, resetInReplay},
		{"0123456789ab-18:5", eventID{}, resetInReplay},
		{"3f9a1c0e5b2d-41", eventID{}, resetOldFormat},
		{"db-42", eventID{}, resetOldFormat},
		{"db-42.7", eventID{}, resetOldFormat},
		{"", eventID{}, resetMalformed},
		{"not-an-id", eventID{}, resetMalformed},
		{"db-", eventID{}, resetMalformed},
		{"db--1", eventID{}, resetMalformed},
		{"v2.", eventID{}, resetMalformed},
		{"v2.p0123456789ab", eventID{}, resetMalformed},
		{"v2.p0123456789ab.", eventID{}, resetMalformed},
		{"v2.p0123456789ab.-1", eventID{}, resetMalformed},
		{"v2.p0123456789ab.+1", eventID{}, resetMalformed},
		{"v2.p0123456789ab.1.0", eventID{}, resetMalformed},
		{"v2.p0123456789ab.1.2.3", eventID{}, resetMalformed},
		{"v2.x0123456789ab.1", eventID{}, resetMalformed},
		{"v2.p.1", eventID{}, resetMalformed},
		{"v2.pABC.1", eventID{}, resetMalformed},
		{"v2.p0123456789ab.99999999999999999999999", eventID{}, resetMalformed},
		{"v3.p0123456789ab.1", eventID{}, resetMalformed},
	} {
		got, reset := parseEventID(c.in)
		if reset != c.reset || (reset == "" && got != c.want) {
			t.Errorf("parseEventID(%q) = %+v, %q; want %+v, %q", c.in, got, reset, c.want, c.reset)
		}
	}
}

// A runtime resumes only ids of its own source: an id of another run of a
// local runtime, of another store, or of the other mode gets a reset
// naming which.
func TestReadEventIDSources(t *testing.T) {
	const local, otherLocal, shared, otherShared = "p0123456789ab", "pba9876543210", "s0123456789ab", "sba9876543210"
	for _, c := range []struct{ source, id, reset string }{
		{local, "v2." + local + ".5", ""},
		{local, "v2." + otherLocal + ".5", resetRestarted},
		{local, "v2." + shared + ".5", resetFromShared},
		{local, "v2." + shared + ".5.2", resetFromShared},
		{shared, "v2." + shared + ".5.2", ""},
		{shared, "v2." + otherShared + ".5", resetOtherStore},
		{shared, "v2." + local + ".5", resetFromLocal},
		{shared, "db-5", resetOldFormat},
		{local, "0123456789ab-5", resetOldFormat},
	} {
		if _, reset := readEventID(c.id, c.source); reset != c.reset {
			t.Errorf("readEventID(%q) by %s: reset %q, want %q", c.id, c.source, reset, c.reset)
		}
	}
}

// The ids a source makes read back as that source's, with their numbers.
func TestFormatEventIDRoundTrip(t *testing.T) {
	prefix := eventIDPrefix("s0123456789ab")
	for _, c := range []struct {
		id   string
		want eventID
	}{
		{formatEventID(prefix, 0), eventID{source: "s0123456789ab"}},
		{formatEventID(prefix, 1<<63), eventID{source: "s0123456789ab", n: 1 << 63}},
		{formatEventIDAfter(prefix, 42, 7), eventID{source: "s0123456789ab", n: 42, k: 7}},
	} {
		got, reset := readEventID(c.id, "s0123456789ab")
		if reset != "" || got != c.want || !strings.HasPrefix(c.id, "v2.s0123456789ab.") {
			t.Errorf("%q read back as %+v (%q), want %+v", c.id, got, reset, c.want)
		}
	}
}
