package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/gorap/gorap/rap"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// toolInfo is one MCP tool as the bridge serves it.
type toolInfo struct {
	mcpName string
	rap     rap.Tool
	key     []byte // canonical JSON of rap, to notice changes
}

// listTools returns every tool of the MCP server, following pagination.
func listTools(ctx context.Context, cs *sdk.ClientSession) ([]*sdk.Tool, error) {
	var all []*sdk.Tool
	for t, err := range cs.Tools(ctx, nil) {
		if err != nil {
			return nil, err
		}
		all = append(all, t)
	}
	return all, nil
}

// syncTools lists the MCP server's tools and makes the served toolset
// match: new tools are added, changed ones replaced, vanished ones
// removed (notifications/tools/list_changed). In proxy mode the toolset
// stays the two proxy tools; only the list the proxy reports changes.
func (b *Bridge) syncTools(ctx context.Context, cs *sdk.ClientSession) error {
	lctx, cancel := context.WithTimeout(ctx, b.opts.ConnectTimeout)
	defer cancel()
	list, err := listTools(lctx, cs)
	if err != nil {
		return fmt.Errorf("tools/list on %s: %w", b.describe(), err)
	}
	next := map[string]*toolInfo{}
	var skipped []Problem
	for _, t := range list {
		ti, err := b.mapTool(t)
		if err != nil {
			skipped = append(skipped, Problem{Tool: t.Name, Reason: err.Error()})
			continue
		}
		if _, dup := next[ti.rap.Name]; dup {
			skipped = append(skipped, Problem{Tool: t.Name, Reason: fmt.Sprintf("another tool already has the RAP name %q", ti.rap.Name)})
			continue
		}
		next[ti.rap.Name] = ti
	}
	for _, p := range skipped {
		b.log.Warn("mcp bridge: an MCP tool is left out of the RAP toolset", "tool", p.Tool, "reason", p.Reason)
	}

	b.mu.Lock()
	defer b.mu.Unlock()
	prev := b.tools
	b.tools = next
	b.skipped = skipped
	if b.opts.Mode == ModeProxy {
		return nil
	}
	names := make([]string, 0, len(prev))
	for name := range prev {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if n, ok := next[name]; !ok || !bytes.Equal(n.key, prev[name].key) {
			b.srv.RemoveTool(name)
		}
	}
	added := make([]*toolInfo, 0, len(list))
	for _, t := range list { // keep the MCP server's order
		ti, ok := next[b.opts.Prefix+t.Name]
		if !ok || ti.mcpName != t.Name {
			continue
		}
		if p, had := prev[ti.rap.Name]; had && bytes.Equal(p.key, ti.key) {
			continue
		}
		added = append(added, ti)
	}
	for _, ti := range added {
		if err := b.addTool(ti); err != nil {
			delete(b.tools, ti.rap.Name)
			b.skipped = append(b.skipped, Problem{Tool: ti.mcpName, Reason: err.Error()})
			b.log.Warn("mcp bridge: an MCP tool is left out of the RAP toolset", "tool", ti.mcpName, "reason", err)
		}
	}
	return nil
}

// addTool registers ti with the rap server. AddRawTool panics on what
// mapTool's validation already refused; the recover is a safety net so
// that one odd tool can never take the bridge down.
func (b *Bridge) addTool(ti *toolInfo) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("the rap server refused it: %v", v)
		}
	}()
	tool := ti.rap
	mcpName := ti.mcpName
	b.srv.AddRawTool(&tool, func(ctx context.Context, c *rap.Call, args json.RawMessage) (*rap.Reply, error) {
		return b.callTool(ctx, c, mcpName, args)
	})
	return nil
}

// mapTool turns an MCP tool into a RAP tool (see docs/mcp.md), or says
// why it cannot be served: its RAP form must pass the rap package's
// toolset validation (RAP TS-1..TS-8).
func (b *Bridge) mapTool(t *sdk.Tool) (*toolInfo, error) {
	if t == nil {
		return nil, fmt.Errorf("the server listed a null tool")
	}
	schema, err := json.Marshal(t.InputSchema)
	if err != nil || t.InputSchema == nil || string(schema) == "null" {
		return nil, fmt.Errorf("it has no inputSchema")
	}
	title := t.Title
	if title == "" && t.Annotations != nil {
		title = t.Annotations.Title
	}
	desc := strings.TrimSpace(t.Description)
	switch {
	case desc == "" && title != "":
		desc = title
	case desc == "":
		desc = fmt.Sprintf("Tool %q of the MCP server %q (it gives no description).", t.Name, b.opts.Name)
	case title != "" && title != desc && !strings.HasPrefix(desc, title+":"):
		desc = title + ": " + desc
	}
	rt := rap.Tool{
		Name:          b.opts.Prefix + t.Name,
		Description:   desc,
		InputSchema:   schema,
		Annotations:   mapAnnotations(t, title),
		DisplayScript: displayScript(title, t.Name, schema),
	}
	ts := rap.Toolset{Name: b.opts.Name, Endpoint: "http://127.0.0.1/", Tools: []rap.Tool{rt}}
	if err := ts.Validate(); err != nil {
		return nil, fmt.Errorf("its RAP form is invalid: %s", strings.ReplaceAll(err.Error(), "tools[0].", ""))
	}
	key, _ := json.Marshal(rt)
	return &toolInfo{mcpName: t.Name, rap: rt, key: key}, nil
}

// mapAnnotations maps MCP tool annotations to RAP ones (RAP TS-3):
// readOnlyHint, destructiveHint and idempotentHint become readOnly,
// destructive and idempotent; openWorldHint and the title are kept as
// x-mcp-openWorldHint and x-mcp-title. MCP's default for an absent
// destructiveHint (true) is not applied: only an explicit hint marks a
// RAP tool destructive.
func mapAnnotations(t *sdk.Tool, title string) *rap.Annotations {
	a := &rap.Annotations{}
	any := false
	if an := t.Annotations; an != nil {
		a.ReadOnly = an.ReadOnlyHint
		a.Idempotent = an.IdempotentHint
		if an.DestructiveHint != nil && *an.DestructiveHint && !an.ReadOnlyHint {
			a.Destructive = true
		}
		any = a.ReadOnly || a.Idempotent || a.Destructive
		if an.OpenWorldHint != nil {
			a.Custom = map[string]json.RawMessage{"x-mcp-openWorldHint": json.RawMessage(fmt.Sprint(*an.OpenWorldHint))}
			any = true
		}
	}
	if title != "" {
		if a.Custom == nil {
			a.Custom = map[string]json.RawMessage{}
		}
		raw, _ := json.Marshal(title)
		a.Custom["x-mcp-title"] = raw
		any = true
	}
	if !any {
		return nil
	}
	return a
}

// displayScript generates a Rhai display script (RAP DS-1) from the
// tool's title (or name) and its required arguments:
// `"Get weather" + " " + args["city"]`. Missing arguments are skipped.
func displayScript(title, name string, schema json.RawMessage) string {
	label := title
	if label == "" {
		label = strings.NewReplacer("_", " ", "-", " ").Replace(name)
	}
	var s struct {
		Required   []string                   `json:"required"`
		Properties map[string]json.RawMessage `json:"properties"`
	}
	_ = json.Unmarshal(schema, &s)
	var b strings.Builder
	b.WriteString("let s = " + rhaiString(label) + ";\n")
	n := 0
	for _, r := range s.Required {
		if _, ok := s.Properties[r]; !ok || n == 3 {
			continue
		}
		var p struct {
			Type any `json:"type"`
		}
		_ = json.Unmarshal(s.Properties[r], &p)
		switch p.Type {
		case "string", "number", "integer", "boolean":
		default:
			continue // objects and arrays render poorly in one line
		}
		if n == 0 {
			b.WriteString("let sep = \": \";\n")
		}
		key := rhaiString(r)
		fmt.Fprintf(&b, "if args[%s] != () { s += sep + args[%s]; sep = \", \"; }\n", key, key)
		n++
	}
	b.WriteString("s")
	return b.String()
}

// rhaiString quotes s as a Rhai string literal.
func rhaiString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20 || r == 0x7f:
			b.WriteByte(' ')
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// proxyListSchema and proxyInvokeSchema are the input schemas of the two
// proxy-mode tools (RAP CF-2).
var (
	proxyListSchema   = json.RawMessage(`{"type":"object","properties":{},"additionalProperties":false}`)
	proxyInvokeSchema = json.RawMessage(`{"type":"object","properties":{"tool_name":{"type":"string","description":"Name of the MCP tool to invoke, as {name}_list_tools lists it."},"arguments":{"type":"object","description":"Arguments to pass to the MCP tool, matching its inputSchema."}},"required":["tool_name"],"additionalProperties":false}`)
)

// addProxyTools registers {name}_list_tools and {name}_invoke_tool.
func (b *Bridge) addProxyTools() {
	name := b.opts.Name
	b.srv.AddRawTool(&rap.Tool{
		Name:          name + "_list_tools",
		Description:   fmt.Sprintf("List the tools available from the %s MCP server (name, description, inputSchema) before invoking one with %s_invoke_tool.", name, name),
		InputSchema:   proxyListSchema,
		Annotations:   &rap.Annotations{ReadOnly: true, Idempotent: true},
		DisplayScript: rhaiString("Listing the tools of " + name),
	}, func(ctx context.Context, c *rap.Call, _ json.RawMessage) (*rap.Reply, error) {
		return b.proxyList()
	})
	b.srv.AddRawTool(&rap.Tool{
		Name:          name + "_invoke_tool",
		Description:   fmt.Sprintf("Invoke a tool from the %s MCP server by name. Use %s_list_tools first to see the available tools and their arguments.", name, name),
		InputSchema:   proxyInvokeSchema,
		DisplayScript: rhaiString(name+": ") + " + args[\"tool_name\"]",
	}, func(ctx context.Context, c *rap.Call, args json.RawMessage) (*rap.Reply, error) {
		var in struct {
			ToolName  string          `json:"tool_name"`
			Arguments json.RawMessage `json:"arguments"`
		}
		if err := json.Unmarshal(args, &in); err != nil {
			return nil, fmt.Errorf("Error: invalid arguments: %v. Send tool_name and arguments as the inputSchema says.", err)
		}
		b.mu.Lock()
		ti, ok := b.tools[b.opts.Prefix+in.ToolName]
		if !ok {
			ti, ok = b.tools[in.ToolName]
		}
		b.mu.Unlock()
		if !ok {
			return nil, fmt.Errorf("Error: the MCP server %q has no tool %q. Call %s_list_tools to see its tools.", name, in.ToolName, name)
		}
		toolArgs := in.Arguments
		if len(toolArgs) == 0 || string(toolArgs) == "null" {
			toolArgs = json.RawMessage(`{}`)
		}
		schema, err := rap.CompileSchema(ti.rap.InputSchema)
		if err == nil {
			if verr := schema.Validate(toolArgs); verr != nil {
				return nil, fmt.Errorf("Error: invalid arguments for the MCP tool %q: %v. Fix them to match its inputSchema (see %s_list_tools) and call again.", ti.mcpName, verr, name)
			}
		}
		return b.callTool(ctx, c, ti.mcpName, toolArgs)
	})
}

// proxyList answers {name}_list_tools.
func (b *Bridge) proxyList() (*rap.Reply, error) {
	b.mu.Lock()
	type entry struct {
		Name        string           `json:"name"`
		Description string           `json:"description"`
		InputSchema json.RawMessage  `json:"inputSchema"`
		Annotations *rap.Annotations `json:"annotations,omitempty"`
	}
	list := make([]entry, 0, len(b.tools))
	for _, ti := range b.tools {
		list = append(list, entry{Name: ti.mcpName, Description: ti.rap.Description, InputSchema: ti.rap.InputSchema, Annotations: ti.rap.Annotations})
	}
	b.mu.Unlock()
	sort.Slice(list, func(i, j int) bool { return list[i].Name < list[j].Name })
	raw, err := json.Marshal(map[string]any{"tools": list})
	if err != nil {
		return nil, err
	}
	return rap.Text(string(raw)), nil
}
