package rap_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/gorap/gorap/rap"
)

// manifest returns a valid manifest as a generic JSON value, so that a test
// can break one member of it.
func manifest() map[string]any {
	return map[string]any{
		"name":     "repo-tools",
		"endpoint": "https://tools.example.com/invoke",
		"tools": []any{
			map[string]any{
				"name":        "get_pull_request",
				"description": "Fetch one pull request",
				"inputSchema": map[string]any{
					"type":       "object",
					"properties": map[string]any{"number": map[string]any{"type": "integer"}},
					"required":   []any{"number"},
				},
			},
			map[string]any{
				"name":        "server_time",
				"description": "Current server time",
				"inputSchema": map[string]any{"type": "object", "additionalProperties": false},
			},
		},
	}
}

// tool0 returns the first tool of m for modification.
func tool0(m map[string]any) map[string]any { return m["tools"].([]any)[0].(map[string]any) }

func encode(t *testing.T, m map[string]any) []byte {
	t.Helper()
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// violations returns the violations of err, failing the test unless err is
// a *rap.ValidationError.
func violations(t *testing.T, err error) []rap.Violation {
	t.Helper()
	var ve *rap.ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("error %v (%T) is not a *rap.ValidationError", err, err)
	}
	if len(ve.Violations) == 0 {
		t.Fatal("ValidationError without violations")
	}
	return ve.Violations
}

// wantViolation asserts that vs holds exactly one violation and that it is
// at path with a message containing every one of substrings.
func wantViolation(t *testing.T, vs []rap.Violation, path string, substrings ...string) {
	t.Helper()
	if len(vs) != 1 {
		t.Fatalf("got %d violations, want 1 at %q:\n%v", len(vs), path, vs)
	}
	if vs[0].Path != path {
		t.Fatalf("violation at %q, want %q: %v", vs[0].Path, path, vs[0])
	}
	for _, s := range substrings {
		if !strings.Contains(vs[0].Message, s) {
			t.Fatalf("violation %q does not contain %q", vs[0], s)
		}
	}
	if got, want := vs[0].String(), path+": "+vs[0].Message; path != "" && got != want {
		t.Fatalf("String() = %q, want %q", got, want)
	}
}

func TestParseToolsetValid(t *testing.T) {
	for _, name := range []string{"repo_tools.json", "ops_tools.json"} {
		t.Run(name, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join("testdata", "toolsets", name))
			if err != nil {
				t.Fatal(err)
			}
			ts, err := rap.ParseToolset(data)
			if err != nil {
				t.Fatalf("ParseToolset: %v", err)
			}
			if err := ts.Validate(); err != nil {
				t.Fatalf("Validate after ParseToolset: %v", err)
			}
			if len(ts.Tools) < 2 || ts.Name == "" || ts.Endpoint == "" {
				t.Fatalf("parsed %+v", ts)
			}
		})
	}
	data, _ := os.ReadFile(filepath.Join("testdata", "toolsets", "repo_tools.json"))
	ts, _ := rap.ParseToolset(data)
	want := rap.Tool{
		Name:          "get_pull_request",
		Description:   "Fetch one pull request by number",
		InputSchema:   json.RawMessage(`{"type":"object","properties":{"owner":{"type":"string","description":"Account that owns the repository"},"repo":{"type":"string"},"number":{"type":"integer","minimum":1}},"required":["owner","repo","number"],"additionalProperties":false}`),
		Annotations:   &rap.Annotations{ReadOnly: true, Idempotent: true},
		DisplayScript: `"PR #" + args.number + " in " + args.owner + "/" + args.repo`,
	}
	if !reflect.DeepEqual(ts.Tools[0], want) {
		t.Fatalf("tools[0] = %#v\nwant %#v", ts.Tools[0], want)
	}
	a := ts.Tools[1].Annotations
	if a == nil || a.RequiresAuth != "github" || !a.LongRunning || string(a.Custom["x-example-cost"]) != "3" {
		t.Fatalf("tools[1].annotations = %+v", a)
	}
	if ts.Description != "Read and watch source repositories" || ts.NeedsMigration {
		t.Fatalf("toolset description/needsMigration = %q/%v", ts.Description, ts.NeedsMigration)
	}
}

// Every toolset and tool rule, one broken member at a time, reported at its
// exact path (RAP TS-1, TS-2, TS-3).
func TestParseToolsetRules(t *testing.T) {
	long := strings.Repeat("a", 129)
	tests := []struct {
		name   string
		modify func(m map[string]any)
		path   string
		want   []string
	}{
		// RAP TS-1: the manifest.
		{"name missing", func(m map[string]any) { delete(m, "name") }, "name", []string{"missing required field"}},
		{"name null", func(m map[string]any) { m["name"] = nil }, "name", []string{"missing required field"}},
		{"name empty", func(m map[string]any) { m["name"] = "" }, "name", []string{"must not be empty", "1 to 128"}},
		{"name blank", func(m map[string]any) { m["name"] = "   " }, "name", []string{"must not be empty"}},
		{"name too long", func(m map[string]any) { m["name"] = long }, "name", []string{"129 characters", "limit is 128"}},
		{"name wrong type", func(m map[string]any) { m["name"] = 7 }, "name", []string{"must be a string, got number"}},
		{"description wrong type", func(m map[string]any) { m["description"] = []any{"x"} }, "description", []string{"must be a string, got array"}},
		{"endpoint missing", func(m map[string]any) { delete(m, "endpoint") }, "endpoint", []string{"missing required field"}},
		{"endpoint empty", func(m map[string]any) { m["endpoint"] = "" }, "endpoint", []string{"must not be empty"}},
		{"endpoint relative", func(m map[string]any) { m["endpoint"] = "/invoke" }, "endpoint", []string{"relative reference", "http://"}},
		{"endpoint no scheme", func(m map[string]any) { m["endpoint"] = "tools.example.com/invoke" }, "endpoint", []string{"relative reference"}},
		{"endpoint ftp", func(m map[string]any) { m["endpoint"] = "ftp://files.example.com/x" }, "endpoint", []string{`scheme "ftp"`}},
		{"endpoint no host", func(m map[string]any) { m["endpoint"] = "https:///invoke" }, "endpoint", []string{"has no host"}},
		{"endpoint unparsable", func(m map[string]any) { m["endpoint"] = "http://[::1/x" }, "endpoint", []string{"not a valid URL"}},
		{"endpoint wrong type", func(m map[string]any) { m["endpoint"] = map[string]any{} }, "endpoint", []string{"must be a string, got object"}},
		{"tools missing", func(m map[string]any) { delete(m, "tools") }, "tools", []string{"missing required field"}},
		{"tools empty", func(m map[string]any) { m["tools"] = []any{} }, "tools", []string{"at least one tool"}},
		{"tools object", func(m map[string]any) { m["tools"] = map[string]any{} }, "tools", []string{"must be an array of tools, got object"}},
		{"too many tools", func(m map[string]any) {
			var tools []any
			for i := 0; i <= rap.MaxTools; i++ {
				tools = append(tools, map[string]any{"name": fmt.Sprintf("t%d", i), "description": "d", "inputSchema": map[string]any{}})
			}
			m["tools"] = tools
		}, "tools", []string{"has 1025 tools; the limit is 1024"}},
		{"tool not an object", func(m map[string]any) { m["tools"] = append(m["tools"].([]any), "x") }, "tools[2]", []string{"must be a JSON object, got string"}},
		{"needsMigration wrong type", func(m map[string]any) { m["needsMigration"] = "yes" }, "needsMigration", []string{"must be a boolean", "got string"}},
		// RAP TS-2: tool name.
		{"tool name missing", func(m map[string]any) { delete(tool0(m), "name") }, "tools[0].name", []string{"missing required field"}},
		{"tool name empty", func(m map[string]any) { tool0(m)["name"] = "" }, "tools[0].name", []string{"must not be empty"}},
		{"tool name too long", func(m map[string]any) { tool0(m)["name"] = long }, "tools[0].name", []string{"129 characters", "limit is 128"}},
		{"tool name wrong type", func(m map[string]any) { tool0(m)["name"] = true }, "tools[0].name", []string{"must be a string, got boolean"}},
		{"tool name space", func(m map[string]any) { tool0(m)["name"] = "get pull" }, "tools[0].name", []string{"contains a space", `"get_pull"`}},
		{"tool name tab", func(m map[string]any) { tool0(m)["name"] = "get\tpull" }, "tools[0].name", []string{"contains a space"}},
		{"tool name dot", func(m map[string]any) { tool0(m)["name"] = "github.get" }, "tools[0].name", []string{"special character", `'.'`}},
		{"tool name slash and space", func(m map[string]any) { tool0(m)["name"] = "a/b c" }, "tools[0].name", []string{"a space and the special character(s) '/'"}},
		{"tool name symbol", func(m map[string]any) { tool0(m)["name"] = "deploy🚀" }, "tools[0].name", []string{"special character"}},
		{"tool name control", func(m map[string]any) { tool0(m)["name"] = "a\x00b" }, "tools[0].name", []string{"special character"}},
		{"tool name duplicate", func(m map[string]any) { tool0(m)["name"] = "server_time" }, "tools[1].name", []string{`duplicate tool name "server_time"`, "tools[0]"}},
		// RAP TS-2: description.
		{"tool description missing", func(m map[string]any) { delete(tool0(m), "description") }, "tools[0].description", []string{"missing required field"}},
		{"tool description empty", func(m map[string]any) { tool0(m)["description"] = "" }, "tools[0].description", []string{"must not be empty"}},
		{"tool description blank", func(m map[string]any) { tool0(m)["description"] = " \n" }, "tools[0].description", []string{"must not be empty"}},
		{"tool description wrong type", func(m map[string]any) { tool0(m)["description"] = 3 }, "tools[0].description", []string{"must be a string, got number"}},
		// RAP TS-2: inputSchema.
		{"inputSchema missing", func(m map[string]any) { delete(tool0(m), "inputSchema") }, "tools[0].inputSchema", []string{"missing required field", `"additionalProperties":false`}},
		{"inputSchema string", func(m map[string]any) { tool0(m)["inputSchema"] = "object" }, "tools[0].inputSchema", []string{"must be a JSON object", "got string"}},
		{"inputSchema boolean", func(m map[string]any) { tool0(m)["inputSchema"] = true }, "tools[0].inputSchema", []string{"must be a JSON object", "got boolean"}},
		{"inputSchema array", func(m map[string]any) { tool0(m)["inputSchema"] = []any{} }, "tools[0].inputSchema", []string{"must be a JSON object", "got array"}},
		{"inputSchema bad keyword", func(m map[string]any) {
			tool0(m)["inputSchema"] = map[string]any{"type": "object", "properties": map[string]any{"number": map[string]any{"type": "int"}}}
		}, "tools[0].inputSchema.properties.number.type", []string{`"int"`}},
		{"inputSchema bad minimum", func(m map[string]any) {
			tool0(m)["inputSchema"] = map[string]any{"type": "object", "properties": map[string]any{"n": map[string]any{"minimum": "1"}}}
		}, "tools[0].inputSchema.properties.n.minimum", []string{"expected number, got string"}},
		{"inputSchema remote ref", func(m map[string]any) {
			tool0(m)["inputSchema"] = map[string]any{"type": "object", "properties": map[string]any{"n": map[string]any{"$ref": "https://schemas.example.com/n.json"}}}
		}, "tools[0].inputSchema.properties.n.$ref", []string{`"https://schemas.example.com/n.json"`, "never fetched"}},
		{"inputSchema unknown draft", func(m map[string]any) {
			tool0(m)["inputSchema"] = map[string]any{"$schema": "https://example.com/my-draft", "type": "object"}
		}, "tools[0].inputSchema.$schema", []string{"not a supported draft"}},
		// RAP TS-3: annotations.
		{"annotations wrong type", func(m map[string]any) { tool0(m)["annotations"] = "readOnly" }, "tools[0].annotations", []string{"must be a JSON object, got string"}},
		{"requiresAuth wrong type", func(m map[string]any) { tool0(m)["annotations"] = map[string]any{"requiresAuth": true} }, "tools[0].annotations.requiresAuth", []string{"must be a string, got boolean"}},
		{"readOnly wrong type", func(m map[string]any) { tool0(m)["annotations"] = map[string]any{"readOnly": "yes"} }, "tools[0].annotations.readOnly", []string{"must be a boolean", "got string"}},
		{"destructive wrong type", func(m map[string]any) { tool0(m)["annotations"] = map[string]any{"destructive": 1} }, "tools[0].annotations.destructive", []string{"must be a boolean", "got number"}},
		{"idempotent wrong type", func(m map[string]any) { tool0(m)["annotations"] = map[string]any{"idempotent": []any{}} }, "tools[0].annotations.idempotent", []string{"must be a boolean", "got array"}},
		{"longRunning wrong type", func(m map[string]any) { tool0(m)["annotations"] = map[string]any{"longRunning": "false"} }, "tools[0].annotations.longRunning", []string{"must be a boolean", "got string"}},
		// RAP DS-1: displayScript.
		{"displayScript wrong type", func(m map[string]any) { tool0(m)["displayScript"] = 42 }, "tools[0].displayScript", []string{"must be a string, got number"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := manifest()
			tc.modify(m)
			ts, err := rap.ParseToolset(encode(t, m))
			if ts != nil {
				t.Fatal("ParseToolset returned a toolset for an invalid manifest (RAP TS-5)")
			}
			wantViolation(t, violations(t, err), tc.path, tc.want...)
		})
	}
}

// The limits of RAP TS-1 and TS-2 count characters, not bytes, and names
// are case-sensitive.
func TestParseToolsetAccepts(t *testing.T) {
	tests := []struct {
		name   string
		modify func(m map[string]any)
	}{
		{"128-character names of 2-byte characters", func(m map[string]any) {
			m["name"] = strings.Repeat("é", 128)
			tool0(m)["name"] = strings.Repeat("é", 128)
		}},
		{"names of exactly 1 character", func(m map[string]any) { m["name"] = "t"; tool0(m)["name"] = "x" }},
		{"names differing only in case", func(m map[string]any) { tool0(m)["name"] = "Server_Time" }},
		{"portable name characters", func(m map[string]any) { tool0(m)["name"] = "Get-PR_2" }},
		{"letters of other scripts", func(m map[string]any) { tool0(m)["name"] = "プル取得" }},
		{"optional members null", func(m map[string]any) {
			m["description"] = nil
			m["needsMigration"] = nil
			tool0(m)["annotations"] = nil
			tool0(m)["displayScript"] = nil
		}},
		{"unknown members", func(m map[string]any) { m["x-vendor"] = 1; tool0(m)["future"] = "yes" }},
		{"http endpoint with port and path", func(m map[string]any) { m["endpoint"] = "http://127.0.0.1:3001/rap/invoke?v=1" }},
		{"needsMigration true", func(m map[string]any) { m["needsMigration"] = true }},
		{"all annotations", func(m map[string]any) {
			tool0(m)["annotations"] = map[string]any{"requiresAuth": "github", "readOnly": true, "destructive": false, "idempotent": true, "longRunning": false, "x-acme-priority": 3}
		}},
		{"draft-04 schema", func(m map[string]any) {
			tool0(m)["inputSchema"] = map[string]any{"$schema": "http://json-schema.org/draft-04/schema#", "type": "object", "properties": map[string]any{"n": map[string]any{"type": "integer", "minimum": 0, "exclusiveMinimum": true}}}
		}},
		{"local refs", func(m map[string]any) {
			tool0(m)["inputSchema"] = map[string]any{"type": "object", "$defs": map[string]any{"n": map[string]any{"type": "integer"}}, "properties": map[string]any{"n": map[string]any{"$ref": "#/$defs/n"}}}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := manifest()
			tc.modify(m)
			ts, err := rap.ParseToolset(encode(t, m))
			if err != nil {
				t.Fatalf("ParseToolset: %v", err)
			}
			if err := ts.Validate(); err != nil {
				t.Fatalf("Validate: %v", err)
			}
		})
	}
}

// The input schemas of one toolset are bounded together, so that a manifest
// of many medium-sized schemas cannot cost minutes of compiling.
func TestParseToolsetSchemaBudget(t *testing.T) {
	// 999 objects in "examples" plus the schema itself: cheap to compile,
	// but they count.
	schema := `{"type":"object","examples":[` + strings.Repeat(`{},`, 998) + `{}]}`
	var tools []string
	for i := 0; i < rap.MaxToolsetSchemaObjects/rap.MaxSchemaObjects+2; i++ {
		tools = append(tools, fmt.Sprintf(`{"name":"t%d","description":"d","inputSchema":%s}`, i, schema))
	}
	data := []byte(`{"name":"big","endpoint":"https://big.example","tools":[` + strings.Join(tools, ",") + `]}`)
	_, err := rap.ParseToolset(data)
	wantViolation(t, violations(t, err), "tools[20].inputSchema", "more than 20000 JSON objects together")
	data = []byte(`{"name":"big","endpoint":"https://big.example","tools":[` + strings.Join(tools[:20], ",") + `]}`)
	if _, err := rap.ParseToolset(data); err != nil {
		t.Fatalf("20 schemas of 1000 objects: %v", err)
	}
}

// A manifest with several problems reports every one of them, in document
// order, each at its own path (RAP TS-5).
func TestParseToolsetReportsEveryViolation(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "toolsets", "invalid_many.json"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = rap.ParseToolset(data)
	vs := violations(t, err)
	var paths []string
	for _, v := range vs {
		paths = append(paths, v.Path)
	}
	want := []string{
		"name",
		"endpoint",
		"tools[0].name",
		"tools[0].description",
		"tools[1].inputSchema.$ref",
		"tools[2].inputSchema",
		"tools[2].annotations.readOnly",
		"tools[3].name",
		"tools[3].displayScript",
		"tools[2].name", // duplicate of tools[1].name
		"needsMigration",
	}
	if !reflect.DeepEqual(paths, want) {
		t.Fatalf("violation paths\n %q\nwant\n %q\nall:\n%v", paths, want, err)
	}
	msg := err.Error()
	if !strings.HasPrefix(msg, fmt.Sprintf("invalid toolset manifest (%d problems):\n", len(want))) {
		t.Fatalf("Error() header: %q", msg)
	}
	if got := strings.Count(msg, "\n"); got != len(want) {
		t.Fatalf("Error() has %d lines after the header, want one per violation:\n%s", got, msg)
	}
	for _, v := range vs {
		if !strings.Contains(msg, "\n"+v.String()) {
			t.Fatalf("Error() lacks the line %q", v)
		}
	}
}

// RAP TR-1, TS-5: anything but a UTF-8 JSON object of bounded size is
// rejected as a whole.
func TestParseToolsetNotAManifest(t *testing.T) {
	tests := []struct {
		name string
		data []byte
		want string
	}{
		{"empty", nil, "empty; expected a JSON object"},
		{"array", []byte(`[{"name":"x"}]`), "must be a JSON object, got array"},
		{"malformed", []byte(`{"name":"x",`), "malformed JSON"},
		{"trailing data", []byte(`{"name":"x"} {}`), "malformed JSON"},
		{"invalid UTF-8", []byte("{\"name\":\"\xff\"}"), "not valid UTF-8"},
		{"too large", append([]byte(`{"name":"`), make([]byte, rap.MaxManifestBytes)...), "the limit is 4194304 bytes"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := rap.ParseToolset(tc.data)
			wantViolation(t, violations(t, err), "", tc.want)
		})
	}
}

// Validate applies the same rules to a Toolset built in Go.
func TestToolsetValidate(t *testing.T) {
	good := func() *rap.Toolset {
		return &rap.Toolset{
			Name:     "clock",
			Endpoint: "https://clock.example/invoke",
			Tools: []rap.Tool{{
				Name: "now", Description: "Current time", InputSchema: rap.EmptyObjectSchema,
			}},
		}
	}
	if err := good().Validate(); err != nil {
		t.Fatalf("valid toolset: %v", err)
	}
	tests := []struct {
		name   string
		modify func(ts *rap.Toolset)
		path   string
		want   string
	}{
		{"no name", func(ts *rap.Toolset) { ts.Name = "" }, "name", "must not be empty"},
		{"long name", func(ts *rap.Toolset) { ts.Name = strings.Repeat("n", 129) }, "name", "limit is 128"},
		{"no endpoint", func(ts *rap.Toolset) { ts.Endpoint = "" }, "endpoint", "must not be empty"},
		{"bad endpoint", func(ts *rap.Toolset) { ts.Endpoint = "mailto:x@example.com" }, "endpoint", `scheme "mailto"`},
		{"no tools", func(ts *rap.Toolset) { ts.Tools = nil }, "tools", "at least one tool"},
		{"too many tools", func(ts *rap.Toolset) {
			for i := 0; i < rap.MaxTools; i++ {
				ts.Tools = append(ts.Tools, rap.Tool{Name: fmt.Sprintf("t%d", i), Description: "d", InputSchema: rap.EmptyObjectSchema})
			}
		}, "tools", "has 1025 tools; the limit is 1024"},
		{"tool name", func(ts *rap.Toolset) { ts.Tools[0].Name = "what time" }, "tools[0].name", "contains a space"},
		{"tool description", func(ts *rap.Toolset) { ts.Tools[0].Description = "" }, "tools[0].description", "missing or empty"},
		{"tool schema missing", func(ts *rap.Toolset) { ts.Tools[0].InputSchema = nil }, "tools[0].inputSchema", "missing"},
		{"tool schema not object", func(ts *rap.Toolset) { ts.Tools[0].InputSchema = json.RawMessage(`"object"`) }, "tools[0].inputSchema", "must be a JSON object"},
		{"tool schema remote ref", func(ts *rap.Toolset) { ts.Tools[0].InputSchema = json.RawMessage(`{"$ref":"file:///etc/schema.json"}`) }, "tools[0].inputSchema.$ref", `"file:///etc/schema.json"`},
		{"duplicate", func(ts *rap.Toolset) { ts.Tools = append(ts.Tools, ts.Tools[0]) }, "tools[1].name", "duplicate"},
		{"custom annotation not JSON", func(ts *rap.Toolset) {
			ts.Tools[0].Annotations = &rap.Annotations{Custom: map[string]json.RawMessage{"x-a": json.RawMessage(`{`)}}
		}, "tools[0].annotations.x-a", "not valid JSON"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ts := good()
			tc.modify(ts)
			wantViolation(t, violations(t, ts.Validate()), tc.path, tc.want)
		})
	}
}

// An endpoint's password never appears in a violation.
func TestEndpointViolationHidesCredentials(t *testing.T) {
	ts := &rap.Toolset{Name: "t", Endpoint: "ftp://user:s3cr3t-pass@files.example.com/x",
		Tools: []rap.Tool{{Name: "a", Description: "d", InputSchema: rap.EmptyObjectSchema}}}
	err := ts.Validate()
	if err == nil || strings.Contains(err.Error(), "s3cr3t-pass") {
		t.Fatalf("Validate() = %v", err)
	}
	ts.Endpoint = "http://user:s3cr3t-pass@[::1/x"
	err = ts.Validate()
	if err == nil || strings.Contains(err.Error(), "s3cr3t-pass") {
		t.Fatalf("Validate() = %v", err)
	}
}

func TestWarnings(t *testing.T) {
	schema := func(s string) json.RawMessage { return json.RawMessage(s) }
	tests := []struct {
		name  string
		tool  rap.Tool
		paths []string
		want  []string
	}{
		{"clean", rap.Tool{Name: "get", Description: "d", InputSchema: schema(`{"type":"object","properties":{"a":{"type":"string"}}}`)}, nil, nil},
		{"no-parameter schema done right (RAP TS-8)", rap.Tool{Name: "now", Description: "d", InputSchema: rap.EmptyObjectSchema}, nil, nil},
		{"no-parameter schema that accepts anything (RAP TS-8)", rap.Tool{Name: "now", Description: "d", InputSchema: schema(`{"type":"object"}`)},
			[]string{"tools[0].inputSchema"}, []string{`declares {"type":"object","additionalProperties":false}`}},
		{"empty properties (RAP TS-8)", rap.Tool{Name: "now", Description: "d", InputSchema: schema(`{"type":"object","properties":{},"additionalProperties":true}`)},
			[]string{"tools[0].inputSchema"}, []string{"RAP TS-8"}},
		{"empty schema", rap.Tool{Name: "now", Description: "d", InputSchema: schema(`{}`)},
			[]string{"tools[0].inputSchema"}, []string{"RAP TS-8"}},
		{"root type not object", rap.Tool{Name: "t", Description: "d", InputSchema: schema(`{"type":"string"}`)},
			[]string{"tools[0].inputSchema.type"}, []string{`is "string"`}},
		{"root type missing", rap.Tool{Name: "t", Description: "d", InputSchema: schema(`{"properties":{"a":{}}}`)},
			[]string{"tools[0].inputSchema"}, []string{`has no "type"`}},
		{"non-ASCII name (RAP TS-2)", rap.Tool{Name: "取得", Description: "d", InputSchema: rap.EmptyObjectSchema},
			[]string{"tools[0].name"}, []string{"outside ASCII"}},
		{"custom annotation not namespaced (RAP TS-3)", rap.Tool{Name: "a", Description: "d", InputSchema: rap.EmptyObjectSchema,
			Annotations: &rap.Annotations{Custom: map[string]json.RawMessage{"priority": json.RawMessage(`1`), "x-acme-cost": json.RawMessage(`2`)}}},
			[]string{"tools[0].annotations.priority"}, []string{`"x-vendor-priority"`}},
		{"destructive (RAP TS-3)", rap.Tool{Name: "drop", Description: "d", InputSchema: rap.EmptyObjectSchema, Annotations: &rap.Annotations{Destructive: true}},
			[]string{"tools[0].annotations.destructive"}, []string{"ask the user"}},
		{"readOnly and destructive", rap.Tool{Name: "drop", Description: "d", InputSchema: rap.EmptyObjectSchema, Annotations: &rap.Annotations{Destructive: true, ReadOnly: true}},
			[]string{"tools[0].annotations.destructive", "tools[0].annotations"}, []string{"ask the user", "both readOnly and destructive"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ts := &rap.Toolset{Name: "t", Endpoint: "https://t.example", Tools: []rap.Tool{tc.tool}}
			if err := ts.Validate(); err != nil {
				t.Fatalf("warnings must not make a toolset invalid: %v", err)
			}
			ws := ts.Warnings()
			if len(ws) != len(tc.paths) {
				t.Fatalf("got warnings %v, want %d at %q", ws, len(tc.paths), tc.paths)
			}
			for i, w := range ws {
				if w.Path != tc.paths[i] || !strings.Contains(w.Message, tc.want[i]) {
					t.Fatalf("warning %d = %v, want at %q containing %q", i, w, tc.paths[i], tc.want[i])
				}
			}
		})
	}
	ts := &rap.Toolset{Name: "t", Endpoint: "https://t.example", Tools: []rap.Tool{
		{Name: "Get", Description: "d", InputSchema: rap.EmptyObjectSchema},
		{Name: "get", Description: "d", InputSchema: rap.EmptyObjectSchema},
	}}
	ws := ts.Warnings()
	if len(ws) != 1 || ws[0].Path != "tools[1].name" || !strings.Contains(ws[0].Message, "only in case") {
		t.Fatalf("case-only difference: %v", ws)
	}
}

func ExampleParseToolset() {
	manifest := []byte(`{
		"name": "clock",
		"endpoint": "https://clock.example.com/invoke",
		"tools": [{
			"name": "now",
			"description": "Current time in ISO 8601",
			"inputSchema": {"type": "object", "additionalProperties": false}
		}]
	}`)
	ts, err := rap.ParseToolset(manifest)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(ts.Name, len(ts.Tools), ts.Tools[0].Name)

	// Every problem is reported with its path.
	_, err = rap.ParseToolset([]byte(`{"name":"clock","endpoint":"clock.example.com","tools":[{"name":"what time","inputSchema":{}}]}`))
	fmt.Println(err)
	// Output:
	// clock 1 now
	// invalid toolset manifest (3 problems):
	// endpoint: is a relative reference; give an absolute URL starting with http:// or https:// (RAP TS-1)
	// tools[0].name: "what time" contains a space; use only letters, digits, "_" and "-", e.g. "what_time" (RAP TS-2)
	// tools[0].description: missing required field
}

func BenchmarkParseToolset(b *testing.B) {
	data, err := os.ReadFile(filepath.Join("testdata", "toolsets", "repo_tools.json"))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := rap.ParseToolset(data); err != nil {
			b.Fatal(err)
		}
	}
}

func ExampleToolset_Warnings() {
	ts := &rap.Toolset{
		Name:     "admin",
		Endpoint: "https://admin.example.com/invoke",
		Tools: []rap.Tool{{
			Name:        "drop_database",
			Description: "Delete a database and all its data",
			InputSchema: json.RawMessage(`{"type":"object"}`),
			Annotations: &rap.Annotations{Destructive: true},
		}},
	}
	fmt.Println(ts.Validate()) // warnings do not make a toolset invalid
	for _, w := range ts.Warnings() {
		fmt.Println(w)
	}
	// Output:
	// <nil>
	// tools[0].annotations.destructive: tool "drop_database" is destructive; a runtime should ask the user before running it (RAP TS-3)
	// tools[0].inputSchema: declares no parameters but accepts any properties; a tool without parameters declares {"type":"object","additionalProperties":false} (RAP TS-8)
}
