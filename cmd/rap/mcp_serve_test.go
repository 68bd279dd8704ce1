package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gorap/gorap/internal/bearer"
	"github.com/gorap/gorap/rap"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// mcpClientScript returns node and the TypeScript SDK client script of
// bridge/mcp/testdata/everything, or skips the test (fails it under
// GORAP_REQUIRE_NPM=1, as CI sets) when either is missing.
func mcpClientScript(t *testing.T) (node, script string) {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", "..", "bridge", "mcp", "testdata", "everything"))
	if err != nil {
		t.Fatal(err)
	}
	skip := func(why string) {
		t.Helper()
		if os.Getenv("GORAP_REQUIRE_NPM") == "1" {
			t.Fatal(why + ", and GORAP_REQUIRE_NPM=1 (CI) requires the npm end-to-end tests to run")
		}
		t.Skip(why)
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@modelcontextprotocol", "sdk", "package.json")); err != nil {
		skip("@modelcontextprotocol/sdk is not installed; run `npm ci` in bridge/mcp/testdata/everything (.ci/run does) to run this end-to-end test")
	}
	node, err = exec.LookPath("node")
	if err != nil {
		skip("node is not on PATH; install Node.js to run the MCP end-to-end tests")
	}
	return node, filepath.Join(dir, "rap-mcp-client.mjs")
}

// startMCPServeTools serves a RAP tool server with a quick tool and a
// slow one that reports progress.
func startMCPServeTools(t *testing.T) string {
	t.Helper()
	s := rap.NewServer("e2e", &rap.ServerOptions{Description: "rap mcp serve's end-to-end tools.", Logger: slog.New(slog.DiscardHandler)})
	type shoutArgs struct {
		Text string `json:"text" jsonschema:"what to shout"`
	}
	rap.AddTool(s, &rap.Tool{Name: "shout", Description: "Shouts its text.", Annotations: &rap.Annotations{ReadOnly: true}},
		func(_ context.Context, _ *rap.Call, in shoutArgs) (*rap.Reply, error) {
			return rap.Text(strings.ToUpper(in.Text) + "!"), nil
		})
	rap.AddTool(s, &rap.Tool{Name: "brew", Description: "Brews tea: reports progress, answers a second later."},
		func(ctx context.Context, c *rap.Call, _ struct{}) (*rap.Reply, error) {
			if err := c.UpdateView(ctx, "progress", map[string]any{"progress": 1, "total": 2, "message": "steeping"}); err != nil {
				return nil, err
			}
			select {
			case <-time.After(time.Second):
				return rap.Text("tea is ready"), nil
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		})
	return serveToolServer(t, s).URL
}

// End to end with the official TypeScript SDK's client over stdio: it
// starts the rap binary's "mcp serve", lists the RAP tools as MCP tools,
// calls a quick one, and calls a slow one whose result comes through the
// callback a second later with a progress notification before it.
func TestMCPServeTypeScriptClient(t *testing.T) {
	node, script := mcpClientScript(t)
	bin := buildRapBinary(t)
	url := startMCPServeTools(t)
	calls := `[{"name":"shout","arguments":{"text":"hello"}},{"name":"brew"}]`
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, script, calls, bin, "mcp", "serve", url)
	cmd.Dir = filepath.Dir(script)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("the TypeScript client failed: %v\nstderr:\n%s", err, stderr.String())
	}
	var out struct {
		ProtocolVersion string `json:"protocolVersion"`
		Tools           []struct {
			Name        string          `json:"name"`
			Description string          `json:"description"`
			InputSchema json.RawMessage `json:"inputSchema"`
			Annotations map[string]any  `json:"annotations"`
		} `json:"tools"`
		Calls []struct {
			Name   string `json:"name"`
			Result struct {
				Content []struct {
					Type string `json:"type"`
					Text string `json:"text"`
				} `json:"content"`
				IsError bool `json:"isError"`
			} `json:"result"`
			Progress []struct {
				Progress float64 `json:"progress"`
				Total    float64 `json:"total"`
				Message  string  `json:"message"`
			} `json:"progress"`
		} `json:"calls"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
		t.Fatalf("the client's output is not its JSON: %v\nstdout: %s\nstderr: %s", err, stdout.String(), stderr.String())
	}
	if out.ProtocolVersion != "2025-11-25" {
		t.Errorf("negotiated protocol version %q, want 2025-11-25", out.ProtocolVersion)
	}
	names := map[string]int{}
	for i, tool := range out.Tools {
		names[tool.Name] = i
	}
	si, ok := names["shout"]
	if _, brew := names["brew"]; !ok || !brew || len(out.Tools) != 2 {
		t.Fatalf("tools listed: %+v, want shout and brew", out.Tools)
	}
	shout := out.Tools[si]
	if shout.Description != "Shouts its text." || !strings.Contains(string(shout.InputSchema), `"text"`) || shout.Annotations["readOnlyHint"] != true {
		t.Errorf("shout is listed as %+v", shout)
	}
	if len(out.Calls) != 2 {
		t.Fatalf("%d call results, want 2", len(out.Calls))
	}
	if r := out.Calls[0].Result; r.IsError || len(r.Content) != 1 || r.Content[0].Text != "HELLO!" {
		t.Errorf("shout's result = %+v, want HELLO!", r)
	}
	brew := out.Calls[1]
	if r := brew.Result; r.IsError || len(r.Content) != 1 || r.Content[0].Text != "tea is ready" {
		t.Errorf("brew's result = %+v, want tea is ready", r)
	}
	if len(brew.Progress) == 0 || brew.Progress[0].Message != "steeping" || brew.Progress[0].Progress != 1 || brew.Progress[0].Total != 2 {
		t.Errorf("brew's progress = %+v, want first 1 of 2, steeping", brew.Progress)
	}
	if !strings.Contains(stderr.String(), "rap mcp serve: 2 tools of 1 tool server: brew, shout") {
		t.Errorf("rap mcp serve's start-up report is not on standard error:\n%s", stderr.String())
	}
}

// Beyond loopback, rap mcp serve --listen refuses to start without a
// client token, before it contacts any tool server.
func TestMCPServeListenNeedsToken(t *testing.T) {
	code, _, stderr := runVerb(t, context.Background(), "mcp", "serve", "--listen", "0.0.0.0:0", "http://127.0.0.1:1")
	if code != exitUsage || !strings.Contains(stderr, "without a token") || !strings.Contains(stderr, "RAP_TOKEN") {
		t.Errorf("exit %d, stderr %q; want a usage error asking for RAP_TOKEN", code, stderr)
	}
}

// --config serves the toolset_server entries of a config file and
// reports the entries of other types as left out; a tool server that
// cannot be reached is an error naming it when it was the only one.
func TestMCPServeConfig(t *testing.T) {
	cfg := writeFile(t, "rap.json", fmt.Sprintf(`{"tool_sets": [
		{"type": "toolset_server", "server_url": %q},
		{"type": "mcp_server", "name": "x", "command": ["x"]}]}`, "http://127.0.0.1:1"))
	code, _, stderr := runVerb(t, context.Background(), "mcp", "serve", "--config", cfg)
	if code != exitFailure || !strings.Contains(stderr, "a mcp_server entry is left out") || !strings.Contains(stderr, "no tool to serve") || !strings.Contains(stderr, "http://127.0.0.1:1") {
		t.Errorf("exit %d, stderr %q; want the mcp_server entry left out and no tool to serve from 127.0.0.1:1", code, stderr)
	}
	if code, _, stderr := runVerb(t, context.Background(), "mcp", "serve"); code != exitUsage || !strings.Contains(stderr, "no tool server to serve") {
		t.Errorf("without servers: exit %d, stderr %q; want a usage error", code, stderr)
	}
}

// rap mcp serve --listen serves Streamable HTTP at /mcp: an MCP client
// with the token calls a tool, a request from another site's page is
// refused, and the server stops promptly when its context ends.
func TestMCPServeHTTP(t *testing.T) {
	url := startMCPServeTools(t)
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	var stdout, stderr lockedBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"mcp", "serve", "--listen", "127.0.0.1:0", "--token", "s3cret", url}, &stdout, &stderr)
	}()
	re := regexp.MustCompile(`MCP endpoint \(Streamable HTTP\) at (http://\S+/mcp)`)
	var endpoint string
	deadline := time.Now().Add(10 * time.Second)
	for endpoint == "" {
		if m := re.FindStringSubmatch(stdout.String()); m != nil {
			endpoint = m[1]
		} else if time.Now().After(deadline) {
			t.Fatalf("no endpoint printed; stdout %q, stderr %q", stdout.String(), stderr.String())
		} else {
			time.Sleep(10 * time.Millisecond)
		}
	}

	req, _ := http.NewRequest(http.MethodPost, endpoint, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer s3cret")
	req.Header.Set("Origin", "https://evil.example")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("a request from another site's page got %d, want 403", resp.StatusCode)
	}

	cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	cs, err := client.Connect(cctx, &mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: bearer.Client("s3cret", 0)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := cs.CallTool(cctx, &mcp.CallToolParams{Name: "shout", Arguments: map[string]any{"text": "hi"}})
	if err != nil {
		t.Fatal(err)
	}
	if tc, ok := res.Content[0].(*mcp.TextContent); !ok || tc.Text != "HI!" {
		t.Errorf("shout over HTTP = %+v", res.Content)
	}
	stop()
	select {
	case code := <-done:
		if code != exitOK {
			t.Errorf("rap mcp serve exited %d after its context ended; stderr %q", code, stderr.String())
		}
	case <-time.After(8 * time.Second):
		t.Fatal("rap mcp serve did not stop within 8 s of its context ending")
	}
	_ = cs.Close()
}
