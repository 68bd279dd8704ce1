package otc

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/gorap/gorap/rap"
)

func sp(s string) *string { return &s }
func bp(b bool) *bool     { return &b }

// Every val_type (and arrays, enums, nested objects,
// nullable) maps to one exact JSON Schema (arcade_core/schema.py ValueSchema).
func TestValueToSchemaTable(t *testing.T) {
	cases := []struct {
		name string
		in   ValueSchema
		want string
	}{
		{"string", ValueSchema{ValType: "string"}, `{"type":"string"}`},
		{"integer", ValueSchema{ValType: "integer"}, `{"type":"integer"}`},
		{"number", ValueSchema{ValType: "number"}, `{"type":"number"}`},
		{"boolean", ValueSchema{ValType: "boolean"}, `{"type":"boolean"}`},
		{"json open", ValueSchema{ValType: "json"}, `{"type":"object"}`},
		{"json nested", ValueSchema{ValType: "json", Properties: map[string]*ValueSchema{
			"a": {ValType: "string", Description: sp("the a")},
			"b": {ValType: "json", Properties: map[string]*ValueSchema{"c": {ValType: "integer"}}, RequiredKeys: []string{"c"}},
		}, RequiredKeys: []string{"a"}},
			`{"properties":{"a":{"description":"the a","type":"string"},"b":{"properties":{"c":{"type":"integer"}},"required":["c"],"type":"object"}},"required":["a"],"type":"object"}`},
		{"array untyped", ValueSchema{ValType: "array"}, `{"type":"array"}`},
		{"array of string", ValueSchema{ValType: "array", InnerValType: sp("string")}, `{"items":{"type":"string"},"type":"array"}`},
		{"array of integer", ValueSchema{ValType: "array", InnerValType: sp("integer")}, `{"items":{"type":"integer"},"type":"array"}`},
		{"array of number", ValueSchema{ValType: "array", InnerValType: sp("number")}, `{"items":{"type":"number"},"type":"array"}`},
		{"array of boolean", ValueSchema{ValType: "array", InnerValType: sp("boolean")}, `{"items":{"type":"boolean"},"type":"array"}`},
		{"array of objects", ValueSchema{ValType: "array", InnerValType: sp("json"),
			InnerProperties: map[string]*ValueSchema{"id": {ValType: "integer"}}, InnerRequiredKeys: []string{"id"}},
			`{"items":{"properties":{"id":{"type":"integer"}},"required":["id"],"type":"object"},"type":"array"}`},
		{"string enum", ValueSchema{ValType: "string", Enum: []string{"a", "b"}}, `{"enum":["a","b"],"type":"string"}`},
		{"integer enum", ValueSchema{ValType: "integer", Enum: []string{"1", "2"}}, `{"enum":[1,2],"type":"integer"}`},
		{"number enum", ValueSchema{ValType: "number", Enum: []string{"1.5"}}, `{"enum":[1.5],"type":"number"}`},
		{"boolean enum", ValueSchema{ValType: "boolean", Enum: []string{"true"}}, `{"enum":[true],"type":"boolean"}`},
		{"nullable string", ValueSchema{ValType: "string", Nullable: bp(true)}, `{"type":["string","null"]}`},
		{"nullable false", ValueSchema{ValType: "string", Nullable: bp(false)}, `{"type":"string"}`},
		{"nullable enum", ValueSchema{ValType: "string", Enum: []string{"x"}, Nullable: bp(true)}, `{"enum":["x",null],"type":["string","null"]}`},
		{"nullable object", ValueSchema{ValType: "json", Nullable: bp(true)}, `{"type":["object","null"]}`},
		{"nullable array", ValueSchema{ValType: "array", InnerValType: sp("string"), Nullable: bp(true)}, `{"items":{"type":"string"},"type":["array","null"]}`},
		{"description", ValueSchema{ValType: "integer", Description: sp("count")}, `{"description":"count","type":"integer"}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, err := ValueToSchema(&c.in)
			if err != nil {
				t.Fatal(err)
			}
			got, _ := json.Marshal(s)
			if string(got) != c.want {
				t.Fatalf("got  %s\nwant %s", got, c.want)
			}
		})
	}
}

// Definitions that cannot be converted are refused with a
// reason.
func TestValueToSchemaErrors(t *testing.T) {
	cases := []struct {
		name string
		in   ValueSchema
		want string
	}{
		{"unknown type", ValueSchema{ValType: "date"}, `unknown val_type "date"`},
		{"array of array", ValueSchema{ValType: "array", InnerValType: sp("array")}, `inner_val_type "array"`},
		{"bad inner", ValueSchema{ValType: "array", InnerValType: sp("uuid")}, `unknown val_type "uuid"`},
		{"int enum", ValueSchema{ValType: "integer", Enum: []string{"x"}}, "not an integer"},
		{"bool enum", ValueSchema{ValType: "boolean", Enum: []string{"yes"}}, "not true or false"},
		{"json enum", ValueSchema{ValType: "json", Enum: []string{"{}"}}, "enum is not supported"},
		{"props on string", ValueSchema{ValType: "string", Properties: map[string]*ValueSchema{"a": {ValType: "string"}}}, "only json values"},
		{"required not a property", ValueSchema{ValType: "json", Properties: map[string]*ValueSchema{"a": {ValType: "string"}}, RequiredKeys: []string{"b"}}, `required key "b"`},
		{"inner props without type", ValueSchema{ValType: "array", InnerProperties: map[string]*ValueSchema{}}, "without inner_val_type"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ValueToSchema(&c.in)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want one containing %q", err, c.want)
			}
		})
	}
}

// Parameters become properties, required parameters are
// listed in order, a parameter's description wins, no extra properties.
func TestParametersToSchema(t *testing.T) {
	got, err := ParametersToSchema([]InputParameter{
		{Name: "b", Required: true, Description: sp("second"), ValueSchema: &ValueSchema{ValType: "integer", Description: sp("ignored")}},
		{Name: "a", Required: false, ValueSchema: &ValueSchema{ValType: "string", Description: sp("kept")}},
		{Name: "c", Required: true, ValueSchema: &ValueSchema{ValType: "boolean"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"$schema":"https://json-schema.org/draft/2020-12/schema","additionalProperties":false,"properties":{"a":{"description":"kept","type":"string"},"b":{"description":"second","type":"integer"},"c":{"type":"boolean"}},"required":["b","c"],"type":"object"}`
	if string(got) != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	if _, err := ParametersToSchema([]InputParameter{{Name: "a", ValueSchema: &ValueSchema{ValType: "string"}}, {Name: "a", ValueSchema: &ValueSchema{ValType: "string"}}}); err == nil {
		t.Fatal("duplicate parameter accepted")
	}
	if _, err := ParametersToSchema([]InputParameter{{Name: "a"}}); err == nil {
		t.Fatal("parameter without value_schema accepted")
	}
}

// Name rule, annotations, deprecation, requirements.
func TestMapArcadeTool(t *testing.T) {
	raw := `{"name":"SendEmail","fully_qualified_name":"Gmail.SendEmail","description":"Sends mail.",
	 "toolkit":{"name":"Gmail","version":"1.2.0"},
	 "input":{"parameters":[{"name":"to","required":true,"value_schema":{"val_type":"string"},"inferrable":false},
	                        {"name":"body","required":false,"value_schema":{"val_type":"string"}}]},
	 "output":{"available_modes":["value","error"],"value_schema":{"val_type":"json"}},
	 "requirements":{"authorization":{"provider_id":"google","provider_type":"oauth2","oauth2":{"scopes":["mail"]}},"secrets":[{"key":"SMTP_KEY"}]},
	 "deprecation_message":"use Gmail.Send"}`
	var at ArcadeTool
	if err := json.Unmarshal([]byte(raw), &at); err != nil {
		t.Fatal(err)
	}
	m, err := MapArcade(&at)
	if err != nil {
		t.Fatal(err)
	}
	if m.Tool.Name != "Gmail_SendEmail" || m.Toolkit != "Gmail" || m.Name != "SendEmail" || m.Version != "1.2.0" {
		t.Fatalf("mapped %+v", m)
	}
	if !strings.HasSuffix(m.Tool.Description, "Deprecated: use Gmail.Send") {
		t.Fatalf("description %q", m.Tool.Description)
	}
	if m.Provider != "google" || m.Tool.Annotations.RequiresAuth != "google" || len(m.Secrets) != 1 || m.Secrets[0] != "SMTP_KEY" {
		t.Fatalf("requirements %+v", m)
	}
	c := m.Tool.Annotations.Custom
	for k, want := range map[string]string{
		AnnToolkit: `"Gmail"`, AnnVersion: `"1.2.0"`, AnnQualified: `"Gmail.SendEmail"`,
		AnnNotInferable: `["to"]`, AnnDialect: `"arcade"`,
	} {
		if string(c[k]) != want {
			t.Errorf("%s = %s, want %s", k, c[k], want)
		}
	}
	if !strings.Contains(string(c[AnnOutput]), `"available_modes"`) {
		t.Errorf("output not kept: %s", c[AnnOutput])
	}
	if _, err := rap.CompileSchema(m.Tool.InputSchema); err != nil {
		t.Fatal(err)
	}
}

// OXP input_schema is used as given; ids map by the same rule.
func TestMapOXPTool(t *testing.T) {
	in := `{"type":"object","properties":{"a":{"type":"number"}},"required":["a"]}`
	m, err := MapOXP(&OXPTool{ID: "Calc.Sqrt@1.0.0", Name: "Calc_Sqrt", Description: "root", Version: "1.0.0", InputSchema: json.RawMessage(in)})
	if err != nil {
		t.Fatal(err)
	}
	if m.Tool.Name != "Calc_Sqrt" || string(m.Tool.InputSchema) != in || m.ToolID != "Calc.Sqrt@1.0.0" || m.Toolkit != "Calc" {
		t.Fatalf("mapped %+v", m)
	}
	m, err = MapOXP(&OXPTool{ID: "Calc.Sqrt", Version: "2.0.0"})
	if err != nil || m.ToolID != "Calc.Sqrt@2.0.0" || string(m.Tool.InputSchema) != string(rap.EmptyObjectSchema) {
		t.Fatalf("mapped %+v, %v", m, err)
	}
	if _, err := MapOXP(&OXPTool{ID: "no-dot"}); err == nil {
		t.Fatal("bad id accepted")
	}
	if _, err := MapOXP(&OXPTool{ID: "A.B", InputSchema: json.RawMessage(`{"type":"object","$ref":"http://x/y"}`)}); err == nil {
		t.Fatal("schema with remote $ref accepted")
	}
}

func TestRAPName(t *testing.T) {
	for in, want := range map[string]string{
		"Math.Add": "Math_Add", "Math.Add@1.0.0": "Math_Add", "My Kit.Do-It": "My_Kit_Do-It", "Ü.x": "__x",
	} {
		if got := RAPName(in); got != want {
			t.Errorf("RAPName(%q) = %q, want %q", in, got, want)
		}
	}
}

// FuzzMapArcade feeds arbitrary definitions to the converter: it must never
// panic, and whatever it accepts must be a tool the rap SDK accepts.
func FuzzMapArcade(f *testing.F) {
	f.Add(`{"name":"Add","fully_qualified_name":"Math.Add","toolkit":{"name":"Math"},"input":{"parameters":[{"name":"a","required":true,"value_schema":{"val_type":"integer"}}]}}`)
	f.Add(`{"name":"X","toolkit":{"name":"K","version":"1"},"input":{"parameters":[{"name":"o","required":false,"value_schema":{"val_type":"json","properties":{"p":{"val_type":"array","inner_val_type":"json","inner_properties":{"q":{"val_type":"number","enum":["1","2.5"]}},"inner_required_keys":["q"]}},"required_keys":["p"],"nullable":true}}]}}`)
	f.Add(`{"name":"E","toolkit":{"name":"K"},"input":{"parameters":[{"name":"e","required":true,"value_schema":{"val_type":"string","enum":["a\"b","\u0000"],"nullable":true}}]}}`)
	f.Fuzz(func(t *testing.T, raw string) {
		var at ArcadeTool
		if json.Unmarshal([]byte(raw), &at) != nil {
			return
		}
		m, err := MapArcade(&at)
		if err != nil {
			return
		}
		s := rap.NewServer("fuzz", nil)
		s.AddRawTool(&m.Tool, func(_ context.Context, c *rap.Call, a json.RawMessage) (*rap.Reply, error) { return nil, nil })
	})
}
