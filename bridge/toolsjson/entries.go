package toolsjson

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/gorap/gorap/rap"
)

// idPattern is what a tool id may hold: letters, digits, ".", "_" and "-".
var idPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// refIDPattern is what a schema:ID or secret id may hold.
var refIDPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._/-]{0,199}$`)

// RAPName maps a tools.json id to a RAP tool name: every
// "." becomes "_" (mail.smtp_send becomes mail_smtp_send). Ids hold only
// letters, digits, ".", "_" and "-", so the result is always a valid RAP
// name; two ids that map to the same name (a.b and a_b) refuse the bundle.
// The original id is kept in the tool's x-runloop-id annotation.
func RAPName(id string) string { return strings.ReplaceAll(id, ".", "_") }

// entry is a tools.json tool entry as written.
type entry struct {
	ID                   *string                    `json:"id"`
	Description          *string                    `json:"description"`
	Transport            json.RawMessage            `json:"transport"`
	InputSchema          json.RawMessage            `json:"input_schema"`
	ResultSchema         json.RawMessage            `json:"result_schema"`
	SchemaRefs           map[string]json.RawMessage `json:"schema_refs"`
	Capabilities         []string                   `json:"capabilities"`
	Secrets              []string                   `json:"secrets"`
	Budget               json.RawMessage            `json:"budget"`
	RequiresConfirmation *bool                      `json:"requires_confirmation"`
	Observability        *struct {
		Tags []string `json:"tags"`
	} `json:"observability"`
}

// parseTools checks the document and every entry.
func parseTools(data []byte, dir string, policy *Policy) ([]*Tool, []Denial, []Violation) {
	var vs []Violation
	add := func(path, format string, args ...any) {
		vs = append(vs, Violation{Path: path, Message: fmt.Sprintf(format, args...)})
	}
	var doc struct {
		Version *json.RawMessage  `json:"version"`
		Tools   []json.RawMessage `json:"tools"`
	}
	if err := decodeStrict(data, &doc); err != nil {
		add(ToolsFile, "is not a valid tools.json document: %v; want {\"version\": 1, \"tools\": [...]}", err)
		return nil, nil, vs
	}
	if doc.Version == nil {
		add("version", "missing; this gorap reads version 1: add \"version\": 1")
	} else if v := strings.TrimSpace(string(*doc.Version)); v != "1" {
		add("version", "is %s; this gorap reads only version 1: write the bundle for version 1, or install a gorap release that supports version %s", v, v)
		return nil, nil, vs // entries of an unknown version are not interpreted
	}

	var tools []*Tool
	var denied []Denial
	ids := map[string]string{}   // id -> path
	names := map[string]string{} // RAP name -> id
	for i, raw := range doc.Tools {
		p := fmt.Sprintf("tools[%d]", i)
		var e entry
		if err := decodeStrict(raw, &e); err != nil {
			add(p, "%v; see docs/toolsjson.md for the members of a tool entry", err)
			continue
		}
		n := len(vs)
		t := &Tool{}
		switch {
		case e.ID == nil || *e.ID == "":
			add(p+".id", "missing; every tool needs a stable id such as \"mail.smtp_send\"")
		case !idPattern.MatchString(*e.ID):
			add(p+".id", "%q is not a valid id; use 1 to 128 letters, digits, \".\", \"_\" and \"-\", starting with a letter or digit", *e.ID)
		default:
			t.ID, t.Name = *e.ID, RAPName(*e.ID)
			if prev, dup := ids[t.ID]; dup {
				add(p+".id", "%q is already the id of %s; ids must be unique", t.ID, prev)
			} else if other, clash := names[t.Name]; clash {
				add(p+".id", "%q and %q both map to the RAP tool name %q (dots become underscores); rename one", other, t.ID, t.Name)
			}
			ids[t.ID], names[t.Name] = p, t.ID
		}
		if e.Description == nil || strings.TrimSpace(*e.Description) == "" {
			add(p+".description", "missing; say in a short sentence what the tool does")
		} else {
			t.Description = *e.Description
		}
		secrets := map[string]bool{}
		for j, s := range e.Secrets {
			if !refIDPattern.MatchString(s) {
				add(fmt.Sprintf("%s.secrets[%d]", p, j), "%q is not a valid secret id; use letters, digits, \".\", \"_\", \"-\" and \"/\"", s)
			}
			secrets[s] = true
		}
		t.Secrets = e.Secrets
		if len(e.Transport) == 0 {
			add(p+".transport", "missing; want {\"kind\": \"exec\", \"command\": \"/abs/path\"} or {\"kind\": \"http\", \"method\": \"POST\", \"url\": \"https://...\"}")
		} else {
			tr, tvs := checkTransport(e.Transport, p+".transport", secrets)
			vs = append(vs, tvs...)
			t.Transport = tr
		}
		refs := map[string]json.RawMessage{}
		for _, k := range sortedKeys(e.SchemaRefs) {
			if !refIDPattern.MatchString(k) {
				add(p+".schema_refs."+k, "is not a valid schema id")
				continue
			}
			refs[k] = e.SchemaRefs[k]
		}
		var sv []Violation
		t.InputSchema, t.InputRef, t.input, sv = resolveSchema(e.InputSchema, p+".input_schema", refs, dir)
		vs = append(vs, sv...)
		t.ResultSchema, t.ResultRef, t.result, sv = resolveSchema(e.ResultSchema, p+".result_schema", refs, dir)
		vs = append(vs, sv...)
		for j, c := range e.Capabilities {
			if fam, val, ok := strings.Cut(c, ":"); !ok || fam == "" || val == "" {
				add(fmt.Sprintf("%s.capabilities[%d]", p, j), "%q is not a capability; write FAMILY:VALUE such as \"net:api.mail.example\"", c)
			}
		}
		t.Capabilities = e.Capabilities
		if len(e.Budget) > 0 {
			var b Budget
			if err := decodeStrict(e.Budget, &b); err != nil {
				add(p+".budget", "%v; want {\"tokens\": 1000, \"usd\": 0.5}", err)
			} else if (b.Tokens != nil && *b.Tokens < 0) || (b.USD != nil && *b.USD < 0) {
				add(p+".budget", "must not be negative")
			} else {
				t.Budget = &b
			}
		}
		if e.RequiresConfirmation != nil {
			t.RequiresConfirmation = *e.RequiresConfirmation
		}
		if e.Observability != nil {
			for j, tag := range e.Observability.Tags {
				if strings.TrimSpace(tag) == "" {
					add(fmt.Sprintf("%s.observability.tags[%d]", p, j), "is empty")
				}
			}
			t.Tags = e.Observability.Tags
		}
		if len(vs) > n {
			continue
		}
		// Capabilities: every one must be granted, and
		// an http tool's host must be covered by a net: grant.
		var ds []Denial
		for j, c := range t.Capabilities {
			if !policy.Grants(c) {
				ds = append(ds, Denial{ToolID: t.ID, Path: fmt.Sprintf("%s.capabilities[%d]", p, j), Capability: c, Tags: t.Tags})
			}
		}
		if t.Transport.Kind == "http" {
			if host := urlHost(t.Transport.URL); !policy.GrantsHost(host) {
				ds = append(ds, Denial{ToolID: t.ID, Path: p + ".transport.url", Capability: "net:" + host, Tags: t.Tags})
			}
		}
		if len(ds) > 0 {
			denied = append(denied, ds...)
			continue
		}
		tools = append(tools, t)
	}
	return tools, denied, vs
}

var httpMethods = map[string]bool{
	http.MethodGet: true, http.MethodPost: true, http.MethodPut: true, http.MethodPatch: true,
	http.MethodDelete: true, http.MethodHead: true,
}

func checkTransport(raw json.RawMessage, p string, secrets map[string]bool) (Transport, []Violation) {
	var vs []Violation
	add := func(path, format string, args ...any) {
		vs = append(vs, Violation{Path: path, Message: fmt.Sprintf(format, args...)})
	}
	var t Transport
	if err := decodeStrict(raw, &t); err != nil {
		add(p, "%v", err)
		return t, vs
	}
	if t.TimeoutMS < 0 {
		add(p+".timeout_ms", "must not be negative")
	}
	switch t.Kind {
	case "exec":
		switch {
		case t.Command == "":
			add(p+".command", "missing; want the absolute path of the program")
		case !filepath.IsAbs(t.Command):
			add(p+".command", "%q is not an absolute path; no shell or PATH lookup is used, so write the full path such as /usr/local/bin/tool", t.Command)
		}
		if t.Method != "" || t.URL != "" || len(t.Headers) > 0 {
			add(p, "an exec transport takes command and args, not method, url or headers")
		}
	case "http":
		if !httpMethods[t.Method] {
			add(p+".method", "%q is not supported; want GET, POST, PUT, PATCH, DELETE or HEAD (upper case)", t.Method)
		}
		if _, err := ParseURLTemplate(t.URL); err != nil {
			add(p+".url", "%v", err)
		}
		for _, k := range sortedKeys(t.Headers) {
			if !validHeaderName(k) {
				add(p+".headers."+k, "is not a valid header name")
			}
			for _, id := range secretPlaceholders(t.Headers[k]) {
				if !secrets[id] {
					add(p+".headers."+k, "uses ${secret:%s} but %q is not listed in the tool's secrets", id, id)
				}
			}
		}
		if t.Command != "" || len(t.Args) > 0 {
			add(p, "an http transport takes method, url and headers, not command or args")
		}
	case "":
		add(p+".kind", "missing; want \"exec\" or \"http\"")
	default:
		add(p+".kind", "%q is not supported; want \"exec\" or \"http\" (a newer tools.json version may add others)", t.Kind)
	}
	return t, vs
}

func validHeaderName(k string) bool {
	if k == "" {
		return false
	}
	for _, r := range k {
		if r <= ' ' || r >= 0x7f || strings.ContainsRune("()<>@,;:\\\"/[]?={}", r) {
			return false
		}
	}
	return true
}

// placeholderPattern matches "${secret:ID}".
var placeholderPattern = regexp.MustCompile(`\$\{secret:([^}]*)\}`)

func secretPlaceholders(s string) []string {
	var ids []string
	for _, m := range placeholderPattern.FindAllStringSubmatch(s, -1) {
		ids = append(ids, m[1])
	}
	return ids
}

func urlHost(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	return u.Host
}

// maxRefExpansions bounds how many schema: references one schema may
// expand, so that references that fan out cannot blow a small tools.json
// up into a huge schema.
const maxRefExpansions = 256

// expansion is the state of expanding one schema's references.
type expansion struct {
	refs  map[string]json.RawMessage
	dir   string
	stack []string // ids being expanded, to find cycles
	left  int      // expansions left
	vs    []Violation
}

// resolveSchema resolves "schema:ID" references in an input_schema or
// result_schema, compiles the result, and returns it with the reference as
// written ("inline" for an inline schema). References are looked up in the
// entry's schema_refs, then in the bundle's schemas directory; nothing is
// ever fetched over the network.
func resolveSchema(raw json.RawMessage, p string, refs map[string]json.RawMessage, dir string) (json.RawMessage, string, *rap.Schema, []Violation) {
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		return nil, "", nil, []Violation{{Path: p, Message: "missing; give a JSON Schema object or {\"$ref\": \"schema:ID\"}"}}
	}
	var doc any
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, "", nil, []Violation{{Path: p, Message: fmt.Sprintf("is not valid JSON: %v", err)}}
	}
	ref := "inline"
	if m, ok := doc.(map[string]any); ok {
		if r, ok := m["$ref"].(string); ok && len(m) == 1 && strings.HasPrefix(r, "schema:") {
			ref = r
		}
	}
	x := &expansion{refs: refs, dir: dir, left: maxRefExpansions}
	expanded := x.expand(doc, p)
	if len(x.vs) > 0 {
		return nil, ref, nil, x.vs
	}
	out, err := json.Marshal(expanded)
	if err != nil {
		return nil, ref, nil, []Violation{{Path: p, Message: err.Error()}}
	}
	s, err := rap.CompileSchema(out)
	if err != nil {
		return nil, ref, nil, []Violation{{Path: p, Message: err.Error()}}
	}
	return out, ref, s, nil
}

// expand replaces every {"$ref": "schema:ID"} in v by the schema it
// names. A reference inside the schema it names (a cycle) is an error.
func (x *expansion) expand(v any, p string) any {
	if len(x.vs) > 0 {
		return nil // report the first problem of a schema only
	}
	switch m := v.(type) {
	case map[string]any:
		if r, ok := m["$ref"].(string); ok && strings.HasPrefix(r, "schema:") {
			id := strings.TrimPrefix(r, "schema:")
			switch {
			case len(m) != 1:
				x.vs = append(x.vs, Violation{Path: p, Message: fmt.Sprintf("a {\"$ref\": %q} must stand alone; move the other keywords into the referenced schema", r)})
				return nil
			case slices.Contains(x.stack, id):
				x.vs = append(x.vs, Violation{Path: p + ".$ref", Message: fmt.Sprintf("%q refers to itself (through %s); recursive schema references are not supported, use $defs inside one schema", r, strings.Join(x.stack, " -> "))})
				return nil
			case x.left == 0:
				x.vs = append(x.vs, Violation{Path: p + ".$ref", Message: fmt.Sprintf("more than %d schema: references are expanded for this schema; share definitions with $defs instead", maxRefExpansions)})
				return nil
			}
			x.left--
			target, err := lookupRef(id, x.refs, x.dir)
			if err != nil {
				x.vs = append(x.vs, Violation{Path: p + ".$ref", Message: err.Error()})
				return nil
			}
			x.stack = append(x.stack, id)
			out := x.expand(target, p)
			x.stack = x.stack[:len(x.stack)-1]
			return out
		}
		out := make(map[string]any, len(m))
		for _, k := range sortedKeys(m) {
			out[k] = x.expand(m[k], p+"."+k)
		}
		return out
	case []any:
		out := make([]any, len(m))
		for i, e := range m {
			out[i] = x.expand(e, fmt.Sprintf("%s[%d]", p, i))
		}
		return out
	default:
		return v
	}
}

func lookupRef(id string, refs map[string]json.RawMessage, dir string) (any, error) {
	if !refIDPattern.MatchString(id) || strings.Contains(id, "..") || strings.Contains(id, "/") {
		return nil, fmt.Errorf("%q is not a valid schema id; use letters, digits, \".\", \"_\" and \"-\"", "schema:"+id)
	}
	raw, ok := refs[id]
	if !ok {
		p := filepath.Join(dir, SchemaDir, id+".json")
		data, err := readLimited(p)
		if err != nil {
			return nil, fmt.Errorf("\"schema:%s\" is not defined: add it to the entry's schema_refs or write %s (schemas are never fetched over the network)", id, filepath.Join(SchemaDir, id+".json"))
		}
		raw = data
	}
	var doc any
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, fmt.Errorf("\"schema:%s\" is not valid JSON: %v", id, err)
	}
	if _, ok := doc.(map[string]any); !ok {
		return nil, fmt.Errorf("\"schema:%s\" is not a JSON Schema object", id)
	}
	return doc, nil
}
