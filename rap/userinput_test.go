package rap_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/gorap/gorap/rap"
)

func intp(n int) *int { return &n }

// signupFields is a form with one field of each type.
var signupFields = []rap.InputField{
	{Name: "email", Title: "Email", Type: rap.InputString, Required: true, Format: rap.FormatEmail},
	{Name: "nick", Type: rap.InputString, MinLength: intp(2), MaxLength: intp(8), Default: json.RawMessage(`"bob"`)},
	{Name: "age", Type: rap.InputInteger},
	{Name: "ratio", Type: rap.InputNumber},
	{Name: "news", Type: rap.InputBoolean},
	{Name: "plan", Type: rap.InputEnum, Options: []string{"free", "pro"}, Required: true},
}

// inputTool asks for the signup form when its invocation lists the
// user_input extension, and reports the answer (or the error) as its result.
func inputTool(s *rap.Server) {
	rap.AddTool(s, &rap.Tool{Name: "signup", Description: "Asks for details."},
		func(ctx context.Context, c *rap.Call, in struct{}) (*rap.Reply, error) {
			a, err := c.AskInput(ctx, "Your details", signupFields, 0)
			if errors.Is(err, rap.ErrInputUnsupported) {
				return rap.Text("unsupported"), nil
			}
			if err != nil {
				return nil, err
			}
			if a.Dismissed {
				return rap.Text("dismissed"), nil
			}
			b, _ := json.Marshal(a.Values)
			return rap.Text(string(b)), nil
		})
}

// AskInput sends a user_input with the fields and a keyed response_url on
// this server; the runtime's answer there is checked against the fields
// (each problem names the field) and the handler gets the values.
func TestAskInputRoundTrip(t *testing.T) {
	sink := newSDKSink(t)
	_, hs := newSDKServer(t, nil, inputTool)
	inv := withExtensions(t, sdkInvocation("signup", "in_1", "thread_i", sink.URL(), nil), rap.ExtensionUserInput)
	if status, _, _ := sdkPost(t, hs.URL, inv); status != 200 {
		t.Fatal("refused")
	}
	var ui *rap.UserInput
	sink.waitFor("in_1", "a user_input", func(msgs []rap.Callback) bool {
		for _, m := range msgs {
			if u, ok := m.(*rap.UserInput); ok {
				ui = u
				return true
			}
		}
		return false
	})
	if ui.Prompt != "Your details" || len(ui.Fields) != len(signupFields) || ui.Fields[1].Default == nil {
		t.Errorf("user_input %+v", ui)
	}
	u, err := url.Parse(ui.ResponseURL)
	if err != nil || u.Path != rap.UserInputResponsePath || u.Query().Get("key") == "" {
		t.Fatalf("response_url %q, want %s with a key", ui.ResponseURL, rap.UserInputResponsePath)
	}
	for _, tc := range []struct {
		name, url, body string
		want            int
		say             string
	}{
		{"missing required", ui.ResponseURL, `{"id":"in_1","values":{"plan":"pro"}}`, 400, "values.email: is required"},
		{"wrong type", ui.ResponseURL, `{"id":"in_1","values":{"email":"a@b.example","plan":"pro","age":"ten"}}`, 400, "values.age: must be a number"},
		{"not whole", ui.ResponseURL, `{"id":"in_1","values":{"email":"a@b.example","plan":"pro","age":1.5}}`, 400, "values.age: must be a whole number"},
		{"bad email", ui.ResponseURL, `{"id":"in_1","values":{"email":"nope","plan":"pro"}}`, 400, "values.email"},
		{"too short", ui.ResponseURL, `{"id":"in_1","values":{"email":"a@b.example","plan":"pro","nick":"x"}}`, 400, "values.nick: is 1 characters"},
		{"not an option", ui.ResponseURL, `{"id":"in_1","values":{"email":"a@b.example","plan":"gold"}}`, 400, "values.plan"},
		{"unknown field", ui.ResponseURL, `{"id":"in_1","values":{"email":"a@b.example","plan":"pro","x":1}}`, 400, "values.x: the form has no such field"},
		{"dismissed with values", ui.ResponseURL, `{"id":"in_1","dismissed":true,"values":{"plan":"pro"}}`, 400, "values"},
		{"no key", strings.Split(ui.ResponseURL, "?")[0], `{"id":"in_1","dismissed":true}`, 401, "response_url"},
		{"unknown id", ui.ResponseURL, `{"id":"in_9","dismissed":true}`, 400, "no user input is pending"},
	} {
		if status, body, _ := sdkPost(t, tc.url, []byte(tc.body)); status != tc.want || !strings.Contains(body, tc.say) {
			t.Errorf("%s: answered %d %q, want %d mentioning %q", tc.name, status, body, tc.want, tc.say)
		}
	}
	answer := `{"id":"in_1","values":{"email":"a@b.example","plan":"pro","age":30,"news":true}}`
	if status, body, _ := sdkPost(t, ui.ResponseURL, []byte(answer)); status != 200 {
		t.Fatalf("valid response answered %d %q", status, body)
	}
	if res := sink.result("in_1"); res.Text != `{"age":30,"email":"a@b.example","news":true,"plan":"pro"}` {
		t.Errorf("result %q", res.Text)
	}
	if status, _, _ := sdkPost(t, ui.ResponseURL, []byte(answer)); status != 400 {
		t.Errorf("a replayed answer was accepted (%d)", status)
	}
}

// A dismissal reaches the handler as Dismissed; an invocation without
// the extension makes AskInput fail with ErrInputUnsupported, sending
// nothing.
func TestAskInputDismissedAndUnsupported(t *testing.T) {
	sink := newSDKSink(t)
	_, hs := newSDKServer(t, nil, inputTool)
	sdkPost(t, hs.URL, withExtensions(t, sdkInvocation("signup", "in_2", "thread_i", sink.URL(), nil), "other", rap.ExtensionUserInput))
	var ui *rap.UserInput
	sink.waitFor("in_2", "a user_input", func(msgs []rap.Callback) bool {
		for _, m := range msgs {
			if u, ok := m.(*rap.UserInput); ok {
				ui = u
				return true
			}
		}
		return false
	})
	if status, body, _ := sdkPost(t, ui.ResponseURL, []byte(`{"id":"in_2","dismissed":true}`)); status != 200 {
		t.Fatalf("dismissal answered %d %q", status, body)
	}
	if res := sink.result("in_2"); res.Text != "dismissed" {
		t.Errorf("result %q, want dismissed", res.Text)
	}
	sdkPost(t, hs.URL, sdkInvocation("signup", "in_3", "thread_i", sink.URL(), nil))
	if res := sink.result("in_3"); res.Text != "unsupported" {
		t.Errorf("result %q, want unsupported", res.Text)
	}
	if got := sink.forID("in_3"); len(got) != 1 {
		t.Errorf("without the extension, messages were sent: %s", sdkDescribe(got))
	}
}

func withExtensions(t *testing.T, inv []byte, ext ...string) []byte {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(inv, &m); err != nil {
		t.Fatal(err)
	}
	m["extensions"] = ext
	b, _ := json.Marshal(m)
	return b
}

// Invocations carry extensions through both decoders, and a bad one is an
// error naming it.
func TestInvocationExtensions(t *testing.T) {
	for _, body := range []string{
		`{"operation":"o","arguments":{},"id":"1","callback_url":"u","group_id":"g","extensions":["user_input","x"]}`,
		`{"operation":"o","arguments":{},"id":"1","callback_url":"u","group_id":"g","extensions":["user\u005finput","x"]}`,
	} {
		inv, err := rap.DecodeInvocation([]byte(body))
		if err != nil || !inv.HasExtension(rap.ExtensionUserInput) || len(inv.Extensions) != 2 {
			t.Errorf("%s: %+v %v", body, inv, err)
		}
	}
	_, err := rap.DecodeInvocation([]byte(`{"operation":"o","arguments":{},"id":"1","callback_url":"u","group_id":"g","extensions":[1]}`))
	if err == nil || !strings.Contains(err.Error(), "extensions[0]") {
		t.Errorf("error %v, want one naming extensions[0]", err)
	}
}

// DecodeCallback checks a user_input's fields and names the bad one.
func TestDecodeUserInput(t *testing.T) {
	base := `{"type":"user_input","group_id":"g","id":"c","prompt":"p","response_url":"http://x/r","fields":%s}`
	ok := `[{"name":"a","type":"string","required":true,"min_length":1,"format":"date","default":"2024-01-02"},{"name":"b","type":"enum","options":["x","y"]},{"name":"n","type":"number","minimum":0,"maximum":1.5}]`
	m, err := rap.DecodeCallback([]byte(fmt.Sprintf(base, ok)))
	if err != nil {
		t.Fatal(err)
	}
	ui := m.(*rap.UserInput)
	if len(ui.Fields) != 3 || !ui.Fields[0].Required || *ui.Fields[0].MinLength != 1 || *ui.Fields[2].Maximum != 1.5 {
		t.Errorf("decoded %+v", ui.Fields)
	}
	round, _ := json.Marshal(ui)
	if again, err := rap.DecodeCallback(round); err != nil || len(again.(*rap.UserInput).Fields) != 3 {
		t.Errorf("round trip: %v", err)
	}
	for fields, want := range map[string]string{
		`[]`:                               "fields: must contain at least one field",
		`[{"type":"string"}]`:              "fields[0].name: missing",
		`[{"name":"a b","type":"string"}]`: "fields[0].name",
		`[{"name":"a","type":"date"}]`:     "fields[0].type: unknown field type",
		`[{"name":"a","type":"enum"}]`:     "fields[0].options",
		`[{"name":"a","type":"string"},{"name":"a","type":"string"}]`:  "fields[1].name",
		`[{"name":"a","type":"integer","default":"x"}]`:                "fields[0].default: must be a number",
		`[{"name":"a","type":"string","format":"phone"}]`:              "fields[0].format",
		`[{"name":"a","type":"boolean","min_length":1}]`:               "fields[0].type",
		`[{"name":"a","type":"string","min_length":3,"max_length":2}]`: "fields[0].min_length",
		`[{"name":"a","type":"number","minimum":"0"}]`:                 "fields[0].minimum: must be a number",
		`{"name":"a"}`: "fields: must be an array",
	} {
		_, err := rap.DecodeCallback([]byte(fmt.Sprintf(base, fields)))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want one containing %q", fields, err, want)
		}
	}
}
