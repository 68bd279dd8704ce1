package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gorap/gorap/bridge/mcp"
	"github.com/gorap/gorap/raptest"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

type bridgeEchoIn struct {
	Text string `json:"text"`
}

// newBridgeTestMCP serves a one-tool MCP server over Streamable HTTP,
// built with the official Go SDK.
func newBridgeTestMCP(t *testing.T) string {
	t.Helper()
	s := sdk.NewServer(&sdk.Implementation{Name: "cmd-test", Version: "1"}, nil)
	sdk.AddTool(s, &sdk.Tool{Name: "echo", Description: "Echoes text."},
		func(ctx context.Context, req *sdk.CallToolRequest, in bridgeEchoIn) (*sdk.CallToolResult, any, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: in.Text}}}, nil, nil
		})
	hs := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s }, nil))
	t.Cleanup(hs.Close)
	return hs.URL
}

// Standalone: "rap bridge mcp --url" serves
// the MCP server as a RAP tool server that rap validate accepts and a
// runtime can call.
func TestBridgeMCPURL(t *testing.T) {
	mcpURL := newBridgeTestMCP(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	bctx, stop := context.WithCancel(ctx)
	ready := make(chan string, 1)
	done := make(chan error, 1)
	var out bytes.Buffer
	opts := &mcp.Options{Name: "echoer", URL: mcpURL, Headers: map[string]string{"X-Test": "1"}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	go func() { done <- bridgeMCP(bctx, opts, "127.0.0.1:0", &out, func(u string) { ready <- u }) }()
	var base string
	select {
	case base = <-ready:
	case err := <-done:
		t.Fatalf("bridge stopped: %v", err)
	case <-ctx.Done():
		t.Fatal("bridge did not start")
	}
	if !strings.Contains(out.String(), "tools (1): echo") {
		t.Errorf("banner = %q", out.String())
	}
	var vout, verr bytes.Buffer
	if code := run(ctx, []string{"validate", base}, &vout, &verr); code != 0 {
		t.Errorf("rap validate %s exited %d: %s %s", base, code, vout.String(), verr.String())
	}
	var iout, ierr bytes.Buffer
	if code := run(ctx, []string{"invoke", base, "echo", `{"text":"via rap invoke"}`}, &iout, &ierr); code != 0 || !strings.Contains(iout.String(), "via rap invoke") {
		t.Errorf("rap invoke %s echo exited %d: %s %s", base, code, iout.String(), ierr.String())
	}
	rt, err := raptest.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	c, err := rt.Invoke(ctx, base, "echo", map[string]any{"text": "through the bridge"})
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.Result(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res.Text != "through the bridge" {
		t.Errorf("result = %q", res.Text)
	}
	stop()
	if err := <-done; err != nil {
		t.Errorf("bridge returned %v", err)
	}
}

func TestBridgeUsageErrors(t *testing.T) {
	ctx := context.Background()
	for _, args := range [][]string{
		{"bridge"},
		{"bridge", "lsp"},
		{"bridge", "mcp", "--listen", "127.0.0.1:0"},
		{"bridge", "mcp", "--url", "http://x", "--", "cmd"},
		{"bridge", "mcp", "--header", "A=B", "--", "cmd"},
		{"bridge", "mcp", "--url", "http://x", "--header", "novalue"},
		{"bridge", "mcp", "stray", "--", "cmd"},
		{"bridge", "mcp", "--sampling-model", "llama:7b", "--", "cmd"},
		{"bridge", "mcp", "--call-timeout", "0s", "--", "cmd"},
		{"bridge", "mcp", "--startup-timeout", "-1s", "--", "cmd"},
	} {
		var out, errOut bytes.Buffer
		if code := run(ctx, args, &out, &errOut); code != 2 {
			t.Errorf("rap %v exited %d, want 2 (usage); stderr: %s", args, code, errOut.String())
		}
	}
}

func TestDefaultBridgeName(t *testing.T) {
	for _, c := range []struct {
		cmd  []string
		url  string
		want string
	}{
		{[]string{"npx", "-y", "@modelcontextprotocol/server-everything"}, "", "server-everything"},
		{[]string{"/usr/bin/mcp-server-git", "--repo", "/src"}, "", "mcp-server-git"},
		{nil, "https://mcp.example.com:8443/mcp", "mcp_example_com"},
	} {
		if got := defaultBridgeName(c.cmd, c.url); got != c.want {
			t.Errorf("defaultBridgeName(%v, %q) = %q, want %q", c.cmd, c.url, got, c.want)
		}
	}
}
