package rap

import "testing"

// A call's messages to one callback URL share one lane, whatever their
// type, so that they arrive in the order they were sent: its oauth,
// user_choice and user_input, a subscription's events, its result, and a
// view update sent for it (ForID). Other calls of the same thread, other
// threads and other URLs get lanes of their own; a message that names no
// call keeps to its thread's lane, and one that names no thread to its
// URL's.
func TestLaneKeyGroupsMessagesByCallAndURL(t *testing.T) {
	const u = "http://runtime:1/callback"
	lane := func(url, body, forID string) string {
		return laneKey(OutboxMessage{URL: url, Body: []byte(body), ForID: forID})
	}
	call := lane(u, `{"type":"tool_result","group_id":"g","id":"c1","text":"done"}`, "")
	for _, m := range []struct{ body, forID string }{
		{`{"type":"subscription_event","group_id":"g","tool_call_id":"c1","text":"1"}`, ""},
		{`{"type":"oauth","group_id":"g","id":"c1","auth_url":"https://auth"}`, ""},
		{`{"type":"user_choice","group_id":"g","id":"c1","prompt":"?","choices":["a"]}`, ""},
		{`{"type":"user_input","group_id":"g","id":"c1","prompt":"?"}`, ""},
		{`{"type":"view_update","group_id":"g","view_type":"progress","content":{}}`, "c1"},
	} {
		if got := lane(u, m.body, m.forID); got != call {
			t.Errorf("lane of %s (for %q) = %q, want the call's %q", m.body, m.forID, got, call)
		}
	}
	others := map[string]string{
		"another call of the thread": lane(u, `{"type":"tool_result","group_id":"g","id":"c2","text":"done"}`, ""),
		"a view update for no call":  lane(u, `{"type":"view_update","group_id":"g","view_type":"progress","content":{}}`, ""),
		"another thread":             lane(u, `{"type":"tool_result","group_id":"h","id":"c1","text":"done"}`, ""),
		"another URL":                lane(u+"/2", `{"type":"tool_result","group_id":"g","id":"c1","text":"done"}`, ""),
		"an unnamed body":            lane(u, `not json`, ""),
	}
	seen := map[string]string{call: "the call"}
	for what, got := range others {
		if prev, dup := seen[got]; dup {
			t.Errorf("%s shares lane %q with %s", what, got, prev)
		}
		seen[got] = what
	}
	if others["an unnamed body"] != u {
		t.Errorf("a body naming no thread is in lane %q, want its URL's", others["an unnamed body"])
	}
	if want := u + "\x00g"; others["a view update for no call"] != want {
		t.Errorf("a view update for no call is in lane %q, want its thread's %q", others["a view update for no call"], want)
	}
}

// The lane is read from the group_id and the id (or tool_call_id)
// wherever they stand in the body; a body that is not a JSON object, or
// whose group_id is not a string, names no thread; an id that is not a
// string names no call.
func TestPeekLane(t *testing.T) {
	for body, want := range map[string][2]string{
		`{"type":"tool_result","group_id":"g1","id":"c","text":"x"}`:                  {"g1", "c"},
		`{"text":{"nested":{"group_id":"no","id":"no"}},"id":"c","group_id":"g2"}`:    {"g2", "c"},
		`{"type":"view_update","content":[1,2,{"a":"b"}],"group_id":"g3"}`:            {"g3", ""},
		`{"type":"subscription_event","group_id":"g4","tool_call_id":"s","text":"1"}`: {"g4", "s"},
		`{"type":"tool_result","group_id":"g5","id":7}`:                               {"g5", ""},
		`{"type":"tool_result","id":"c"}`:                                             {"", "c"},
		`{"group_id":7}`:                                                              {"", ""},
		`["group_id","g"]`:                                                            {"", ""},
		`not json`:                                                                    {"", ""},
		``:                                                                            {"", ""},
	} {
		g, id := peekLane([]byte(body), true)
		if g != want[0] || (want[0] != "" && id != want[1]) {
			t.Errorf("peekLane(%s) = %q, %q; want %q, %q", body, g, id, want[0], want[1])
		}
	}
	if g, id := peekLane([]byte(`{"group_id":"g","id":"c"}`), false); g != "g" || id != "" {
		t.Errorf("peekLane without the id = %q, %q; want the group only", g, id)
	}
}
