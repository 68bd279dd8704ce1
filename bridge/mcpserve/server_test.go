package mcpserve

import (
	"context"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gorap/gorap/rap"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Every tool of the RAP tool server is listed as an MCP tool, with its
// description, input schema and hints; the server's MCP title comes from
// the x-mcp-title annotation.
func TestListTools(t *testing.T) {
	tt := startTestTools(t)
	s := newTestServer(t, nil, tt.URL)
	cs, _ := connect(t, s, nil)
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]*mcp.Tool{}
	for _, tool := range res.Tools {
		byName[tool.Name] = tool
	}
	for _, name := range []string{"echo", "slow", "block", "ask", "picture", "fail", "sign_in", "ticks"} {
		if byName[name] == nil {
			t.Errorf("tool %q is not listed; got %d tools", name, len(res.Tools))
		}
	}
	echo := byName["echo"]
	if echo == nil {
		t.FailNow()
	}
	if echo.Description != "Sends back its text." || echo.Title != "Echo" {
		t.Errorf("echo: description %q, title %q", echo.Description, echo.Title)
	}
	schema, _ := echo.InputSchema.(map[string]any)
	props, _ := schema["properties"].(map[string]any)
	if schema["type"] != "object" || props["text"] == nil {
		t.Errorf("echo's input schema = %v, want an object with the property text", echo.InputSchema)
	}
	a := echo.Annotations
	if a == nil || !a.ReadOnlyHint || !a.IdempotentHint || a.DestructiveHint == nil || *a.DestructiveHint || a.Title != "Echo" {
		t.Errorf("echo's annotations = %+v, want read-only, idempotent, not destructive, titled", a)
	}
	if byName["slow"].Annotations != nil {
		t.Errorf("slow has no RAP annotations but got MCP ones: %+v", byName["slow"].Annotations)
	}
}

// A synchronous tool's result comes back as MCP text; a RAP error result
// (text starting "Error:") is an MCP error result; images are images.
func TestCallResults(t *testing.T) {
	tt := startTestTools(t)
	s := newTestServer(t, nil, tt.URL)
	cs, _ := connect(t, s, nil)

	res := callTool(t, cs, "echo", map[string]any{"text": "hello"}, nil)
	if got := texts(res); res.IsError || len(got) != 1 || got[0] != "hello" {
		t.Errorf("echo: isError %v, texts %q; want hello", res.IsError, got)
	}

	res = callTool(t, cs, "fail", map[string]any{}, nil)
	if got := texts(res); !res.IsError || len(got) != 1 || !strings.HasPrefix(got[0], "Error:") || !strings.Contains(got[0], "the disk is full") {
		t.Errorf("fail: isError %v, texts %q; want an error result naming the cause", res.IsError, got)
	}

	res = callTool(t, cs, "picture", nil, nil)
	if len(res.Content) != 2 {
		t.Fatalf("picture: %d content items, want 2", len(res.Content))
	}
	img, ok := res.Content[1].(*mcp.ImageContent)
	if !ok || img.MIMEType != "image/png" || string(img.Data) != "\x89PNG\r\n\x1a\n" {
		t.Errorf("picture's second item = %#v, want the PNG signature as image/png", res.Content[1])
	}

	res = callTool(t, cs, "echo", map[string]any{"text": 3}, nil)
	if got := texts(res); !res.IsError || len(got) != 1 || !strings.Contains(got[0], "do not fit the input schema") {
		t.Errorf("echo with a number: isError %v, texts %q; want an error result about the schema", res.IsError, got)
	}
}

// A result that arrives through the callback seconds after the call is
// returned, and the tool's progress view arrives meanwhile as an MCP
// progress notification for the client's token.
func TestSlowCallWithProgress(t *testing.T) {
	tt := startTestTools(t)
	s := newTestServer(t, func(o *Options) { o.ProgressInterval = 400 * time.Millisecond }, tt.URL)
	cs, ev := connect(t, s, nil)
	start := time.Now()
	res := callTool(t, cs, "slow", nil, "tok-1")
	if got := texts(res); res.IsError || len(got) != 1 || got[0] != "done slowly" {
		t.Fatalf("slow: isError %v, texts %q", res.IsError, got)
	}
	if d := time.Since(start); d < 2*time.Second {
		t.Errorf("slow answered after %v, before its result was sent", d)
	}
	waitFor(t, 2*time.Second, "the progress notifications", func() bool { return len(ev.progressMessages()) >= 2 })
	msgs := ev.progressMessages()
	first := msgs[0]
	if first.ProgressToken != "tok-1" || first.Progress != 1 || first.Total != 2 || first.Message != "half way" {
		t.Errorf("first progress = %+v, want the tool's view: 1 of 2, half way, token tok-1", first)
	}
	last := 0.0
	heartbeat := false
	for _, m := range msgs {
		if m.Progress <= last {
			t.Errorf("progress went from %v to %v; MCP wants it to grow", last, m.Progress)
		}
		last = m.Progress
		if m.Total > 0 && m.Progress > m.Total {
			t.Errorf("progress %v is over its total %v", m.Progress, m.Total)
		}
		heartbeat = heartbeat || strings.HasPrefix(m.Message, "waiting for the result of slow")
	}
	if !heartbeat {
		t.Errorf("no 'still waiting' progress in 2 s with a 400 ms interval: %d notifications", len(msgs))
	}
}

// Without a progress token the client gets no progress notifications.
func TestNoProgressWithoutToken(t *testing.T) {
	tt := startTestTools(t)
	s := newTestServer(t, func(o *Options) { o.ProgressInterval = 200 * time.Millisecond }, tt.URL)
	cs, ev := connect(t, s, nil)
	res := callTool(t, cs, "slow", nil, nil)
	if res.IsError {
		t.Fatalf("slow failed: %q", texts(res))
	}
	if n := len(ev.progressMessages()); n != 0 {
		t.Errorf("%d progress notifications without a progress token", n)
	}
}

// An MCP client that cancels its request makes the server send RAP
// /cancel_tool_call: the tool's context ends with rap.ErrCallCancelled.
func TestCancelSendsCancelToolCall(t *testing.T) {
	tt := startTestTools(t)
	s := newTestServer(t, nil, tt.URL)
	cs, _ := connect(t, s, nil)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "block", Arguments: map[string]any{}})
		errc <- err
	}()
	receive(t, tt.started, 5*time.Second, "the block tool to start")
	cancel()
	if err := receive(t, errc, 5*time.Second, "CallTool to return"); err == nil {
		t.Error("the cancelled CallTool returned no error")
	}
	if cause := receive(t, tt.cancelled, 5*time.Second, "the tool to be cancelled"); !errors.Is(cause, rap.ErrCallCancelled) {
		t.Errorf("the tool's context ended with %v, want rap.ErrCallCancelled (from /cancel_tool_call)", cause)
	}
}

// A call with no result within the call timeout is cancelled at the tool
// server and answered with an error result that says so.
func TestCallTimeout(t *testing.T) {
	tt := startTestTools(t)
	s := newTestServer(t, func(o *Options) { o.CallTimeout = 300 * time.Millisecond }, tt.URL)
	cs, _ := connect(t, s, nil)
	res := callTool(t, cs, "block", nil, nil)
	if got := texts(res); !res.IsError || len(got) != 1 || !strings.Contains(got[0], "no result within 300ms") || !strings.Contains(got[0], "--call-timeout") {
		t.Errorf("block: isError %v, texts %q; want an error result naming the call timeout", res.IsError, got)
	}
	if cause := receive(t, tt.cancelled, 5*time.Second, "the tool to be cancelled"); !errors.Is(cause, rap.ErrCallCancelled) {
		t.Errorf("the tool's context ended with %v, want rap.ErrCallCancelled", cause)
	}
}

// A user_choice becomes a form elicitation whose enum holds the choices;
// the user's pick is POSTed to the tool.
func TestUserChoiceElicitation(t *testing.T) {
	tt := startTestTools(t)
	s := newTestServer(t, nil, tt.URL)
	var asked *mcp.ElicitParams
	cs, _ := connect(t, s, func(_ context.Context, r *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		asked = r.Params
		return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"choice": "blue"}}, nil
	})
	res := callTool(t, cs, "ask", nil, nil)
	if got := texts(res); res.IsError || len(got) != 1 || got[0] != "picked 2" {
		t.Fatalf("ask: isError %v, texts %q; want picked 2", res.IsError, got)
	}
	if asked == nil || asked.Mode != "form" || !strings.Contains(asked.Message, "Pick a colour") {
		t.Fatalf("elicitation = %+v, want a form with the prompt", asked)
	}
	schema, _ := asked.RequestedSchema.(map[string]any)
	props, _ := schema["properties"].(map[string]any)
	field, _ := props["choice"].(map[string]any)
	enum, _ := field["enum"].([]any)
	if len(enum) != 3 || enum[0] != "red" || enum[2] != "blue" {
		t.Errorf("the form's choice field = %v, want the enum red, green, blue", field)
	}
}

// A declined elicitation, and a client without elicitation, answer the
// choice with its default, as a dismissal does (RAP UC-2).
func TestUserChoiceDismissed(t *testing.T) {
	tt := startTestTools(t)
	s := newTestServer(t, nil, tt.URL)
	declining, _ := connect(t, s, func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		return &mcp.ElicitResult{Action: "decline"}, nil
	})
	if got := texts(callTool(t, declining, "ask", nil, nil)); len(got) != 1 || got[0] != "picked 0" {
		t.Errorf("declined: texts %q, want picked 0 (the default)", got)
	}
	plain, _ := connect(t, s, nil)
	if got := texts(callTool(t, plain, "ask", nil, nil)); len(got) != 1 || got[0] != "picked 0" {
		t.Errorf("without elicitation: texts %q, want picked 0 (the default)", got)
	}
}

// An oauth link becomes a URL-mode elicitation; the call goes on until
// the tool's result.
func TestOAuthURLElicitation(t *testing.T) {
	tt := startTestTools(t)
	s := newTestServer(t, nil, tt.URL)
	urls := make(chan string, 1)
	cs, _ := connect(t, s, func(_ context.Context, r *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		if r.Params.Mode == "url" {
			urls <- r.Params.URL
			close(tt.signedIn)
		}
		return &mcp.ElicitResult{Action: "accept"}, nil
	})
	res := callTool(t, cs, "sign_in", nil, nil)
	if got := receive(t, urls, time.Second, "the URL elicitation"); got != "https://auth.example/authorize?state=xyz" {
		t.Errorf("URL elicitation for %q", got)
	}
	if got := texts(res); res.IsError || len(got) != 1 || got[0] != "signed in" {
		t.Errorf("sign_in: isError %v, texts %q", res.IsError, got)
	}
}

// A client without URL elicitation and without a progress token gets the
// link as an error result, and the call is cancelled.
func TestOAuthWithoutElicitation(t *testing.T) {
	tt := startTestTools(t)
	s := newTestServer(t, nil, tt.URL)
	cs, _ := connect(t, s, nil)
	res := callTool(t, cs, "sign_in", nil, nil)
	if got := texts(res); !res.IsError || len(got) != 1 || !strings.Contains(got[0], "https://auth.example/authorize?state=xyz") {
		t.Errorf("sign_in: isError %v, texts %q; want an error result with the link", res.IsError, got)
	}
}

// A tool the MCP SDK refuses (here: an x-mcp-header on an object
// property) is left out and reported; the others are served.
func TestToolTheSDKRefusesIsLeftOut(t *testing.T) {
	s := rap.NewServer("odd", &rap.ServerOptions{Description: "An odd tool and a plain one.", Logger: testLogger()})
	s.AddRawTool(&rap.Tool{Name: "odd", Description: "Has a header annotation MCP refuses.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"o":{"type":"object","x-mcp-header":"X-O"}}}`)},
		func(context.Context, *rap.Call, json.RawMessage) (*rap.Reply, error) { return rap.Text("odd"), nil })
	s.AddRawTool(&rap.Tool{Name: "plain", Description: "Plain.", InputSchema: rap.EmptyObjectSchema},
		func(context.Context, *rap.Call, json.RawMessage) (*rap.Reply, error) { return rap.Text("plain"), nil })
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s)
	t.Cleanup(func() { hs.Close(); _ = s.Shutdown(context.Background()) })
	srv := newTestServer(t, nil, hs.URL)
	if got := srv.Tools(); len(got) != 1 || got[0] != "plain" {
		t.Errorf("tools served: %v, want plain only", got)
	}
	if sk := srv.Skipped(); len(sk) != 1 || !strings.Contains(sk[0], `"odd"`) || !strings.Contains(sk[0], "x-mcp-header") {
		t.Errorf("skipped: %q, want odd with the SDK's reason", sk)
	}
}
