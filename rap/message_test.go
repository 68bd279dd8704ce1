package rap_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/gorap/gorap/rap"
)

// mustMarshal encodes v or fails the test.
func mustMarshal(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("json.Marshal(%#v): %v", v, err)
	}
	return string(b)
}

// RAP IN-1: every invocation field decodes, and encoding writes exactly the
// members that are present (optional ones are omitted when absent).
func TestInvocationRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want *rap.Invocation
		enc  string
	}{
		{
			name: "all fields",
			in: `{"operation":"get_pull_request","arguments":{ "owner": "acme", "number": 42 },"id":"call_1","call_id":"c-9",
				"callback_url":"https://runtime.example/cb/tok","group_id":"thread_b","thread_ancestors":["thread_root","thread_a"],"user_id":"u42"}`,
			want: &rap.Invocation{
				Operation: "get_pull_request", Arguments: json.RawMessage(`{"owner":"acme","number":42}`), ID: "call_1", CallID: "c-9",
				CallbackURL: "https://runtime.example/cb/tok", GroupID: "thread_b", ThreadAncestors: []string{"thread_root", "thread_a"}, UserID: "u42",
			},
			enc: `{"operation":"get_pull_request","arguments":{"owner":"acme","number":42},"id":"call_1","call_id":"c-9","callback_url":"https://runtime.example/cb/tok","group_id":"thread_b","thread_ancestors":["thread_root","thread_a"],"user_id":"u42"}`,
		},
		{
			name: "root thread, optional fields null or absent",
			in:   `{"operation":"now","arguments":{},"id":"call_2","call_id":null,"callback_url":"https://r/cb","group_id":"g","user_id":null}`,
			want: &rap.Invocation{Operation: "now", Arguments: json.RawMessage(`{}`), ID: "call_2", CallbackURL: "https://r/cb", GroupID: "g"},
			enc:  `{"operation":"now","arguments":{},"id":"call_2","callback_url":"https://r/cb","group_id":"g"}`,
		},
		{
			name: "empty thread_ancestors means root",
			in:   `{"operation":"now","arguments":{},"id":"i","callback_url":"u","group_id":"g","thread_ancestors":[]}`,
			want: &rap.Invocation{Operation: "now", Arguments: json.RawMessage(`{}`), ID: "i", CallbackURL: "u", GroupID: "g"},
			enc:  `{"operation":"now","arguments":{},"id":"i","callback_url":"u","group_id":"g"}`,
		},
		{
			name: "unknown members are ignored",
			in:   `{"operation":"now","arguments":{},"id":"i","callback_url":"u","group_id":"g","future_field":[1,2]}`,
			want: &rap.Invocation{Operation: "now", Arguments: json.RawMessage(`{}`), ID: "i", CallbackURL: "u", GroupID: "g"},
			enc:  `{"operation":"now","arguments":{},"id":"i","callback_url":"u","group_id":"g"}`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := rap.DecodeInvocation([]byte(tc.in))
			if err != nil {
				t.Fatalf("DecodeInvocation: %v", err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("decoded\n %#v\nwant\n %#v", got, tc.want)
			}
			if enc := mustMarshal(t, got); enc != tc.enc {
				t.Fatalf("encoded\n %s\nwant\n %s", enc, tc.enc)
			}
			again, err := rap.DecodeInvocation([]byte(tc.enc))
			if err != nil || !reflect.DeepEqual(again, tc.want) {
				t.Fatalf("re-decoding the encoding: %v, %#v", err, again)
			}
		})
	}
}

// RAP IN-1: an invocation built without arguments still sends the required
// "arguments" object.
func TestInvocationEncodesMissingArgumentsAsEmptyObject(t *testing.T) {
	enc := mustMarshal(t, rap.Invocation{Operation: "now", ID: "i", CallbackURL: "u", GroupID: "g"})
	want := `{"operation":"now","arguments":{},"id":"i","callback_url":"u","group_id":"g"}`
	if enc != want {
		t.Fatalf("got %s, want %s", enc, want)
	}
}

// fieldErr asserts that err is a *rap.FieldError for field whose message
// contains every one of substrings.
func fieldErr(t *testing.T, err error, field string, substrings ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want one naming %q", field)
	}
	var fe *rap.FieldError
	if !errors.As(err, &fe) {
		t.Fatalf("error %v (%T) is not a *rap.FieldError", err, err)
	}
	if fe.Field != field {
		t.Fatalf("error names field %q, want %q (error: %v)", fe.Field, field, err)
	}
	if !strings.HasPrefix(err.Error(), field+": ") && field != "" {
		t.Fatalf("error %q does not start with the field name %q", err, field)
	}
	for _, s := range substrings {
		if !strings.Contains(err.Error(), s) {
			t.Fatalf("error %q does not contain %q", err, s)
		}
	}
}

const validInvocation = `{"operation":"op","arguments":{"a":1},"id":"call_1","call_id":"c","callback_url":"https://r/cb","group_id":"g","thread_ancestors":["root"],"user_id":"u"}`

// withMember returns the JSON object doc with member key set to raw, or
// removed when raw is "".
func withMember(t *testing.T, doc, key, raw string) []byte {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(doc), &m); err != nil {
		t.Fatal(err)
	}
	if raw == "" {
		delete(m, key)
	} else {
		m[key] = json.RawMessage(raw)
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// RAP IN-1: each missing required field, and each member of the wrong JSON
// type, is an error naming the field.
func TestDecodeInvocationErrors(t *testing.T) {
	for _, f := range []string{"operation", "arguments", "id", "callback_url", "group_id"} {
		t.Run("missing "+f, func(t *testing.T) {
			_, err := rap.DecodeInvocation(withMember(t, validInvocation, f, ""))
			fieldErr(t, err, f, "missing required field")
		})
		t.Run("null "+f, func(t *testing.T) {
			_, err := rap.DecodeInvocation(withMember(t, validInvocation, f, "null"))
			fieldErr(t, err, f, "missing required field")
		})
	}
	for _, f := range []string{"operation", "id", "callback_url", "group_id"} {
		t.Run("empty "+f, func(t *testing.T) {
			_, err := rap.DecodeInvocation(withMember(t, validInvocation, f, `""`))
			fieldErr(t, err, f, "must not be empty")
		})
	}
	wrong := []struct {
		field, raw, want string
	}{
		{"operation", `42`, "must be a string, got number"},
		{"arguments", `"{}"`, "must be a JSON object, got string"},
		{"arguments", `[1]`, "must be a JSON object, got array"},
		{"id", `true`, "must be a string, got boolean"},
		{"call_id", `7`, "must be a string, got number"},
		{"callback_url", `{}`, "must be a string, got object"},
		{"group_id", `["g"]`, "must be a string, got array"},
		{"thread_ancestors", `"root"`, "must be an array of strings, got string"},
		{"user_id", `false`, "must be a string, got boolean"},
	}
	for _, w := range wrong {
		t.Run("wrong type "+w.field+" "+w.raw, func(t *testing.T) {
			_, err := rap.DecodeInvocation(withMember(t, validInvocation, w.field, w.raw))
			fieldErr(t, err, w.field, w.want)
		})
	}
	// RAP TR-1: messages are UTF-8.
	t.Run("invalid UTF-8", func(t *testing.T) {
		_, err := rap.DecodeInvocation([]byte("{\"operation\":\"op\",\"arguments\":{},\"id\":\"call_\xff\",\"callback_url\":\"u\",\"group_id\":\"g\"}"))
		fieldErr(t, err, "", "not valid UTF-8")
		_, err = rap.DecodeCallback([]byte("{\"type\":\"tool_result\",\"group_id\":\"g\xc3\",\"id\":\"i\",\"text\":\"t\"}"))
		fieldErr(t, err, "", "not valid UTF-8")
	})
	t.Run("thread_ancestors item", func(t *testing.T) {
		_, err := rap.DecodeInvocation(withMember(t, validInvocation, "thread_ancestors", `["root",5]`))
		fieldErr(t, err, "thread_ancestors[1]", "must be a string, got number")
	})
	for _, body := range []string{``, `   `, `[]`, `"x"`, `null`, `{"operation":`, `{} {}`} {
		t.Run(fmt.Sprintf("not an object %q", body), func(t *testing.T) {
			_, err := rap.DecodeInvocation([]byte(body))
			fieldErr(t, err, "")
		})
	}
}

// RAP TR-5, RE-1, RE-2, RE-3, SU-2, OA-1, UC-1, VU-1: each callback type
// round-trips and its encoding is exactly the members that are present.
func TestCallbackRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want rap.Callback
		enc  string
	}{
		{
			name: "tool_result text",
			in:   `{"type":"tool_result","group_id":"g","id":"call_1","call_id":null,"text":"done"}`,
			want: &rap.ToolResult{GroupID: "g", ID: "call_1", Text: "done"},
			enc:  `{"type":"tool_result","group_id":"g","id":"call_1","text":"done"}`,
		},
		{
			name: "tool_result empty text is kept",
			in:   `{"type":"tool_result","group_id":"g","id":"call_1","text":""}`,
			want: &rap.ToolResult{GroupID: "g", ID: "call_1"},
			enc:  `{"type":"tool_result","group_id":"g","id":"call_1","text":""}`,
		},
		{
			name: "tool_result content, display_as, subscription, call_id",
			in: `{"type":"tool_result","group_id":"g","id":"call_1","call_id":"c","content":[{"type":"text","text":""},{"type":"image","data":"iVBORw==","mediaType":"image/png"}],
				"display_as":[{"type":"diff","content":{ "patch": "@@", "path": "a.go" }},{"type":"text","content":"short"},{"type":"hologram","content":[1, 2]}],"subscription":true}`,
			want: &rap.ToolResult{GroupID: "g", ID: "call_1", CallID: "c",
				Content:      []rap.ContentItem{rap.TextContent(""), rap.ImageContent("iVBORw==", "image/png")},
				DisplayAs:    []rap.DisplaySegment{rap.DiffSegment("a.go", "@@"), rap.TextSegment("short"), {Type: "hologram", Content: json.RawMessage(`[1,2]`)}},
				Subscription: true},
			enc: `{"type":"tool_result","group_id":"g","id":"call_1","call_id":"c","content":[{"type":"text","text":""},{"type":"image","data":"iVBORw==","mediaType":"image/png"}],"display_as":[{"type":"diff","content":{"patch":"@@","path":"a.go"}},{"type":"text","content":"short"},{"type":"hologram","content":[1,2]}],"subscription":true}`,
		},
		{
			name: "tool_result text and content",
			in:   `{"type":"tool_result","group_id":"g","id":"i","text":"fallback","content":[{"type":"text","text":"rich"}]}`,
			want: &rap.ToolResult{GroupID: "g", ID: "i", Text: "fallback", Content: []rap.ContentItem{rap.TextContent("rich")}},
			enc:  `{"type":"tool_result","group_id":"g","id":"i","content":[{"type":"text","text":"rich"}],"text":"fallback"}`,
		},
		{
			name: "subscription_event defaults",
			in:   `{"type":"subscription_event","group_id":"g","tool_call_id":"call_1","text":"{\"n\":1}"}`,
			want: &rap.SubscriptionEvent{GroupID: "g", ToolCallID: "call_1", Text: `{"n":1}`},
			enc:  `{"type":"subscription_event","group_id":"g","tool_call_id":"call_1","text":"{\"n\":1}"}`,
		},
		{
			name: "subscription_event flags",
			in:   `{"type":"subscription_event","group_id":"g","tool_call_id":"call_1","text":"","associative":true,"final":true}`,
			want: &rap.SubscriptionEvent{GroupID: "g", ToolCallID: "call_1", Associative: true, Final: true},
			enc:  `{"type":"subscription_event","group_id":"g","tool_call_id":"call_1","text":"","associative":true,"final":true}`,
		},
		{
			name: "oauth",
			in:   `{"type":"oauth","group_id":"g","id":"call_1","auth_url":"https://idp.example/authorize?x=1"}`,
			want: &rap.OAuth{GroupID: "g", ID: "call_1", AuthURL: "https://idp.example/authorize?x=1"},
			enc:  `{"type":"oauth","group_id":"g","id":"call_1","auth_url":"https://idp.example/authorize?x=1"}`,
		},
		{
			name: "oauth call_id",
			in:   `{"type":"oauth","group_id":"g","id":"call_1","call_id":"c","auth_url":"https://idp"}`,
			want: &rap.OAuth{GroupID: "g", ID: "call_1", CallID: "c", AuthURL: "https://idp"},
			enc:  `{"type":"oauth","group_id":"g","id":"call_1","call_id":"c","auth_url":"https://idp"}`,
		},
		{
			name: "user_choice",
			in:   `{"type":"user_choice","group_id":"g","id":"call_1","prompt":"Deploy?","choices":["yes","no"],"default":1,"response_url":"https://tool/choice/1"}`,
			want: &rap.UserChoice{GroupID: "g", ID: "call_1", Prompt: "Deploy?", Choices: []string{"yes", "no"}, Default: 1, ResponseURL: "https://tool/choice/1"},
			enc:  `{"type":"user_choice","group_id":"g","id":"call_1","prompt":"Deploy?","choices":["yes","no"],"default":1,"response_url":"https://tool/choice/1"}`,
		},
		{
			name: "user_choice default 0 and call_id",
			in:   `{"type":"user_choice","group_id":"g","id":"i","call_id":"c","prompt":"","choices":["only"],"default":0,"response_url":"u"}`,
			want: &rap.UserChoice{GroupID: "g", ID: "i", CallID: "c", Choices: []string{"only"}, ResponseURL: "u"},
			enc:  `{"type":"user_choice","group_id":"g","id":"i","call_id":"c","prompt":"","choices":["only"],"default":0,"response_url":"u"}`,
		},
		{
			name: "view_update",
			in:   `{"type":"view_update","group_id":"g","view_type":"diff","content":{ "files": [ "a" ] }}`,
			want: &rap.ViewUpdate{GroupID: "g", ViewType: "diff", Content: json.RawMessage(`{"files":["a"]}`)},
			enc:  `{"type":"view_update","group_id":"g","view_type":"diff","content":{"files":["a"]}}`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := rap.DecodeCallback([]byte(tc.in))
			if err != nil {
				t.Fatalf("DecodeCallback: %v", err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("decoded\n %#v\nwant\n %#v", got, tc.want)
			}
			if got.Thread() != "g" {
				t.Fatalf("Thread() = %q, want g (RAP TR-5: every callback carries group_id)", got.Thread())
			}
			if enc := mustMarshal(t, got); enc != tc.enc {
				t.Fatalf("encoded\n %s\nwant\n %s", enc, tc.enc)
			}
			var typ struct{ Type string }
			if err := json.Unmarshal([]byte(tc.enc), &typ); err != nil || typ.Type != string(got.MessageType()) {
				t.Fatalf("encoded type %q, MessageType() %q", typ.Type, got.MessageType())
			}
			again, err := rap.DecodeCallback([]byte(tc.enc))
			if err != nil || !reflect.DeepEqual(again, tc.want) {
				t.Fatalf("re-decoding the encoding: %v, %#v", err, again)
			}
		})
	}
}

// Each callback type's required fields, one missing at a time, and members of
// the wrong JSON type: the error names the field.
func TestDecodeCallbackErrors(t *testing.T) {
	valid := map[string]string{
		"tool_result":        `{"type":"tool_result","group_id":"g","id":"i","call_id":"c","text":"t","display_as":[{"type":"text","content":"x"}],"subscription":false}`,
		"subscription_event": `{"type":"subscription_event","group_id":"g","tool_call_id":"i","text":"t","associative":false,"final":false}`,
		"oauth":              `{"type":"oauth","group_id":"g","id":"i","call_id":"c","auth_url":"https://a"}`,
		"user_choice":        `{"type":"user_choice","group_id":"g","id":"i","call_id":"c","prompt":"p","choices":["a","b"],"default":0,"response_url":"https://r"}`,
		"view_update":        `{"type":"view_update","group_id":"g","view_type":"v","content":{}}`,
	}
	required := map[string][]string{
		"tool_result":        {"type", "group_id", "id"},                                      // RAP RE-1
		"subscription_event": {"type", "group_id", "tool_call_id", "text"},                    // RAP SU-2
		"oauth":              {"type", "group_id", "id", "auth_url"},                          // RAP OA-1
		"user_choice":        {"type", "group_id", "id", "prompt", "choices", "response_url"}, // RAP UC-1; default defaults to 0
		"view_update":        {"type", "group_id", "view_type", "content"},                    // RAP VU-1
	}
	for typ, fields := range required {
		for _, f := range fields {
			t.Run(typ+" missing "+f, func(t *testing.T) {
				_, err := rap.DecodeCallback(withMember(t, valid[typ], f, ""))
				fieldErr(t, err, f, "missing required field")
			})
		}
	}
	wrong := []struct {
		typ, field, raw, want string
	}{
		{"tool_result", "group_id", `1`, "must be a string, got number"},
		{"tool_result", "id", `{}`, "must be a string, got object"},
		{"tool_result", "call_id", `1`, "must be a string, got number"},
		{"tool_result", "text", `["a"]`, "must be a string, got array"},
		{"tool_result", "content", `"text"`, "must be an array, got string"},
		{"tool_result", "display_as", `{}`, "must be an array, got object"},
		{"tool_result", "subscription", `"true"`, "must be a boolean, got string"},
		{"subscription_event", "tool_call_id", `5`, "must be a string, got number"},
		{"subscription_event", "text", `{"a":1}`, "must be a string, got object"},
		{"subscription_event", "associative", `1`, "must be a boolean, got number"},
		{"subscription_event", "final", `"yes"`, "must be a boolean, got string"},
		{"oauth", "auth_url", `true`, "must be a string, got boolean"},
		{"user_choice", "prompt", `1`, "must be a string, got number"},
		{"user_choice", "choices", `"a"`, "must be an array of strings, got string"},
		{"user_choice", "default", `"0"`, "must be an integer, got string"},
		{"user_choice", "default", `0.5`, "must be an integer, got number"},
		{"user_choice", "response_url", `[]`, "must be a string, got array"},
		{"view_update", "view_type", `1`, "must be a string, got number"},
	}
	for _, w := range wrong {
		t.Run(w.typ+" wrong "+w.field+" "+w.raw, func(t *testing.T) {
			_, err := rap.DecodeCallback(withMember(t, valid[w.typ], w.field, w.raw))
			fieldErr(t, err, w.field, w.want)
		})
	}
	other := []struct {
		name, in, field, want string
	}{
		// RAP TR-5: exactly five message types.
		{"unknown type", `{"type":"tool_reslt","group_id":"g","id":"i","text":"t"}`, "type", `unknown message type "tool_reslt"`},
		{"unknown type checked before other fields", `{"type":"progress"}`, "type", "want one of tool_result, subscription_event, oauth, user_choice, view_update"},
		{"type not a string", `{"type":1,"group_id":"g"}`, "type", "must be a string, got number"},
		{"empty type", `{"type":"","group_id":"g"}`, "type", "must not be empty"},
		// RAP RE-2: content items.
		{"content item not an object", `{"type":"tool_result","group_id":"g","id":"i","content":["hi"]}`, "content[0]", "expected a JSON object, got string"},
		{"content item unknown type", `{"type":"tool_result","group_id":"g","id":"i","content":[{"type":"text","text":"a"},{"type":"audio","data":"x"}]}`, "content[1].type", `unknown content type "audio"`},
		{"content text item without text", `{"type":"tool_result","group_id":"g","id":"i","content":[{"type":"text"}]}`, "content[0].text", "missing required field"},
		{"content image without data", `{"type":"tool_result","group_id":"g","id":"i","content":[{"type":"image","mediaType":"image/png"}]}`, "content[0].data", "missing required field"},
		{"content image without mediaType", `{"type":"tool_result","group_id":"g","id":"i","content":[{"type":"image","data":"AA=="}]}`, "content[0].mediaType", "missing required field"},
		{"content image data wrong type", `{"type":"tool_result","group_id":"g","id":"i","content":[{"type":"image","data":5,"mediaType":"image/png"}]}`, "content[0].data", "must be a string, got number"},
		// RAP RE-3: display segments.
		{"segment without content", `{"type":"tool_result","group_id":"g","id":"i","text":"t","display_as":[{"type":"text"}]}`, "display_as[0].content", "missing required field"},
		{"segment without type", `{"type":"tool_result","group_id":"g","id":"i","text":"t","display_as":[{"content":"x"}]}`, "display_as[0].type", "missing required field"},
		{"text segment with object content", `{"type":"tool_result","group_id":"g","id":"i","text":"t","display_as":[{"type":"text","content":{}}]}`, "display_as[0].content", "must be a string for a text segment, got object"},
		{"diff segment with string content", `{"type":"tool_result","group_id":"g","id":"i","text":"t","display_as":[{"type":"text","content":"a"},{"type":"diff","content":"@@"}]}`, "display_as[1].content", "must be an object for a diff segment, got string"},
		{"image segment with array content", `{"type":"tool_result","group_id":"g","id":"i","text":"t","display_as":[{"type":"image","content":[]}]}`, "display_as[0].content", "must be an object for a image segment, got array"},
		// RAP UC-1: choices and default.
		{"no choices", `{"type":"user_choice","group_id":"g","id":"i","prompt":"p","choices":[],"default":0,"response_url":"u"}`, "choices", "at least one choice"},
		{"choice not a string", `{"type":"user_choice","group_id":"g","id":"i","prompt":"p","choices":["a",2],"default":0,"response_url":"u"}`, "choices[1]", "must be a string, got number"},
		{"default out of range", `{"type":"user_choice","group_id":"g","id":"i","prompt":"p","choices":["a","b"],"default":2,"response_url":"u"}`, "default", "index 2 is out of range for 2 choices"},
		{"default negative", `{"type":"user_choice","group_id":"g","id":"i","prompt":"p","choices":["a"],"default":-1,"response_url":"u"}`, "default", "index -1 is out of range"},
		{"not an object", `["tool_result"]`, "", "expected a JSON object, got array"},
		{"malformed", `{"type":"oauth",`, "", "malformed JSON"},
		{"empty body", ``, "", "empty body"},
	}
	for _, tc := range other {
		t.Run(tc.name, func(t *testing.T) {
			_, err := rap.DecodeCallback([]byte(tc.in))
			fieldErr(t, err, tc.field, tc.want)
		})
	}
}

// RAP TC-1, CA-1, MI-1, UC-2: the small request bodies decode strictly,
// round-trip, and name a missing or mistyped field.
func TestDecodeControlBodies(t *testing.T) {
	type decodeFunc func([]byte) (any, error)
	wrap := func(f any) decodeFunc {
		return func(b []byte) (any, error) {
			out := reflect.ValueOf(f).Call([]reflect.Value{reflect.ValueOf(b)})
			err, _ := out[1].Interface().(error)
			return out[0].Interface(), err
		}
	}
	tests := []struct {
		name   string
		decode decodeFunc
		in     string
		want   any
		fields []string
	}{
		{"close_thread (RAP TC-1)", wrap(rap.DecodeCloseThread), `{"thread_id":"thread_1"}`,
			&rap.CloseThreadRequest{ThreadID: "thread_1"}, []string{"thread_id"}},
		{"cancel_tool_call (RAP CA-1)", wrap(rap.DecodeCancelToolCall), `{"thread_id":"thread_1","tool_call_id":"call_1"}`,
			&rap.CancelToolCallRequest{ThreadID: "thread_1", ToolCallID: "call_1"}, []string{"thread_id", "tool_call_id"}},
		{"migrate (RAP MI-1)", wrap(rap.DecodeMigrate), `{"session_id":"thread_root","destination_url":"https://dest.example"}`,
			&rap.MigrateRequest{SessionID: "thread_root", DestinationURL: "https://dest.example"}, []string{"session_id", "destination_url"}},
		{"user choice response (RAP UC-2)", wrap(rap.DecodeUserChoiceResponse), `{"id":"call_1","selected":1}`,
			&rap.UserChoiceResponse{ID: "call_1", Selected: 1}, []string{"id", "selected"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.decode([]byte(tc.in))
			if err != nil {
				t.Fatalf("decode: %v", err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("decoded %#v, want %#v", got, tc.want)
			}
			if enc := mustMarshal(t, got); enc != tc.in {
				t.Fatalf("encoded %s, want %s", enc, tc.in)
			}
			for _, f := range tc.fields {
				_, err := tc.decode(withMember(t, tc.in, f, ""))
				fieldErr(t, err, f, "missing required field")
				_, err = tc.decode(withMember(t, tc.in, f, `{"x":1}`))
				fieldErr(t, err, f, "got object")
			}
			_, err = tc.decode([]byte(`[]`))
			fieldErr(t, err, "", "expected a JSON object")
		})
	}
	_, err := rap.DecodeUserChoiceResponse([]byte(`{"id":"i","selected":-1}`))
	fieldErr(t, err, "selected", "must not be negative")
	_, err = rap.DecodeCloseThread([]byte(`{"thread_id":""}`))
	fieldErr(t, err, "thread_id", "must not be empty")
}

// RAP RE-1, RE-2: content supersedes text for the model, and an image
// becomes a placeholder naming its media type, never its bytes.
func TestModelText(t *testing.T) {
	r := &rap.ToolResult{Text: "fallback"}
	if got := r.ModelText(); got != "fallback" {
		t.Fatalf("text only: %q", got)
	}
	r.Content = []rap.ContentItem{rap.TextContent("Here is the logo."), rap.ImageContent("iVBORw0KGgoSECRETBYTES", "image/png"), rap.TextContent("end")}
	got := r.ModelText()
	if strings.Contains(got, "fallback") || strings.Contains(got, "iVBORw0KGgoSECRETBYTES") {
		t.Fatalf("ModelText %q uses text or leaks image bytes", got)
	}
	for _, want := range []string{"Here is the logo.", "image/png", "end"} {
		if !strings.Contains(got, want) {
			t.Fatalf("ModelText %q lacks %q", got, want)
		}
	}
}

func ExampleDecodeInvocation() {
	body := []byte(`{
		"operation": "get_pull_request",
		"arguments": {"owner": "acme", "repo": "widgets", "number": 42},
		"id": "call_abc123",
		"call_id": null,
		"callback_url": "https://agent.example.com/callback/t0k3n",
		"group_id": "thread_xyz"
	}`)
	inv, err := rap.DecodeInvocation(body)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(inv.Operation, inv.ID, inv.GroupID, string(inv.Arguments))

	// A missing or mistyped field is named in the error.
	_, err = rap.DecodeInvocation([]byte(`{"operation":"get_pull_request","arguments":"owner=acme"}`))
	fmt.Println(err)
	// Output:
	// get_pull_request call_abc123 thread_xyz {"owner":"acme","repo":"widgets","number":42}
	// arguments: must be a JSON object, got string
}

func BenchmarkDecodeInvocation(b *testing.B) {
	body := []byte(validInvocation)
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if _, err := rap.DecodeInvocation(body); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeCallback(b *testing.B) {
	body := []byte(`{"type":"tool_result","group_id":"thread_xyz","id":"call_abc123","text":"Deployment completed. Instance i-0abc123 is running.","display_as":[{"type":"text","content":"Deployed i-0abc123"}]}`)
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if _, err := rap.DecodeCallback(body); err != nil {
			b.Fatal(err)
		}
	}
}
