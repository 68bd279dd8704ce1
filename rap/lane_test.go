package rap

import "testing"

// A thread's messages to one callback URL share one lane, whatever their
// type or call, so that they arrive in the order they were sent (a view
// update before the result that follows it); other threads and other URLs
// get lanes of their own; a body that names no thread keeps to its URL's
// lane.
func TestLaneKeyGroupsMessagesByThreadAndURL(t *testing.T) {
	const u = "http://runtime:1/callback"
	lane := func(url, body string) string { return laneKey(OutboxMessage{URL: url, Body: []byte(body)}) }
	thread := lane(u, `{"type":"tool_result","group_id":"g","id":"c1","text":"done"}`)
	for _, body := range []string{
		`{"type":"subscription_event","group_id":"g","tool_call_id":"c1","text":"1"}`,
		`{"type":"oauth","group_id":"g","id":"c1","auth_url":"https://auth"}`,
		`{"type":"user_choice","group_id":"g","id":"c1","prompt":"?","choices":["a"]}`,
		`{"type":"user_input","group_id":"g","id":"c1","prompt":"?"}`,
		`{"type":"view_update","group_id":"g","view_type":"progress","content":{}}`,
		`{"type":"tool_result","group_id":"g","id":"c2","text":"done"}`,
	} {
		if got := lane(u, body); got != thread {
			t.Errorf("lane of %s = %q, want the thread's %q", body, got, thread)
		}
	}
	others := map[string]string{
		"another thread":  lane(u, `{"type":"tool_result","group_id":"h","id":"c1","text":"done"}`),
		"another URL":     lane(u+"/2", `{"type":"tool_result","group_id":"g","id":"c1","text":"done"}`),
		"an unnamed body": lane(u, `not json`),
	}
	seen := map[string]string{thread: "the thread"}
	for what, got := range others {
		if prev, dup := seen[got]; dup {
			t.Errorf("%s shares lane %q with %s", what, got, prev)
		}
		seen[got] = what
	}
	if others["an unnamed body"] != u {
		t.Errorf("a body naming no thread is in lane %q, want its URL's", others["an unnamed body"])
	}
}

// The lane is read from the group_id wherever it stands in the body, and
// a body that is not a JSON object, or whose group_id is not a string,
// names no thread.
func TestPeekGroupID(t *testing.T) {
	for body, want := range map[string]string{
		`{"type":"tool_result","group_id":"g1","id":"c","text":"x"}`:       "g1",
		`{"text":{"nested":{"group_id":"no"}},"id":"c","group_id":"g2"}`:   "g2",
		`{"type":"view_update","content":[1,2,{"a":"b"}],"group_id":"g3"}`: "g3",
		`{"type":"tool_result","id":"c"}`:                                  "",
		`{"group_id":7}`:                                                   "",
		`["group_id","g"]`:                                                 "",
		`not json`:                                                         "",
		``:                                                                 "",
	} {
		if got := peekGroupID([]byte(body)); got != want {
			t.Errorf("peekGroupID(%s) = %q, want %q", body, got, want)
		}
	}
}
