package conformance

import (
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"

	"github.com/gorap/gorap/rap"
)

// The discovery checks: the toolset document and what it declares (RAP
// TS-1 to TS-4, TS-8).
func (r *toolRun) addDiscovery(s *Suite) {
	s.Add(Check{
		ID: "tool.discovery.document", Level: Must, Rule: "RAP TS-4",
		Title: "GET {base}/.well-known/rap-toolset answers 200 with a JSON object",
		Fix:   "serve the toolset as a JSON object at GET /.well-known/rap-toolset under the base URL",
	}, r.checkDiscovery)
	s.Add(Check{
		ID: "tool.discovery.content-type", Level: Should, Rule: "RAP TR-1, TS-4",
		Title: "the toolset document is served as application/json",
		Fix:   "answer discovery with the header Content-Type: application/json",
	}, r.checkDiscoveryContentType)
	s.Add(Check{
		ID: "tool.toolset.fields", Level: Must, Rule: "RAP TS-1",
		Title: "the toolset has a name (1-128 chars), an endpoint URL, at least one tool, a boolean needsMigration",
		Fix:   `give the toolset "name" (1-128 characters), "endpoint" (an absolute http(s) URL) and a non-empty "tools" array`,
	}, r.checkToolsetFields)
	s.Add(Check{
		ID: "tool.toolset.tools", Level: Must, Rule: "RAP TS-2, TS-3",
		Title: "each tool has a unique name without spaces, a description, a valid JSON Schema inputSchema, typed annotations",
		Fix:   `give every tool a unique "name" (1-128 chars, no spaces), a "description" and an "inputSchema" that is a JSON Schema object`,
	}, r.checkTools)
	s.Add(Check{
		ID: "tool.toolset.names", Level: Should, Rule: "RAP TS-2",
		Title: "tool names use only ASCII letters, digits, _ and -",
		Fix:   "rename tools to use only A-Z, a-z, 0-9, _ and -",
	}, r.checkToolNames)
	s.Add(Check{
		ID: "tool.toolset.no-params-schema", Level: Should, Rule: "RAP TS-8",
		Title: `a tool without parameters declares {"type":"object","additionalProperties":false}`,
		Fix:   `declare parameterless tools' inputSchema as {"type":"object","additionalProperties":false}`,
	}, r.checkNoParams)
}

func (r *toolRun) fetchDiscovery(t *T) (*http.Response, []byte) {
	if !validHTTPURL(r.cfg.BaseURL) {
		t.Failf("the base URL %q is not an absolute http(s) URL", r.cfg.BaseURL)
	}
	u := r.cfg.BaseURL + "/.well-known/rap-toolset"
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, u, nil)
	if err != nil {
		t.Failf("%v", err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := t.Client().Do(req)
	if err != nil {
		t.Failf("GET %s: %v (is the server running, and is the URL its base URL?)", u, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		t.Failf("reading the toolset document: %v", err)
	}
	return resp, body
}

func (r *toolRun) checkDiscovery(t *T) {
	resp, body := r.fetchDiscovery(t)
	if resp.StatusCode != http.StatusOK {
		t.Failf("discovery answered %d, not 200 (%s)", resp.StatusCode, snippet(body))
	}
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil || m == nil {
		t.Failf("the toolset document is not a JSON object: %v (%s)", err, snippet(body))
	}
	var tools []toolDef
	if arr, ok := m["tools"].([]any); ok {
		for _, it := range arr {
			o, _ := it.(map[string]any)
			name, _ := o["name"].(string)
			schema, _ := o["inputSchema"].(map[string]any)
			ann, _ := o["annotations"].(map[string]any)
			if name != "" {
				tools = append(tools, toolDef{Name: name, Schema: schema, Annotations: ann})
			}
		}
	}
	calls, unknown := r.allowedCalls(tools)
	ep, _ := m["endpoint"].(string)
	nm, _ := m["needsMigration"].(bool)
	r.mu.Lock()
	r.manifest, r.tools, r.calls, r.needsMigration = m, tools, calls, nm
	if validHTTPURL(ep) {
		r.endpoint = ep
	}
	r.mu.Unlock()
	t.Logf("%d tools; the kit may call %d of them", len(tools), len(calls))
	if len(unknown) > 0 {
		t.Logf("allowed calls of tools the toolset does not have: %s", strings.Join(unknown, ", "))
	}
}

func (r *toolRun) checkDiscoveryContentType(t *T) {
	t.Requires("tool.discovery.document")
	resp, _ := r.fetchDiscovery(t)
	ct := resp.Header.Get("Content-Type")
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil || mt != "application/json" {
		t.Failf("Content-Type is %q, not application/json", ct)
	}
}

func (r *toolRun) checkToolsetFields(t *T) {
	t.Requires("tool.discovery.document")
	r.mu.Lock()
	m := r.manifest
	r.mu.Unlock()
	var problems []string
	name, ok := m["name"].(string)
	if !ok || len([]rune(name)) < 1 || len([]rune(name)) > 128 {
		problems = append(problems, fmt.Sprintf(`"name" must be a string of 1 to 128 characters (got %s)`, jsonText(m["name"])))
	}
	ep, ok := m["endpoint"].(string)
	if !ok || !validHTTPURL(ep) {
		problems = append(problems, fmt.Sprintf(`"endpoint" must be an absolute http(s) URL (got %s)`, jsonText(m["endpoint"])))
	}
	if d, present := m["description"]; present {
		if _, ok := d.(string); !ok {
			problems = append(problems, `"description" must be a string`)
		}
	}
	arr, ok := m["tools"].([]any)
	if !ok || len(arr) == 0 {
		problems = append(problems, `"tools" must be an array of at least one tool`)
	}
	if v, present := m["needsMigration"]; present {
		if _, ok := v.(bool); !ok {
			problems = append(problems, `"needsMigration" must be a boolean`)
		}
	}
	if len(problems) > 0 {
		t.Failf("%s", strings.Join(problems, "; "))
	}
}

func (r *toolRun) checkTools(t *T) {
	t.Requires("tool.discovery.document")
	r.mu.Lock()
	arr, _ := r.manifest["tools"].([]any)
	r.mu.Unlock()
	if len(arr) == 0 {
		t.Skipf(`the toolset has no "tools" array (see tool.toolset.fields)`)
	}
	var problems []string
	seen := map[string]bool{}
	for i, it := range arr {
		o, ok := it.(map[string]any)
		if !ok {
			problems = append(problems, fmt.Sprintf("tools[%d] is not an object", i))
			continue
		}
		name, ok := o["name"].(string)
		label := fmt.Sprintf("tools[%d] %q", i, name)
		switch {
		case !ok || len([]rune(name)) < 1 || len([]rune(name)) > 128:
			problems = append(problems, fmt.Sprintf("tools[%d]: \"name\" must be a string of 1 to 128 characters", i))
		case strings.ContainsFunc(name, func(c rune) bool { return c <= ' ' || c == 0x7f || strings.ContainsRune(`"'\/<>()[]{}`, c) }):
			problems = append(problems, label+": the name contains spaces or special characters")
		case seen[name]:
			problems = append(problems, label+": the name is used twice")
		}
		seen[name] = true
		if d, ok := o["description"].(string); !ok || d == "" {
			problems = append(problems, label+`: "description" is missing or not a string`)
		}
		schema, ok := o["inputSchema"].(map[string]any)
		if !ok {
			problems = append(problems, label+`: "inputSchema" is missing or not an object`)
		} else {
			raw, _ := json.Marshal(schema)
			if _, err := rap.CompileSchema(raw); err != nil {
				problems = append(problems, fmt.Sprintf("%s: inputSchema is not a valid JSON Schema: %v", label, err))
			}
		}
		if a, present := o["annotations"]; present {
			am, ok := a.(map[string]any)
			if !ok {
				problems = append(problems, label+`: "annotations" is not an object`)
			}
			for _, k := range []string{"readOnly", "destructive", "idempotent", "longRunning"} {
				if v, present := am[k]; present {
					if _, ok := v.(bool); !ok {
						problems = append(problems, fmt.Sprintf("%s: annotation %q must be a boolean", label, k))
					}
				}
			}
			if v, present := am["requiresAuth"]; present {
				if _, ok := v.(string); !ok {
					problems = append(problems, label+`: annotation "requiresAuth" must be a string`)
				}
			}
		}
	}
	if len(problems) > 0 {
		t.Failf("%s", strings.Join(problems, "; "))
	}
}

func (r *toolRun) checkToolNames(t *T) {
	t.Requires("tool.discovery.document")
	r.mu.Lock()
	tools := r.tools
	r.mu.Unlock()
	var bad []string
	for _, td := range tools {
		if strings.ContainsFunc(td.Name, func(c rune) bool {
			return !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-')
		}) {
			bad = append(bad, fmt.Sprintf("%q", td.Name))
		}
	}
	if len(bad) > 0 {
		t.Failf("tool names outside [A-Za-z0-9_-]: %s", strings.Join(bad, ", "))
	}
}

func (r *toolRun) checkNoParams(t *T) {
	t.Requires("tool.discovery.document")
	r.mu.Lock()
	tools := r.tools
	r.mu.Unlock()
	var bad []string
	for _, td := range tools {
		if td.Schema == nil {
			continue
		}
		props, _ := td.Schema["properties"].(map[string]any)
		_, hasProps := td.Schema["properties"]
		if hasProps && len(props) > 0 {
			continue
		}
		// Schemas that combine others are not "without parameters".
		if _, ok := td.Schema["$ref"]; ok {
			continue
		}
		if ap, ok := td.Schema["additionalProperties"].(bool); ok && !ap {
			continue
		}
		if _, ok := td.Schema["additionalProperties"]; ok {
			continue // additional properties declared on purpose
		}
		if ty, _ := td.Schema["type"].(string); ty != "object" {
			continue
		}
		bad = append(bad, fmt.Sprintf("%q", td.Name))
	}
	if len(bad) > 0 {
		t.Failf(`tools with no declared properties that accept any object: %s`, strings.Join(bad, ", "))
	}
}

func jsonText(v any) string {
	if v == nil {
		return "nothing"
	}
	b, _ := json.Marshal(v)
	if len(b) > 80 {
		return string(b[:80]) + "…"
	}
	return string(b)
}
