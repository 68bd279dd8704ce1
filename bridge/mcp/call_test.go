package mcp

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gorap/gorap/rap"
	"github.com/gorap/gorap/raptest"
)

// Each MCP content kind reaches the model as docs/mcp.md
// says (RAP RE-1, RE-2, RE-4).
func TestContentKinds(t *testing.T) {
	f := startHTTP(t, nil)
	t.Run("text", func(t *testing.T) {
		if r := f.call(t, "echo", map[string]any{"text": "hello"}); r.Text != "hello" || len(r.Content) != 0 {
			t.Errorf("echo = %+v", r)
		}
	})
	t.Run("structuredContent with its text copy", func(t *testing.T) {
		r := f.call(t, "add", map[string]any{"a": 2, "b": 3})
		if r.Text != `{"sum":5}` {
			t.Errorf("add = %q, want the JSON once", r.Text)
		}
	})
	t.Run("structuredContent alone", func(t *testing.T) {
		if r := f.call(t, "structured_only", map[string]any{}); r.Text != `{"temperature":21.5}` {
			t.Errorf("structured_only = %q", r.Text)
		}
	})
	t.Run("image", func(t *testing.T) {
		r := f.call(t, "image", map[string]any{})
		want := []rap.ContentItem{rap.TextContent("a pixel"), rap.ImageContent("iVBORw==", "image/png")}
		if !slices.Equal(r.Content, want) {
			t.Errorf("image content = %+v, want %+v", r.Content, want)
		}
	})
	t.Run("audio", func(t *testing.T) {
		r := f.call(t, "audio", map[string]any{})
		if !strings.Contains(r.Text, "[audio: audio/wav, 8 bytes") {
			t.Errorf("audio text = %q", r.Text)
		}
		if len(r.DisplayAs) != 1 || r.DisplayAs[0].Type != "audio" || !strings.Contains(string(r.DisplayAs[0].Content), `"mediaType":"audio/wav"`) {
			t.Errorf("audio display_as = %+v", r.DisplayAs)
		}
	})
	t.Run("resource_link", func(t *testing.T) {
		r := f.call(t, "link", map[string]any{})
		if r.Text != "Resource link: file:///tmp/report.txt (report.txt), text/plain, 42 bytes: the report" {
			t.Errorf("link = %q", r.Text)
		}
	})
	t.Run("embedded resource", func(t *testing.T) {
		r := f.call(t, "embedded", map[string]any{})
		if !strings.Contains(r.Text, "Resource mem://notes (text/markdown):\n# Notes") ||
			!strings.Contains(r.Text, "[resource mem://blob: binary, application/zip, 3 bytes") {
			t.Errorf("embedded = %q", r.Text)
		}
	})
	t.Run("isError", func(t *testing.T) {
		r := f.call(t, "fail", map[string]any{})
		if r.Text != `Error: the MCP tool "fail" of server "test" reported an error: disk full` {
			t.Errorf("fail = %q", r.Text)
		}
	})
	t.Run("protocol error", func(t *testing.T) {
		r := f.call(t, "rpc_error", map[string]any{})
		if !strings.HasPrefix(r.Text, "Error: ") || !strings.Contains(r.Text, `MCP server "test"`) || !strings.Contains(r.Text, "JSON-RPC error -32001") || !strings.Contains(r.Text, "quota exceeded") {
			t.Errorf("protocol error = %q", r.Text)
		}
	})
}

// MCP progress notifications become view updates of
// type "progress", all before the one result (RAP VU-1).
func TestProgressViewUpdates(t *testing.T) {
	f := startHTTP(t, nil)
	ctx := ctxT(t)
	c, err := f.rt.Invoke(ctx, f.url, "progress", map[string]any{"steps": 3})
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.Result(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res.Text != "done" {
		t.Errorf("result = %q", res.Text)
	}
	msgs := c.Messages()
	var views []*rap.ViewUpdate
	for i, m := range msgs {
		if v, ok := m.(*rap.ViewUpdate); ok {
			views = append(views, v)
			if i > slices.IndexFunc(msgs, func(m rap.Callback) bool { _, ok := m.(*rap.ToolResult); return ok }) {
				t.Errorf("a view update followed the result: %+v", msgs)
			}
		}
	}
	if len(views) == 0 {
		t.Fatalf("no view update among %d messages", len(msgs))
	}
	last := views[len(views)-1]
	var content struct {
		Progress, Total float64
		Message, Tool   string
	}
	if err := json.Unmarshal(last.Content, &content); err != nil {
		t.Fatal(err)
	}
	if last.ViewType != "progress" || content.Progress != 3 || content.Total != 3 || content.Message != "step 3" || content.Tool != "progress" {
		t.Errorf("last view update = %s %s", last.ViewType, last.Content)
	}
}

// The invocation is acknowledged at once and tools/call
// runs in the background; /cancel_tool_call cancels the MCP request
// (notifications/cancelled reaches the server) and the call ends in one
// Error: result (RAP CA-1, IN-4).
func TestCancelToolCall(t *testing.T) {
	f := startHTTP(t, nil)
	ctx := ctxT(t)
	c, err := f.rt.Invoke(ctx, f.url, "block", map[string]any{}) // returns once acknowledged
	if err != nil {
		t.Fatal(err)
	}
	// Cancel once the MCP server runs the call (a call cancelled before
	// its request left gets no notifications/cancelled: nothing to stop).
	waitFor(t, "the MCP server to start the call", func() bool { return f.hooks.startedCalls() == 1 })
	if err := c.Cancel(ctx); err != nil {
		t.Fatal(err)
	}
	res, err := c.Result(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(res.Text, "Error: ") || !strings.Contains(res.Text, "cancelled") {
		t.Errorf("result = %q", res.Text)
	}
	waitFor(t, "the MCP server to see the cancellation", func() bool { return slices.Contains(f.hooks.cancelledTools(), "block") })
}

// /close_thread cancels that thread's calls, not others.
func TestCloseThreadCancelsItsCalls(t *testing.T) {
	f := startHTTP(t, nil)
	ctx := ctxT(t)
	c, err := f.rt.Invoke(ctx, f.url, "block", map[string]any{})
	if err != nil {
		t.Fatal(err)
	}
	other, err := f.rt.Invoke(ctx, f.url, "block", map[string]any{}, raptest.InThread("thread-other"))
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the MCP server to start both calls", func() bool { return f.hooks.startedCalls() == 2 })
	if err := f.rt.CloseThread(ctx, f.url, c.Invocation.GroupID); err != nil {
		t.Fatal(err)
	}
	res, err := c.Result(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(res.Text, "Error: ") || !strings.Contains(res.Text, "thread was closed") {
		t.Errorf("result = %q", res.Text)
	}
	waitFor(t, "the MCP server to see the cancellation", func() bool { return slices.Contains(f.hooks.cancelledTools(), "block") })
	// The other thread's call still runs, and finishes normally.
	close(f.hooks.release)
	if res, err := other.Result(ctx); err != nil || res.Text != "released" {
		t.Errorf("the other thread's call = %+v, %v; want released", res, err)
	}
	if n := len(f.hooks.cancelledTools()); n != 1 {
		t.Errorf("%d calls cancelled, want 1", n)
	}
}

// Supervision over stdio: a server that dies
// mid-call ends that call with one Error: result naming the server; the
// bridge restarts it and the next call works.
func TestStdioServerCrashMidCall(t *testing.T) {
	f := startStdio(t, nil)
	if got := f.call(t, "echo", map[string]any{"text": "before"}).Text; got != "before" {
		t.Fatalf("echo before the crash = %q", got)
	}
	ctx := ctxT(t)
	c, err := f.rt.Invoke(ctx, f.url, "crash", map[string]any{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.Result(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("crash result: %s", res.Text)
	if !strings.HasPrefix(res.Text, "Error: ") || !strings.Contains(res.Text, `MCP server "stdio"`) {
		t.Errorf("crash result = %q", res.Text)
	}
	// Exactly one result: nothing else arrives for the call.
	n := 0
	for _, m := range c.Messages() {
		if _, ok := m.(*rap.ToolResult); ok {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d results for one invocation", n)
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		got := f.call(t, "echo", map[string]any{"text": "after"}).Text
		if got == "after" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("echo after the crash = %q; the server was not restarted", got)
		}
	}
}

// A server that cannot start is a clear error from Start.
func TestServerCannotStart(t *testing.T) {
	b, err := New(&Options{Name: "ghost", Command: []string{"/nonexistent/mcp-server"}, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	err = b.Start(ctxT(t))
	if err == nil {
		t.Fatal("Start succeeded for a command that does not exist")
	}
	if !strings.Contains(err.Error(), `cannot start MCP server "ghost"`) || !strings.Contains(err.Error(), "/nonexistent/mcp-server") {
		t.Errorf("error = %v", err)
	}
}

func TestNewChecksOptions(t *testing.T) {
	for _, o := range []Options{
		{},
		{Name: "x"},
		{Name: "x", Command: []string{"a"}, URL: "http://h"},
		{Name: "x", URL: "http://h", Mode: "fancy"},
		{Name: "x", Command: []string{"a"}, Env: []string{"NOEQUALS"}},
	} {
		if _, err := New(&o); err == nil {
			t.Errorf("New(%+v) accepted", o)
		}
	}
}
