package scripted

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorap/gorap/model"
)

type deltas []string

func (d *deltas) TextDelta(s string) { *d = append(*d, s) }

// converse plays a conversation: for each user input it runs a completion
// over the history so far and appends the reply, answering every tool call
// with results[name].
func converse(t *testing.T, m *Model, inputs []string, results map[string]string) []*model.Response {
	t.Helper()
	var msgs []model.Message
	var out []*model.Response
	for _, in := range inputs {
		msgs = append(msgs, model.Message{Role: model.RoleUser, Text: in})
		for {
			resp, err := m.Complete(context.Background(), model.Request{Messages: msgs}, nil)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, resp)
			msgs = append(msgs, model.Message{Role: model.RoleAssistant, Text: resp.Text, ToolCalls: resp.ToolCalls})
			if len(resp.ToolCalls) == 0 {
				break
			}
			um := model.Message{Role: model.RoleUser}
			for _, c := range resp.ToolCalls {
				um.ToolResults = append(um.ToolResults, model.ToolResult{CallID: c.ID, Text: results[c.Name]})
			}
			msgs = append(msgs, um)
		}
	}
	return out
}

func TestSequentialAndReactiveTurns(t *testing.T) {
	turns, err := Parse([]byte(`{"turns": [
		{"after_user": "time", "tool_calls": [{"name": "get_time", "arguments": {"tz": "UTC"}}]},
		{"when": {"last_result_contains": "UTC"}, "text": "It is {{last_result}}."},
		{"text": "You said: {{last_user}}", "repeat": true}
	]}`))
	if err != nil {
		t.Fatal(err)
	}
	m := New(turns)
	out := converse(t, m, []string{"hello", "what time is it?", "thanks", "bye"}, map[string]string{"get_time": "12:00 UTC"})
	var got []string
	for _, r := range out {
		s := r.Text
		for _, c := range r.ToolCalls {
			s += "call " + c.Name + string(c.Arguments)
		}
		got = append(got, s)
	}
	want := []string{"You said: hello", `call get_time{"tz": "UTC"}`, "It is 12:00 UTC.", "You said: thanks", "You said: bye"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("replies:\n%q\nwant\n%q", got, want)
	}
}

// Selection depends only on the conversation, so a new Model (a restarted
// runtime) continues where the old one was.
func TestSelectionIsAFunctionOfHistory(t *testing.T) {
	turns := []Turn{{Text: "one"}, {Text: "two"}, {Text: "three"}}
	msgs := []model.Message{{Role: model.RoleUser, Text: "a"}, {Role: model.RoleAssistant, Text: "one"}, {Role: model.RoleUser, Text: "b"}}
	r, err := New(turns).Complete(context.Background(), model.Request{Messages: msgs}, nil)
	if err != nil || r.Text != "two" {
		t.Fatalf("%v %v", r, err)
	}
	msgs = append(msgs, model.Message{Role: model.RoleAssistant, Text: "two"}, model.Message{Role: model.RoleUser, Text: "c"},
		model.Message{Role: model.RoleAssistant, Text: "three"}, model.Message{Role: model.RoleUser, Text: "d"})
	r, _ = New(turns).Complete(context.Background(), model.Request{Messages: msgs}, nil)
	if !strings.Contains(r.Text, "no turn of the script matches") {
		t.Fatalf("after the script ends: %q", r.Text)
	}
}

func TestStreamsInDeltasAndIDsAreUnique(t *testing.T) {
	m := New([]Turn{{Text: "the quick brown fox jumps over the lazy dog", ToolCalls: []Call{{Name: "a"}, {Name: "b"}}, Repeat: true}})
	var d deltas
	r, err := m.Complete(context.Background(), model.Request{Messages: []model.Message{{Role: model.RoleUser, Text: "x"}}}, &d)
	if err != nil {
		t.Fatal(err)
	}
	if len(d) < 2 || strings.Join(d, "") != r.Text {
		t.Fatalf("deltas %q do not rebuild %q", d, r.Text)
	}
	if r.ToolCalls[0].ID == r.ToolCalls[1].ID || string(r.ToolCalls[0].Arguments) != "{}" || r.StopReason != "tool_use" {
		t.Fatalf("calls = %+v", r.ToolCalls)
	}
	if m.Completions() != 1 {
		t.Fatalf("completions = %d", m.Completions())
	}
}

func TestErrorTurn(t *testing.T) {
	m := New([]Turn{{Error: "overloaded"}})
	if _, err := m.Complete(context.Background(), model.Request{}, nil); err == nil || !strings.Contains(err.Error(), "overloaded") {
		t.Fatalf("err = %v", err)
	}
}

func TestLoadAndName(t *testing.T) {
	path := filepath.Join(t.TempDir(), "demo.json")
	os.WriteFile(path, []byte(`[{"text": "hi", "repeat": true}]`), 0o644)
	m, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if m.Name() != "scripted:demo.json (scripted test model — not a real LLM)" {
		t.Fatalf("name = %q", m.Name())
	}
	if _, err := Load(filepath.Join(t.TempDir(), "missing.json")); err == nil {
		t.Fatal("missing file loaded")
	}
	if m.ContextWindow() != 0 {
		t.Errorf("a script without context_window declares %d tokens", m.ContextWindow())
	}
}

// A script's "context_window" is the window the model declares
// (model.WindowReporter); a negative or non-numeric one is refused with an
// error naming it.
func TestContextWindow(t *testing.T) {
	path := filepath.Join(t.TempDir(), "small.json")
	if err := os.WriteFile(path, []byte(`{"context_window": 8000, "turns": [{"text": "hi", "repeat": true}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	m, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if n, known := model.ProviderContextWindow(m); n != 8000 || !known {
		t.Errorf("declared window: %d, %v; want 8000", n, known)
	}
	for _, bad := range []string{`-1`, `"8k"`, `8000.5`} {
		if err := os.WriteFile(path, []byte(`{"context_window": `+bad+`, "turns": [{"text": "x"}]}`), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := Load(path); err == nil || !strings.Contains(err.Error(), "context_window") {
			t.Errorf("context_window %s: err = %v; want one naming context_window", bad, err)
		}
	}
	n := New([]Turn{{Text: "x"}})
	n.SetContextWindow(4000)
	if n.ContextWindow() != 4000 {
		t.Errorf("SetContextWindow(4000): %d", n.ContextWindow())
	}
}

func TestParseErrors(t *testing.T) {
	cases := map[string]string{
		`{"turns": []}`:                     "no turns",
		`{"turns": [{"txt": "x"}]}`:         "unknown field",
		`{"turns": [{}]}`:                   "turns[0]: needs text",
		`{"turns": [{"tool_calls": [{}]}]}`: "turns[0].tool_calls[0].name",
		`{"turns": [{"text": "x", "when": {"last_input": "bot"}}]}`: "last_input",
		`nonsense`: "not a valid script",
	}
	for in, want := range cases {
		_, err := Parse([]byte(in))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse(%s) = %v; want an error mentioning %q", in, err, want)
		}
	}
}

// The benchmark mode: a script of repeat turns answers without replaying
// the history.
func BenchmarkRepeatTurn(b *testing.B) {
	m := New([]Turn{{Text: "ok", Repeat: true}})
	var msgs []model.Message
	for i := 0; i < 200; i++ {
		msgs = append(msgs, model.Message{Role: model.RoleUser, Text: "x"}, model.Message{Role: model.RoleAssistant, Text: "ok"})
	}
	req := model.Request{Messages: msgs}
	for b.Loop() {
		if _, err := m.Complete(context.Background(), req, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// FuzzParse: no script panics the parser, and a script that parses plays
// without panicking.
func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"turns": [{"after_user": "a", "text": "x {{last_result}}", "tool_calls": [{"name": "t", "arguments": {"k": 1}}]}, {"text": "y", "repeat": true}]}`))
	f.Add([]byte(`[{"when": {"last_input": "tool_result", "last_result_contains": "z"}, "error": "e"}]`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		turns, err := Parse(data)
		if err != nil {
			return
		}
		m := New(turns)
		msgs := []model.Message{{Role: model.RoleUser, Text: "a"}, {Role: model.RoleAssistant, Text: "x"},
			{Role: model.RoleUser, ToolResults: []model.ToolResult{{CallID: "c", Text: "z"}}}}
		m.Complete(context.Background(), model.Request{Messages: msgs}, &deltas{})
	})
}

// "{{thread_id}}" and "{{thread_stack}}" in arguments take the thread the
// runtime names in the system prompt; assistant messages made only of
// injected event calls are not replayed as script turns.
func TestThreadPlaceholdersAndInjectedCalls(t *testing.T) {
	m := New([]Turn{
		{AfterUser: "go", ToolCalls: []Call{{Name: "close_thread", Arguments: []byte(`{"thread_id": "{{thread_id}}", "stack": "{{thread_stack}}"}`)}}},
		{Text: "second"},
	})
	req := model.Request{System: "Be brief.\n\n[runtime] You are thread c1. Your thread stack, root first: [\"r\",\"c1\"].",
		Messages: []model.Message{{Role: model.RoleUser, Text: "go"}}}
	resp, err := m.Complete(context.Background(), req, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(resp.ToolCalls[0].Arguments); got != `{"thread_id": "c1", "stack": ["r","c1"]}` {
		t.Fatalf("arguments = %s", got)
	}
	// "{{call_id:TOOL}}" is the id of the latest call to TOOL.
	m = New([]Turn{{ToolCalls: []Call{{Name: "cancel_subscription", Arguments: []byte(`{"tool_call_id": "{{call_id:watch}}", "none": "{{call_id:nope}}"}`)}}, Repeat: true}})
	req.Messages = []model.Message{
		{Role: model.RoleAssistant, ToolCalls: []model.ToolCall{{ID: "w1", Name: "watch"}}},
		{Role: model.RoleUser, ToolResults: []model.ToolResult{{CallID: "w1", Text: "subscribed"}}},
		{Role: model.RoleAssistant, ToolCalls: []model.ToolCall{{ID: "w2", Name: "watch"}}},
		{Role: model.RoleUser, ToolResults: []model.ToolResult{{CallID: "w2", Text: "subscribed"}}, Text: "stop"},
	}
	resp, err = m.Complete(context.Background(), req, nil)
	if err != nil || len(resp.ToolCalls) != 1 || string(resp.ToolCalls[0].Arguments) != `{"tool_call_id": "w2", "none": ""}` {
		t.Fatalf("call_id placeholder: %+v %v", resp, err)
	}
	// An injected call in the history does not use up a turn.
	m = New([]Turn{{Text: "first"}, {Text: "second"}})
	req.Messages = []model.Message{
		{Role: model.RoleAssistant, ToolCalls: []model.ToolCall{{ID: "e1", Name: InjectedToolName, Arguments: []byte(`{}`)}}},
		{Role: model.RoleUser, ToolResults: []model.ToolResult{{CallID: "e1", Text: "event"}}},
	}
	resp, err = m.Complete(context.Background(), req, nil)
	if err != nil || resp.Text != "first" {
		t.Fatalf("reply %+v %v: the injected call used up a turn", resp, err)
	}
}

// The input a turn is matched against is the latest user text, the latest
// tool result, and which of the two came last (a message's text comes
// after its results).
func TestInputOf(t *testing.T) {
	res := func(texts ...string) []model.ToolResult {
		var out []model.ToolResult
		for _, s := range texts {
			out = append(out, model.ToolResult{CallID: "c", Text: s})
		}
		return out
	}
	cases := []struct {
		name string
		msgs []model.Message
		want input
	}{
		{"empty", nil, input{}},
		{"user only", []model.Message{{Role: model.RoleUser, Text: "hi"}}, input{lastUser: "hi", lastKind: "user"}},
		{"result after user", []model.Message{
			{Role: model.RoleUser, Text: "hi"}, {Role: model.RoleAssistant, Text: "x"},
			{Role: model.RoleUser, ToolResults: res("r1", "r2")}},
			input{lastUser: "hi", lastResult: "r2", lastKind: "tool_result"}},
		{"text after results in one message", []model.Message{
			{Role: model.RoleUser, Text: "later", ToolResults: res("r1")}},
			input{lastUser: "later", lastResult: "r1", lastKind: "user"}},
		{"older result, newer user", []model.Message{
			{Role: model.RoleUser, ToolResults: res("old")}, {Role: model.RoleAssistant},
			{Role: model.RoleUser, Text: "new"}, {Role: model.RoleAssistant},
			{Role: model.RoleUser, Text: "newest"}},
			input{lastUser: "newest", lastResult: "old", lastKind: "user"}},
	}
	for _, c := range cases {
		if got := inputOf(c.msgs); got != c.want {
			t.Errorf("%s: got %+v, want %+v", c.name, got, c.want)
		}
	}
}

// deltaRecorder records the text deltas of a completion.
type deltaRecorder struct {
	mu     sync.Mutex
	deltas []string
}

func (d *deltaRecorder) TextDelta(s string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.deltas = append(d.deltas, s)
}

// A script's stream_delay streams each reply a word at a time with the
// delay between words, and a completion whose context ends while it
// streams stops at once with the context's error.
func TestStreamDelay(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.json")
	if err := os.WriteFile(path, []byte(`{"stream_delay": "20ms", "turns": [{"text": "one two three four five", "repeat": true}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	m, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	msgs := []model.Message{{Role: model.RoleUser, Text: "hi"}}
	rec := &deltaRecorder{}
	start := time.Now()
	r, err := m.Complete(context.Background(), model.Request{Messages: msgs}, rec)
	if err != nil || r.Text != "one two three four five" {
		t.Fatalf("Complete = %+v, %v", r, err)
	}
	if elapsed := time.Since(start); elapsed < 4*20*time.Millisecond {
		t.Errorf("5 words streamed in %v; want at least 4 pauses of 20ms", elapsed)
	}
	if got := strings.Join(rec.deltas, "|"); got != "one |two |three |four |five" {
		t.Errorf("deltas %q; want a word each", got)
	}

	ctx, cancel := context.WithCancel(context.Background())
	slow := New([]Turn{{Text: strings.Repeat("word ", 100), Repeat: true}})
	slow.SetStreamDelay(time.Hour)
	cancelled := &deltaRecorder{}
	done := make(chan error, 1)
	go func() {
		_, err := slow.Complete(ctx, model.Request{Messages: msgs}, cancelled)
		done <- err
	}()
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("cancelled completion: err = %v, want context.Canceled", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a cancelled completion kept streaming")
	}

	for _, bad := range []string{`"soon"`, `"-1s"`, `"1h"`} {
		if err := os.WriteFile(path, []byte(`{"stream_delay": `+bad+`, "turns": [{"text": "x"}]}`), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := Load(path); err == nil || !strings.Contains(err.Error(), "stream_delay") {
			t.Errorf("stream_delay %s: err = %v; want one naming stream_delay", bad, err)
		}
	}
}

// A script with "report_usage" reports each completion's estimated
// tokens, as a provider does; one without reports none.
func TestReportUsage(t *testing.T) {
	path := filepath.Join(t.TempDir(), "usage.json")
	if err := os.WriteFile(path, []byte(`{"report_usage": true, "turns": [{"text": "a short answer", "repeat": true}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	m, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	req := model.Request{System: "be brief", Messages: []model.Message{{Role: model.RoleUser, Text: strings.Repeat("tell me more ", 50)}}}
	resp, err := m.Complete(context.Background(), req, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Usage.InputTokens < 50 || resp.Usage.OutputTokens < 1 {
		t.Errorf("usage = %+v; want the request's and the answer's estimated tokens", resp.Usage)
	}
	resp, err = New([]Turn{{Text: "x"}}).Complete(context.Background(), req, nil)
	if err != nil || resp.Usage != (model.Usage{}) {
		t.Errorf("a script without report_usage reported %+v, %v", resp.Usage, err)
	}
}
