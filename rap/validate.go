package rap

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxNameLength is the longest toolset or tool name, in characters
// (RAP TS-1, TS-2).
const MaxNameLength = 128

// MaxTools is the most tools a toolset may declare. The protocol sets no
// limit; this one bounds the work of loading a manifest (each input schema
// is compiled) and is far above what model APIs accept in one request.
const MaxTools = 1024

// Violation is one problem found in a toolset manifest. Path names the
// offending member the way it is written in JSON: "name", "tools",
// "tools[2].inputSchema", "tools[0].annotations.readOnly".
type Violation struct {
	// Path locates the member; "" stands for the manifest (or schema) root.
	Path string
	// Message says what is wrong and how to fix it.
	Message string
}

// String returns "path: message", or the message alone for the root.
func (v Violation) String() string {
	if v.Path == "" {
		return v.Message
	}
	return v.Path + ": " + v.Message
}

// ValidationError lists every problem of an invalid toolset manifest
// (RAP TS-5): a manifest with one problem is rejected as a whole.
type ValidationError struct {
	// Violations lists every problem found, in document order.
	Violations []Violation
}

// Error lists all violations, one per line.
func (e *ValidationError) Error() string {
	if len(e.Violations) == 1 {
		return "invalid toolset manifest: " + e.Violations[0].String()
	}
	var b strings.Builder
	fmt.Fprintf(&b, "invalid toolset manifest (%d problems):", len(e.Violations))
	for _, v := range e.Violations {
		b.WriteString("\n")
		b.WriteString(v.String())
	}
	return b.String()
}

// ParseToolset decodes and validates a toolset manifest (RAP TS-1, TS-2,
// TS-3, TS-5). Decoding is strict: a member of the wrong JSON type is a
// violation naming its path, and so is a missing required member. Unknown
// members are ignored, so that newer manifests still load. Every problem is
// reported, not only the first; on any problem ParseToolset returns a nil
// Toolset and a *ValidationError.
func ParseToolset(data []byte) (*Toolset, error) {
	ts, vs := parseToolset(data)
	if len(vs) > 0 {
		return nil, &ValidationError{Violations: vs}
	}
	return ts, nil
}

// parseToolset decodes data and returns the toolset and its violations.
func parseToolset(data []byte) (*Toolset, []Violation) {
	c := &checker{}
	if len(data) > MaxManifestBytes {
		c.add("", "manifest is %d bytes; the limit is %d bytes (4 MiB)", len(data), MaxManifestBytes)
		return nil, c.vs
	}
	if !utf8.Valid(data) {
		c.add("", "manifest is not valid UTF-8 (RAP TR-1)")
		return nil, c.vs
	}
	root, ok := c.object(data, "")
	if !ok {
		return nil, c.vs
	}
	ts := &Toolset{}
	if s, ok := c.str(root, "", "name", true); ok {
		ts.Name = s
		c.toolsetName("name", s)
	}
	if s, ok := c.str(root, "", "description", false); ok {
		ts.Description = s
	}
	if s, ok := c.str(root, "", "endpoint", true); ok {
		ts.Endpoint = s
		c.endpoint("endpoint", s)
	}
	if raw, ok := present(root, "tools"); !ok {
		c.add("tools", "missing required field; list at least one tool")
	} else if jsonKind(raw) != "array" {
		c.add("tools", "must be an array of tools, got %s", jsonKind(raw))
	} else {
		var items []json.RawMessage
		if err := json.Unmarshal(raw, &items); err != nil {
			c.add("tools", "malformed array: %v", err)
		} else if len(items) == 0 {
			c.add("tools", "must contain at least one tool (RAP TS-1)")
		} else if len(items) > MaxTools {
			c.add("tools", "has %d tools; the limit is %d: split the tools across several toolsets", len(items), MaxTools)
			items = nil
		}
		ts.Tools = make([]Tool, len(items))
		for i, item := range items {
			ts.Tools[i] = c.parseTool(item, fmt.Sprintf("tools[%d]", i))
		}
		c.uniqueNames(ts.Tools)
	}
	if b, ok := c.boolean(root, "", "needsMigration"); ok {
		ts.NeedsMigration = b
	}
	return ts, c.vs
}

// parseTool decodes and checks the tool at path.
func (c *checker) parseTool(raw json.RawMessage, path string) Tool {
	var t Tool
	m, ok := c.object(raw, path)
	if !ok {
		return t
	}
	if s, ok := c.str(m, path, "name", true); ok {
		t.Name = s
		c.toolName(path+".name", s)
	}
	if s, ok := c.str(m, path, "description", true); ok {
		t.Description = s
		if strings.TrimSpace(s) == "" {
			c.add(path+".description", "must not be empty; say what the tool does so the model can choose it (RAP TS-2)")
		}
	}
	if raw, ok := present(m, "inputSchema"); !ok {
		c.add(path+".inputSchema", `missing required field; a tool without parameters declares {"type":"object","additionalProperties":false} (RAP TS-8)`)
	} else {
		t.InputSchema = compactJSON(raw)
		c.inputSchema(path+".inputSchema", t.InputSchema)
	}
	if raw, ok := present(m, "annotations"); ok {
		t.Annotations = c.parseAnnotations(raw, path+".annotations")
	}
	if s, ok := c.str(m, path, "displayScript", false); ok {
		t.DisplayScript = s
	}
	return t
}

func (c *checker) parseAnnotations(raw json.RawMessage, path string) *Annotations {
	m, ok := c.object(raw, path)
	if !ok {
		return nil
	}
	a := &Annotations{}
	if s, ok := c.str(m, path, "requiresAuth", false); ok {
		a.RequiresAuth = s
	}
	for _, f := range []struct {
		key string
		dst *bool
	}{{"readOnly", &a.ReadOnly}, {"destructive", &a.Destructive}, {"idempotent", &a.Idempotent}, {"longRunning", &a.LongRunning}} {
		if b, ok := c.boolean(m, path, f.key); ok {
			*f.dst = b
		}
	}
	for k, v := range m {
		if !knownAnnotations[k] {
			if a.Custom == nil {
				a.Custom = map[string]json.RawMessage{}
			}
			a.Custom[k] = compactJSON(v)
		}
	}
	return a
}

// Validate checks the toolset against RAP TS-1, TS-2 and TS-3 and returns
// nil or a *ValidationError listing every problem. Every tool's input schema
// is compiled (see CompileSchema).
func (ts *Toolset) Validate() error {
	if vs, _ := ts.check(); len(vs) > 0 {
		return &ValidationError{Violations: vs}
	}
	return nil
}

// check validates ts and returns its violations and the compiled input
// schema of each tool (nil where a schema is invalid).
func (ts *Toolset) check() ([]Violation, []*Schema) {
	c := &checker{}
	c.toolsetName("name", ts.Name)
	c.endpoint("endpoint", ts.Endpoint)
	if len(ts.Tools) == 0 {
		c.add("tools", "must contain at least one tool (RAP TS-1)")
	}
	if len(ts.Tools) > MaxTools {
		c.add("tools", "has %d tools; the limit is %d: split the tools across several toolsets", len(ts.Tools), MaxTools)
		return c.vs, nil
	}
	schemas := make([]*Schema, len(ts.Tools))
	for i, t := range ts.Tools {
		path := fmt.Sprintf("tools[%d]", i)
		c.toolName(path+".name", t.Name)
		if strings.TrimSpace(t.Description) == "" {
			c.add(path+".description", "missing or empty; say what the tool does so the model can choose it (RAP TS-2)")
		}
		if len(bytes.TrimSpace(t.InputSchema)) == 0 {
			c.add(path+".inputSchema", `missing; a tool without parameters declares {"type":"object","additionalProperties":false} (RAP TS-8)`)
		} else {
			schemas[i] = c.inputSchema(path+".inputSchema", t.InputSchema)
		}
		if t.Annotations != nil {
			keys := make([]string, 0, len(t.Annotations.Custom))
			for k := range t.Annotations.Custom {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				if !json.Valid(t.Annotations.Custom[k]) {
					c.add(joinPath(path+".annotations", k), "is not valid JSON")
				}
			}
		}
	}
	c.uniqueNames(ts.Tools)
	return c.vs, schemas
}

// Warnings returns SHOULD-level findings that do not make the toolset
// invalid:
//
//   - a tool name with letters or digits outside ASCII (RAP TS-2 asks for
//     ASCII letters, digits, "_" and "-"; many model APIs reject others),
//     while spaces and other special characters are violations;
//   - tool names that differ only in case;
//   - custom annotation keys not namespaced with "x-" (RAP TS-3);
//   - destructive tools, which a runtime should confirm with the user
//     before running (RAP TS-3), and tools marked both readOnly and
//     destructive;
//   - a tool that declares no parameters but whose schema accepts any
//     properties, instead of {"type":"object","additionalProperties":false}
//     (RAP TS-8);
//   - an input schema whose root "type" is not "object".
func (ts *Toolset) Warnings() []Violation {
	var ws []Violation
	warn := func(path, format string, args ...any) {
		ws = append(ws, Violation{Path: path, Message: fmt.Sprintf(format, args...)})
	}
	byFold := map[string]int{}
	for i, t := range ts.Tools {
		path := fmt.Sprintf("tools[%d]", i)
		if nameProblem(t.Name) == "" && !isPortableName(t.Name) {
			warn(path+".name", "%q has characters outside ASCII letters, digits, \"_\" and \"-\"; some model APIs reject such names (RAP TS-2)", t.Name)
		}
		if t.Name != "" {
			fold := strings.ToLower(t.Name)
			if j, ok := byFold[fold]; ok && ts.Tools[j].Name != t.Name {
				warn(path+".name", "%q differs from tools[%d].name %q only in case; names are case-sensitive, but people and models confuse them", t.Name, j, ts.Tools[j].Name)
			} else if !ok {
				byFold[fold] = i
			}
		}
		if a := t.Annotations; a != nil {
			keys := make([]string, 0, len(a.Custom))
			for k := range a.Custom {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				if !strings.HasPrefix(k, "x-") {
					warn(joinPath(path+".annotations", k), "custom annotation keys should be namespaced, e.g. \"x-vendor-%s\" (RAP TS-3)", k)
				}
			}
			if a.Destructive {
				warn(path+".annotations.destructive", "tool %q is destructive; a runtime should ask the user before running it (RAP TS-3)", t.Name)
				if a.ReadOnly {
					warn(path+".annotations", "tool %q is marked both readOnly and destructive; at most one can be true", t.Name)
				}
			}
		}
		ws = append(ws, schemaWarnings(path+".inputSchema", t.InputSchema)...)
	}
	return ws
}

// schemaWarnings inspects the root of an input schema for RAP TS-8 and the
// root "type".
func schemaWarnings(path string, raw json.RawMessage) []Violation {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil
	}
	var ws []Violation
	if declaresNoParameters(m) {
		ws = append(ws, Violation{Path: path, Message: `declares no parameters but accepts any properties; a tool without parameters declares {"type":"object","additionalProperties":false} (RAP TS-8)`})
		if _, ok := m["type"]; !ok {
			return ws
		}
	}
	t, ok := m["type"]
	if !ok {
		ws = append(ws, Violation{Path: path, Message: `has no "type"; arguments are always a JSON object (RAP IN-1), so declare "type":"object"`})
		return ws
	}
	var s string
	if json.Unmarshal(t, &s) != nil || s != "object" {
		ws = append(ws, Violation{Path: path + ".type", Message: fmt.Sprintf(`is %s; arguments are always a JSON object (RAP IN-1), so declare "type":"object"`, string(t))})
	}
	return ws
}

// declaresNoParameters reports whether a schema root names no properties
// and constrains none, yet leaves additional properties open.
func declaresNoParameters(m map[string]json.RawMessage) bool {
	if ap, ok := m["additionalProperties"]; ok && string(bytes.TrimSpace(ap)) != "true" {
		return false
	}
	if t, ok := m["type"]; ok && string(bytes.TrimSpace(t)) != `"object"` {
		return false
	}
	neutral := map[string]bool{
		"type": true, "$schema": true, "$id": true, "$comment": true, "title": true, "description": true,
		"examples": true, "default": true, "$defs": true, "definitions": true, "properties": true,
		"required": true, "additionalProperties": true,
	}
	for k := range m {
		if !neutral[k] {
			return false
		}
	}
	for _, k := range []string{"properties", "required"} {
		if v, ok := m[k]; ok {
			s := string(bytes.TrimSpace(v))
			if s != "{}" && s != "[]" && s != "null" {
				return false
			}
		}
	}
	return true
}

// MaxToolsetSchemaObjects is the most JSON objects the input schemas of one
// toolset may hold together (see MaxSchemaObjects). It bounds the time spent
// compiling one manifest.
const MaxToolsetSchemaObjects = 20000

// checker accumulates violations in the order the members are visited.
type checker struct {
	vs []Violation
	// schemaObjects counts the JSON objects of the input schemas seen so
	// far; overBudget is set once they exceed MaxToolsetSchemaObjects.
	schemaObjects int
	overBudget    bool
}

func (c *checker) add(path, format string, args ...any) {
	c.vs = append(c.vs, Violation{Path: path, Message: fmt.Sprintf(format, args...)})
}

// present returns a member that is present and not null.
func present(m map[string]json.RawMessage, key string) (json.RawMessage, bool) {
	v, ok := m[key]
	if !ok || string(bytes.TrimSpace(v)) == "null" {
		return nil, false
	}
	return v, true
}

// object decodes raw as a JSON object, reporting anything else at path.
func (c *checker) object(raw json.RawMessage, path string) (map[string]json.RawMessage, bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		c.add(path, "empty; expected a JSON object")
		return nil, false
	}
	if k := jsonKind(raw); k != "object" {
		c.add(path, "must be a JSON object, got %s", k)
		return nil, false
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		c.add(path, "malformed JSON: %v", err)
		return nil, false
	}
	return m, true
}

// str reads a string member of m (at parent path); ok is false when the
// member is absent or not a string (the latter, and a missing required
// member, are reported).
func (c *checker) str(m map[string]json.RawMessage, parent, key string, required bool) (string, bool) {
	path := joinPath(parent, key)
	v, ok := present(m, key)
	if !ok {
		if required {
			c.add(path, "missing required field")
		}
		return "", false
	}
	var s string
	if jsonKind(v) != "string" || json.Unmarshal(v, &s) != nil {
		c.add(path, "must be a string, got %s", jsonKind(v))
		return "", false
	}
	return s, true
}

func (c *checker) boolean(m map[string]json.RawMessage, parent, key string) (bool, bool) {
	path := joinPath(parent, key)
	v, ok := present(m, key)
	if !ok {
		return false, false
	}
	var b bool
	if jsonKind(v) != "boolean" || json.Unmarshal(v, &b) != nil {
		c.add(path, "must be a boolean (true or false), got %s", jsonKind(v))
		return false, false
	}
	return b, true
}

func (c *checker) toolsetName(path, name string) {
	switch n := utf8.RuneCountInString(name); {
	case strings.TrimSpace(name) == "":
		c.add(path, "must not be empty; give the toolset a name of 1 to %d characters (RAP TS-1)", MaxNameLength)
	case n > MaxNameLength:
		c.add(path, "is %d characters long; the limit is %d (RAP TS-1)", n, MaxNameLength)
	case !utf8.ValidString(name):
		c.add(path, "is not valid UTF-8")
	}
}

func (c *checker) endpoint(path, s string) {
	if s == "" {
		c.add(path, "must not be empty; give the absolute http or https URL invocations are POSTed to (RAP TS-1)")
		return
	}
	u, err := url.Parse(s)
	if err != nil {
		reason := err
		if ue, ok := err.(*url.Error); ok {
			reason = ue.Err // url.Error repeats the URL, which may hold a credential
		}
		c.add(path, "is not a valid URL (%v); give an absolute http or https URL (RAP TS-1)", reason)
		return
	}
	switch {
	case u.Scheme == "":
		c.add(path, "is a relative reference; give an absolute URL starting with http:// or https:// (RAP TS-1)")
	case u.Scheme != "http" && u.Scheme != "https":
		c.add(path, "has scheme %q; invocations are POSTed over http or https, so use an http:// or https:// URL (RAP TR-1)", u.Scheme)
	case u.Host == "" || u.Hostname() == "":
		c.add(path, "has no host; give an absolute URL such as https://tools.example.com/invoke (RAP TS-1)")
	}
}

// nameProblem returns why name breaks the MUST rules of RAP TS-2, or "".
// Letters and digits of any script pass here (Warnings flags non-ASCII
// ones); spaces, control characters, punctuation other than "_" and "-",
// and symbols fail.
func nameProblem(name string) string {
	if name == "" {
		return fmt.Sprintf("must not be empty; use 1 to %d characters from A-Z, a-z, 0-9, \"_\" and \"-\" (RAP TS-2)", MaxNameLength)
	}
	if !utf8.ValidString(name) {
		return "is not valid UTF-8"
	}
	if n := utf8.RuneCountInString(name); n > MaxNameLength {
		return fmt.Sprintf("is %d characters long; the limit is %d (RAP TS-2)", n, MaxNameLength)
	}
	var space bool
	var special []string
	seen := map[rune]bool{}
	for _, r := range name {
		switch {
		case r == '_' || r == '-' || unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r):
		case unicode.IsSpace(r):
			space = true
		case !seen[r]:
			seen[r] = true
			special = append(special, fmt.Sprintf("%q", r))
		}
	}
	var what []string
	if space {
		what = append(what, "a space")
	}
	if len(special) > 0 {
		what = append(what, "the special character(s) "+strings.Join(special, " "))
	}
	if len(what) == 0 {
		return ""
	}
	return fmt.Sprintf("%q contains %s; use only letters, digits, \"_\" and \"-\", e.g. %q (RAP TS-2)", name, strings.Join(what, " and "), suggestName(name))
}

// isPortableName reports whether name uses only A-Z, a-z, 0-9, "_" and "-".
func isPortableName(name string) bool {
	for i := 0; i < len(name); i++ {
		b := name[i]
		if !(b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' || b == '_' || b == '-') {
			return false
		}
	}
	return true
}

// suggestName replaces every character a tool name must not have with "_".
func suggestName(name string) string {
	var b strings.Builder
	for _, r := range name {
		if r == '_' || r == '-' || unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r) {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	return excerpt(b.String(), MaxNameLength)
}

func (c *checker) toolName(path, name string) {
	if p := nameProblem(name); p != "" {
		c.add(path, "%s", p)
	}
}

// uniqueNames reports each tool whose name repeats an earlier one
// (case-sensitive, RAP TS-2).
func (c *checker) uniqueNames(tools []Tool) {
	first := map[string]int{}
	for i, t := range tools {
		if t.Name == "" {
			continue
		}
		if j, ok := first[t.Name]; ok {
			c.add(fmt.Sprintf("tools[%d].name", i), "duplicate tool name %q, already used by tools[%d]; tool names must be unique within a toolset (RAP TS-2)", t.Name, j)
			continue
		}
		first[t.Name] = i
	}
}

// inputSchema compiles raw and reports its problems under path.
func (c *checker) inputSchema(path string, raw json.RawMessage) *Schema {
	if k := jsonKind(raw); k != "object" {
		c.add(path, "must be a JSON object (a JSON Schema), got %s; a tool without parameters declares {\"type\":\"object\",\"additionalProperties\":false} (RAP TS-2)", k)
		return nil
	}
	if c.overBudget {
		return nil
	}
	if c.schemaObjects += countObjects(raw); c.schemaObjects > MaxToolsetSchemaObjects {
		c.overBudget = true
		c.add(path, "the input schemas of the toolset hold more than %d JSON objects together; this and later schemas were not compiled: simplify the schemas or split the toolset", MaxToolsetSchemaObjects)
		return nil
	}
	sch, err := CompileSchema(raw)
	if err == nil {
		return sch
	}
	if se, ok := err.(*SchemaError); ok {
		for _, p := range se.Problems {
			sub := path
			switch {
			case p.Path == "":
			case strings.HasPrefix(p.Path, "["):
				sub += p.Path
			default:
				sub += "." + p.Path
			}
			c.add(sub, "%s", p.Message)
		}
		return nil
	}
	c.add(path, "%v", err)
	return nil
}

// compactJSON returns v compacted, or a copy of v if it cannot be.
func compactJSON(v json.RawMessage) json.RawMessage {
	var b bytes.Buffer
	if err := json.Compact(&b, v); err != nil {
		return append(json.RawMessage(nil), v...)
	}
	return b.Bytes()
}
