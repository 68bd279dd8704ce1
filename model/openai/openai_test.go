package openai_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	sdk "github.com/openai/openai-go/v3"

	"github.com/gorap/gorap/model"
	"github.com/gorap/gorap/model/openai"
	"github.com/gorap/gorap/model/wiretest"
)

// harness lets the shared provider tests of package wiretest drive this
// provider.
var harness = wiretest.Harness{
	Start: wiretest.NewOpenAI,
	New: func(tb testing.TB, srv *wiretest.Server, images bool) model.Provider {
		p, err := openai.New(&openai.Options{BaseURL: srv.URL + "/v1", SupportsImages: &images})
		if err != nil {
			tb.Fatalf("New: %v", err)
		}
		return p
	},
}

// TestConformance runs the tests every provider must pass (RAP RT-1, RE-6).
func TestConformance(t *testing.T) { wiretest.TestProvider(t, harness) }

func newProvider(t *testing.T, srv *wiretest.Server, opts openai.Options) *openai.Provider {
	t.Helper()
	opts.BaseURL = srv.URL + "/v1"
	p, err := openai.New(&opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return p
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

// wireBody is the part of a Chat Completions request body the tests inspect.
type wireBody struct {
	Model               string `json:"model"`
	Stream              bool   `json:"stream"`
	MaxTokens           int    `json:"max_tokens"`
	MaxCompletionTokens int    `json:"max_completion_tokens"`
	Tools               []struct {
		Type     string `json:"type"`
		Function struct {
			Name        string          `json:"name"`
			Description string          `json:"description"`
			Parameters  json.RawMessage `json:"parameters"`
		} `json:"function"`
	} `json:"tools"`
	Messages []struct {
		Role       string          `json:"role"`
		Content    json.RawMessage `json:"content"`
		ToolCallID string          `json:"tool_call_id"`
		ToolCalls  []struct {
			ID       string `json:"id"`
			Type     string `json:"type"`
			Function struct {
				Name      string `json:"name"`
				Arguments string `json:"arguments"`
			} `json:"function"`
		} `json:"tool_calls"`
	} `json:"messages"`
}

func decodeBody(t *testing.T, req wiretest.Request) wireBody {
	t.Helper()
	var b wireBody
	if err := json.Unmarshal(req.Body, &b); err != nil {
		t.Fatalf("request body: %v\n%s", err, req.Body)
	}
	return b
}

// str decodes a content member that must be a JSON string.
func str(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatalf("content %s is not a string: %v", raw, err)
	}
	return s
}

func TestStreamingText(t *testing.T) {
	srv := wiretest.NewOpenAI(wiretest.Replies(wiretest.Reply{Text: "Hello from a local server, in pieces.", ChunkSize: 4}))
	defer srv.Close()
	p := newProvider(t, srv, openai.Options{Model: "llama3.1"})
	var rec wiretest.Recorder
	resp, err := p.Complete(ctx(t), model.Request{
		System:   "Be brief.",
		Messages: []model.Message{{Role: model.RoleUser, Text: "Hi"}},
	}, &rec)
	if err != nil {
		t.Fatalf("Complete: %v", err)
	}
	if resp.Text != "Hello from a local server, in pieces." || resp.StopReason != "end_turn" {
		t.Errorf("Text=%q StopReason=%q", resp.Text, resp.StopReason)
	}
	if len(rec.Deltas()) < 5 || strings.Join(rec.Deltas(), "") != resp.Text {
		t.Errorf("deltas = %q", rec.Deltas())
	}
	req := srv.Requests()[0]
	b := decodeBody(t, req)
	if !b.Stream || b.Model != "llama3.1" {
		t.Errorf("stream=%v model=%q", b.Stream, b.Model)
	}
	// A local server gets max_tokens, which they all understand.
	if b.MaxTokens != openai.DefaultMaxTokens || b.MaxCompletionTokens != 0 {
		t.Errorf("max_tokens=%d max_completion_tokens=%d", b.MaxTokens, b.MaxCompletionTokens)
	}
	if len(b.Messages) != 2 || b.Messages[0].Role != "system" || str(t, b.Messages[0].Content) != "Be brief." ||
		b.Messages[1].Role != "user" || str(t, b.Messages[1].Content) != "Hi" {
		t.Errorf("messages = %s", req.Body)
	}
	// No key configured for a local server: no Authorization header.
	if h := req.Header.Get("Authorization"); h != "" && h != "Bearer" {
		t.Errorf("Authorization = %q; want none for a keyless local server", h)
	}
	if p.Name() != "openai:llama3.1" || p.SupportsImages() {
		t.Errorf("Name=%q SupportsImages=%v; a local model defaults to no images", p.Name(), p.SupportsImages())
	}
}

func TestToolCallArgumentsAcrossManyChunks(t *testing.T) {
	args := `{"city":"Zürich","days":[1,2,3],"note":"a fairly long argument string to split"}`
	srv := wiretest.NewOpenAI(wiretest.Replies(wiretest.Reply{
		ToolCalls: []model.ToolCall{{ID: "call_1", Name: "forecast", Arguments: json.RawMessage(args)}},
		ChunkSize: 3,
	}))
	defer srv.Close()
	p := newProvider(t, srv, openai.Options{})
	resp, err := p.Complete(ctx(t), model.Request{
		Messages: []model.Message{{Role: model.RoleUser, Text: "Weather?"}},
		Tools: []model.ToolSpec{{Name: "forecast", Description: "Weather forecast",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`)}},
	}, nil)
	if err != nil {
		t.Fatalf("Complete: %v", err)
	}
	if resp.StopReason != "tool_use" || len(resp.ToolCalls) != 1 {
		t.Fatalf("StopReason=%q ToolCalls=%+v", resp.StopReason, resp.ToolCalls)
	}
	if c := resp.ToolCalls[0]; c.ID != "call_1" || c.Name != "forecast" || string(c.Arguments) != args {
		t.Errorf("tool call = %s %s %s", c.ID, c.Name, c.Arguments)
	}
	b := decodeBody(t, srv.Requests()[0])
	if len(b.Tools) != 1 || b.Tools[0].Type != "function" || b.Tools[0].Function.Name != "forecast" ||
		!strings.Contains(string(b.Tools[0].Function.Parameters), `"required":["city"]`) {
		t.Errorf("tools = %+v", b.Tools)
	}
}

// Some servers send each tool call whole, all at index 0 and some without
// an id; the provider still separates them and makes ids.
func TestToolCallsFromQuirkyServer(t *testing.T) {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for _, line := range []string{
			`{"id":"x","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"a","arguments":"{\"x\":1}"}}]},"finish_reason":null}]}`,
			`{"id":"x","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_b","type":"function","function":{"name":"b","arguments":"{}"}}]},"finish_reason":null}]}`,
			`{"id":"x","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"type":"function","function":{"name":"c","arguments":""}}]},"finish_reason":"tool_calls"}]}`,
			`[DONE]`,
		} {
			fmt.Fprintf(w, "data: %s\n\n", line)
		}
	}))
	defer ts.Close()
	p, err := openai.New(&openai.Options{BaseURL: ts.URL})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := p.Complete(ctx(t), model.Request{Messages: []model.Message{{Role: model.RoleUser, Text: "go"}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.ToolCalls) != 3 {
		t.Fatalf("ToolCalls = %+v, want 3", resp.ToolCalls)
	}
	got := resp.ToolCalls
	if got[0].ID != "call_a" || got[1].ID != "call_b" || !strings.HasPrefix(got[2].ID, "call_") || got[2].ID == "call_a" ||
		got[2].Name != "c" || string(got[2].Arguments) != "{}" {
		t.Errorf("ToolCalls = %+v", got)
	}
}

// RAP RE-1, RE-4: results are linked to their calls by tool_call_id, and
// an error result says so.
func TestToolResultsMappedBack(t *testing.T) {
	srv := wiretest.NewOpenAI(wiretest.Replies(wiretest.Reply{Text: "done"}))
	defer srv.Close()
	p := newProvider(t, srv, openai.Options{})
	_, err := p.Complete(ctx(t), model.Request{Messages: []model.Message{
		{Role: model.RoleUser, Text: "Do two things"},
		{Role: model.RoleAssistant, Text: "On it.", ToolCalls: []model.ToolCall{
			{ID: "call_a", Name: "first", Arguments: json.RawMessage(`{"n":1}`)},
			{ID: "call_b", Name: "second", Arguments: nil},
		}},
		{Role: model.RoleUser, ToolResults: []model.ToolResult{
			{CallID: "call_b", Text: "no such file; pass an existing path", IsError: true},
			{CallID: "call_a", Content: []model.ContentPart{{Type: "text", Text: "one"}, {Type: "text", Text: "uno"}}},
		}},
	}}, nil)
	if err != nil {
		t.Fatalf("Complete: %v", err)
	}
	req := srv.Requests()[0]
	b := decodeBody(t, req)
	var roles []string
	for _, m := range b.Messages {
		roles = append(roles, m.Role)
	}
	if strings.Join(roles, ",") != "user,assistant,tool,tool" {
		t.Fatalf("roles = %v\n%s", roles, req.Body)
	}
	a := b.Messages[1]
	if str(t, a.Content) != "On it." || len(a.ToolCalls) != 2 ||
		a.ToolCalls[0].ID != "call_a" || a.ToolCalls[0].Type != "function" || a.ToolCalls[0].Function.Name != "first" || a.ToolCalls[0].Function.Arguments != `{"n":1}` ||
		a.ToolCalls[1].ID != "call_b" || a.ToolCalls[1].Function.Arguments != "{}" {
		t.Errorf("assistant = %+v", a)
	}
	if m := b.Messages[2]; m.ToolCallID != "call_a" || str(t, m.Content) != "one\nuno" {
		t.Errorf("first tool message = %s %s", m.ToolCallID, m.Content)
	}
	if m := b.Messages[3]; m.ToolCallID != "call_b" || !strings.HasPrefix(str(t, m.Content), "Error") ||
		!strings.Contains(str(t, m.Content), "no such file; pass an existing path") {
		t.Errorf("error tool message = %s %s", m.ToolCallID, m.Content)
	}
}

// A user message while a tool runs (RAP RT-3): the open call is answered
// with a pending note, and its late result is kept as user text.
func TestPendingAndLateResults(t *testing.T) {
	srv := wiretest.NewOpenAI(nil)
	defer srv.Close()
	p := newProvider(t, srv, openai.Options{})
	_, err := p.Complete(ctx(t), model.Request{Messages: []model.Message{
		{Role: model.RoleUser, Text: "Start the build"},
		{Role: model.RoleAssistant, ToolCalls: []model.ToolCall{{ID: "call_build", Name: "build", Arguments: json.RawMessage(`{}`)}}},
		{Role: model.RoleUser, Text: "How is it going?"},
		{Role: model.RoleAssistant, Text: "Still running."},
		{Role: model.RoleUser, ToolResults: []model.ToolResult{{CallID: "call_build", Text: "build ok"}}},
	}}, nil)
	if err != nil {
		t.Fatalf("Complete (the server rejects broken tool linkage): %v", err)
	}
	b := decodeBody(t, srv.Requests()[0])
	var roles []string
	for _, m := range b.Messages {
		roles = append(roles, m.Role)
	}
	if strings.Join(roles, ",") != "user,assistant,tool,user,assistant,user" {
		t.Fatalf("roles = %v", roles)
	}
	if !strings.Contains(str(t, b.Messages[2].Content), "No result yet") || str(t, b.Messages[3].Content) != "How is it going?" {
		t.Errorf("pending = %s, user = %s", b.Messages[2].Content, b.Messages[3].Content)
	}
	if late := str(t, b.Messages[5].Content); !strings.Contains(late, "call_build") || !strings.Contains(late, "build ok") {
		t.Errorf("late result = %q", late)
	}
}

// RAP RE-2: tool messages carry text only. Without image support each image
// becomes a placeholder and no image bytes are sent; with it the image goes
// in a user message right after the tool messages.
func TestImagesInToolResults(t *testing.T) {
	const imageData = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
	conv := []model.Message{
		{Role: model.RoleUser, Text: "Screenshot please"},
		{Role: model.RoleAssistant, ToolCalls: []model.ToolCall{{ID: "call_s", Name: "screenshot", Arguments: json.RawMessage(`{}`)}}},
		{Role: model.RoleUser, ToolResults: []model.ToolResult{{CallID: "call_s", Content: []model.ContentPart{
			{Type: "text", Text: "Here it is"},
			{Type: "image", Data: imageData, MediaType: "image/png"},
		}}}},
	}
	t.Run("without images", func(t *testing.T) {
		no := false
		srv := wiretest.NewOpenAI(nil)
		defer srv.Close()
		p := newProvider(t, srv, openai.Options{SupportsImages: &no})
		if _, err := p.Complete(ctx(t), model.Request{Messages: conv}, nil); err != nil {
			t.Fatal(err)
		}
		req := srv.Requests()[0]
		if strings.Contains(string(req.Body), imageData) || strings.Contains(string(req.Body), "image_url") {
			t.Fatalf("image bytes reached a model without image input:\n%s", req.Body)
		}
		b := decodeBody(t, req)
		if len(b.Messages) != 3 {
			t.Fatalf("messages = %d, want 3", len(b.Messages))
		}
		tool := str(t, b.Messages[2].Content)
		if !strings.HasPrefix(tool, "Here it is\n") || !strings.Contains(tool, "image omitted") || !strings.Contains(tool, "image/png") {
			t.Errorf("tool message = %q", tool)
		}
	})
	t.Run("with images", func(t *testing.T) {
		yes := true
		srv := wiretest.NewOpenAI(nil)
		defer srv.Close()
		p := newProvider(t, srv, openai.Options{SupportsImages: &yes})
		if _, err := p.Complete(ctx(t), model.Request{Messages: conv}, nil); err != nil {
			t.Fatal(err)
		}
		b := decodeBody(t, srv.Requests()[0])
		if len(b.Messages) != 4 || b.Messages[2].Role != "tool" || b.Messages[3].Role != "user" {
			t.Fatalf("messages = %+v", b.Messages)
		}
		if tool := str(t, b.Messages[2].Content); !strings.Contains(tool, "Here it is") || !strings.Contains(tool, "attached in the next user message") || strings.Contains(tool, imageData) {
			t.Errorf("tool message = %q", tool)
		}
		var parts []struct {
			Type     string `json:"type"`
			Text     string `json:"text"`
			ImageURL struct {
				URL string `json:"url"`
			} `json:"image_url"`
		}
		if err := json.Unmarshal(b.Messages[3].Content, &parts); err != nil {
			t.Fatal(err)
		}
		if len(parts) != 2 || parts[0].Type != "text" || !strings.Contains(parts[0].Text, "call_s") ||
			parts[1].Type != "image_url" || parts[1].ImageURL.URL != "data:image/png;base64,"+imageData {
			t.Errorf("image message parts = %+v", parts)
		}
	})
}

func TestHTTPErrors(t *testing.T) {
	t.Run("401", func(t *testing.T) {
		srv := wiretest.NewOpenAI(nil)
		defer srv.Close()
		srv.RequireAPIKey("the-right-key")
		p := newProvider(t, srv, openai.Options{APIKey: "sk-wrong-secret-key"})
		_, err := p.Complete(ctx(t), model.Request{Messages: []model.Message{{Role: model.RoleUser, Text: "hi"}}}, nil)
		if err == nil {
			t.Fatal("want an error")
		}
		msg := err.Error()
		for _, want := range []string{"401", "Incorrect API key", openai.EnvAPIKey} {
			if !strings.Contains(msg, want) {
				t.Errorf("error %q lacks %q", msg, want)
			}
		}
		if strings.Contains(msg, "sk-wrong-secret-key") {
			t.Errorf("error leaks the API key: %q", msg)
		}
		var apiErr *sdk.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != 401 {
			t.Errorf("errors.As(*openai.Error) failed or wrong status: %v", err)
		}
	})
	t.Run("404 model", func(t *testing.T) {
		srv := wiretest.NewOpenAI(func(wiretest.Request) wiretest.Reply {
			return wiretest.Reply{Status: 404, Error: "model 'nope' not found"}
		})
		defer srv.Close()
		p := newProvider(t, srv, openai.Options{Model: "nope"})
		_, err := p.Complete(ctx(t), model.Request{Messages: []model.Message{{Role: model.RoleUser, Text: "hi"}}}, nil)
		if err == nil || !strings.Contains(err.Error(), "model 'nope' not found") || !strings.Contains(err.Error(), "check the model name") {
			t.Errorf("error = %v", err)
		}
	})
}

// A stream cut before its finish_reason must not pass for a whole answer
// (RAP RT-1: half-streamed output is never persisted).
func TestTruncatedStream(t *testing.T) {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, `data: {"id":"x","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"half an ans"},"finish_reason":null}]}`+"\n\n")
	}))
	defer ts.Close()
	p, err := openai.New(&openai.Options{BaseURL: ts.URL})
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.Complete(ctx(t), model.Request{Messages: []model.Message{{Role: model.RoleUser, Text: "hi"}}}, nil)
	if err == nil || !strings.Contains(err.Error(), "finish_reason") {
		t.Errorf("error = %v; want a truncated-stream error", err)
	}
}

func TestBadInput(t *testing.T) {
	srv := wiretest.NewOpenAI(nil)
	defer srv.Close()
	p := newProvider(t, srv, openai.Options{})
	cases := []struct {
		name string
		req  model.Request
		want string
	}{
		{"role", model.Request{Messages: []model.Message{{Role: "tool", Text: "x"}}}, `messages[0]: role "tool"`},
		{"schema", model.Request{Messages: []model.Message{{Role: model.RoleUser, Text: "x"}},
			Tools: []model.ToolSpec{{Name: "t", InputSchema: json.RawMessage(`"s"`)}}}, "tools[0] (t): input_schema is not a JSON object"},
		{"empty", model.Request{Messages: []model.Message{{Role: model.RoleUser}}}, "no messages"},
		{"arguments", model.Request{Messages: []model.Message{
			{Role: model.RoleUser, Text: "x"},
			{Role: model.RoleAssistant, ToolCalls: []model.ToolCall{{ID: "c1", Name: "t", Arguments: json.RawMessage(`{bad`)}}},
		}}, "id c1, tool t): arguments are not valid JSON"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := p.Complete(ctx(t), tc.req, nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error = %v; want it to contain %q", err, tc.want)
			}
		})
	}
	if n := len(srv.Requests()); n != 0 {
		t.Errorf("%d invalid requests reached the server", n)
	}
}

func TestNew(t *testing.T) {
	t.Setenv(openai.EnvAPIKey, "")
	t.Setenv(openai.EnvBaseURL, "")
	if _, err := openai.New(nil); err == nil || !strings.Contains(err.Error(), "set OPENAI_API_KEY") {
		t.Errorf("public endpoint without key: error = %v", err)
	}
	if _, err := openai.New(&openai.Options{BaseURL: "localhost:11434"}); err == nil || !strings.Contains(err.Error(), "not an http(s) URL") {
		t.Errorf("bad base URL: error = %v", err)
	}
	p, err := openai.New(&openai.Options{APIKey: "k"})
	if err != nil {
		t.Fatal(err)
	}
	if p.Name() != "openai:"+openai.DefaultModel || !p.SupportsImages() {
		t.Errorf("Name=%q SupportsImages=%v; gpt-4o on the public API takes images", p.Name(), p.SupportsImages())
	}

	srv := wiretest.NewOpenAI(nil)
	defer srv.Close()
	t.Setenv(openai.EnvAPIKey, "from-env")
	t.Setenv(openai.EnvBaseURL, srv.URL+"/v1")
	p, err = openai.New(&openai.Options{Model: "qwen2.5"})
	if err != nil {
		t.Fatalf("New from the environment: %v", err)
	}
	if _, err := p.Complete(ctx(t), model.Request{Messages: []model.Message{{Role: model.RoleUser, Text: "hi"}}}, nil); err != nil {
		t.Fatal(err)
	}
	if got := srv.Requests()[0].Header.Get("Authorization"); got != "Bearer from-env" {
		t.Errorf("Authorization = %q", got)
	}
}

// RAP allows tool names of up to 128 characters; the API takes 64. Long
// names go out shortened, consistently in tools and history, and come back
// as the original name.
func TestLongToolNames(t *testing.T) {
	long := strings.Repeat("very_long_tool_name_", 5) // 100 characters
	sibling := long[:90] + ".other"                   // same first 64 bytes, and a '.'
	srv := wiretest.NewOpenAI(func(r wiretest.Request) wiretest.Reply {
		return wiretest.Reply{ToolCalls: []model.ToolCall{{Name: r.Tools[0].Name, Arguments: json.RawMessage(`{}`)}}}
	})
	defer srv.Close()
	p := newProvider(t, srv, openai.Options{})
	resp, err := p.Complete(ctx(t), model.Request{
		Messages: []model.Message{
			{Role: model.RoleUser, Text: "go"},
			{Role: model.RoleAssistant, ToolCalls: []model.ToolCall{{ID: "c0", Name: long, Arguments: json.RawMessage(`{}`)}}},
			{Role: model.RoleUser, ToolResults: []model.ToolResult{{CallID: "c0", Text: "r"}}},
		},
		Tools: []model.ToolSpec{
			{Name: long, InputSchema: json.RawMessage(`{"type":"object"}`)},
			{Name: sibling, InputSchema: json.RawMessage(`{"type":"object"}`)},
		},
	}, nil)
	if err != nil {
		t.Fatalf("Complete (the server enforces the 64-character limit): %v", err)
	}
	if len(resp.ToolCalls) != 1 || resp.ToolCalls[0].Name != long {
		t.Errorf("ToolCalls = %+v; want the original name back", resp.ToolCalls)
	}
	req := srv.Requests()[0]
	if req.Tools[0].Name == req.Tools[1].Name {
		t.Errorf("two long names with one prefix both went out as %q", req.Tools[0].Name)
	}
	if wire := req.Tools[0].Name; len(wire) > 64 || wire != req.Messages[1].ToolCalls[0].Name {
		t.Errorf("wire names: tool %q, history %q; want the same name of at most 64 characters", wire, req.Messages[1].ToolCalls[0].Name)
	}
}

// TestDefaultClientReusesConnections: without Options.HTTPClient, concurrent
// completions reuse their connections.
func TestDefaultClientReusesConnections(t *testing.T) {
	wiretest.CheckConnectionReuse(t, wiretest.OpenAIAPI(nil), func(base string) model.Provider {
		p, err := openai.New(&openai.Options{APIKey: "test-key", BaseURL: base + "/v1"})
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		return p
	})
}
