package api

import (
	"encoding/json"
	"reflect"
	"testing"
)

// Every event type decodes to its own payload type; an unknown type stays
// raw, so that an older client keeps working with a newer runtime.
func TestDecodeEvent(t *testing.T) {
	cases := map[string]any{
		EventTextDelta: &TextDelta{}, EventMessage: &Message{}, EventToolCall: &ToolCallEvent{},
		EventToolResult: &ToolResultEvent{}, EventError: &Error{}, EventUsage: &Usage{}, EventStatus: &Status{},
		EventView: &View{}, EventToolsets: &Toolsets{}, EventOAuth: &OAuth{}, EventUserChoice: &UserChoice{},
		EventChoiceAnswered: &ChoiceAnswered{}, EventThreadSpawned: &ThreadSpawned{}, EventThreadClosed: &ThreadClosed{},
		EventThreadUpdated: &Thread{}, EventThread: &ThreadInfo{}, EventReset: &Reset{}, EventReplayDone: &ReplayDone{},
	}
	for typ, want := range cases {
		got, err := DecodeEvent(typ, []byte(`{}`))
		if err != nil {
			t.Fatalf("%s: %v", typ, err)
		}
		if reflect.TypeOf(got) != reflect.TypeOf(want) {
			t.Errorf("%s decodes to %T, want %T", typ, got, want)
		}
	}
	got, err := DecodeEvent("later_kind", []byte(`[1]`))
	if raw, ok := got.(json.RawMessage); err != nil || !ok || string(raw) != `[1]` {
		t.Errorf("unknown type: %v %v", got, err)
	}
	if _, err := DecodeEvent(EventStatus, []byte(`{"state":1}`)); err == nil {
		t.Error("a payload of the wrong shape decoded")
	}
	d, _ := DecodeEvent(EventTextDelta, []byte(`{"text":"hi"}`))
	if d.(*TextDelta).Text != "hi" {
		t.Errorf("text_delta = %+v", d)
	}
}
