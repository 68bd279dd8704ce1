package rap_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/gorap/gorap/rap"
)

// set builds a valid toolset whose tools take no parameters.
func set(name, endpoint string, tools ...string) *rap.Toolset {
	ts := &rap.Toolset{Name: name, Endpoint: endpoint}
	for _, tool := range tools {
		ts.Tools = append(ts.Tools, rap.Tool{Name: tool, Description: "does " + tool, InputSchema: rap.EmptyObjectSchema})
	}
	return ts
}

// names lists the catalog's tools as "toolset/tool@endpoint".
func names(c *rap.Catalog) []string {
	var out []string
	for _, t := range c.Tools() {
		out = append(out, t.Toolset+"/"+t.Tool.Name+"@"+t.Endpoint)
	}
	return out
}

// RAP TS-6: a tool name defined by two toolsets is an error naming both,
// neither tool is exposed, the other tools load, and each tool dispatches to
// its own toolset's endpoint.
func TestCatalogNameCollision(t *testing.T) {
	a := set("alpha", "https://alpha.example/invoke", "search", "alpha_only")
	b := set("beta", "https://beta.example/invoke", "beta_only", "search")
	c := set("gamma", "http://127.0.0.1:3001/invoke", "gamma_only")
	cat, errs := rap.NewCatalog([]*rap.Toolset{a, b, c})
	want := []string{
		"alpha/alpha_only@https://alpha.example/invoke",
		"beta/beta_only@https://beta.example/invoke",
		"gamma/gamma_only@http://127.0.0.1:3001/invoke",
	}
	if got := names(cat); !reflect.DeepEqual(got, want) {
		t.Fatalf("tools %q, want %q", got, want)
	}
	if _, ok := cat.Lookup("search"); ok {
		t.Fatal(`"search" is exposed although two toolsets define it`)
	}
	if len(errs) != 1 {
		t.Fatalf("errors %v, want exactly one", errs)
	}
	var ce *rap.ToolConflictError
	if !errors.As(errs[0], &ce) {
		t.Fatalf("error %v (%T) is not a *rap.ToolConflictError", errs[0], errs[0])
	}
	if ce.Tool != "search" || !reflect.DeepEqual(ce.Toolsets, []string{"alpha", "beta"}) {
		t.Fatalf("conflict %+v", ce)
	}
	msg := errs[0].Error()
	for _, s := range []string{`"search"`, `"alpha"`, `"beta"`, "https://alpha.example/invoke", "https://beta.example/invoke", "neither is available", "RAP TS-6"} {
		if !strings.Contains(msg, s) {
			t.Fatalf("error %q lacks %q", msg, s)
		}
	}
	for _, name := range []string{"alpha_only", "beta_only", "gamma_only"} {
		rt, ok := cat.Lookup(name)
		if !ok {
			t.Fatalf("%s missing", name)
		}
		wantEndpoint := map[string]string{"alpha_only": a.Endpoint, "beta_only": b.Endpoint, "gamma_only": c.Endpoint}[name]
		if rt.Endpoint != wantEndpoint {
			t.Fatalf("%s dispatches to %s, want %s", name, rt.Endpoint, wantEndpoint)
		}
	}
}

// A name shared by three toolsets is one error listing all three.
func TestCatalogNameCollisionThreeWays(t *testing.T) {
	cat, errs := rap.NewCatalog([]*rap.Toolset{
		set("a", "https://a.example", "x", "a1"),
		set("b", "https://b.example", "x"),
		set("c", "https://c.example", "x", "c1"),
	})
	var ce *rap.ToolConflictError
	if len(errs) != 1 || !errors.As(errs[0], &ce) || !reflect.DeepEqual(ce.Toolsets, []string{"a", "b", "c"}) {
		t.Fatalf("errors %v", errs)
	}
	if got := names(cat); !reflect.DeepEqual(got, []string{"a/a1@https://a.example", "c/c1@https://c.example"}) {
		t.Fatalf("tools %q", got)
	}
}

// Names are case-sensitive across toolsets too (RAP TS-2).
func TestCatalogCaseSensitive(t *testing.T) {
	cat, errs := rap.NewCatalog([]*rap.Toolset{set("a", "https://a.example", "Search"), set("b", "https://b.example", "search")})
	if len(errs) != 0 || len(cat.Tools()) != 2 {
		t.Fatalf("errors %v, tools %q", errs, names(cat))
	}
}

// RAP TS-5: an invalid toolset exposes none of its tools, not even the valid
// ones, while a valid toolset loaded with it is unaffected. The invalid
// toolset's names do not block the same names elsewhere.
func TestCatalogInvalidToolsetExposesNothing(t *testing.T) {
	bad := set("broken", "https://broken.example/invoke", "fine_tool", "search")
	bad.Tools = append(bad.Tools, rap.Tool{Name: "bad name", Description: "d", InputSchema: rap.EmptyObjectSchema})
	good := set("good", "https://good.example/invoke", "search", "other")
	cat, errs := rap.NewCatalog([]*rap.Toolset{bad, good})
	if got := names(cat); !reflect.DeepEqual(got, []string{"good/search@https://good.example/invoke", "good/other@https://good.example/invoke"}) {
		t.Fatalf("tools %q", got)
	}
	if _, ok := cat.Lookup("fine_tool"); ok {
		t.Fatal("a valid tool of an invalid toolset is exposed (partial loading, RAP TS-5)")
	}
	if len(errs) != 1 {
		t.Fatalf("errors %v, want one", errs)
	}
	var te *rap.ToolsetError
	if !errors.As(errs[0], &te) || te.Index != 0 || te.Name != "broken" {
		t.Fatalf("error %v (%T)", errs[0], errs[0])
	}
	var ve *rap.ValidationError
	if !errors.As(errs[0], &ve) || len(ve.Violations) != 1 || ve.Violations[0].Path != "tools[2].name" {
		t.Fatalf("violations: %v", errs[0])
	}
	msg := errs[0].Error()
	for _, s := range []string{`"broken"`, "none of its tools are available", "tools[2].name", "contains a space"} {
		if !strings.Contains(msg, s) {
			t.Fatalf("error %q lacks %q", msg, s)
		}
	}
}

func TestCatalogNilAndEmpty(t *testing.T) {
	cat, errs := rap.NewCatalog(nil)
	if len(errs) != 0 || len(cat.Tools()) != 0 {
		t.Fatalf("empty catalog: %v %v", errs, cat.Tools())
	}
	if _, ok := cat.Lookup("x"); ok {
		t.Fatal("lookup in an empty catalog")
	}
	cat, errs = rap.NewCatalog([]*rap.Toolset{nil, set("a", "https://a.example", "x")})
	var te *rap.ToolsetError
	if len(errs) != 1 || !errors.As(errs[0], &te) || te.Index != 0 || len(cat.Tools()) != 1 {
		t.Fatalf("nil toolset: %v, tools %q", errs, names(cat))
	}
}

// Errors never show an endpoint's password.
func TestCatalogErrorsHideCredentials(t *testing.T) {
	a := set("a", "https://svc:hunter2-secret@a.example/invoke", "x")
	b := set("b", "https://b.example/invoke", "x")
	bad := set("", "https://svc:hunter2-secret@c.example/invoke", "y")
	_, errs := rap.NewCatalog([]*rap.Toolset{a, b, bad})
	if len(errs) != 2 {
		t.Fatalf("errors %v", errs)
	}
	for _, err := range errs {
		if strings.Contains(err.Error(), "hunter2-secret") {
			t.Fatalf("error leaks the password: %v", err)
		}
	}
}

// The catalog's tools validate arguments with their compiled schema
// (RAP IN-2), and Tools returns a copy.
func TestResolvedToolValidateArguments(t *testing.T) {
	ts := set("calc", "https://calc.example", "add")
	ts.Tools[0].InputSchema = json.RawMessage(`{"type":"object","properties":{"a":{"type":"number"},"b":{"type":"number"}},"required":["a","b"],"additionalProperties":false}`)
	cat, errs := rap.NewCatalog([]*rap.Toolset{ts})
	if len(errs) != 0 {
		t.Fatal(errs)
	}
	add, _ := cat.Lookup("add")
	if add.Schema == nil {
		t.Fatal("no compiled schema")
	}
	if err := add.ValidateArguments(json.RawMessage(`{"a":1,"b":2.5}`)); err != nil {
		t.Fatalf("valid arguments: %v", err)
	}
	wantProblems(t, add.ValidateArguments(json.RawMessage(`{"a":"1"}`)),
		`arguments.a: expected number, got string "1"`, `arguments.b: missing required property "b"`)

	// A hand-made ResolvedTool compiles its schema on demand.
	manual := &rap.ResolvedTool{Tool: ts.Tools[0]}
	wantProblems(t, manual.ValidateArguments(json.RawMessage(`{"a":1,"b":2,"c":3}`)), `arguments: unknown property "c" (allowed: a, b)`)

	tools := cat.Tools()
	tools[0] = nil
	if cat.Tools()[0] == nil {
		t.Fatal("Tools() exposes the catalog's own slice")
	}
}

func ExampleNewCatalog() {
	github := &rap.Toolset{
		Name:     "github",
		Endpoint: "https://github-tools.example.com/invoke",
		Tools: []rap.Tool{
			{Name: "search", Description: "Search code", InputSchema: json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"}},"required":["q"]}`)},
			{Name: "get_issue", Description: "Fetch an issue", InputSchema: json.RawMessage(`{"type":"object","properties":{"number":{"type":"integer"}},"required":["number"]}`)},
		},
	}
	web := &rap.Toolset{
		Name:     "web",
		Endpoint: "https://web-tools.example.com/invoke",
		Tools: []rap.Tool{
			{Name: "search", Description: "Search the web", InputSchema: json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"}}}`)},
			{Name: "fetch_page", Description: "Fetch a page", InputSchema: json.RawMessage(`{"type":"object","properties":{"url":{"type":"string"}},"required":["url"]}`)},
		},
	}
	cat, errs := rap.NewCatalog([]*rap.Toolset{github, web})
	for _, err := range errs {
		fmt.Println("error:", err)
	}
	for _, t := range cat.Tools() {
		fmt.Println(t.Tool.Name, "->", t.Endpoint)
	}
	issue, _ := cat.Lookup("get_issue")
	fmt.Println(issue.ValidateArguments(json.RawMessage(`{"number":"42"}`)))
	// Output:
	// error: tool "search" is defined by toolsets "github" (https://github-tools.example.com/invoke) and "web" (https://web-tools.example.com/invoke); tool names must be unique across loaded toolsets, so neither is available: rename the tool in one of them (RAP TS-6)
	// get_issue -> https://github-tools.example.com/invoke
	// fetch_page -> https://web-tools.example.com/invoke
	// invalid arguments: arguments.number: expected integer, got string "42"
}
