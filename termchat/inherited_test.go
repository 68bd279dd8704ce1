package termchat

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gorap/gorap/model/scripted"
)

// A child thread's event stream replays the history it inherited from its
// parent; the child's transcript shows only the child's own messages, not
// the parent's again after them (the same conversation, in
// order, once).
func TestTranscriptChildSkipsInheritedHistory(t *testing.T) {
	var b syncBuffer
	root := newTranscript(&b, Display{})
	root.self = "parent-thread-0001"
	c := root.forChild("child-thread-0002")
	ev := func(typ, data string) { c.event(Event{Type: typ, Data: json.RawMessage(data)}) }
	ev("message", `{"thread_id":"child-thread-0002","seq":1,"role":"user","text":"handle the tick"}`)
	ev("message", `{"thread_id":"child-thread-0002","seq":2,"role":"assistant","text":"Tick handled."}`)
	// The inherited history, as the replay sends it: messages, calls, results.
	ev("message", `{"thread_id":"parent-thread-0001","seq":1,"role":"user","text":"PARENT-QUESTION"}`)
	ev("message", `{"thread_id":"parent-thread-0001","seq":2,"role":"assistant","text":"PARENT-REPLY","tool_calls":[{"id":"call_p","name":"get_time","arguments":{}}]}`)
	ev("tool_call", `{"call_id":"call_p","name":"get_time","arguments":{}}`)
	ev("message", `{"thread_id":"parent-thread-0001","seq":3,"role":"tool","tool_results":[{"call_id":"call_p","name":"get_time","text":"PARENT-RESULT"}]}`)
	ev("tool_result", `{"call_id":"call_p","name":"get_time","text":"PARENT-RESULT"}`)
	out := b.String()
	for _, s := range []string{"PARENT-QUESTION", "PARENT-REPLY", "get_time", "PARENT-RESULT"} {
		if strings.Contains(out, s) {
			t.Errorf("the child's transcript shows the parent's %q:\n%s", s, out)
		}
	}
	for _, s := range []string{"handle the tick", "Tick handled."} {
		if !strings.Contains(out, s) {
			t.Errorf("the child's transcript lacks its own %q:\n%s", s, out)
		}
	}
}

// The README's tour runs without an API key on the
// script examples/scripted/tour.json and the get-time example tool
// server; this plays what the tour types into "rap chat".
func TestReadmeTourScript(t *testing.T) {
	m, err := scripted.Load(filepath.Join("..", "examples", "scripted", "tour.json"))
	if err != nil {
		t.Fatal(err)
	}
	rt := startTestRuntime(t, m, startGettime(t, nil))
	out, errOut, err := runChatFor(t, Options{Server: rt.URL, Wait: time.Minute}, "What time is it in Tokyo?\nwatch the clock tick\n")
	if err != nil {
		t.Fatalf("chat: %v\nstderr: %s", err, errOut)
	}
	wantLines(t, out,
		"  ← get_time_in_zone: ",
		"assistant: In Tokyo it is ",
		"  ← subscribe_clock (subscription): Subscribed",
		"assistant: Subscribed: each tick is handled in a child thread.",
		"child thread ",
		"close_thread(",
		"assistant: A child thread reports that the clock ticked.")
	if strings.Contains(out, "no turn of the script matches") {
		t.Errorf("the script has no answer for a step of the tour:\n%s", out)
	}
}
