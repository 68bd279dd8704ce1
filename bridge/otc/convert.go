package otc

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/gorap/gorap/rap"
)

// SchemaDraft is the JSON Schema dialect of converted input schemas.
const SchemaDraft = "https://json-schema.org/draft/2020-12/schema"

// Annotation keys the bridge adds to every tool (see docs/otc.md).
const (
	AnnToolkit      = "x-otc-toolkit"
	AnnVersion      = "x-otc-version"
	AnnQualified    = "x-otc-name"
	AnnDialect      = "x-otc-dialect"
	AnnNotInferable = "x-otc-not-inferrable"
	AnnOutput       = "x-otc-output"
	AnnRequirements = "x-otc-requirements"
)

var unsafeName = regexp.MustCompile(`[^A-Za-z0-9_-]`)

// RAPName turns an OTC fully qualified name ("Toolkit.Tool", optionally
// "@version") into a RAP tool name: the version is dropped, and every
// character other than A-Z, a-z, 0-9, "_" and "-" becomes "_"; so
// "Math.Add@1.0.0" becomes "Math_Add". Names longer than rap.MaxNameLength
// are refused by the converter.
func RAPName(qualified string) string {
	if i := strings.IndexByte(qualified, '@'); i >= 0 {
		qualified = qualified[:i]
	}
	return unsafeName.ReplaceAllString(qualified, "_")
}

// Mapped is one OTC tool converted to RAP, with what the bridge needs to call
// it.
type Mapped struct {
	Tool     rap.Tool
	Toolkit  string
	Name     string // the tool name as the worker knows it
	Version  string
	ToolID   string // OXP tool_id (with version)
	Secrets  []string
	Provider string // authorization provider id, "" if none
}

// ValueToSchema converts an OTC value_schema to a JSON Schema object
// (draft 2020-12 keywords). It fails on an unknown val_type, an array
// without a valid inner type description, an inner type "array", or an enum
// entry that is not a value of the type.
func ValueToSchema(v *ValueSchema) (map[string]any, error) {
	if v == nil {
		return nil, fmt.Errorf("value_schema is missing")
	}
	return valueToSchema(v, 0)
}

const maxDepth = 32

func valueToSchema(v *ValueSchema, depth int) (map[string]any, error) {
	if depth > maxDepth {
		return nil, fmt.Errorf("value_schema nests deeper than %d levels", maxDepth)
	}
	s := map[string]any{}
	var err error
	switch v.ValType {
	case "string", "integer", "number", "boolean":
		s["type"] = v.ValType
	case "json":
		s["type"] = "object"
		if err = objectProps(s, v.Properties, v.RequiredKeys, depth); err != nil {
			return nil, err
		}
	case "array":
		s["type"] = "array"
		if v.InnerValType != nil {
			inner := &ValueSchema{ValType: *v.InnerValType, Properties: v.InnerProperties, RequiredKeys: v.InnerRequiredKeys}
			if *v.InnerValType == "array" {
				return nil, fmt.Errorf(`inner_val_type "array" is not allowed (arrays of arrays cannot be described in OTC)`)
			}
			items, err := valueToSchema(inner, depth+1)
			if err != nil {
				return nil, fmt.Errorf("inner_val_type: %w", err)
			}
			s["items"] = items
		} else if v.InnerProperties != nil || v.InnerRequiredKeys != nil {
			return nil, fmt.Errorf("inner_properties given without inner_val_type")
		}
	default:
		return nil, fmt.Errorf("unknown val_type %q; want string, integer, number, boolean, json or array", v.ValType)
	}
	if v.ValType != "json" && (v.Properties != nil || v.RequiredKeys != nil) {
		return nil, fmt.Errorf("properties/required_keys given for val_type %q; only json values have properties", v.ValType)
	}
	nullable := v.Nullable != nil && *v.Nullable
	if v.Enum != nil {
		vals := make([]any, 0, len(v.Enum)+1)
		for _, e := range v.Enum {
			x, err := enumValue(v.ValType, e)
			if err != nil {
				return nil, err
			}
			vals = append(vals, x)
		}
		if nullable {
			vals = append(vals, nil)
		}
		s["enum"] = vals
	}
	if nullable {
		s["type"] = []any{s["type"], "null"}
	}
	if v.Description != nil && *v.Description != "" {
		s["description"] = *v.Description
	}
	return s, nil
}

func objectProps(s map[string]any, props map[string]*ValueSchema, required []string, depth int) error {
	if props != nil {
		ps := map[string]any{}
		for name, p := range props {
			if p == nil {
				return fmt.Errorf("property %q has no value schema", name)
			}
			c, err := valueToSchema(p, depth+1)
			if err != nil {
				return fmt.Errorf("property %q: %w", name, err)
			}
			ps[name] = c
		}
		s["properties"] = ps
	}
	if len(required) > 0 {
		req := make([]any, 0, len(required))
		seen := map[string]bool{}
		for _, k := range required {
			if props != nil && props[k] == nil {
				return fmt.Errorf("required key %q is not among the properties", k)
			}
			if !seen[k] {
				seen[k] = true
				req = append(req, k)
			}
		}
		s["required"] = req
	}
	return nil
}

// enumValue reads one OTC enum entry (always a string in Arcade's schema) as
// a value of the parameter's type.
func enumValue(valType, e string) (any, error) {
	switch valType {
	case "string":
		return e, nil
	case "integer":
		n, err := strconv.ParseInt(e, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("enum entry %q is not an integer", e)
		}
		return n, nil
	case "number":
		f, err := strconv.ParseFloat(e, 64)
		if err != nil {
			return nil, fmt.Errorf("enum entry %q is not a number", e)
		}
		return json.Number(strconv.FormatFloat(f, 'g', -1, 64)), nil
	case "boolean":
		b, err := strconv.ParseBool(e)
		if err != nil || (e != "true" && e != "false") {
			return nil, fmt.Errorf("enum entry %q is not true or false", e)
		}
		return b, nil
	}
	return nil, fmt.Errorf("enum is not supported for val_type %q", valType)
}

// ParametersToSchema converts an OTC parameter list into the JSON Schema of
// the arguments object: one property per parameter (its description from
// the parameter, else from its value_schema), "required" listing the
// required parameters in their order, and no other properties allowed.
func ParametersToSchema(params []InputParameter) (json.RawMessage, error) {
	props := map[string]any{}
	required := []any{}
	for i, p := range params {
		if p.Name == "" {
			return nil, fmt.Errorf("parameter %d has no name", i)
		}
		if _, dup := props[p.Name]; dup {
			return nil, fmt.Errorf("parameter %q is listed twice", p.Name)
		}
		s, err := ValueToSchema(p.ValueSchema)
		if err != nil {
			return nil, fmt.Errorf("parameter %q: %w", p.Name, err)
		}
		if p.Description != nil && *p.Description != "" {
			s["description"] = *p.Description
		}
		props[p.Name] = s
		if p.Required {
			required = append(required, p.Name)
		}
	}
	out := map[string]any{
		"$schema":              SchemaDraft,
		"type":                 "object",
		"properties":           props,
		"additionalProperties": false,
	}
	if len(required) > 0 {
		out["required"] = required
	}
	return marshal(out)
}

func marshal(v any) (json.RawMessage, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

func rawJSON(v any) json.RawMessage {
	b, _ := marshal(v)
	return b
}

// MapArcade converts one Arcade tool definition (GET /worker/tools).
func MapArcade(t *ArcadeTool) (*Mapped, error) {
	fq := t.FullyQualifiedName
	if fq == "" {
		fq = t.Toolkit.Name + "." + t.Name
	}
	if t.Name == "" || t.Toolkit.Name == "" {
		return nil, fmt.Errorf("tool %q has no name or no toolkit name", fq)
	}
	schema, err := ParametersToSchema(t.Input.Parameters)
	if err != nil {
		return nil, fmt.Errorf("tool %s: %w", fq, err)
	}
	m := &Mapped{Toolkit: t.Toolkit.Name, Name: t.Name}
	if t.Toolkit.Version != nil {
		m.Version = *t.Toolkit.Version
	}
	custom := map[string]json.RawMessage{
		AnnToolkit:   rawJSON(t.Toolkit.Name),
		AnnQualified: rawJSON(fq),
		AnnDialect:   rawJSON(DialectArcade),
	}
	if m.Version != "" {
		custom[AnnVersion] = rawJSON(m.Version)
	}
	var notInf []string
	for _, p := range t.Input.Parameters {
		if p.Inferrable != nil && !*p.Inferrable {
			notInf = append(notInf, p.Name)
		}
	}
	if len(notInf) > 0 {
		custom[AnnNotInferable] = rawJSON(notInf)
	}
	if len(t.Output) > 0 && !bytes.Equal(bytes.TrimSpace(t.Output), []byte("null")) {
		custom[AnnOutput] = append(json.RawMessage(nil), t.Output...)
	}
	ann := &rap.Annotations{Custom: custom}
	for _, s := range t.Requirements.Secrets {
		if s.Name() != "" {
			m.Secrets = append(m.Secrets, s.Name())
		}
	}
	if t.Requirements.Authorization != nil {
		m.Provider = t.Requirements.Authorization.Provider()
		ann.RequiresAuth = m.Provider
	}
	if t.Requirements.Authorization != nil || len(m.Secrets) > 0 || len(t.Requirements.Metadata) > 0 {
		custom[AnnRequirements] = rawJSON(t.Requirements)
	}
	desc := t.Description
	if t.DeprecationMessage != nil && *t.DeprecationMessage != "" {
		desc = strings.TrimSpace(desc + "\n\nDeprecated: " + *t.DeprecationMessage)
	}
	m.Tool = rap.Tool{Name: RAPName(fq), Description: desc, InputSchema: schema, Annotations: ann}
	return m, checkTool(&m.Tool)
}

var oxpVersioned = regexp.MustCompile(`^([A-Za-z0-9_]+)\.([A-Za-z0-9_]+)(@([0-9]+|[0-9]+\.[0-9]+\.[0-9]+))?$`)

// MapOXP converts one OXP tool definition (GET /tools). Its input_schema is
// used as it is.
func MapOXP(t *OXPTool) (*Mapped, error) {
	parts := oxpVersioned.FindStringSubmatch(t.ID)
	if parts == nil {
		return nil, fmt.Errorf("tool id %q is not of the form Toolkit.Tool[@version]", t.ID)
	}
	m := &Mapped{Toolkit: parts[1], Name: parts[2], Version: t.Version, ToolID: t.ID}
	if m.Version != "" && parts[3] == "" {
		m.ToolID = t.ID + "@" + m.Version
	}
	schema := t.InputSchema
	if len(bytes.TrimSpace(schema)) == 0 || bytes.Equal(bytes.TrimSpace(schema), []byte("null")) {
		schema = rap.EmptyObjectSchema
	}
	var obj map[string]any
	if err := json.Unmarshal(schema, &obj); err != nil {
		return nil, fmt.Errorf("tool %s: input_schema is not a JSON object: %v", t.ID, err)
	}
	custom := map[string]json.RawMessage{
		AnnToolkit:   rawJSON(m.Toolkit),
		AnnQualified: rawJSON(t.ID),
		AnnDialect:   rawJSON(DialectOXP),
	}
	if m.Version != "" {
		custom[AnnVersion] = rawJSON(m.Version)
	}
	if len(t.OutputSchema) > 0 {
		custom[AnnOutput] = append(json.RawMessage(nil), t.OutputSchema...)
	}
	ann := &rap.Annotations{Custom: custom}
	if r := t.Requirements; r != nil {
		for _, s := range r.Secrets {
			if s.Name() != "" {
				m.Secrets = append(m.Secrets, s.Name())
			}
		}
		if len(r.Authorization) > 0 {
			m.Provider = r.Authorization[0].Provider()
			ann.RequiresAuth = m.Provider
		}
		custom[AnnRequirements] = rawJSON(r)
	}
	m.Tool = rap.Tool{Name: RAPName(t.ID), Description: t.Description, InputSchema: append(json.RawMessage(nil), schema...), Annotations: ann}
	return m, checkTool(&m.Tool)
}

// checkTool reports a converted tool the rap SDK would refuse.
func checkTool(t *rap.Tool) error {
	if t.Name == "" || len(t.Name) > rap.MaxNameLength {
		return fmt.Errorf("tool name %q is empty or longer than %d characters", t.Name, rap.MaxNameLength)
	}
	if _, err := rap.CompileSchema(t.InputSchema); err != nil {
		return fmt.Errorf("tool %s: input schema does not compile: %v", t.Name, err)
	}
	return nil
}

// sortedKeys returns m's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
