package rap

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
)

// ResolvedTool is a tool of a loaded toolset, ready to dispatch: it carries
// the endpoint of its own toolset (RAP TS-6) and its compiled input schema.
type ResolvedTool struct {
	// Tool is the definition from the manifest.
	Tool Tool
	// Toolset is the name of the toolset that defines the tool.
	Toolset string
	// Endpoint is that toolset's endpoint: invocations of this tool are
	// POSTed there.
	Endpoint string
	// Schema is the compiled input schema.
	Schema *Schema
}

// ValidateArguments checks a call's arguments against the tool's input
// schema (RAP IN-2) and returns nil or an *ArgumentsError.
func (t *ResolvedTool) ValidateArguments(args json.RawMessage) error {
	s := t.Schema
	if s == nil {
		var err error
		if s, err = CompileSchema(t.Tool.InputSchema); err != nil {
			return fmt.Errorf("tool %q has an invalid input schema: %w", t.Tool.Name, err)
		}
	}
	return s.Validate(args)
}

// ToolsetError reports a toolset that failed validation; none of its tools
// are in the catalog (RAP TS-5).
type ToolsetError struct {
	// Index is the toolset's position in the slice given to NewCatalog.
	Index int
	// Name is the toolset's name as given (possibly empty or invalid).
	Name string
	// Endpoint is the toolset's endpoint with any password redacted.
	Endpoint string
	// Err is the *ValidationError, or a description of a nil toolset.
	Err error
}

// Error names the toolset and says that none of its tools are available.
func (e *ToolsetError) Error() string {
	return fmt.Sprintf("toolset %s: none of its tools are available (RAP TS-5): %v", e.label(), e.Err)
}

// Unwrap returns the underlying error.
func (e *ToolsetError) Unwrap() error { return e.Err }

func (e *ToolsetError) label() string {
	s := fmt.Sprintf("#%d", e.Index)
	if e.Name != "" {
		s += fmt.Sprintf(" %q", e.Name)
	}
	if e.Endpoint != "" {
		s += " (" + e.Endpoint + ")"
	}
	return s
}

// ToolConflictError reports a tool name defined by more than one toolset;
// no toolset's tool of that name is in the catalog (RAP TS-6).
type ToolConflictError struct {
	// Tool is the conflicting tool name.
	Tool string
	// Toolsets names every toolset that defines it, in load order.
	Toolsets []string
	// Endpoints holds the endpoint of each toolset in Toolsets.
	Endpoints []string
}

// Error names the tool and every toolset that defines it.
func (e *ToolConflictError) Error() string {
	parts := make([]string, len(e.Toolsets))
	for i, name := range e.Toolsets {
		parts[i] = fmt.Sprintf("%q (%s)", name, e.Endpoints[i])
	}
	return fmt.Sprintf("tool %q is defined by toolsets %s; tool names must be unique across loaded toolsets, so neither is available: rename the tool in one of them (RAP TS-6)",
		e.Tool, strings.Join(parts, " and "))
}

// Catalog is the set of tools from several toolsets loaded together
// (RAP TS-5, TS-6). It is immutable and safe for concurrent use.
type Catalog struct {
	tools  []*ResolvedTool
	byName map[string]*ResolvedTool
}

// NewCatalog validates each toolset and gathers the tools of the valid ones.
//
// A toolset that fails validation contributes no tool at all and yields a
// *ToolsetError (RAP TS-5). A tool name defined by two or more valid
// toolsets yields a *ToolConflictError and none of those tools is exposed,
// while the other tools of the same toolsets are (RAP TS-6). Each tool keeps
// its own toolset's endpoint. The catalog is usable whatever the errors.
func NewCatalog(sets []*Toolset) (*Catalog, []error) {
	var errs []error
	type loaded struct {
		ts      *Toolset
		schemas []*Schema
	}
	var ok []loaded
	owners := map[string][]int{} // tool name -> indexes into ok
	for i, ts := range sets {
		if ts == nil {
			errs = append(errs, &ToolsetError{Index: i, Err: fmt.Errorf("toolset is nil")})
			continue
		}
		vs, schemas := ts.check()
		if len(vs) > 0 {
			errs = append(errs, &ToolsetError{Index: i, Name: ts.Name, Endpoint: redactURL(ts.Endpoint), Err: &ValidationError{Violations: vs}})
			continue
		}
		for _, t := range ts.Tools {
			owners[t.Name] = append(owners[t.Name], len(ok))
		}
		ok = append(ok, loaded{ts, schemas})
	}
	c := &Catalog{byName: map[string]*ResolvedTool{}}
	reported := map[string]bool{}
	for _, l := range ok {
		for j, t := range l.ts.Tools {
			if own := owners[t.Name]; len(own) > 1 {
				if !reported[t.Name] {
					reported[t.Name] = true
					e := &ToolConflictError{Tool: t.Name}
					for _, k := range own {
						e.Toolsets = append(e.Toolsets, ok[k].ts.Name)
						e.Endpoints = append(e.Endpoints, redactURL(ok[k].ts.Endpoint))
					}
					errs = append(errs, e)
				}
				continue
			}
			rt := &ResolvedTool{Tool: t, Toolset: l.ts.Name, Endpoint: l.ts.Endpoint, Schema: l.schemas[j]}
			c.tools = append(c.tools, rt)
			c.byName[t.Name] = rt
		}
	}
	return c, errs
}

// Lookup returns the tool with the given name (case-sensitive).
func (c *Catalog) Lookup(name string) (*ResolvedTool, bool) {
	t, ok := c.byName[name]
	return t, ok
}

// Tools returns every available tool in load order: toolsets in the order
// given to NewCatalog, tools in manifest order. The slice is a copy; the
// tools themselves must not be modified.
func (c *Catalog) Tools() []*ResolvedTool {
	return append([]*ResolvedTool(nil), c.tools...)
}

// redactURL hides any password in u, for messages and logs.
func redactURL(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return "<invalid URL>"
	}
	return p.Redacted()
}
