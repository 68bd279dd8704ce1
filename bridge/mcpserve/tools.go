package mcpserve

// This file maps a RAP tool definition (RAP TS-2, TS-3) to an MCP tool.

import (
	"encoding/json"
	"fmt"

	"github.com/gorap/gorap/rap"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Custom RAP annotations that carry MCP fields: bridge/mcp puts an MCP
// tool's title and openWorldHint there, so that a tool that went from MCP
// to RAP comes back with them.
const (
	annotationTitle     = "x-mcp-title"
	annotationOpenWorld = "x-mcp-openWorldHint"
)

// maxToolName is the longest tool name MCP allows.
const maxToolName = 128

// mcpTool returns the MCP form of a RAP tool, or why it cannot be served.
func mcpTool(rt *rap.ResolvedTool) (*mcp.Tool, string) {
	t := rt.Tool
	if problem := checkName(t.Name); problem != "" {
		return nil, problem
	}
	var schema map[string]json.RawMessage
	if err := json.Unmarshal(t.InputSchema, &schema); err != nil {
		return nil, "its input schema is not a JSON object, which MCP requires"
	}
	if typ, ok := schema["type"]; !ok || string(typ) != `"object"` {
		return nil, `its input schema does not say "type": "object", which MCP requires of a tool's input schema`
	}
	mt := &mcp.Tool{
		Name:        t.Name,
		Description: t.Description,
		InputSchema: json.RawMessage(t.InputSchema),
	}
	if a := t.Annotations; a != nil {
		ann := &mcp.ToolAnnotations{
			ReadOnlyHint:   a.ReadOnly,
			IdempotentHint: a.Idempotent,
		}
		// RAP's destructive is false unless said; MCP's destructiveHint is
		// true unless said. A tool that annotates itself says what it
		// does, so its absent destructive means not destructive.
		destructive := a.Destructive && !a.ReadOnly
		ann.DestructiveHint = &destructive
		if raw, ok := a.Custom[annotationOpenWorld]; ok {
			var open bool
			if json.Unmarshal(raw, &open) == nil {
				ann.OpenWorldHint = &open
			}
		}
		if raw, ok := a.Custom[annotationTitle]; ok {
			var title string
			if json.Unmarshal(raw, &title) == nil {
				mt.Title = title
				ann.Title = title
			}
		}
		mt.Annotations = ann
	}
	return mt, ""
}

// checkName returns why MCP refuses a tool name, or "": 1 to 128 ASCII
// letters, digits, '_', '-' and '.'.
func checkName(name string) string {
	if len(name) > maxToolName {
		return fmt.Sprintf("its name is %d characters long; MCP allows at most %d", len(name), maxToolName)
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' || r == '.') {
			return fmt.Sprintf("its name has the character %q, which MCP does not allow in tool names (letters, digits, _, - and . only)", r)
		}
	}
	return ""
}
