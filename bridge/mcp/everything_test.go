package mcp

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gorap/gorap/rap"
	"github.com/gorap/gorap/raptest"
)

// End-to-end tests against the MCP reference servers from the npm
// registry (server-everything, server-filesystem, server-memory), pinned
// by testdata/everything/package.json and package-lock.json. .ci/run
// installs them with "npm ci"; without them these tests skip and say how
// to install them, or fail when GORAP_REQUIRE_NPM=1 (as .ci/run sets).

// everythingServer returns the node binary and server-everything's entry
// point, or skips the test.
func everythingServer(t *testing.T) (node, script string) {
	t.Helper()
	return npmServer(t, "server-everything")
}

// npmServer returns the node binary and the entry point of the npm
// package @modelcontextprotocol/PKG installed in testdata/everything. When
// either is missing the test skips, or fails under GORAP_REQUIRE_NPM=1.
func npmServer(t *testing.T, pkg string) (node, script string) {
	t.Helper()
	script, err := filepath.Abs(filepath.Join("testdata", "everything", "node_modules", "@modelcontextprotocol", pkg, "dist", "index.js"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(script); err != nil {
		skipNoNPM(t, "@modelcontextprotocol/"+pkg+" is not installed; run `npm ci` in bridge/mcp/testdata/everything (.ci/run does) to run this end-to-end test")
	}
	node, err = exec.LookPath("node")
	if err != nil {
		skipNoNPM(t, "node is not on PATH; install Node.js to run the MCP npm servers' end-to-end tests")
	}
	return node, script
}

// skipNoNPM skips the test for why, or fails it when GORAP_REQUIRE_NPM=1:
// CI must run the end-to-end tests, not skip them.
func skipNoNPM(t *testing.T, why string) {
	t.Helper()
	if os.Getenv("GORAP_REQUIRE_NPM") == "1" {
		t.Fatal(why + ", and GORAP_REQUIRE_NPM=1 (CI) requires the npm end-to-end tests to run")
	}
	t.Skip(why)
}

// Through the bridge over stdio, each content
// kind of server-everything reaches the model as docs/mcp.md says, and a
// long-running operation shows progress view updates before its result.
func TestEverythingStdio(t *testing.T) {
	node, script := everythingServer(t)
	f := startStdio(t, func(o *Options) {
		o.Name = "everything"
		o.Command = []string{node, script, "stdio"}
		o.Env = nil
		o.Stderr = devNull(t)
		o.TerminateWait = 300 * time.Millisecond
	})
	ts, err := f.rt.Discover(ctxT(t), f.url)
	if err != nil {
		t.Fatal(err)
	}
	if err := ts.Validate(); err != nil {
		t.Fatalf("the bridged toolset is invalid: %v", err)
	}
	if skipped := f.bridge.Skipped(); len(skipped) > 0 {
		t.Errorf("tools left out: %v", skipped)
	}
	for _, want := range []string{"echo", "get-sum", "get-tiny-image", "get-structured-content", "get-resource-links", "get-resource-reference", "trigger-long-running-operation"} {
		if toolByName(ts, want) == nil {
			t.Errorf("tool %q missing; served: %v", want, names(ts))
		}
	}

	t.Run("text", func(t *testing.T) {
		if got := f.call(t, "echo", map[string]any{"message": "hi"}).Text; got != "Echo: hi" {
			t.Errorf("echo = %q", got)
		}
	})
	t.Run("get-sum", func(t *testing.T) {
		if got := f.call(t, "get-sum", map[string]any{"a": 2, "b": 40}).Text; !strings.Contains(got, "42") {
			t.Errorf("get-sum = %q", got)
		}
	})
	t.Run("image", func(t *testing.T) {
		r := f.call(t, "get-tiny-image", map[string]any{})
		var images int
		for _, c := range r.Content {
			if c.Type == "image" && c.MediaType == "image/png" && c.Data != "" {
				images++
			}
		}
		if images != 1 {
			t.Errorf("get-tiny-image content = %+v, want one PNG image", r.Content)
		}
	})
	t.Run("structuredContent", func(t *testing.T) {
		r := f.call(t, "get-structured-content", map[string]any{"location": "Chicago"})
		if strings.Count(r.Text, `"temperature"`) != 1 {
			t.Errorf("get-structured-content = %q, want the JSON once", r.Text)
		}
	})
	t.Run("resource_link", func(t *testing.T) {
		r := f.call(t, "get-resource-links", map[string]any{"count": 2})
		if strings.Count(r.Text, "Resource link: ") != 2 {
			t.Errorf("get-resource-links = %q", r.Text)
		}
	})
	t.Run("embedded text resource", func(t *testing.T) {
		r := f.call(t, "get-resource-reference", map[string]any{"resourceType": "Text", "resourceId": 2})
		if !strings.Contains(r.Text, "Resource demo://resource/") {
			t.Errorf("get-resource-reference text = %q", r.Text)
		}
	})
	t.Run("progress", func(t *testing.T) {
		ctx := ctxT(t)
		c, err := f.rt.Invoke(ctx, f.url, "trigger-long-running-operation", map[string]any{"duration": 0.3, "steps": 3})
		if err != nil {
			t.Fatal(err)
		}
		res, err := c.Result(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(res.Text, "Long running operation completed") {
			t.Errorf("result = %q", res.Text)
		}
		var views int
		for _, m := range c.Messages() {
			if v, ok := m.(*rap.ViewUpdate); ok && v.ViewType == ProgressViewType {
				views++
			}
			if _, ok := m.(*rap.ToolResult); ok {
				break
			}
		}
		if views == 0 {
			t.Errorf("no progress view update before the result: %d messages", len(c.Messages()))
		}
	})
	t.Run("elicitation with free-text fields", func(t *testing.T) {
		// server-everything asks with elicitation/create
		// (no reference to the call: the bridge attributes it to the one
		// call in flight); its form has free-text fields, so the bridge
		// declines and the result says why.
		r := f.call(t, "trigger-elicitation-request", map[string]any{})
		if !strings.Contains(r.Text, "decline") || !strings.Contains(r.Text, "[gorap MCP bridge]") || !strings.Contains(r.Text, "free-form") {
			t.Errorf("trigger-elicitation-request = %q", r.Text)
		}
	})
	t.Run("elicitation as a user input", func(t *testing.T) {
		// With a runtime that lists the user_input extension, the same
		// form is asked as one user_input with typed fields (its optional
		// multi-select fields left out, as the result says); the values
		// reach the server.
		ctx := ctxT(t)
		c, err := f.rt.Invoke(ctx, f.url, "trigger-elicitation-request", map[string]any{}, raptest.WithExtensions(rap.ExtensionUserInput))
		if err != nil {
			t.Fatal(err)
		}
		ui := nextInput(t, c)
		byName := map[string]rap.InputField{}
		for _, fld := range ui.Fields {
			byName[fld.Name] = fld
		}
		if ui.Fields[0].Name != "name" || !ui.Fields[0].Required || byName["email"].Format != rap.FormatEmail ||
			byName["integer"].Type != rap.InputInteger || *byName["integer"].Maximum != 100 || byName["check"].Type != rap.InputBoolean ||
			len(byName["titledSingleSelectEnum"].Options) != 3 || byName["untitledSingleSelectEnum"].Type != rap.InputEnum {
			t.Fatalf("user_input fields = %+v", ui.Fields)
		}
		if _, ok := byName["untitledMultipleSelectEnum"]; ok {
			t.Errorf("a multi-select field was asked: %+v", ui.Fields)
		}
		if err := f.rt.AnswerInput(ctx, ui, map[string]any{"name": "Ada Lovelace", "check": true, "integer": 7, "email": "ada@example.com"}); err != nil {
			t.Fatal(err)
		}
		res, err := c.Result(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"- Name: Ada Lovelace", "- Agreed to terms: true", "- Favorite Integer: 7", "- Email: ada@example.com", "left out its optional fields"} {
			if !strings.Contains(res.Text, want) {
				t.Errorf("result lacks %q: %q", want, res.Text)
			}
		}
	})
	t.Run("elicitation as a user input, dismissed", func(t *testing.T) {
		ctx := ctxT(t)
		c, err := f.rt.Invoke(ctx, f.url, "trigger-elicitation-request", map[string]any{}, raptest.WithExtensions(rap.ExtensionUserInput))
		if err != nil {
			t.Fatal(err)
		}
		if err := f.rt.AnswerInput(ctx, nextInput(t, c), nil); err != nil {
			t.Fatal(err)
		}
		res, err := c.Result(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(res.Text, "declined") {
			t.Errorf("result = %q, want the server's decline", res.Text)
		}
	})
	t.Run("url elicitation", func(t *testing.T) {
		// The link reaches the runtime as an oauth message.
		ctx := ctxT(t)
		c, err := f.rt.Invoke(ctx, f.url, "trigger-url-elicitation", map[string]any{"url": "https://example.com/login?x=1"})
		if err != nil {
			t.Fatal(err)
		}
		res, err := c.Result(ctx)
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, m := range c.Messages() {
			if o, ok := m.(*rap.OAuth); ok && o.AuthURL == "https://example.com/login?x=1" {
				found = true
			}
		}
		if !found || strings.HasPrefix(res.Text, "Error: ") {
			t.Errorf("no oauth message with the URL, or an error result: %q", res.Text)
		}
	})
	t.Run("tool error", func(t *testing.T) {
		r := f.call(t, "get-resource-reference", map[string]any{"resourceType": "Text", "resourceId": 0})
		if !strings.HasPrefix(r.Text, "Error: ") || !strings.Contains(r.Text, `"everything"`) {
			t.Errorf("get-resource-reference with id 0 = %q", r.Text)
		}
	})
}

// Every tool of server-everything is callable through
// the bridge and each invocation ends in exactly one result, also tools
// that need client features the bridge does not offer yet (elicitation,
// sampling: they end in an Error: result).
func TestEverythingEveryTool(t *testing.T) {
	node, script := everythingServer(t)
	f := startStdio(t, func(o *Options) {
		o.Name = "everything"
		o.Command = []string{node, script, "stdio"}
		o.Env = nil
		o.Stderr = devNull(t)
		o.TerminateWait = 300 * time.Millisecond
	})
	ts, err := f.rt.Discover(ctxT(t), f.url)
	if err != nil {
		t.Fatal(err)
	}
	overrides := map[string]map[string]any{
		"trigger-long-running-operation": {"duration": 0.1, "steps": 2},
		"get-structured-content":         {"location": "Chicago"},
		"get-resource-reference":         {"resourceType": "Text", "resourceId": 2},
		"trigger-url-elicitation":        {"url": "https://example.com/login"},
		// A data: URL: no network needed.
		"gzip-file-as-resource": {"name": "hello.txt.gz", "data": "data:text/plain;base64,aGVsbG8gd29ybGQ=", "outputType": "resource"},
	}
	ctx := ctxT(t)
	start := time.Now()
	calls := map[string]*raptest.Call{}
	for _, tool := range ts.Tools {
		args := overrides[tool.Name]
		if args == nil {
			args = exampleArgs(tool.InputSchema)
		}
		c, err := f.rt.Invoke(ctx, f.url, tool.Name, args)
		if err != nil {
			t.Errorf("invoke %s: %v", tool.Name, err)
			continue
		}
		calls[tool.Name] = c
	}
	for name, c := range calls {
		res, err := c.Result(ctx)
		if err != nil {
			t.Errorf("%s: no result: %v", name, err)
			continue
		}
		n := 0
		for _, m := range c.Messages() {
			if _, ok := m.(*rap.ToolResult); ok {
				n++
			}
		}
		if n != 1 {
			t.Errorf("%s: %d results", name, n)
		}
		if name == "gzip-file-as-resource" && !strings.Contains(res.ModelText(), "binary, application/gzip") {
			t.Errorf("gzip-file-as-resource (an embedded blob) = %q", res.ModelText())
		}
		t.Logf("%s -> %.60q (%v)", name, res.ModelText(), time.Since(start))
	}
}

// exampleArgs builds arguments from a schema's required properties: the
// default or first enum value when given, else a value of the type.
func exampleArgs(schema json.RawMessage) map[string]any {
	var s struct {
		Required   []string `json:"required"`
		Properties map[string]struct {
			Type    any   `json:"type"`
			Enum    []any `json:"enum"`
			Default any   `json:"default"`
		} `json:"properties"`
	}
	_ = json.Unmarshal(schema, &s)
	args := map[string]any{}
	for _, r := range s.Required {
		p := s.Properties[r]
		switch {
		case p.Default != nil:
			args[r] = p.Default
		case len(p.Enum) > 0:
			args[r] = p.Enum[0]
		case p.Type == "string":
			args[r] = "x"
		case p.Type == "number" || p.Type == "integer":
			args[r] = 1
		case p.Type == "boolean":
			args[r] = false
		case p.Type == "array":
			args[r] = []any{}
		default:
			args[r] = map[string]any{}
		}
	}
	return args
}

// The same server over Streamable HTTP.
func TestEverythingStreamableHTTP(t *testing.T) {
	node, script := everythingServer(t)
	port := startEverythingHTTP(t, node, script)
	f := startBridge(t, &Options{Name: "everything", URL: "http://127.0.0.1:" + port + "/mcp", Logger: quietLogger()})
	if got := f.call(t, "echo", map[string]any{"message": "over http"}).Text; got != "Echo: over http" {
		t.Errorf("echo = %q", got)
	}
	r := f.call(t, "get-tiny-image", map[string]any{})
	if len(r.Content) == 0 {
		t.Errorf("get-tiny-image = %+v", r)
	}
}

// startEverythingHTTP starts server-everything over Streamable HTTP and
// returns its port once it answers there. The server takes its port from
// $PORT and cannot choose one itself, so the port is one that was free a
// moment ago: another test's listener can take it first, and then node
// exits ("already in use") or, bound beside it, is not the one that
// answers on 127.0.0.1. Either way the start is retried on another port.
func startEverythingHTTP(t *testing.T, node, script string) string {
	t.Helper()
	for attempt := 1; attempt <= 5; attempt++ {
		port := freePort(t)
		cmd := exec.Command(node, script, "streamableHttp")
		cmd.Env = append(os.Environ(), "PORT="+port)
		stderr := &syncBuf{}
		cmd.Stderr = stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan struct{})
		go func() { _ = cmd.Wait(); close(exited) }()
		stop := func() { _ = cmd.Process.Kill(); <-exited }
		if everythingAnswers(t, port, exited, stderr) {
			t.Cleanup(stop)
			return port
		}
		stop()
		t.Logf("server-everything did not come up on port %s (attempt %d), retrying on another:\n%s", port, attempt, stderr)
	}
	t.Fatal("server-everything did not come up in 5 attempts")
	return ""
}

// everythingAnswers waits until server-everything says it listens on port,
// then checks that what answers there is server-everything: its MCP
// endpoint refuses a GET without a session, exposing mcp-session-id.
func everythingAnswers(t *testing.T, port string, exited <-chan struct{}, stderr *syncBuf) bool {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !strings.Contains(stderr.String(), "listening on port "+port) {
		select {
		case <-exited:
			return false
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("server-everything did not listen on port %s within 60 s:\n%s", port, stderr)
		}
	}
	hc := &http.Client{Timeout: 10 * time.Second}
	resp, err := hc.Get("http://127.0.0.1:" + port + "/mcp")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusBadRequest && strings.Contains(resp.Header.Get("Access-Control-Expose-Headers"), "mcp-session-id")
}

// freePort returns a port that was free a moment ago.
func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return fmt.Sprint(ln.Addr().(*net.TCPAddr).Port)
}

func devNull(t *testing.T) *os.File {
	t.Helper()
	f, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}
