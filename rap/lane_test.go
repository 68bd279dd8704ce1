package rap

import "testing"

// A call's messages share one lane, whatever their type (its events name
// it by tool_call_id); other calls, other threads, other URLs and view
// updates get lanes of their own; a body that names no call keeps to its
// URL's lane.
func TestLaneKeyGroupsMessagesByCall(t *testing.T) {
	const u = "http://runtime:1/callback"
	lane := func(url, body string) string { return laneKey(OutboxMessage{URL: url, Body: []byte(body)}) }
	call := lane(u, `{"type":"tool_result","group_id":"g","id":"c1","text":"done"}`)
	for _, body := range []string{
		`{"type":"subscription_event","group_id":"g","tool_call_id":"c1","text":"1"}`,
		`{"type":"oauth","group_id":"g","id":"c1","auth_url":"https://auth"}`,
		`{"type":"user_choice","group_id":"g","id":"c1","prompt":"?","choices":["a"]}`,
		`{"type":"user_input","group_id":"g","id":"c1","prompt":"?"}`,
	} {
		if got := lane(u, body); got != call {
			t.Errorf("lane of %s = %q, want the call's %q", body, got, call)
		}
	}
	others := map[string]string{
		"another call":    lane(u, `{"type":"tool_result","group_id":"g","id":"c2","text":"done"}`),
		"another thread":  lane(u, `{"type":"tool_result","group_id":"h","id":"c1","text":"done"}`),
		"another URL":     lane(u+"/2", `{"type":"tool_result","group_id":"g","id":"c1","text":"done"}`),
		"a view update":   lane(u, `{"type":"view_update","group_id":"g","view_type":"c1","content":{}}`),
		"an unnamed body": lane(u, `not json`),
	}
	seen := map[string]string{call: "the call"}
	for what, got := range others {
		if prev, dup := seen[got]; dup {
			t.Errorf("%s shares lane %q with %s", what, got, prev)
		}
		seen[got] = what
	}
	if others["an unnamed body"] != u {
		t.Errorf("a body naming no call is in lane %q, want its URL's", others["an unnamed body"])
	}
}
