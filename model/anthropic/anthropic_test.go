package anthropic_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	sdk "github.com/anthropics/anthropic-sdk-go"

	"github.com/gorap/gorap/model"
	"github.com/gorap/gorap/model/anthropic"
	"github.com/gorap/gorap/model/wiretest"
)

// harness lets the shared provider tests of package wiretest drive this
// provider.
var harness = wiretest.Harness{
	Start: wiretest.NewAnthropic,
	New: func(tb testing.TB, srv *wiretest.Server, images bool) model.Provider {
		p, err := anthropic.New(&anthropic.Options{APIKey: "test-key", BaseURL: srv.URL, SupportsImages: &images})
		if err != nil {
			tb.Fatalf("New: %v", err)
		}
		return p
	},
}

// TestConformance runs the tests every provider must pass (RAP RT-1, RE-6).
func TestConformance(t *testing.T) { wiretest.TestProvider(t, harness) }

func newProvider(t *testing.T, srv *wiretest.Server, opts anthropic.Options) *anthropic.Provider {
	t.Helper()
	if opts.APIKey == "" {
		opts.APIKey = "test-key"
	}
	opts.BaseURL = srv.URL
	p, err := anthropic.New(&opts)
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

// wireBody is the part of a Messages API request body the tests inspect.
type wireBody struct {
	Model     string `json:"model"`
	MaxTokens int    `json:"max_tokens"`
	Stream    bool   `json:"stream"`
	System    []struct {
		Text string `json:"text"`
	} `json:"system"`
	Tools []struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		InputSchema json.RawMessage `json:"input_schema"`
	} `json:"tools"`
	Messages []struct {
		Role    string `json:"role"`
		Content []struct {
			Type      string          `json:"type"`
			Text      string          `json:"text"`
			ID        string          `json:"id"`
			Name      string          `json:"name"`
			Input     json.RawMessage `json:"input"`
			ToolUseID string          `json:"tool_use_id"`
			IsError   bool            `json:"is_error"`
			Content   []struct {
				Type   string `json:"type"`
				Text   string `json:"text"`
				Source struct {
					Type      string `json:"type"`
					MediaType string `json:"media_type"`
					Data      string `json:"data"`
				} `json:"source"`
			} `json:"content"`
		} `json:"content"`
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

func TestStreamingText(t *testing.T) {
	srv := wiretest.NewAnthropic(wiretest.Replies(wiretest.Reply{Text: "Hello from the wire, streamed in pieces.", ChunkSize: 5}))
	defer srv.Close()
	p := newProvider(t, srv, anthropic.Options{Model: "claude-test"})

	var rec wiretest.Recorder
	resp, err := p.Complete(ctx(t), model.Request{
		System:   "Be brief.",
		Messages: []model.Message{{Role: model.RoleUser, Text: "Hi"}},
	}, &rec)
	if err != nil {
		t.Fatalf("Complete: %v", err)
	}
	if resp.Text != "Hello from the wire, streamed in pieces." {
		t.Errorf("Text = %q", resp.Text)
	}
	if resp.StopReason != "end_turn" {
		t.Errorf("StopReason = %q, want end_turn", resp.StopReason)
	}
	if len(rec.Deltas()) < 5 || strings.Join(rec.Deltas(), "") != resp.Text {
		t.Errorf("deltas = %q; want several pieces that add up to the text", rec.Deltas())
	}
	reqs := srv.Requests()
	if len(reqs) != 1 {
		t.Fatalf("server saw %d requests, want 1", len(reqs))
	}
	b := decodeBody(t, reqs[0])
	if !b.Stream || b.Model != "claude-test" || b.MaxTokens != anthropic.DefaultMaxTokens {
		t.Errorf("stream=%v model=%q max_tokens=%d; want true, claude-test, %d", b.Stream, b.Model, b.MaxTokens, anthropic.DefaultMaxTokens)
	}
	if len(b.System) != 1 || b.System[0].Text != "Be brief." {
		t.Errorf("system = %+v", b.System)
	}
	if got := reqs[0].Header.Get("x-api-key"); got != "test-key" {
		t.Errorf("x-api-key header = %q", got)
	}
	if reqs[0].Header.Get("anthropic-version") == "" {
		t.Error("no anthropic-version header")
	}
	if p.Name() != "anthropic:claude-test" {
		t.Errorf("Name = %q", p.Name())
	}
}

func TestMaxTokensFromRequestAndOptions(t *testing.T) {
	srv := wiretest.NewAnthropic(nil)
	defer srv.Close()
	p := newProvider(t, srv, anthropic.Options{MaxTokens: 1000})
	msgs := []model.Message{{Role: model.RoleUser, Text: "Hi"}}
	if _, err := p.Complete(ctx(t), model.Request{Messages: msgs}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Complete(ctx(t), model.Request{Messages: msgs, MaxTokens: 77}, nil); err != nil {
		t.Fatal(err)
	}
	reqs := srv.Requests()
	if a, b := decodeBody(t, reqs[0]).MaxTokens, decodeBody(t, reqs[1]).MaxTokens; a != 1000 || b != 77 {
		t.Errorf("max_tokens = %d then %d; want 1000 (options) then 77 (request)", a, b)
	}
	if got := decodeBody(t, reqs[0]).Model; got != anthropic.DefaultModel {
		t.Errorf("model = %q, want the default %q", got, anthropic.DefaultModel)
	}
}

func TestToolCallArgumentsAcrossManyDeltas(t *testing.T) {
	args := `{"city":"Zürich","days":[1,2,3],"note":"a fairly long argument string to split"}`
	srv := wiretest.NewAnthropic(wiretest.Replies(wiretest.Reply{
		Text:      "Let me look.",
		ToolCalls: []model.ToolCall{{ID: "toolu_1", Name: "forecast", Arguments: json.RawMessage(args)}},
		ChunkSize: 3,
	}))
	defer srv.Close()
	p := newProvider(t, srv, anthropic.Options{})

	resp, err := p.Complete(ctx(t), model.Request{
		Messages: []model.Message{{Role: model.RoleUser, Text: "Weather?"}},
		Tools: []model.ToolSpec{{
			Name:        "forecast",
			Description: "Weather forecast",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"],"additionalProperties":false}`),
		}},
	}, nil)
	if err != nil {
		t.Fatalf("Complete: %v", err)
	}
	if resp.StopReason != "tool_use" || resp.Text != "Let me look." {
		t.Errorf("StopReason=%q Text=%q", resp.StopReason, resp.Text)
	}
	if len(resp.ToolCalls) != 1 {
		t.Fatalf("ToolCalls = %+v, want 1", resp.ToolCalls)
	}
	c := resp.ToolCalls[0]
	if c.ID != "toolu_1" || c.Name != "forecast" || string(c.Arguments) != args {
		t.Errorf("tool call = %s %s %s; want toolu_1 forecast %s", c.ID, c.Name, c.Arguments, args)
	}
	// The tool went out with its whole schema.
	b := decodeBody(t, srv.Requests()[0])
	if len(b.Tools) != 1 || b.Tools[0].Name != "forecast" || b.Tools[0].Description != "Weather forecast" {
		t.Fatalf("tools = %+v", b.Tools)
	}
	var schema map[string]any
	if err := json.Unmarshal(b.Tools[0].InputSchema, &schema); err != nil {
		t.Fatal(err)
	}
	if schema["type"] != "object" || schema["additionalProperties"] != false || schema["required"] == nil || schema["properties"] == nil {
		t.Errorf("input_schema = %s; want type, properties, required and additionalProperties kept", b.Tools[0].InputSchema)
	}
}

// RAP RE-1, RE-4: tool results (errors included) reach the model linked to
// their calls.
func TestToolResultsMappedBack(t *testing.T) {
	srv := wiretest.NewAnthropic(wiretest.Replies(wiretest.Reply{Text: "done"}))
	defer srv.Close()
	p := newProvider(t, srv, anthropic.Options{})
	_, err := p.Complete(ctx(t), model.Request{Messages: []model.Message{
		{Role: model.RoleUser, Text: "Do two things"},
		{Role: model.RoleAssistant, Text: "On it.", ToolCalls: []model.ToolCall{
			{ID: "toolu_a", Name: "first", Arguments: json.RawMessage(`{"n":1}`)},
			{ID: "toolu_b", Name: "second", Arguments: json.RawMessage(`{}`)},
		}},
		{Role: model.RoleUser, ToolResults: []model.ToolResult{
			{CallID: "toolu_b", Text: "Error: no such file; pass an existing path", IsError: true},
			{CallID: "toolu_a", Content: []model.ContentPart{{Type: "text", Text: "one"}, {Type: "text", Text: "uno"}}},
		}},
	}}, nil)
	if err != nil {
		t.Fatalf("Complete: %v", err)
	}
	b := decodeBody(t, srv.Requests()[0])
	if len(b.Messages) != 3 {
		t.Fatalf("messages = %d, want 3", len(b.Messages))
	}
	roles := []string{b.Messages[0].Role, b.Messages[1].Role, b.Messages[2].Role}
	if strings.Join(roles, ",") != "user,assistant,user" {
		t.Errorf("roles = %v", roles)
	}
	a := b.Messages[1].Content
	if len(a) != 3 || a[0].Type != "text" || a[0].Text != "On it." ||
		a[1].Type != "tool_use" || a[1].ID != "toolu_a" || a[1].Name != "first" || string(a[1].Input) != `{"n":1}` ||
		a[2].Type != "tool_use" || a[2].ID != "toolu_b" {
		t.Errorf("assistant content = %+v", a)
	}
	u := b.Messages[2].Content
	if len(u) != 2 {
		t.Fatalf("user content = %+v, want two tool_result blocks", u)
	}
	// Results come in call order, each linked by tool_use_id.
	if u[0].Type != "tool_result" || u[0].ToolUseID != "toolu_a" || u[0].IsError ||
		len(u[0].Content) != 2 || u[0].Content[0].Text != "one" || u[0].Content[1].Text != "uno" {
		t.Errorf("first result = %+v", u[0])
	}
	if u[1].Type != "tool_result" || u[1].ToolUseID != "toolu_b" || !u[1].IsError ||
		len(u[1].Content) != 1 || u[1].Content[0].Text != "Error: no such file; pass an existing path" {
		t.Errorf("second result = %+v", u[1])
	}
}

// A user message can arrive while a tool is still running (RAP RT-3); the
// API nonetheless demands a tool_result after every tool_use. The provider
// answers the open call with a pending note, and the real result, arriving
// later, is kept as text rather than dropped.
func TestPendingAndLateResults(t *testing.T) {
	srv := wiretest.NewAnthropic(nil)
	defer srv.Close()
	p := newProvider(t, srv, anthropic.Options{})
	_, err := p.Complete(ctx(t), model.Request{Messages: []model.Message{
		{Role: model.RoleUser, Text: "Start the build"},
		{Role: model.RoleAssistant, ToolCalls: []model.ToolCall{{ID: "toolu_build", Name: "build", Arguments: json.RawMessage(`{}`)}}},
		{Role: model.RoleUser, Text: "How is it going?"},
		{Role: model.RoleAssistant, Text: "Still running."},
		{Role: model.RoleUser, ToolResults: []model.ToolResult{{CallID: "toolu_build", Text: "build ok"}}},
	}}, nil)
	if err != nil {
		t.Fatalf("Complete (the server rejects broken tool linkage): %v", err)
	}
	b := decodeBody(t, srv.Requests()[0])
	if len(b.Messages) != 5 {
		t.Fatalf("messages = %d, want 5", len(b.Messages))
	}
	m2 := b.Messages[2].Content
	if len(m2) != 2 || m2[0].Type != "tool_result" || m2[0].ToolUseID != "toolu_build" || !strings.Contains(m2[0].Content[0].Text, "No result yet") ||
		m2[1].Type != "text" || m2[1].Text != "How is it going?" {
		t.Errorf("message 2 = %+v", m2)
	}
	m4 := b.Messages[4].Content
	var texts []string
	for _, c := range m4 {
		if c.Type != "text" {
			t.Errorf("late result block type = %q, want text", c.Type)
		}
		texts = append(texts, c.Text)
	}
	joined := strings.Join(texts, "\n")
	if !strings.Contains(joined, "toolu_build") || !strings.Contains(joined, "build") || !strings.Contains(joined, "build ok") {
		t.Errorf("late result = %q; want the call id, tool name and result text", joined)
	}
}

// RAP RE-2: for a model without image input each image becomes a text
// placeholder, text items stay, and the image bytes are never sent.
func TestImagesBecomePlaceholders(t *testing.T) {
	const imageData = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
	conv := []model.Message{
		{Role: model.RoleUser, Text: "Screenshot please"},
		{Role: model.RoleAssistant, ToolCalls: []model.ToolCall{{ID: "toolu_s", Name: "screenshot", Arguments: json.RawMessage(`{}`)}}},
		{Role: model.RoleUser, ToolResults: []model.ToolResult{{CallID: "toolu_s", Content: []model.ContentPart{
			{Type: "text", Text: "Here it is"},
			{Type: "image", Data: imageData, MediaType: "image/png"},
		}}}},
	}
	for _, images := range []bool{false, true} {
		srv := wiretest.NewAnthropic(nil)
		p := newProvider(t, srv, anthropic.Options{SupportsImages: &images})
		if p.SupportsImages() != images {
			t.Errorf("SupportsImages() = %v, want %v", p.SupportsImages(), images)
		}
		if _, err := p.Complete(ctx(t), model.Request{Messages: conv}, nil); err != nil {
			t.Fatalf("images=%v: %v", images, err)
		}
		req := srv.Requests()[0]
		srv.Close()
		sent := strings.Contains(string(req.Body), imageData)
		if sent != images {
			t.Errorf("images=%v: image bytes in request body = %v", images, sent)
		}
		res := decodeBody(t, req).Messages[2].Content[0]
		if len(res.Content) != 2 || res.Content[0].Type != "text" || res.Content[0].Text != "Here it is" {
			t.Fatalf("images=%v: result content = %+v", images, res.Content)
		}
		second := res.Content[1]
		if images {
			if second.Type != "image" || second.Source.Type != "base64" || second.Source.MediaType != "image/png" || second.Source.Data != imageData {
				t.Errorf("image block = %+v", second)
			}
		} else if second.Type != "text" || !strings.Contains(second.Text, "image omitted") || !strings.Contains(second.Text, "image/png") {
			t.Errorf("placeholder = %+v", second)
		}
	}
}

func TestHTTPErrors(t *testing.T) {
	t.Run("401", func(t *testing.T) {
		srv := wiretest.NewAnthropic(nil)
		defer srv.Close()
		srv.RequireAPIKey("the-right-key")
		p := newProvider(t, srv, anthropic.Options{APIKey: "sk-wrong-secret-key"})
		_, err := p.Complete(ctx(t), model.Request{Messages: []model.Message{{Role: model.RoleUser, Text: "hi"}}}, nil)
		if err == nil {
			t.Fatal("want an error")
		}
		msg := err.Error()
		for _, want := range []string{"401", "authentication_error", anthropic.EnvAPIKey} {
			if !strings.Contains(msg, want) {
				t.Errorf("error %q lacks %q", msg, want)
			}
		}
		if strings.Contains(msg, "sk-wrong-secret-key") {
			t.Errorf("error leaks the API key: %q", msg)
		}
		var apiErr *sdk.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != 401 {
			t.Errorf("errors.As(*anthropic.Error) failed or wrong status: %v", err)
		}
	})
	t.Run("529 overloaded", func(t *testing.T) {
		srv := wiretest.NewAnthropic(func(wiretest.Request) wiretest.Reply {
			return wiretest.Reply{Status: 529, Error: "Overloaded", Header: http.Header{"X-Should-Retry": {"false"}}}
		})
		defer srv.Close()
		p := newProvider(t, srv, anthropic.Options{})
		_, err := p.Complete(ctx(t), model.Request{Messages: []model.Message{{Role: model.RoleUser, Text: "hi"}}}, nil)
		if err == nil || !strings.Contains(err.Error(), "overloaded") || !strings.Contains(err.Error(), "retry later") {
			t.Errorf("error = %v", err)
		}
	})
	t.Run("connection refused", func(t *testing.T) {
		srv := wiretest.NewAnthropic(nil)
		url := srv.URL
		srv.Close()
		p, err := anthropic.New(&anthropic.Options{APIKey: "k", BaseURL: url})
		if err != nil {
			t.Fatal(err)
		}
		c, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		_, err = p.Complete(c, model.Request{Messages: []model.Message{{Role: model.RoleUser, Text: "hi"}}}, nil)
		if err == nil || !strings.Contains(err.Error(), "base URL") {
			t.Errorf("error = %v; want advice to check the base URL", err)
		}
	})
}

func TestBadInput(t *testing.T) {
	srv := wiretest.NewAnthropic(nil)
	defer srv.Close()
	p := newProvider(t, srv, anthropic.Options{})
	cases := []struct {
		name string
		req  model.Request
		want string
	}{
		{"role", model.Request{Messages: []model.Message{{Role: "system", Text: "x"}}}, `messages[0]: role "system"`},
		{"schema", model.Request{Messages: []model.Message{{Role: model.RoleUser, Text: "x"}},
			Tools: []model.ToolSpec{{Name: "t", InputSchema: json.RawMessage(`[1]`)}}}, "tools[0] (t): input_schema is not a JSON object"},
		{"schema type", model.Request{Messages: []model.Message{{Role: model.RoleUser, Text: "x"}},
			Tools: []model.ToolSpec{{Name: "t", InputSchema: json.RawMessage(`{"type":"string"}`)}}}, `needs "object"`},
		{"empty", model.Request{}, "no messages"},
		{"arguments", model.Request{Messages: []model.Message{
			{Role: model.RoleUser, Text: "x"},
			{Role: model.RoleAssistant, ToolCalls: []model.ToolCall{{ID: "c1", Name: "t", Arguments: json.RawMessage(`[1,2]`)}}},
			{Role: model.RoleUser, ToolResults: []model.ToolResult{{CallID: "c1", Text: "r"}}},
		}}, "id c1, tool t): arguments are not a JSON object"},
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
	t.Setenv(anthropic.EnvAPIKey, "")
	t.Setenv(anthropic.EnvBaseURL, "")
	if _, err := anthropic.New(nil); err == nil || !strings.Contains(err.Error(), "set ANTHROPIC_API_KEY") {
		t.Errorf("missing key: error = %v", err)
	}
	if _, err := anthropic.New(&anthropic.Options{APIKey: "k", BaseURL: "ftp://x"}); err == nil || !strings.Contains(err.Error(), "ftp://x") {
		t.Errorf("bad base URL: error = %v", err)
	}
	if _, err := anthropic.New(&anthropic.Options{APIKey: "k", MaxTokens: -1}); err == nil || !strings.Contains(err.Error(), "MaxTokens is -1") {
		t.Errorf("negative MaxTokens: error = %v", err)
	}

	srv := wiretest.NewAnthropic(nil)
	defer srv.Close()
	t.Setenv(anthropic.EnvAPIKey, "from-env")
	t.Setenv(anthropic.EnvBaseURL, srv.URL)
	p, err := anthropic.New(nil)
	if err != nil {
		t.Fatalf("New from the environment: %v", err)
	}
	if !p.SupportsImages() {
		t.Error("SupportsImages defaults to true for Claude")
	}
	if _, err := p.Complete(ctx(t), model.Request{Messages: []model.Message{{Role: model.RoleUser, Text: "hi"}}}, nil); err != nil {
		t.Fatal(err)
	}
	if got := srv.Requests()[0].Header.Get("x-api-key"); got != "from-env" {
		t.Errorf("x-api-key = %q, want the value of %s", got, anthropic.EnvAPIKey)
	}
}

// TestDefaultClientReusesConnections: without Options.HTTPClient, concurrent
// completions reuse their connections.
func TestDefaultClientReusesConnections(t *testing.T) {
	wiretest.CheckConnectionReuse(t, wiretest.AnthropicAPI(nil), func(base string) model.Provider {
		p, err := anthropic.New(&anthropic.Options{APIKey: "test-key", BaseURL: base})
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		return p
	})
}
