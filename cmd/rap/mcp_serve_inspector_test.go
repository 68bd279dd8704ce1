package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// inspectorCLI returns node and the MCP Inspector's launcher from
// bridge/mcp/testdata/everything, or skips the test (fails it under
// GORAP_REQUIRE_NPM=1, as CI sets) when either is missing.
func inspectorCLI(t *testing.T) (node, launcher string) {
	t.Helper()
	node, script := mcpClientScript(t)
	launcher = filepath.Join(filepath.Dir(script), "node_modules", ".bin", "mcp-inspector")
	if _, err := os.Stat(launcher); err != nil {
		if os.Getenv("GORAP_REQUIRE_NPM") == "1" {
			t.Fatal("@modelcontextprotocol/inspector is not installed, and GORAP_REQUIRE_NPM=1 (CI) requires the npm end-to-end tests to run; run `npm ci` in bridge/mcp/testdata/everything")
		}
		t.Skip("@modelcontextprotocol/inspector is not installed; run `npm ci` in bridge/mcp/testdata/everything (.ci/run does) to run this end-to-end test")
	}
	return node, launcher
}

// runInspector runs the Inspector's CLI mode with args and decodes the
// JSON it prints (after the banner it may print first) into out.
func runInspector(t *testing.T, node, launcher string, out any, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, append([]string{launcher, "--cli"}, args...)...)
	cmd.Dir = filepath.Dir(launcher)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("mcp-inspector --cli %s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	raw := stdout.Bytes()
	if i := bytes.IndexByte(raw, '{'); i >= 0 {
		raw = raw[i:]
	}
	if err := json.Unmarshal(raw, out); err != nil {
		t.Fatalf("mcp-inspector --cli %s printed no JSON: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
}

type inspectorTools struct {
	Tools []struct {
		Name      string `json:"name"`
		Execution struct {
			TaskSupport string `json:"taskSupport"`
		} `json:"execution"`
	} `json:"tools"`
}

type inspectorCall struct {
	Content []struct {
		Text string `json:"text"`
	} `json:"content"`
	IsError bool `json:"isError"`
}

// checkInspector lists the tools and calls shout, through the
// Inspector's CLI with the target arguments (a command, or a URL with its
// transport and header).
func checkInspector(t *testing.T, node, launcher string, target, extra []string) {
	t.Helper()
	var tools inspectorTools
	runInspector(t, node, launcher, &tools, append(append(append([]string{}, target...), "--method", "tools/list"), extra...)...)
	var names []string
	for _, tool := range tools.Tools {
		names = append(names, tool.Name)
	}
	if strings.Join(names, ",") != "brew,shout" {
		t.Errorf("tools/list through the Inspector = %v, want brew and shout", names)
	}
	var res inspectorCall
	runInspector(t, node, launcher, &res, append(append(append([]string{}, target...), "--method", "tools/call", "--tool-name", "shout", "--tool-arg", "text=hello"), extra...)...)
	if res.IsError || len(res.Content) != 1 || res.Content[0].Text != "HELLO!" {
		t.Errorf("tools/call shout through the Inspector = %+v, want HELLO!", res)
	}
}

// The MCP Inspector's CLI mode (@modelcontextprotocol/inspector, pinned in
// bridge/mcp/testdata/everything) lists rap mcp serve's tools and calls
// one, over stdio (the Inspector starts the rap binary) and over
// Streamable HTTP with the bearer token in its --header option.
func TestMCPServeInspectorCLI(t *testing.T) {
	node, launcher := inspectorCLI(t)
	url := startMCPServeTools(t)
	t.Run("stdio", func(t *testing.T) {
		bin := buildRapBinary(t)
		checkInspector(t, node, launcher, []string{bin, "mcp", "serve", url}, nil)
	})
	t.Run("http", func(t *testing.T) {
		endpoint := startMCPServeHTTP(t, "s3cret", url)
		checkInspector(t, node, launcher, []string{endpoint, "--transport", "http"}, []string{"--header", "Authorization: Bearer s3cret"})
		// The header is what lets it in: with another token it is refused.
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, node, launcher, "--cli", endpoint, "--transport", "http", "--method", "tools/list", "--header", "Authorization: Bearer wrong")
		if out, err := cmd.CombinedOutput(); err == nil {
			t.Errorf("the Inspector listed the tools with a wrong token:\n%s", out)
		}
	})
}
