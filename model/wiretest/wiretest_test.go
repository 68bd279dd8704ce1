package wiretest_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	anthropicsdk "github.com/anthropics/anthropic-sdk-go"
	anthropicopt "github.com/anthropics/anthropic-sdk-go/option"
	openaisdk "github.com/openai/openai-go/v3"
	openaiopt "github.com/openai/openai-go/v3/option"

	"github.com/gorap/gorap/model"
	"github.com/gorap/gorap/model/wiretest"
)

func post(t *testing.T, url, body string, header map[string]string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// The Anthropic server rejects conversations the real API rejects, with
// the real error shape.
func TestAnthropicValidation(t *testing.T) {
	srv := wiretest.NewAnthropic(nil)
	defer srv.Close()
	url := srv.URL + "/v1/messages"
	cases := []struct {
		name, body, want string
	}{
		{"no max_tokens", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, "max_tokens"},
		{"no messages", `{"model":"m","max_tokens":5,"messages":[]}`, "at least one message"},
		{"empty text", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"text","text":""}]}]}`, "non-empty"},
		{"unanswered tool_use", `{"model":"m","max_tokens":5,"messages":[
			{"role":"user","content":"hi"},
			{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"x","input":{}}]},
			{"role":"user","content":"next"}]}`, "without `tool_result` blocks immediately after: t1"},
		{"stray tool_result", `{"model":"m","max_tokens":5,"messages":[
			{"role":"user","content":[{"type":"tool_result","tool_use_id":"nope","content":"r"}]}]}`, "unexpected `tool_use_id`"},
		{"result after text", `{"model":"m","max_tokens":5,"messages":[
			{"role":"user","content":"hi"},
			{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"x","input":{}}]},
			{"role":"user","content":[{"type":"text","text":"a"},{"type":"tool_result","tool_use_id":"t1","content":"r"}]}]}`, "must come before"},
		{"schema type", `{"model":"m","max_tokens":5,"tools":[{"name":"x","input_schema":{"type":"string"}}],"messages":[{"role":"user","content":"hi"}]}`, "'object'"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			status, body := post(t, url, tc.body, nil)
			if status != 400 || !strings.Contains(body, `"invalid_request_error"`) || !strings.Contains(body, tc.want) {
				t.Errorf("status %d body %s; want 400 invalid_request_error mentioning %q", status, body, tc.want)
			}
		})
	}
	if got := len(srv.Requests()); got != len(cases) {
		t.Errorf("recorded %d requests, want %d (rejected ones too)", got, len(cases))
	}
	if status, _ := post(t, srv.URL+"/v1/other", `{}`, nil); status != 404 {
		t.Errorf("unknown path: status %d, want 404", status)
	}
}

// The Anthropic server takes server-side compaction as the real API does:
// a compact_20260112 edit or a compaction block only with the beta
// header, a trigger of at least 50,000 input tokens, a compaction block
// only in an assistant message; and it records the edit and each block as
// sent.
func TestAnthropicCompaction(t *testing.T) {
	srv := wiretest.NewAnthropic(nil)
	defer srv.Close()
	url := srv.URL + "/v1/messages"
	beta := map[string]string{"anthropic-beta": wiretest.CompactionBeta}
	edit := func(tokens string) string {
		return `"context_management":{"edits":[{"type":"compact_20260112","trigger":{"type":"input_tokens","value":` + tokens + `}}]}`
	}
	const block = `{"type":"compaction", "content":"S","encrypted_content":"E"}`
	for _, tc := range []struct {
		name, body string
		header     map[string]string
		want       string
	}{
		{"edit without the header", `{"model":"m","max_tokens":5,` + edit("60000") + `,"messages":[{"role":"user","content":"hi"}]}`, nil, "beta header"},
		{"trigger too low", `{"model":"m","max_tokens":5,` + edit("1000") + `,"messages":[{"role":"user","content":"hi"}]}`, beta, "at least 50000"},
		{"block without the header", `{"model":"m","max_tokens":5,"messages":[{"role":"assistant","content":[` + block + `]},{"role":"user","content":"hi"}]}`, nil, "beta header"},
		{"block from the user", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[` + block + `]}]}`, beta, "assistant messages"},
	} {
		if status, body := post(t, url, tc.body, tc.header); status != 400 || !strings.Contains(body, tc.want) {
			t.Errorf("%s: status %d body %s; want 400 mentioning %q", tc.name, status, body, tc.want)
		}
	}
	body := `{"model":"m","max_tokens":5,` + edit("60000") + `,"messages":[{"role":"assistant","content":[` + block + `,{"type":"text","text":"a"}]},{"role":"user","content":"hi"}]}`
	if status, resp := post(t, url, body, beta); status != 200 {
		t.Fatalf("a request with the edit and a block: status %d %s", status, resp)
	}
	reqs := srv.Requests()
	last := reqs[len(reqs)-1]
	if len(last.CompactionBlocks) != 1 || string(last.CompactionBlocks[0]) != block || !strings.Contains(string(last.ContextManagement), "compact_20260112") {
		t.Errorf("recorded blocks %q and context_management %s; want the block as sent and the edit", last.CompactionBlocks, last.ContextManagement)
	}
}

func TestOpenAIValidation(t *testing.T) {
	srv := wiretest.NewOpenAI(nil)
	defer srv.Close()
	url := srv.URL + "/v1/chat/completions"
	cases := []struct {
		name, body, want string
	}{
		{"no model", `{"messages":[{"role":"user","content":"hi"}]}`, "model"},
		{"unanswered call", `{"model":"m","messages":[
			{"role":"user","content":"hi"},
			{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"x","arguments":"{}"}}]},
			{"role":"user","content":"next"}]}`, "did not have response messages: c1"},
		{"stray tool message", `{"model":"m","messages":[{"role":"user","content":"hi"},{"role":"tool","tool_call_id":"c9","content":"r"}]}`, "must be a response"},
		{"image in tool message", `{"model":"m","messages":[
			{"role":"user","content":"hi"},
			{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"x","arguments":"{}"}}]},
			{"role":"tool","tool_call_id":"c1","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA"}}]}]}`, "text content parts only"},
		{"bad arguments", `{"model":"m","messages":[
			{"role":"user","content":"hi"},
			{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"x","arguments":"{oops"}}]}]}`, "not valid JSON"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			status, body := post(t, url, tc.body, nil)
			if status != 400 || !strings.Contains(body, `"invalid_request_error"`) || !strings.Contains(body, tc.want) {
				t.Errorf("status %d body %s; want 400 mentioning %q", status, body, tc.want)
			}
		})
	}
	// Local servers are also reached without the /v1 prefix.
	if status, _ := post(t, srv.URL+"/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, nil); status != 200 {
		t.Errorf("/chat/completions: status %d, want 200", status)
	}
}

func TestRequireAPIKey(t *testing.T) {
	a := wiretest.NewAnthropic(nil)
	defer a.Close()
	a.RequireAPIKey("secret")
	body := `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`
	if status, resp := post(t, a.URL+"/v1/messages", body, map[string]string{"x-api-key": "wrong", "anthropic-version": "2023-06-01"}); status != 401 || !strings.Contains(resp, "authentication_error") || strings.Contains(resp, "wrong") {
		t.Errorf("wrong key: %d %s", status, resp)
	}
	if status, resp := post(t, a.URL+"/v1/messages", body, map[string]string{"x-api-key": "secret", "anthropic-version": "2023-06-01"}); status != 200 {
		t.Errorf("right key: %d %s", status, resp)
	}

	o := wiretest.NewOpenAI(nil)
	defer o.Close()
	o.RequireAPIKey("secret")
	body = `{"model":"m","messages":[{"role":"user","content":"hi"}]}`
	if status, resp := post(t, o.URL+"/v1/chat/completions", body, nil); status != 401 || !strings.Contains(resp, "invalid_api_key") {
		t.Errorf("no key: %d %s", status, resp)
	}
	if status, resp := post(t, o.URL+"/v1/chat/completions", body, map[string]string{"Authorization": "Bearer secret"}); status != 200 {
		t.Errorf("right key: %d %s", status, resp)
	}
}

// The official SDK decodes the non-streaming answers, so their shape is the
// real one.
func TestNonStreamingWithOfficialSDKs(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	reply := wiretest.Reply{Text: "Checking.", ToolCalls: []model.ToolCall{{Name: "lookup", Arguments: json.RawMessage(`{"q":"go"}`)}}}

	a := wiretest.NewAnthropic(wiretest.Replies(reply))
	defer a.Close()
	ac := anthropicsdk.NewClient(anthropicopt.WithoutEnvironmentDefaults(), anthropicopt.WithBaseURL(a.URL), anthropicopt.WithAPIKey("k"))
	msg, err := ac.Messages.New(ctx, anthropicsdk.MessageNewParams{
		Model: "m", MaxTokens: 10,
		Messages: []anthropicsdk.MessageParam{anthropicsdk.NewUserMessage(anthropicsdk.NewTextBlock("hi"))},
	})
	if err != nil {
		t.Fatalf("anthropic: %v", err)
	}
	if msg.StopReason != "tool_use" || len(msg.Content) != 2 || msg.Content[0].Text != "Checking." ||
		msg.Content[1].Type != "tool_use" || msg.Content[1].Name != "lookup" || string(msg.Content[1].Input) != `{"q":"go"}` || msg.Content[1].ID == "" {
		t.Errorf("anthropic message = %+v", msg)
	}

	o := wiretest.NewOpenAI(wiretest.Replies(reply))
	defer o.Close()
	oc := openaisdk.NewClient(openaiopt.WithBaseURL(o.URL+"/v1"), openaiopt.WithAPIKey("k"))
	cc, err := oc.Chat.Completions.New(ctx, openaisdk.ChatCompletionNewParams{
		Model:    "m",
		Messages: []openaisdk.ChatCompletionMessageParamUnion{openaisdk.UserMessage("hi")},
	})
	if err != nil {
		t.Fatalf("openai: %v", err)
	}
	if len(cc.Choices) != 1 || cc.Choices[0].FinishReason != "tool_calls" || cc.Choices[0].Message.Content != "Checking." ||
		len(cc.Choices[0].Message.ToolCalls) != 1 || cc.Choices[0].Message.ToolCalls[0].Function.Name != "lookup" ||
		cc.Choices[0].Message.ToolCalls[0].Function.Arguments != `{"q":"go"}` {
		t.Errorf("openai completion = %+v", cc)
	}
}

// The streamed events are the documented ones, in order.
func TestAnthropicEventSequence(t *testing.T) {
	srv := wiretest.NewAnthropic(wiretest.Replies(wiretest.Reply{
		Text: "héllo wörld", ChunkSize: 1,
		ToolCalls: []model.ToolCall{{ID: "toolu_x", Name: "t", Arguments: json.RawMessage(`{"a":"ü"}`)}},
	}))
	defer srv.Close()
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/messages",
		strings.NewReader(`{"model":"m","max_tokens":5,"stream":true,"messages":[{"role":"user","content":"hi"}]}`))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		t.Errorf("Content-Type = %q", ct)
	}
	var events []string
	var text, args strings.Builder
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if ev, ok := strings.CutPrefix(line, "event: "); ok {
			if len(events) == 0 || events[len(events)-1] != ev {
				events = append(events, ev)
			}
		}
		if data, ok := strings.CutPrefix(line, "data: "); ok {
			var m map[string]any
			if err := json.Unmarshal([]byte(data), &m); err != nil {
				t.Fatalf("data line is not JSON: %s", data)
			}
			if delta, ok := m["delta"].(map[string]any); ok {
				if s, ok := delta["text"].(string); ok {
					text.WriteString(s)
				}
				if s, ok := delta["partial_json"].(string); ok {
					args.WriteString(s)
				}
			}
		}
	}
	want := "message_start,content_block_start,ping,content_block_delta,content_block_stop,content_block_start,content_block_delta,content_block_stop,message_delta,message_stop"
	if got := strings.Join(events, ","); got != want {
		t.Errorf("events = %s\nwant     %s", got, want)
	}
	if text.String() != "héllo wörld" || args.String() != `{"a":"ü"}` {
		t.Errorf("reassembled text %q args %q (UTF-8 must not be split)", text.String(), args.String())
	}
}

func TestCallToolThenAnswer(t *testing.T) {
	s := wiretest.CallToolThenAnswer("get_time", json.RawMessage(`{"zone":"UTC"}`))
	first := s(wiretest.Request{Messages: []model.Message{{Role: model.RoleUser, Text: "time?"}}})
	if len(first.ToolCalls) != 1 || first.ToolCalls[0].Name != "get_time" || string(first.ToolCalls[0].Arguments) != `{"zone":"UTC"}` {
		t.Errorf("first reply = %+v", first)
	}
	second := s(wiretest.Request{Messages: []model.Message{
		{Role: model.RoleUser, Text: "time?"},
		{Role: model.RoleAssistant, ToolCalls: []model.ToolCall{{ID: "c", Name: "get_time"}}},
		{Role: model.RoleUser, ToolResults: []model.ToolResult{{CallID: "c", Content: []model.ContentPart{{Type: "text", Text: "12:00"}}}}},
	}})
	if second.Text != "The tool answered: 12:00" || len(second.ToolCalls) != 0 {
		t.Errorf("second reply = %+v", second)
	}
}

func TestRepliesExhausted(t *testing.T) {
	s := wiretest.Replies(wiretest.Reply{Text: "one"})
	if r := s(wiretest.Request{}); r.Text != "one" {
		t.Errorf("first = %+v", r)
	}
	if r := s(wiretest.Request{}); r.Status != 500 || !strings.Contains(r.Error, "only 1 replies") {
		t.Errorf("second = %+v", r)
	}
}

// Close ends a reply that hangs mid-stream instead of waiting for it.
func TestCloseEndsHangingReply(t *testing.T) {
	srv := wiretest.NewOpenAI(wiretest.Replies(wiretest.Reply{Text: "partial", Hang: true}))
	resp, err := http.Post(srv.URL+"/v1/chat/completions", "application/json",
		strings.NewReader(`{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "data: ") {
		t.Fatalf("first line %q, err %v", line, err)
	}
	closed := make(chan struct{})
	go func() {
		srv.Close()
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(20 * time.Second):
		t.Fatal("Close blocked on a hanging reply")
	}
	if rest, _ := io.ReadAll(resp.Body); strings.Contains(string(rest), "[DONE]") {
		t.Errorf("a hanging reply must not finish: %s", rest)
	}
}
