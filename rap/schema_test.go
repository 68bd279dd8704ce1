package rap_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/gorap/gorap/rap"
)

func mustCompile(t testing.TB, s string) *rap.Schema {
	t.Helper()
	sch, err := rap.CompileSchema(json.RawMessage(s))
	if err != nil {
		t.Fatalf("CompileSchema(%s): %v", s, err)
	}
	return sch
}

// schemaProblems asserts err is a *rap.SchemaError and returns its problems.
func schemaProblems(t *testing.T, err error) []rap.Violation {
	t.Helper()
	var se *rap.SchemaError
	if !errors.As(err, &se) || len(se.Problems) == 0 {
		t.Fatalf("error %v (%T) is not a *rap.SchemaError with problems", err, err)
	}
	return se.Problems
}

// RAP TS-2: the input schema is a JSON object.
func TestCompileSchemaRootMustBeObject(t *testing.T) {
	tests := []struct{ in, want string }{
		{``, "schema is empty"},
		{`true`, "must be a JSON object, got boolean"},
		{`false`, "must be a JSON object, got boolean"},
		{`[]`, "must be a JSON object, got array"},
		{`"object"`, "must be a JSON object, got string"},
		{`null`, "must be a JSON object, got null"},
		{`{"type":`, "not valid JSON"},
		{`{} []`, "not valid JSON"},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			_, err := rap.CompileSchema(json.RawMessage(tc.in))
			ps := schemaProblems(t, err)
			if len(ps) != 1 || ps[0].Path != "" || !strings.Contains(ps[0].Message, tc.want) {
				t.Fatalf("problems %v, want one at the root containing %q", ps, tc.want)
			}
		})
	}
	// Nesting is bounded: compiling time grows steeply with depth.
	nest := func(levels int) string { // each "items" adds one level
		return strings.Repeat(`{"items":`, levels-1) + `{}` + strings.Repeat(`}`, levels-1)
	}
	mustCompile(t, nest(rap.MaxSchemaDepth))
	_, err := rap.CompileSchema(json.RawMessage(nest(rap.MaxSchemaDepth + 1)))
	if ps := schemaProblems(t, err); !strings.Contains(ps[0].Message, "nests more than 64 levels") || ps[0].Path != strings.TrimSuffix(strings.Repeat("items.", 64), ".") {
		t.Fatalf("deep schema: %v", ps)
	}
	// So is the number of objects: compiling time grows faster than
	// linearly with the number of subschemas. Braces inside strings do not
	// count.
	objects := func(n int) string {
		return `{"description":"{{{\"{{","anyOf":[` + strings.Repeat(`{"type":"string"},`, n-2) + `{"type":"integer"}]}`
	}
	mustCompile(t, objects(rap.MaxSchemaObjects))
	_, err = rap.CompileSchema(json.RawMessage(objects(rap.MaxSchemaObjects + 1)))
	if ps := schemaProblems(t, err); ps[0].Path != "" || !strings.Contains(ps[0].Message, "has 1001 JSON objects (schemas and subschemas); the limit is 1000") {
		t.Fatalf("too many objects: %v", ps)
	}
	big := `{"description":"` + strings.Repeat("x", rap.MaxSchemaBytes) + `"}`
	_, err = rap.CompileSchema(json.RawMessage(big))
	if ps := schemaProblems(t, err); !strings.Contains(ps[0].Message, "limit is 1048576 bytes") {
		t.Fatalf("oversized schema: %v", ps)
	}
}

// RAP TS-2: remote references are never fetched; compiling fails and names
// the reference.
func TestCompileSchemaRefusesRemoteRefs(t *testing.T) {
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"type":"string"}`)
	}))
	defer srv.Close()
	tests := []struct {
		name, schema, path, ref string
	}{
		{"http", `{"type":"object","properties":{"a":{"$ref":"` + srv.URL + `/a.json"}}}`, "properties.a.$ref", srv.URL + "/a.json"},
		{"http with fragment", `{"type":"object","properties":{"a":{"$ref":"` + srv.URL + `/a.json#/$defs/x"}}}`, "properties.a.$ref", srv.URL + "/a.json#/$defs/x"},
		{"https", `{"$ref":"https://schemas.example.com/person.json"}`, "$ref", "https://schemas.example.com/person.json"},
		{"file", `{"type":"object","properties":{"p":{"$ref":"file:///etc/passwd"}}}`, "properties.p.$ref", "file:///etc/passwd"},
		{"relative", `{"type":"object","properties":{"p":{"$ref":"other.json"}}}`, "properties.p.$ref", "other.json"},
		{"in array", `{"anyOf":[{"type":"null"},{"$ref":"https://x.example/s.json"}]}`, "anyOf[1].$ref", "https://x.example/s.json"},
		{"in $defs", `{"type":"object","$defs":{"a":{"$ref":"` + srv.URL + `/d.json"}},"properties":{"a":{"$ref":"#/$defs/a"}}}`, "$defs.a.$ref", srv.URL + "/d.json"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := rap.CompileSchema(json.RawMessage(tc.schema))
			ps := schemaProblems(t, err)
			if len(ps) != 1 || ps[0].Path != tc.path {
				t.Fatalf("problems %v, want one at %q", ps, tc.path)
			}
			if !strings.Contains(ps[0].Message, fmt.Sprintf("%q", tc.ref)) || !strings.Contains(ps[0].Message, "never fetched") {
				t.Fatalf("problem %q does not name the reference %q", ps[0].Message, tc.ref)
			}
		})
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("the schema server was contacted %d times; remote references must never be fetched", n)
	}
	// An unknown meta-schema in $schema is a remote document too.
	_, err := rap.CompileSchema(json.RawMessage(`{"$schema":"` + srv.URL + `/meta","type":"object"}`))
	ps := schemaProblems(t, err)
	if ps[0].Path != "$schema" || !strings.Contains(ps[0].Message, "not a supported draft") {
		t.Fatalf("unknown $schema: %v", ps)
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("the meta-schema was fetched (%d requests)", n)
	}
}

// References inside the schema, and to the built-in meta-schemas, resolve
// without any fetch.
func TestCompileSchemaLocalRefs(t *testing.T) {
	sch := mustCompile(t, `{
		"type":"object",
		"$defs":{"qty":{"type":"integer","minimum":1},"line":{"type":"object","properties":{"qty":{"$ref":"#/$defs/qty"}},"required":["qty"]}},
		"properties":{"lines":{"type":"array","items":{"$ref":"#/$defs/line"}},"meta":{"$ref":"https://json-schema.org/draft/2020-12/schema"}}
	}`)
	if err := sch.Validate(json.RawMessage(`{"lines":[{"qty":2}],"meta":{"type":"string"}}`)); err != nil {
		t.Fatalf("valid arguments: %v", err)
	}
	err := sch.Validate(json.RawMessage(`{"lines":[{"qty":2},{"qty":0}]}`))
	wantProblems(t, err, `arguments.lines[1].qty: must be >= 1, got integer 0`)
	_, err = rap.CompileSchema(json.RawMessage(`{"properties":{"a":{"$ref":"#/$defs/missing"}}}`))
	if ps := schemaProblems(t, err); ps[0].Path != "properties.a.$ref" || !strings.Contains(ps[0].Message, `"#/$defs/missing"`) {
		t.Fatalf("dangling local ref: %v", ps)
	}
	_, err = rap.CompileSchema(json.RawMessage(`{"properties":{"a":{"items":{"$ref":"#nowhere"}}}}`))
	if ps := schemaProblems(t, err); len(ps) != 1 || ps[0].Path != "properties.a.items.$ref" || !strings.Contains(ps[0].Message, `"#nowhere" names an anchor that does not exist`) {
		t.Fatalf("dangling anchor: %v", ps)
	}
	anchored := mustCompile(t, `{"type":"object","$defs":{"n":{"$anchor":"num","type":"integer"}},"properties":{"a":{"$ref":"#num"}}}`)
	wantProblems(t, anchored.Validate(json.RawMessage(`{"a":"x"}`)), `arguments.a: expected integer, got string "x"`)
}

// RAP TS-2: draft 2020-12 unless "$schema" names another draft. Keywords
// that differ between drafts show which draft applied.
func TestCompileSchemaDrafts(t *testing.T) {
	tuple := `"properties":{"pair":{"type":"array","items":[{"type":"string"},{"type":"integer"}]}}`
	// Under 2020-12 (the default) the array form of "items" is not a schema.
	_, err := rap.CompileSchema(json.RawMessage(`{"type":"object",` + tuple + `}`))
	if ps := schemaProblems(t, err); ps[0].Path != "properties.pair.items" {
		t.Fatalf("array-form items under 2020-12: %v", ps)
	}
	// Under draft-07 it is the tuple form.
	d7 := mustCompile(t, `{"$schema":"http://json-schema.org/draft-07/schema#","type":"object",`+tuple+`,"dependencies":{"card":["billing_address"]}}`)
	if err := d7.Validate(json.RawMessage(`{"pair":["a",1]}`)); err != nil {
		t.Fatalf("draft-07 tuple: %v", err)
	}
	wantProblems(t, d7.Validate(json.RawMessage(`{"pair":["a","b"]}`)), `arguments.pair[1]: expected integer, got string "b"`)
	// "dependencies" is enforced by draft-07 ...
	wantProblems(t, d7.Validate(json.RawMessage(`{"card":"4111"}`)), `arguments: properties 'billing_address' required, if 'card' exists`)
	// 2020-12's dependentRequired applies without "$schema".
	d2020 := mustCompile(t, `{"type":"object","dependentRequired":{"iban":["bic"]}}`)
	wantProblems(t, d2020.Validate(json.RawMessage(`{"iban":"DE00"}`)), `arguments: properties 'bic' required, if 'iban' exists`)
	// "format" asserts under draft-07 and only annotates under 2020-12.
	email := `"type":"object","properties":{"to":{"type":"string","format":"email"}}}`
	if err := mustCompile(t, `{`+email).Validate(json.RawMessage(`{"to":"nobody"}`)); err != nil {
		t.Fatalf("2020-12 must not assert format: %v", err)
	}
	wantProblems(t, mustCompile(t, `{"$schema":"http://json-schema.org/draft-07/schema#",`+email).Validate(json.RawMessage(`{"to":"nobody"}`)),
		`arguments.to: 'nobody' is not valid email: missing @`)
	// 2020-12 prefixItems works without "$schema".
	pre := mustCompile(t, `{"type":"object","properties":{"pair":{"type":"array","prefixItems":[{"type":"string"},{"type":"integer"}],"items":false}}}`)
	wantProblems(t, pre.Validate(json.RawMessage(`{"pair":["a",1,true]}`)), `arguments.pair[2]: is not allowed here; remove it`)
	// Draft-04's boolean exclusiveMinimum.
	d4 := mustCompile(t, `{"$schema":"http://json-schema.org/draft-04/schema#","type":"object","properties":{"n":{"type":"number","minimum":0,"exclusiveMinimum":true}}}`)
	wantProblems(t, d4.Validate(json.RawMessage(`{"n":0}`)), `arguments.n: must be > 0, got integer 0`)
	// 2019-09 is recognised too.
	mustCompile(t, `{"$schema":"https://json-schema.org/draft/2019-09/schema","type":"object"}`)
}

// wantProblems asserts that err is an *rap.ArgumentsError with exactly the
// given problems.
func wantProblems(t *testing.T, err error, want ...string) {
	t.Helper()
	var ae *rap.ArgumentsError
	if !errors.As(err, &ae) {
		t.Fatalf("error %v (%T) is not a *rap.ArgumentsError", err, err)
	}
	if !reflect.DeepEqual(ae.Problems, want) {
		t.Fatalf("problems\n %q\nwant\n %q", ae.Problems, want)
	}
}

// RAP IN-2, IN-5: argument errors name the path and say what to change, so a
// model can correct its call; every problem is listed.
func TestValidateArgumentsMessages(t *testing.T) {
	weather := mustCompile(t, `{
		"type":"object",
		"properties":{
			"timezone":{"type":"string"},
			"count":{"type":"integer","minimum":1,"maximum":10},
			"color":{"enum":["red","blue"]},
			"size":{"type":"string","minLength":2,"maxLength":4,"pattern":"^[a-z]+$"},
			"tags":{"type":"array","items":{"type":"string"},"maxItems":2,"uniqueItems":true},
			"line items":{"type":"array","items":{"type":"object","properties":{"qty":{"type":"integer"}},"required":["qty"]}},
			"when":{"anyOf":[{"type":"string"},{"type":"integer"}]}
		},
		"required":["timezone"],
		"additionalProperties":false
	}`)
	tests := []struct {
		name string
		args string
		want []string
	}{
		{"missing required", `{}`, []string{`arguments.timezone: missing required property "timezone"`}},
		{"wrong type", `{"timezone":"UTC","count":"3"}`, []string{`arguments.count: expected integer, got string "3"`}},
		{"number for integer", `{"timezone":"UTC","count":2.5}`, []string{`arguments.count: expected integer, got number 2.5`}},
		{"null", `{"timezone":null}`, []string{`arguments.timezone: expected string, got null`}},
		{"unknown property", `{"timezone":"UTC","colour":"red"}`, []string{`arguments: unknown property "colour" (allowed: color, count, line items, size, tags, timezone, when)`}},
		{"enum", `{"timezone":"UTC","color":"green"}`, []string{`arguments.color: value must be one of 'red', 'blue'; got string "green"`}},
		{"range", `{"timezone":"UTC","count":11}`, []string{`arguments.count: must be <= 10, got integer 11`}},
		{"string length and pattern", `{"timezone":"UTC","size":"X"}`, []string{
			`arguments.size: must be at least 2 characters long, got 1`,
			`arguments.size: must match the pattern "^[a-z]+$", got string "X"`,
		}},
		{"array", `{"timezone":"UTC","tags":["a","a",3]}`, []string{
			`arguments.tags: must have at most 2 items, got 3`,
			`arguments.tags: must not repeat items: items 0 and 1 are equal`,
			`arguments.tags[2]: expected string, got integer 3`,
		}},
		{"quoted key and nested index", `{"timezone":"UTC","line items":[{"qty":1},{}]}`, []string{
			`arguments["line items"][1].qty: missing required property "qty"`,
		}},
		{"alternatives", `{"timezone":"UTC","when":true}`, []string{
			`arguments.when: must match one of 2 alternatives: (1) expected string, got boolean true; (2) expected integer, got boolean true`,
		}},
		{"several at once, sorted by path", `{"count":0,"colour":1,"timezone":5}`, []string{
			`arguments: unknown property "colour" (allowed: color, count, line items, size, tags, timezone, when)`,
			`arguments.count: must be >= 1, got integer 0`,
			`arguments.timezone: expected string, got integer 5`,
		}},
		{"not an object (RAP IN-1)", `["UTC"]`, []string{`arguments: expected a JSON object, got array`}},
		{"string", `"UTC"`, []string{`arguments: expected a JSON object, got string "UTC"`}},
		{"empty", ``, []string{`arguments: missing; send a JSON object, {} when the tool takes no arguments`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			wantProblems(t, weather.Validate(json.RawMessage(tc.args)), tc.want...)
		})
	}
	t.Run("malformed", func(t *testing.T) {
		err := weather.Validate(json.RawMessage(`{"timezone":`))
		var ae *rap.ArgumentsError
		if !errors.As(err, &ae) || len(ae.Problems) != 1 || !strings.HasPrefix(ae.Problems[0], "arguments: not valid JSON") {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("valid", func(t *testing.T) {
		if err := weather.Validate(json.RawMessage(`{"timezone":"Europe/Paris","count":3,"color":"red","line items":[{"qty":1}],"when":5}`)); err != nil {
			t.Fatalf("valid arguments rejected: %v", err)
		}
	})
	t.Run("many alternatives are summarised", func(t *testing.T) {
		sch := mustCompile(t, `{"type":"object","properties":{"v":{"anyOf":[`+strings.Repeat(`{"type":"string"},`, 7)+`{"type":"integer"}]}}}`)
		wantProblems(t, sch.Validate(json.RawMessage(`{"v":true}`)),
			`arguments.v: must match one of 8 alternatives: (1) expected string, got boolean true; (2) expected string, got boolean true; `+
				`(3) expected string, got boolean true; (4) expected string, got boolean true; (5) expected string, got boolean true; and 3 more`)
	})
	t.Run("no-parameter tool (RAP TS-8)", func(t *testing.T) {
		none := mustCompile(t, string(rap.EmptyObjectSchema))
		if err := none.Validate(json.RawMessage(`{}`)); err != nil {
			t.Fatalf("{} rejected: %v", err)
		}
		wantProblems(t, none.Validate(json.RawMessage(`{"verbose":true}`)), `arguments: unknown property "verbose" (no properties are allowed here; send {})`)
	})
	t.Run("Error joins problems", func(t *testing.T) {
		err := weather.Validate(json.RawMessage(`{"count":"x"}`))
		want := `invalid arguments: arguments.count: expected integer, got string "x"; arguments.timezone: missing required property "timezone"`
		if err == nil || err.Error() != want {
			t.Fatalf("Error() = %q, want %q", err, want)
		}
	})
}

// Each kind of failure is phrased as what to change.
func TestValidateArgumentsKeywordMessages(t *testing.T) {
	tests := []struct{ schema, args, want string }{
		{`{"type":"object","if":{"properties":{"kind":{"const":"vm"}}},"then":{"required":["size"]}}`, `{"kind":"vm"}`,
			`arguments.size: missing required property "size"`},
		{`{"type":"object","properties":{"k":{"const":"x"}}}`, `{"k":"y"}`, `arguments.k: value must be 'x'; got string "y"`},
		{`{"type":"object","properties":{"k":{"not":{"type":"string"}}}}`, `{"k":"y"}`, `arguments.k: must not match the schema under "not"`},
		{`{"type":"object","properties":{"k":{"type":"array","contains":{"type":"integer"}}}}`, `{"k":["y"]}`,
			`arguments.k: must contain at least one item that matches the "contains" schema`},
		{`{"type":"object","propertyNames":{"pattern":"^[a-z]+$"}}`, `{"A1":1}`,
			`arguments: property name "A1" does not match the "propertyNames" schema; rename or remove it`},
		{`{"type":"object","minProperties":1}`, `{}`, `arguments: must have at least 1 property, got 0`},
		{`{"type":"object","maxProperties":2}`, `{"a":1,"b":2,"c":3}`, `arguments: must have at most 2 properties, got 3`},
		{`{"type":"object","properties":{"l":{"minItems":1}}}`, `{"l":[]}`, `arguments.l: must have at least 1 item, got 0`},
		{`{"type":"object","properties":{"a":{"type":"string"}},"unevaluatedProperties":false}`, `{"a":"x","b":1}`, `arguments.b: is not allowed here; remove it`},
		{`{"type":"object","properties":{"v":{"oneOf":[{"type":"integer"},{"type":"number"}]}}}`, `{"v":1}`,
			`arguments.v: matches more than one of the "oneOf" alternatives (0 and 1); it must match exactly one`},
		{`{"type":"object","properties":{"v":{"multipleOf":5}}}`, `{"v":7}`, `arguments.v: must be a multiple of 5, got integer 7`},
		{`{"type":"object","properties":{"v":{"exclusiveMaximum":0.5}}}`, `{"v":0.5}`, `arguments.v: must be < 0.5, got number 0.5`},
		{`{"type":"object","properties":{"v":{"type":["string","null"]}}}`, `{"v":1}`, `arguments.v: expected null or string, got integer 1`},
		{`{"type":"object","patternProperties":{"^x-":{}},"additionalProperties":false}`, `{"y":1}`,
			`arguments: unknown property "y" (only names matching the declared patterns are allowed)`},
		{`{"type":"object","properties":{"v":{"$ref":"#/$defs/a"}},"$defs":{"a":{"type":"object","properties":{"b":{"type":"integer"}}}}}`, `{"v":{"b":"s"}}`,
			`arguments.v.b: expected integer, got string "s"`},
		{`{"type":"object","dependentSchemas":{"a":{"required":["b"]}}}`, `{"a":1}`, `arguments.b: missing required property "b"`},
	}
	for _, tc := range tests {
		t.Run(tc.want, func(t *testing.T) {
			wantProblems(t, mustCompile(t, tc.schema).Validate(json.RawMessage(tc.args)), tc.want)
		})
	}
}

// At most ten problems are spelled out; the rest are counted.
func TestValidateArgumentsCapsProblems(t *testing.T) {
	var req []string
	for i := 0; i < 15; i++ {
		req = append(req, fmt.Sprintf(`"p%02d"`, i))
	}
	sch := mustCompile(t, `{"type":"object","required":[`+strings.Join(req, ",")+`]}`)
	var ae *rap.ArgumentsError
	if !errors.As(sch.Validate(json.RawMessage(`{}`)), &ae) {
		t.Fatal("want an ArgumentsError")
	}
	if len(ae.Problems) != 11 || ae.Problems[0] != `arguments.p00: missing required property "p00"` || ae.Problems[10] != "and 5 more" {
		t.Fatalf("problems: %q", ae.Problems)
	}
}

// Long values are cut short in messages.
func TestValidateArgumentsExcerpt(t *testing.T) {
	sch := mustCompile(t, `{"type":"object","properties":{"n":{"type":"integer"}}}`)
	long := strings.Repeat("y", 500)
	err := sch.Validate(json.RawMessage(`{"n":"` + long + `"}`))
	if err == nil || strings.Contains(err.Error(), long) || !strings.Contains(err.Error(), "…") {
		t.Fatalf("value not shortened: %v", err)
	}
}

func TestSchemaRaw(t *testing.T) {
	sch := mustCompile(t, "{ \"type\" : \"object\",\n \"additionalProperties\" : false }")
	if got := string(sch.Raw()); got != string(rap.EmptyObjectSchema) {
		t.Fatalf("Raw() = %s", got)
	}
}

// A compiled schema is used by many goroutines at once (run with -race).
func TestSchemaConcurrentValidate(t *testing.T) {
	sch := mustCompile(t, `{"type":"object","properties":{"n":{"type":"integer"}},"additionalProperties":false}`)
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				good := sch.Validate(json.RawMessage(fmt.Sprintf(`{"n":%d}`, i)))
				bad := sch.Validate(json.RawMessage(`{"m":1}`))
				if good != nil || bad == nil {
					errs <- fmt.Errorf("goroutine %d: good=%v bad=%v", g, good, bad)
					return
				}
			}
		}(g)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

func BenchmarkSchemaValidate(b *testing.B) {
	sch := mustCompile(b, `{"type":"object","properties":{"owner":{"type":"string"},"repo":{"type":"string"},"number":{"type":"integer","minimum":1}},"required":["owner","repo","number"],"additionalProperties":false}`)
	args := json.RawMessage(`{"owner":"acme","repo":"widgets","number":42}`)
	b.ReportAllocs()
	for b.Loop() {
		if err := sch.Validate(args); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkSchemaValidateInvalid(b *testing.B) {
	sch := mustCompile(b, `{"type":"object","properties":{"owner":{"type":"string"},"repo":{"type":"string"},"number":{"type":"integer","minimum":1}},"required":["owner","repo","number"],"additionalProperties":false}`)
	args := json.RawMessage(`{"owner":1,"number":"42","colour":"red"}`)
	b.ReportAllocs()
	for b.Loop() {
		if err := sch.Validate(args); err == nil {
			b.Fatal("want an error")
		}
	}
}

func BenchmarkCompileSchema(b *testing.B) {
	raw := json.RawMessage(`{"type":"object","$defs":{"n":{"type":"integer","minimum":1}},"properties":{"owner":{"type":"string"},"repo":{"type":"string"},"number":{"$ref":"#/$defs/n"}},"required":["owner","repo","number"],"additionalProperties":false}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := rap.CompileSchema(raw); err != nil {
			b.Fatal(err)
		}
	}
}

// Schemas inferred from Go structs by github.com/google/jsonschema-go, as
// the tool-server SDK does, compile and validate as their struct implies.
func TestCompileInferredSchema(t *testing.T) {
	type Line struct {
		SKU string `json:"sku"`
		Qty int    `json:"qty"`
	}
	type Order struct {
		Customer string            `json:"customer" jsonschema:"the customer id"`
		Lines    []Line            `json:"lines"`
		Note     *string           `json:"note,omitempty"`
		Labels   map[string]string `json:"labels,omitempty"`
		Express  bool              `json:"express,omitempty"`
	}
	js, err := jsonschema.For[Order](nil)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(js)
	if err != nil {
		t.Fatal(err)
	}
	sch := mustCompile(t, string(raw))
	if err := sch.Validate(json.RawMessage(`{"customer":"c1","lines":[{"sku":"a","qty":2}],"labels":{"k":"v"}}`)); err != nil {
		t.Fatalf("valid order rejected: %v", err)
	}
	wantProblems(t, sch.Validate(json.RawMessage(`{"customer":"c1","lines":[{"sku":"a","qty":"2"}],"colour":"red"}`)),
		`arguments: unknown property "colour" (allowed: customer, express, labels, lines, note)`,
		`arguments.lines[0].qty: expected integer, got string "2"`)
}

func ExampleSchema_Validate() {
	schema, err := rap.CompileSchema(json.RawMessage(`{
		"type": "object",
		"properties": {
			"city": {"type": "string"},
			"days": {"type": "integer", "minimum": 1, "maximum": 14}
		},
		"required": ["city"],
		"additionalProperties": false
	}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(schema.Validate(json.RawMessage(`{"city":"Lyon","days":3}`)))
	err = schema.Validate(json.RawMessage(`{"days":"3","units":"metric"}`))
	var ae *rap.ArgumentsError
	if errors.As(err, &ae) {
		for _, p := range ae.Problems {
			fmt.Println(p)
		}
	}
	// Output:
	// <nil>
	// arguments: unknown property "units" (allowed: city, days)
	// arguments.city: missing required property "city"
	// arguments.days: expected integer, got string "3"
}

func ExampleCompileSchema() {
	// Remote references are never fetched.
	_, err := rap.CompileSchema(json.RawMessage(`{"type":"object","properties":{"user":{"$ref":"https://schemas.example.com/user.json"}}}`))
	fmt.Println(err)
	// Output:
	// invalid JSON Schema: properties.user.$ref: reference "https://schemas.example.com/user.json" points outside this schema; remote references (http, https, file or any other) are never fetched: copy the definition under "$defs" and refer to it as "#/$defs/<name>"
}
