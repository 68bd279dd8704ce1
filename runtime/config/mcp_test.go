package config

import (
	"strings"
	"testing"
	"time"
)

// RAP CF-1: mcp_server and http_mcp_server entries parse
// into MCPServer settings.
func TestParseMCPEntries(t *testing.T) {
	f, err := Parse([]byte(`{"tool_sets": [
		{"type": "mcp_server", "name": "everything", "command": ["npx", "-y", "srv"], "env": {"A": "1"}, "id": "e", "startup_timeout": "4m"},
		{"type": "http_mcp_server", "name": "remote", "url": "https://mcp.example.com/mcp", "headers": {"X-Key": "k"}, "mode": "proxy", "prefix": "r_", "call_timeout": "30m"},
		{"type": "mcp_server", "name": "everything", "command": ["other"]},
		{"type": "toolset_server", "server_url": "http://127.0.0.1:3001"}
	]}`), "rap.json")
	if err != nil {
		t.Fatal(err)
	}
	ms := f.MCPServers()
	if len(ms) != 2 {
		t.Fatalf("MCPServers() = %d entries, want 2 (the duplicate name dropped)", len(ms))
	}
	e, r := ms[0].MCP, ms[1].MCP
	if e.Name != "everything" || strings.Join(e.Command, " ") != "npx -y srv" || e.Env["A"] != "1" || ms[0].ID != "e" || ms[0].Source != "rap.json: tool_sets[0]" {
		t.Errorf("mcp_server = %+v (%+v)", e, ms[0])
	}
	if r.URL != "https://mcp.example.com/mcp" || r.Headers["X-Key"] != "k" || r.Mode != "proxy" || r.ToolPrefix() != "r_" || time.Duration(r.CallTimeout) != 30*time.Minute {
		t.Errorf("http_mcp_server = %+v", r)
	}
	if time.Duration(e.StartupTimeout) != 4*time.Minute || r.StartupTimeout != 0 {
		t.Errorf("startup_timeout: %v and %v, want 4m and 0 (the bridge's default)", time.Duration(e.StartupTimeout), time.Duration(r.StartupTimeout))
	}
	if e.CallTimeout != 0 {
		t.Errorf("mcp_server without call_timeout has %v; want 0 (the bridge's default)", time.Duration(e.CallTimeout))
	}
	if got := f.ServerURLs(); len(got) != 1 {
		t.Errorf("ServerURLs() = %v; MCP entries are not URLs", got)
	}
}

// An entry's MCP tools are prefixed with its name and "_" unless it sets
// "prefix"; an explicit "prefix": "" means none.
func TestMCPToolPrefix(t *testing.T) {
	f, err := Parse([]byte(`{"tool_sets": [
		{"type": "mcp_server", "name": "notes", "command": ["srv"]},
		{"type": "mcp_server", "name": "people", "command": ["srv"], "prefix": "p_"},
		{"type": "mcp_server", "name": "plain", "command": ["srv"], "prefix": ""}
	]}`), "rap.json")
	if err != nil {
		t.Fatal(err)
	}
	ms := f.MCPServers()
	for i, want := range []string{"notes_", "p_", ""} {
		if got := ms[i].MCP.ToolPrefix(); got != want {
			t.Errorf("%s: ToolPrefix() = %q, want %q", ms[i].MCP.Name, got, want)
		}
	}
}

func TestParseMCPEntryErrors(t *testing.T) {
	for _, c := range []struct{ data, want string }{
		{`{"type":"mcp_server","command":["x"]}`, `tool_sets[0].name: "" must be`},
		{`{"type":"mcp_server","name":"a b","command":["x"]}`, `tool_sets[0].name: "a b"`},
		{`{"type":"mcp_server","name":"x","command":[]}`, `tool_sets[0].command: missing`},
		{`{"type":"mcp_server","name":"x","command":"npx srv"}`, `tool_sets[0].command: is a JSON string`},
		{`{"type":"mcp_server","name":"x","command":["x"],"url":"http://h"}`, `tool_sets[0].url: is for http_mcp_server`},
		{`{"type":"mcp_server","name":"x","command":["x"],"mode":"fast"}`, `tool_sets[0].mode: "fast" is unknown`},
		{`{"type":"mcp_server","name":"x","command":["x"],"colour":"red"}`, `unknown field "colour"`},
		{`{"type":"http_mcp_server","name":"x"}`, `tool_sets[0].url: "" is not an absolute`},
		{`{"type":"http_mcp_server","name":"x","url":"https://h","command":["x"]}`, `tool_sets[0].command: is for mcp_server`},
		{`{"type":"mcp_server","name":"x","command":["x"],"oauth":{}}`, `tool_sets[0].oauth: is for http_mcp_server`},
		{`{"type":"http_mcp_server","name":"x","url":"https://h","oauth":{"redirect_url":"/cb"}}`, `tool_sets[0].oauth.redirect_url: "/cb" is not an absolute`},
		{`{"type":"http_mcp_server","name":"x","url":"https://h","oauth":{"port":1}}`, `unknown field "port"`},
		{`{"type":"mcp_server","name":"x","command":["x"],"call_timeout":"soon"}`, `"soon" is not a duration`},
		{`{"type":"mcp_server","name":"x","command":["x"],"call_timeout":300}`, `must be a duration string`},
		{`{"type":"mcp_server","name":"x","command":["x"],"startup_timeout":"long"}`, `"long" is not a duration`},
	} {
		_, err := Parse([]byte(`{"tool_sets": [`+c.data+`]}`), "")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Parse(%s) = %v, want an error containing %q", c.data, err, c.want)
		}
	}
}

// An http_mcp_server entry takes an "oauth" object
// (gorap extension) with an optional redirect_url and listen address.
func TestParseMCPOAuth(t *testing.T) {
	f, err := Parse([]byte(`{"tool_sets": [
		{"type": "http_mcp_server", "name": "a", "url": "https://mcp.example.com/mcp", "oauth": {}},
		{"type": "http_mcp_server", "name": "b", "url": "https://mcp.example.com/mcp", "oauth": {"redirect_url": "http://127.0.0.1:8976/oauth/callback", "listen": "127.0.0.1:8976"}},
		{"type": "http_mcp_server", "name": "c", "url": "https://mcp.example.com/mcp"}
	]}`), "rap.json")
	if err != nil {
		t.Fatal(err)
	}
	ms := f.MCPServers()
	if ms[0].MCP.OAuth == nil || *ms[0].MCP.OAuth != (MCPOAuth{}) {
		t.Errorf("a: oauth = %+v", ms[0].MCP.OAuth)
	}
	if o := ms[1].MCP.OAuth; o == nil || o.RedirectURL != "http://127.0.0.1:8976/oauth/callback" || o.Listen != "127.0.0.1:8976" {
		t.Errorf("b: oauth = %+v", o)
	}
	if ms[2].MCP.OAuth != nil {
		t.Errorf("c: oauth = %+v, want none", ms[2].MCP.OAuth)
	}
}
