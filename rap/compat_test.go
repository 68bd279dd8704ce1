package rap_test

import (
	"errors"
	"reflect"
	"testing"

	"github.com/gorap/gorap/rap"
)

// Callbacks the reference runtime (crates/rap-protocol)
// accepts and no MUST forbids decode here too.
func TestDecodeAcceptsWhatTheReferenceAccepts(t *testing.T) {
	tests := []struct {
		name, in string
		want     rap.Callback
	}{
		// RAP RE-1 asks for text or content; the reference takes neither as
		// an empty result.
		{"tool_result with neither text nor content", `{"type":"tool_result","group_id":"g","id":"i"}`,
			&rap.ToolResult{GroupID: "g", ID: "i"}},
		{"tool_result with null text and null content", `{"type":"tool_result","group_id":"g","id":"i","text":null,"content":null}`,
			&rap.ToolResult{GroupID: "g", ID: "i"}},
		{"tool_result with an empty content list only", `{"type":"tool_result","group_id":"g","id":"i","content":[],"subscription":true}`,
			&rap.ToolResult{GroupID: "g", ID: "i", Subscription: true}},
		// RAP UC-1: default absent is 0.
		{"user_choice without default", `{"type":"user_choice","group_id":"g","id":"i","prompt":"p","choices":["a","b"],"response_url":"https://r"}`,
			&rap.UserChoice{GroupID: "g", ID: "i", Prompt: "p", Choices: []string{"a", "b"}, ResponseURL: "https://r"}},
		{"user_choice with null default", `{"type":"user_choice","group_id":"g","id":"i","prompt":"p","choices":["a"],"default":null,"response_url":"https://r"}`,
			&rap.UserChoice{GroupID: "g", ID: "i", Prompt: "p", Choices: []string{"a"}, ResponseURL: "https://r"}},
		// RAP VU-1: the runtime never interprets content; the reference takes any JSON value.
		{"view_update with array content", `{"type":"view_update","group_id":"g","view_type":"v","content":[1, 2]}`,
			&rap.ViewUpdate{GroupID: "g", ViewType: "v", Content: []byte(`[1,2]`)}},
		{"view_update with string content", `{"type":"view_update","group_id":"g","view_type":"v","content":"x"}`,
			&rap.ViewUpdate{GroupID: "g", ViewType: "v", Content: []byte(`"x"`)}},
		{"view_update with null content", `{"type":"view_update","group_id":"g","view_type":"v","content":null}`,
			&rap.ViewUpdate{GroupID: "g", ViewType: "v", Content: []byte(`null`)}},
		{"view_update with an empty view_type", `{"type":"view_update","group_id":"g","view_type":"","content":{}}`,
			&rap.ViewUpdate{GroupID: "g", Content: []byte(`{}`)}},
		// The gorap event_id extension is read when present.
		{"subscription_event with event_id", `{"type":"subscription_event","group_id":"g","tool_call_id":"c","text":"t","event_id":"e1"}`,
			&rap.SubscriptionEvent{GroupID: "g", ToolCallID: "c", Text: "t", EventID: "e1"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := rap.DecodeCallback([]byte(tc.in))
			if err != nil {
				t.Fatalf("refused: %v", err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("decoded %#v, want %#v", got, tc.want)
			}
		})
	}
}

// What gorap still refuses although the reference's serde
// types accept it, each for the reason docs/compatibility.md gives.
func TestDecodeStillRefuses(t *testing.T) {
	tests := []struct{ name, in, field string }{
		// An empty id routes to no thread or call (RAP RE-5, TR-5).
		{"empty group_id", `{"type":"tool_result","group_id":"","id":"i","text":"t"}`, "group_id"},
		{"empty id", `{"type":"tool_result","group_id":"g","id":"","text":"t"}`, "id"},
		{"empty tool_call_id", `{"type":"subscription_event","group_id":"g","tool_call_id":"","text":"t"}`, "tool_call_id"},
		// Nothing to show the user (RAP OA-1).
		{"empty auth_url", `{"type":"oauth","group_id":"g","id":"i","auth_url":""}`, "auth_url"},
		// Nowhere to send the answer (RAP UC-2).
		{"empty response_url", `{"type":"user_choice","group_id":"g","id":"i","prompt":"p","choices":["a"],"response_url":""}`, "response_url"},
		// Nothing the user could pick, or a dismissal that picks nothing (RAP UC-1).
		{"no choices", `{"type":"user_choice","group_id":"g","id":"i","prompt":"p","choices":[],"response_url":"u"}`, "choices"},
		{"default out of range", `{"type":"user_choice","group_id":"g","id":"i","prompt":"p","choices":["a"],"default":3,"response_url":"u"}`, "default"},
		// An image without bytes or type would make the provider refuse the turn (RAP RE-2).
		{"image without data", `{"type":"tool_result","group_id":"g","id":"i","content":[{"type":"image","data":"","mediaType":"image/png"}]}`, "content[0].data"},
		{"image without mediaType", `{"type":"tool_result","group_id":"g","id":"i","content":[{"type":"image","data":"AA==","mediaType":""}]}`, "content[0].mediaType"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := rap.DecodeCallback([]byte(tc.in))
			var fe *rap.FieldError
			if !errors.As(err, &fe) || fe.Field != tc.field {
				t.Fatalf("error %v, want one naming %q", err, tc.field)
			}
		})
	}
}
