package main

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

const mcpEchoScript = `{"turns": [
  {"after_user": "Echo", "tool_calls": [{"name": "echo", "arguments": {"text": "hello from MCP"}}]},
  {"when": {"last_input": "tool_result"}, "text": "Result: {{last_result}}"},
  {"text": "ok", "repeat": true}
]}`

// issue 10 item 2: rap serve bridges http_mcp_server and mcp_server
// entries in process; a tool of the MCP server is called by the model and
// its result reaches the model; an entry whose server cannot start is
// reported and skipped while the others load (RAP CF-1).
func TestServeMCPEntries(t *testing.T) {
	clearRAPEnv(t)
	dir := t.TempDir()
	mcpURL := newBridgeTestMCP(t)
	cfg := filepath.Join(dir, "rap.json")
	data := fmt.Sprintf(`{"tool_sets": [
		{"type": "mcp_server", "name": "ghost", "command": [%q]},
		{"type": "http_mcp_server", "name": "echoer", "url": %q, "headers": {"X-Test": "1"}}
	]}`, filepath.Join(dir, "no-such-mcp-server"), mcpURL)
	if err := os.WriteFile(cfg, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	s := baseSettings(t, "scripted:"+writeScript(t, dir, mcpEchoScript), cfg)
	info, stdout, _, _ := runningServe(t, s)
	wantLines(t, stdout.String(),
		`rap serve: MCP server "ghost" (`+cfg+`: tool_sets[0]) skipped: cannot start MCP server "ghost"`,
		`rap serve: MCP server "echoer" bridged in process: 1 tools`)

	var th struct {
		ID string `json:"id"`
	}
	postJSON(t, info.URL+"/v1/threads", struct{}{}, &th)
	postJSON(t, info.URL+"/v1/threads/"+th.ID+"/messages", map[string]string{"text": "Echo please"}, nil)
	waitAnswer(t, info.URL, th.ID, "Result: hello from MCP")
}
