package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorap/gorap/rap"
	"github.com/gorap/gorap/raptest"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// fixture is a bridge in front of an MCP server, served over real HTTP,
// and a fake RAP runtime that invokes it.
type fixture struct {
	bridge *Bridge
	url    string // the bridge's RAP base URL
	rt     *raptest.Runtime
	hooks  *serverHooks
	server *sdk.Server
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// startHTTP starts the in-process MCP server behind a Streamable HTTP
// endpoint and a bridge to it.
func startHTTP(t *testing.T, mut func(*Options)) *fixture {
	t.Helper()
	hooks := &serverHooks{release: make(chan struct{})}
	server := newTestServer(hooks)
	mcpHTTP := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return server }, nil))
	t.Cleanup(mcpHTTP.Close)
	opts := Options{Name: "test", URL: mcpHTTP.URL, Logger: quietLogger()}
	if mut != nil {
		mut(&opts)
	}
	f := startBridge(t, &opts)
	f.hooks, f.server = hooks, server
	t.Cleanup(func() {
		defer func() { _ = recover() }() // a test may have closed it
		close(hooks.release)
	})
	return f
}

// startStdio starts this test binary as a stdio MCP server and a bridge
// to it.
func startStdio(t *testing.T, mut func(*Options)) *fixture {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	opts := Options{Name: "stdio", Command: []string{exe, "-test.run=^$"}, Env: []string{envStdioServer + "=1"},
		Logger: quietLogger(), MinBackoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond}
	if mut != nil {
		mut(&opts)
	}
	return startBridge(t, &opts)
}

func startBridge(t *testing.T, opts *Options) *fixture {
	t.Helper()
	ctx := context.Background()
	b, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Start(ctx); err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(b)
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = b.Shutdown(sctx)
		hs.Close()
	})
	rt, err := raptest.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rt.Close)
	return &fixture{bridge: b, url: hs.URL, rt: rt}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// call invokes op and returns its one result.
func (f *fixture) call(t *testing.T, op string, args any) *rap.ToolResult {
	t.Helper()
	ctx := ctxT(t)
	c, err := f.rt.Invoke(ctx, f.url, op, args)
	if err != nil {
		t.Fatalf("invoke %s: %v", op, err)
	}
	res, err := c.Result(ctx)
	if err != nil {
		t.Fatalf("result of %s: %v", op, err)
	}
	return res
}

func toolByName(ts *rap.Toolset, name string) *rap.Tool {
	for i := range ts.Tools {
		if ts.Tools[i].Name == name {
			return &ts.Tools[i]
		}
	}
	return nil
}

// Every MCP tool becomes a RAP tool with its name,
// description, schema, annotations and a display script; a tool whose
// schema RAP refuses is reported and left out (RAP TS-1..TS-8).
func TestToolsMapped(t *testing.T) {
	f := startHTTP(t, nil)
	ts, err := f.rt.Discover(ctxT(t), f.url)
	if err != nil {
		t.Fatal(err)
	}
	if err := ts.Validate(); err != nil {
		t.Fatalf("served toolset is invalid: %v", err)
	}
	echo := toolByName(ts, "echo")
	if echo == nil {
		t.Fatalf("no echo tool in %+v", ts.Tools)
	}
	if echo.Description != "Echo: Echoes text." {
		t.Errorf("description = %q", echo.Description)
	}
	if a := echo.Annotations; a == nil || !a.ReadOnly || !a.Idempotent || a.Destructive ||
		string(a.Custom["x-mcp-openWorldHint"]) != "false" || string(a.Custom["x-mcp-title"]) != `"Echo"` {
		t.Errorf("echo annotations = %+v", echo.Annotations)
	}
	if !strings.Contains(string(echo.InputSchema), `"text"`) {
		t.Errorf("echo schema = %s", echo.InputSchema)
	}
	if !strings.Contains(echo.DisplayScript, `"Echo"`) || !strings.Contains(echo.DisplayScript, `args["text"]`) {
		t.Errorf("echo display script = %q", echo.DisplayScript)
	}
	if add := toolByName(ts, "add"); add == nil || add.Annotations == nil || !add.Annotations.Destructive {
		t.Errorf("add should be destructive: %+v", add)
	}
	if toolByName(ts, "bad_schema") != nil {
		t.Error("bad_schema is served; a tool with a schema RAP refuses must be left out")
	}
	skipped := f.bridge.Skipped()
	if len(skipped) != 1 || skipped[0].Tool != "bad_schema" || !strings.Contains(skipped[0].Reason, "inputSchema") {
		t.Errorf("Skipped() = %v, want bad_schema with an inputSchema reason", skipped)
	}
}

// The name prefix avoids collisions between servers.
func TestToolsPrefix(t *testing.T) {
	f := startHTTP(t, func(o *Options) { o.Prefix = "t_" })
	ts, err := f.rt.Discover(ctxT(t), f.url)
	if err != nil {
		t.Fatal(err)
	}
	if toolByName(ts, "t_echo") == nil || toolByName(ts, "echo") != nil {
		t.Fatalf("tools = %v, want t_echo and no echo", names(ts))
	}
	if got := f.call(t, "t_echo", map[string]any{"text": "hi"}).Text; got != "hi" {
		t.Errorf("t_echo = %q", got)
	}
}

func names(ts *rap.Toolset) []string {
	var n []string
	for _, t := range ts.Tools {
		n = append(n, t.Name)
	}
	return n
}

// notifications/tools/list_changed refreshes the served
// toolset: an added tool appears, a removed one disappears.
func TestToolListChanged(t *testing.T) {
	f := startHTTP(t, nil)
	f.server.AddTool(&sdk.Tool{Name: "late", Description: "Added later.", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return textResult("late here"), nil
		})
	waitFor(t, "the late tool to be served", func() bool { return toolByName(f.bridge.Toolset("http://x/"), "late") != nil })
	if got := f.call(t, "late", map[string]any{}).Text; got != "late here" {
		t.Errorf("late = %q", got)
	}
	f.server.RemoveTools("echo")
	waitFor(t, "echo to be removed", func() bool { return toolByName(f.bridge.Toolset("http://x/"), "echo") == nil })
}

// RAP CF-2: proxy mode serves {name}_list_tools and
// {name}_invoke_tool.
func TestProxyMode(t *testing.T) {
	f := startHTTP(t, func(o *Options) { o.Mode = ModeProxy })
	ts, err := f.rt.Discover(ctxT(t), f.url)
	if err != nil {
		t.Fatal(err)
	}
	if got := names(ts); !slices.Equal(got, []string{"test_list_tools", "test_invoke_tool"}) {
		t.Fatalf("proxy tools = %v", got)
	}
	list := f.call(t, "test_list_tools", map[string]any{}).Text
	if !strings.Contains(list, `"name":"echo"`) || strings.Contains(list, "bad_schema") {
		t.Errorf("list_tools = %s", list)
	}
	if got := f.call(t, "test_invoke_tool", map[string]any{"tool_name": "echo", "arguments": map[string]any{"text": "via proxy"}}).Text; got != "via proxy" {
		t.Errorf("invoke_tool echo = %q", got)
	}
	if got := f.call(t, "test_invoke_tool", map[string]any{"tool_name": "echo", "arguments": map[string]any{"text": 5}}).Text; !strings.HasPrefix(got, "Error: invalid arguments") {
		t.Errorf("invoke_tool with bad arguments = %q", got)
	}
	if got := f.call(t, "test_invoke_tool", map[string]any{"tool_name": "nope"}).Text; !strings.HasPrefix(got, "Error: ") || !strings.Contains(got, "test_list_tools") {
		t.Errorf("invoke_tool of an unknown tool = %q", got)
	}
}

// syncBuf is a bytes.Buffer safe for concurrent use.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// docs/security/mcp-bridge.md: the headers sent to an HTTP
// MCP server (API keys) reach the server but never the bridge's log (at
// debug level), the manifest or a result.
func TestHeadersNotLeaked(t *testing.T) {
	const secret = "s3cret-api-key-value"
	var logs syncBuf
	var seen atomic.Bool
	server := newTestServer(&serverHooks{release: make(chan struct{})})
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return server }, nil)
	mcpHTTP := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") == "Bearer "+secret {
			seen.Store(true)
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(mcpHTTP.Close)
	f := startBridge(t, &Options{Name: "test", URL: mcpHTTP.URL, Headers: map[string]string{"Authorization": "Bearer " + secret},
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	var results []string
	for _, op := range []string{"echo", "fail", "rpc_error"} {
		results = append(results, f.call(t, op, map[string]any{"text": "x"}).Text)
	}
	manifest, _ := json.Marshal(f.bridge.Toolset("http://x/"))
	if !seen.Load() {
		t.Fatal("the MCP server never received the configured header")
	}
	for what, s := range map[string]string{"log": logs.String(), "manifest": string(manifest), "results": strings.Join(results, "\n")} {
		if strings.Contains(s, secret) {
			t.Errorf("the header value appears in the %s", what)
		}
	}
}
