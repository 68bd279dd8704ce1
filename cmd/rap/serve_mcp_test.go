package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gorap/gorap/runtime/config"
)

const mcpEchoScript = `{"turns": [
  {"after_user": "Echo", "tool_calls": [{"name": "echoer_echo", "arguments": {"text": "hello from MCP"}}]},
  {"when": {"last_input": "tool_result"}, "text": "Result: {{last_result}}"},
  {"text": "ok", "repeat": true}
]}`

// rap serve bridges http_mcp_server and mcp_server
// entries in process; a tool of the MCP server, named after the entry
// ("echoer_echo"), is called by the model and
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
		`rap serve: MCP server "echoer" bridged in process: 1 tool`,
		// In process: a host that never resolves, no port opened.
		"tool servers: http://echoer.mcp.rap.invalid (from")

	var th struct {
		ID string `json:"id"`
	}
	th.ID = createThread(t, info.URL)
	sendMessage(t, info.URL, th.ID, "Echo please")
	waitAnswer(t, info.URL, th.ID, "Result: hello from MCP")
	// The bridge keeps its subscriptions in a durable
	// store in the data dir, so they survive a restart.
	if _, err := os.Stat(filepath.Join(s.DataDir, "mcp", "echoer.db")); err != nil {
		t.Errorf("no durable store for the bridge: %v", err)
	}
}

const everythingSumScript = `{"turns": [
  {"after_user": "Sum", "tool_calls": [{"name": "ev_get-sum", "arguments": {"a": 2, "b": 40}}]},
  {"when": {"last_input": "tool_result"}, "text": "Result: {{last_result}}"},
  {"text": "ok", "repeat": true}
]}`

// End to end: rap serve runs
// @modelcontextprotocol/server-everything (from npm, installed by .ci/run)
// as an mcp_server entry with a prefix, and the model's call of one of its
// tools gets the server's answer.
func TestServeMCPEverything(t *testing.T) {
	node, script := npmMCPServer(t, "server-everything")
	clearRAPEnv(t)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "rap.json")
	data := fmt.Sprintf(`{"tool_sets": [{"type": "mcp_server", "name": "everything", "prefix": "ev_", "command": [%q, %q, "stdio"], "env": {"GORAP_TEST": "1"}}]}`, node, script)
	if err := os.WriteFile(cfg, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	s := baseSettings(t, "scripted:"+writeScript(t, dir, everythingSumScript), cfg)
	info, stdout, _, _ := runningServe(t, s)
	wantLines(t, stdout.String(), `rap serve: MCP server "everything" bridged in process:`)
	var th struct {
		ID string `json:"id"`
	}
	th.ID = createThread(t, info.URL)
	sendMessage(t, info.URL, th.ID, "Sum please")
	waitAnswer(t, info.URL, th.ID, "Result: The sum of 2 and 40 is 42.")
}

const twoMemoriesScript = `{"turns": [
  {"after_user": "Remember", "tool_calls": [
    {"name": "notes_create_entities", "arguments": {"entities": [{"name": "Ada", "entityType": "person", "observations": ["wrote programs"]}]}},
    {"name": "people_create_entities", "arguments": {"entities": [{"name": "Bob", "entityType": "person", "observations": ["builds bridges"]}]}}
  ]},
  {"when": {"last_input": "tool_result"}, "tool_calls": [{"name": "notes_read_graph", "arguments": {}}]},
  {"when": {"last_result_contains": "wrote programs"}, "tool_calls": [{"name": "people_read_graph", "arguments": {}}]},
  {"when": {"last_result_contains": "builds bridges"}, "text": "People: {{last_result}}"},
  {"text": "ok", "repeat": true}
]}`

// End to end: two mcp_server entries of the same MCP server
// (@modelcontextprotocol/server-memory) named "notes" and "people" serve
// their tools under their own names (notes_create_entities,
// people_create_entities...), so none collides in the runtime's catalog
// and each keeps its own data.
func TestServeTwoEntriesOfOneMCPServer(t *testing.T) {
	node, script := npmMCPServer(t, "server-memory")
	clearRAPEnv(t)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "rap.json")
	data := fmt.Sprintf(`{"tool_sets": [
		{"type": "mcp_server", "name": "notes", "command": [%q, %q], "env": {"MEMORY_FILE_PATH": %q}},
		{"type": "mcp_server", "name": "people", "command": [%q, %q], "env": {"MEMORY_FILE_PATH": %q}}
	]}`, node, script, filepath.Join(dir, "notes.jsonl"), node, script, filepath.Join(dir, "people.jsonl"))
	if err := os.WriteFile(cfg, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	s := baseSettings(t, "scripted:"+writeScript(t, dir, twoMemoriesScript), cfg)
	info, stdout, _, _ := runningServe(t, s)
	wantLines(t, stdout.String(), `rap serve: MCP server "notes" bridged in process:`, `rap serve: MCP server "people" bridged in process:`)
	th := createThread(t, info.URL)
	sendMessage(t, info.URL, th, "Remember them")
	msgs := waitAnswer(t, info.URL, th, "People: ")
	if last := msgs[len(msgs)-1].Text; !strings.Contains(last, "Bob") || strings.Contains(last, "Ada") {
		t.Errorf("people_read_graph answered %q, want Bob's entry only", last)
	}
}

// An http_mcp_server entry with "oauth" is bridged with
// the MCP authorization flow: before any user has signed in it serves
// the sign_in tool (whose call shows the user a link), and it keeps the
// users' tokens under the data dir.
func TestServeMCPOAuthEntry(t *testing.T) {
	clearRAPEnv(t)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "rap.json")
	data := `{"tool_sets": [{"type": "http_mcp_server", "name": "linear", "url": "http://127.0.0.1:1/mcp", "prefix": "lin_", "oauth": {}}]}`
	if err := os.WriteFile(cfg, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	s := baseSettings(t, "scripted:"+writeScript(t, dir, mcpEchoScript), cfg)
	_, stdout, _, _ := runningServe(t, s)
	wantLines(t, stdout.String(), `rap serve: MCP server "linear" bridged in process: 1 tool`)
	for _, c := range []struct {
		o       config.MCPOAuth
		listen  string
		wantErr string
	}{
		{config.MCPOAuth{}, "127.0.0.1:0", ""},
		{config.MCPOAuth{RedirectURL: "http://127.0.0.1:8976/oauth/callback"}, "127.0.0.1:8976", ""},
		{config.MCPOAuth{RedirectURL: "https://rap.example.com/oauth/callback"}, "", `set "listen"`},
		{config.MCPOAuth{RedirectURL: "https://rap.example.com/oauth/callback", Listen: "127.0.0.1:9000"}, "127.0.0.1:9000", ""},
	} {
		got, err := mcpOAuthOptions(&c.o, s.DataDir)
		if c.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("%+v: error %v, want %q", c.o, err, c.wantErr)
			}
			continue
		}
		if err != nil || got.CallbackListen != c.listen || got.TokenDir != filepath.Join(s.DataDir, "mcp-tokens") {
			t.Errorf("%+v: options %+v, %v", c.o, got, err)
		}
	}
	if _, err := mcpOAuthOptions(&config.MCPOAuth{}, ""); err == nil {
		t.Error("oauth without a data dir accepted")
	}
}

// An entry's call_timeout, startup_timeout and prefix reach the bridge;
// without them the bridge's defaults apply (mcp.DefaultCallTimeout, the
// start-up limit for the command) and the tools are prefixed NAME_.
func TestMCPEntryCallTimeout(t *testing.T) {
	f, err := config.Parse([]byte(`{"tool_sets": [
		{"type": "mcp_server", "name": "slow", "command": ["srv"], "call_timeout": "45m", "startup_timeout": "3m", "prefix": ""},
		{"type": "mcp_server", "name": "plain", "command": ["srv"]}
	]}`), "rap.json")
	if err != nil {
		t.Fatal(err)
	}
	ms := f.MCPServers()
	if got := mcpEntryOptions(ms[0].MCP, nil, nil).CallTimeout; got != 45*time.Minute {
		t.Errorf("call_timeout 45m reached the bridge as %v", got)
	}
	if got := mcpEntryOptions(ms[1].MCP, nil, nil).CallTimeout; got != 0 {
		t.Errorf("no call_timeout reached the bridge as %v; want 0 (the bridge's default)", got)
	}
	if o := mcpEntryOptions(ms[0].MCP, nil, nil); o.ConnectTimeout != 3*time.Minute || o.Prefix != "" {
		t.Errorf("startup_timeout 3m and prefix \"\" reached the bridge as %v and %q", o.ConnectTimeout, o.Prefix)
	}
	if o := mcpEntryOptions(ms[1].MCP, nil, nil); o.ConnectTimeout != 0 || o.Prefix != "plain_" {
		t.Errorf("no startup_timeout and no prefix reached the bridge as %v and %q; want 0 (the bridge's default) and \"plain_\"", o.ConnectTimeout, o.Prefix)
	}
}

// npmMCPServer returns the node binary and the entry point of the npm
// package @modelcontextprotocol/PKG installed in
// bridge/mcp/testdata/everything. When either is missing the test skips,
// or fails under GORAP_REQUIRE_NPM=1 (as .ci/run sets).
func npmMCPServer(t *testing.T, pkg string) (node, script string) {
	t.Helper()
	skip := func(why string) {
		t.Helper()
		if os.Getenv("GORAP_REQUIRE_NPM") == "1" {
			t.Fatal(why + ", and GORAP_REQUIRE_NPM=1 (CI) requires the npm end-to-end tests to run")
		}
		t.Skip(why)
	}
	script, err := filepath.Abs(filepath.Join("..", "..", "bridge", "mcp", "testdata", "everything", "node_modules", "@modelcontextprotocol", pkg, "dist", "index.js"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(script); err != nil {
		skip("@modelcontextprotocol/" + pkg + " is not installed; run `npm ci` in bridge/mcp/testdata/everything (.ci/run does) to run this end-to-end test")
	}
	node, err = exec.LookPath("node")
	if err != nil {
		skip("node is not on PATH; install Node.js to run this end-to-end test")
	}
	return node, script
}
