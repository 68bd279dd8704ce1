package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"
)

// MCPServer is the MCP part of a mcp_server or http_mcp_server entry
// (RAP CF-1): rap serve bridges the MCP server in process and exposes its
// tools as a toolset. See docs/mcp.md.
type MCPServer struct {
	// Name names the server: the toolset name, the name in error results
	// and log lines. Letters, digits, "_" and "-".
	Name string `json:"name"`
	// Command is the program and arguments of a stdio server
	// (mcp_server).
	Command []string `json:"command,omitempty"`
	// Env holds extra environment variables for Command.
	Env map[string]string `json:"env,omitempty"`
	// URL is the Streamable HTTP endpoint (http_mcp_server).
	URL string `json:"url,omitempty"`
	// Headers are sent with every request to URL.
	Headers map[string]string `json:"headers,omitempty"`
	// Mode is "direct" (default: one RAP tool per MCP tool) or "proxy"
	// (two tools, {name}_list_tools and {name}_invoke_tool, RAP CF-2).
	Mode string `json:"mode,omitempty"`
	// Prefix is prepended to every MCP tool name (gorap extension); nil
	// (no "prefix" member) means the entry's name and "_", so that two
	// entries never serve the same tool name, and an explicit "" means
	// none. ToolPrefix resolves it.
	Prefix *string `json:"prefix,omitempty"`
	// OAuth enables the MCP authorization flow for an http_mcp_server
	// (gorap extension); nil means none.
	OAuth *MCPOAuth `json:"oauth,omitempty"`
	// CallTimeout bounds one synchronous tools/call, such as "30m"
	// (default 5m, gorap extension); calls the server runs as MCP tasks
	// are not bounded by it.
	CallTimeout Duration `json:"call_timeout,omitempty"`
	// StartupTimeout is the start-up limit: how long the server may take
	// to start and answer MCP's initialize, such as "5m" (default 30s,
	// or 2m for a command run by npx, uvx and other package launchers,
	// whose first start downloads the package; gorap extension).
	StartupTimeout Duration `json:"startup_timeout,omitempty"`
}

// MCPOAuth configures the MCP authorization flow of an http_mcp_server
// entry: the bridge signs each user in (the runtime shows them the
// link) and keeps their tokens in the data dir. See docs/mcp.md.
type MCPOAuth struct {
	// RedirectURL is where the user's browser reaches the bridge's
	// redirect endpoint; empty means http://LISTEN/oauth/callback.
	RedirectURL string `json:"redirect_url,omitempty"`
	// Listen is the address the redirect endpoint listens on; empty
	// means the host and port of a loopback RedirectURL, else
	// 127.0.0.1 on a free port.
	Listen string `json:"listen,omitempty"`
}

// ToolPrefix is the prefix of the entry's MCP tool names: Prefix when
// the entry sets one (even ""), else Name and "_" ("notes" serves
// server-memory's create_entities as notes_create_entities).
func (m *MCPServer) ToolPrefix() string {
	if m.Prefix != nil {
		return *m.Prefix
	}
	return m.Name + "_"
}

var mcpNameRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// parseMCPEntry parses an mcp_server or http_mcp_server entry.
func parseMCPEntry(item json.RawMessage, typ, name, path string) (ToolSet, error) {
	var raw struct {
		MCPServer
		ID   string `json:"id,omitempty"`
		Type string `json:"type"`
	}
	dec := json.NewDecoder(bytes.NewReader(item))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&raw); err != nil {
		var ute *json.UnmarshalTypeError
		if errors.As(err, &ute) {
			return ToolSet{}, &Error{File: name, Path: path + "." + strings.TrimPrefix(ute.Field, "MCPServer."), Problem: fmt.Sprintf("is a JSON %s; want %s", ute.Value, describeType(ute.Type.String()))}
		}
		return ToolSet{}, &Error{File: name, Path: path, Problem: err.Error() + "; an " + typ + " entry has " + mcpFields(typ)}
	}
	m := raw.MCPServer
	fail := func(field, problem string) (ToolSet, error) {
		return ToolSet{}, &Error{File: name, Path: path + "." + field, Problem: problem}
	}
	if !mcpNameRE.MatchString(m.Name) {
		return fail("name", fmt.Sprintf("%q must be 1 to 64 letters, digits, \"_\" or \"-\", such as \"files\"", m.Name))
	}
	switch typ {
	case TypeMCPServer:
		if len(m.Command) == 0 || strings.TrimSpace(m.Command[0]) == "" {
			return fail("command", `missing; want the server's program and arguments, such as ["npx", "-y", "@modelcontextprotocol/server-everything"]`)
		}
		if m.URL != "" || len(m.Headers) > 0 {
			return fail("url", "is for http_mcp_server entries; an mcp_server runs a command")
		}
		if m.OAuth != nil {
			return fail("oauth", "is for http_mcp_server entries; an mcp_server takes its credentials from env")
		}
		for k := range m.Env {
			if k == "" || strings.Contains(k, "=") {
				return fail("env", fmt.Sprintf("has the invalid variable name %q", k))
			}
		}
	case TypeHTTPMCPServer:
		if len(m.Command) > 0 || len(m.Env) > 0 {
			return fail("command", "is for mcp_server entries; an http_mcp_server is reached at its url")
		}
		u, err := url.Parse(m.URL)
		if m.URL == "" || err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fail("url", fmt.Sprintf("%q is not an absolute http:// or https:// URL; want the MCP endpoint, such as \"https://mcp.example.com/mcp\"", m.URL))
		}
		if o := m.OAuth; o != nil && o.RedirectURL != "" {
			if r, err := url.Parse(o.RedirectURL); err != nil || (r.Scheme != "http" && r.Scheme != "https") || r.Host == "" {
				return fail("oauth.redirect_url", fmt.Sprintf("%q is not an absolute http:// or https:// URL; want where the user's browser reaches the bridge, such as \"http://127.0.0.1:8976/oauth/callback\"", o.RedirectURL))
			}
		}
	}
	switch m.Mode {
	case "", "direct", "proxy":
	default:
		return fail("mode", fmt.Sprintf("%q is unknown; want \"direct\" or \"proxy\"", m.Mode))
	}
	ts := ToolSet{Type: typ, ID: raw.ID, MCP: &m, Source: name + ": " + path}
	if name == "" {
		ts.Source = path
	}
	return ts, nil
}

func mcpFields(typ string) string {
	if typ == TypeMCPServer {
		return "name, command, env, and optionally id, mode, prefix, call_timeout, startup_timeout"
	}
	return "name, url, headers, and optionally id, mode, prefix, oauth, call_timeout, startup_timeout"
}

// MCPServers returns the mcp_server and http_mcp_server entries in order,
// without a second entry of the same name.
func (f *File) MCPServers() []ToolSet {
	seen := map[string]bool{}
	var out []ToolSet
	for _, ts := range f.ToolSets {
		if ts.MCP == nil || seen[ts.MCP.Name] {
			continue
		}
		seen[ts.MCP.Name] = true
		out = append(out, ts)
	}
	return out
}
