package rap

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// MaxSchemaBytes is the largest input schema CompileSchema accepts.
const MaxSchemaBytes = 1 << 20

// MaxSchemaDepth is how deeply the JSON of an input schema may nest (objects
// and arrays). Compiling time grows steeply with depth, so the bound keeps a
// small hostile manifest from costing seconds of CPU; schemas inferred from
// Go structs nest far less.
const MaxSchemaDepth = 64

// MaxSchemaObjects is the most JSON objects (the schema, its subschemas and
// any object-valued keywords) an input schema may contain. Compiling time
// grows faster than linearly with their number; a thousand is far more than
// a tool's parameters need.
const MaxSchemaObjects = 1000

// maxAlternatives is how many alternatives of a failed anyOf or oneOf an
// argument problem spells out.
const maxAlternatives = 5

// maxProblems is how many problems an ArgumentsError or SchemaError spells
// out before summarising the rest as "and N more".
const maxProblems = 10

// schemaBase is the location a schema is compiled at. The .invalid top-level
// domain never resolves, and nothing is ever fetched from it anyway.
const schemaBase = "https://gorap.invalid/inputSchema.json"

var printer = message.NewPrinter(language.English)

// Schema is a compiled JSON Schema together with the JSON it was compiled
// from. A Schema is immutable and safe for concurrent use.
type Schema struct {
	raw      json.RawMessage
	compiled *jsonschema.Schema
	// index maps each compiled (sub)schema's location to it, so that an
	// "unknown property" message can list the properties that are allowed.
	index schemaIndex
}

// SchemaError reports why a JSON Schema could not be compiled. Each problem's
// Path is relative to the schema root ("" for the root itself,
// "properties.count.type" for a nested keyword).
type SchemaError struct {
	// Problems lists each problem with its path inside the schema.
	Problems []Violation
}

// Error lists the problems, one per line.
func (e *SchemaError) Error() string {
	if len(e.Problems) == 1 {
		return "invalid JSON Schema: " + e.Problems[0].String()
	}
	var b strings.Builder
	fmt.Fprintf(&b, "invalid JSON Schema (%d problems):", len(e.Problems))
	for _, p := range e.Problems {
		b.WriteString("\n")
		b.WriteString(p.String())
	}
	return b.String()
}

func schemaErr(path, format string, args ...any) *SchemaError {
	return &SchemaError{Problems: []Violation{{Path: path, Message: fmt.Sprintf(format, args...)}}}
}

// CompileSchema compiles an input schema (RAP TS-2).
//
// The root must be a JSON object. Draft 2020-12 applies unless "$schema"
// names draft-04, draft-06, draft-07 or 2019-09. References are resolved only
// inside the schema itself (and against the built-in meta-schemas): a $ref to
// any other document, over http, https, file or any other scheme, is never
// fetched and compiling fails with an error naming it. Failures are
// *SchemaError.
//
// "format" is an annotation under drafts 2019-09 and 2020-12 and an
// assertion under the earlier drafts, as each draft specifies.
func CompileSchema(raw json.RawMessage) (*Schema, error) {
	if len(raw) > MaxSchemaBytes {
		return nil, schemaErr("", "schema is %d bytes; the limit is %d bytes (1 MiB)", len(raw), MaxSchemaBytes)
	}
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 {
		return nil, schemaErr("", `schema is empty; a tool without parameters declares {"type":"object","additionalProperties":false}`)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(trimmed))
	if err != nil {
		return nil, schemaErr("", "schema is not valid JSON: %v", err)
	}
	if _, ok := doc.(map[string]any); !ok {
		return nil, schemaErr("", "schema must be a JSON object, got %s", jsonKind(trimmed))
	}
	if n := countObjects(trimmed); n > MaxSchemaObjects {
		return nil, schemaErr("", "has %d JSON objects (schemas and subschemas); the limit is %d: simplify the schema or split the tool", n, MaxSchemaObjects)
	}
	if path, deep := tooDeep(doc, "", 1); deep {
		return nil, schemaErr(path, "nests more than %d levels deep; flatten the schema or move repeated parts under \"$defs\" and refer to them with \"$ref\"", MaxSchemaDepth)
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, trimmed); err != nil {
		return nil, schemaErr("", "schema is not valid JSON: %v", err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(refuseLoader{})
	if err := c.AddResource(schemaBase, doc); err != nil {
		return nil, schemaErr("", "cannot register schema: %v", err)
	}
	compiled, err := c.Compile(schemaBase)
	if err != nil {
		return nil, explainCompileError(err, doc)
	}
	return &Schema{raw: compact.Bytes(), compiled: compiled, index: indexSchemas(compiled)}, nil
}

// Raw returns the schema's JSON, compacted. The caller must not modify it.
func (s *Schema) Raw() json.RawMessage { return s.raw }

// refuseLoader is the compiler's only loader: it refuses every document that
// is not the schema itself or a built-in meta-schema.
type refuseLoader struct{}

var errRemoteRef = errors.New("remote references are never fetched")

// Load refuses to load url: input schemas must be self-contained.
func (refuseLoader) Load(string) (any, error) { return nil, errRemoteRef }

// explainCompileError turns a compiler error into a SchemaError whose
// problems name the place in the schema that is wrong.
func explainCompileError(err error, doc any) *SchemaError {
	var load *jsonschema.LoadURLError
	if errors.As(err, &load) {
		if meta, _ := doc.(map[string]any)["$schema"].(string); meta != "" && sameDocument(meta, load.URL) {
			return schemaErr("$schema", "%q is not a supported draft; use one of "+
				"https://json-schema.org/draft/2020-12/schema (the default), https://json-schema.org/draft/2019-09/schema, "+
				"http://json-schema.org/draft-07/schema#, http://json-schema.org/draft-06/schema#, http://json-schema.org/draft-04/schema#", meta)
		}
		base, _ := url.Parse(schemaBase)
		path, ref := findRef(doc, func(ref string) bool {
			if sameDocument(ref, load.URL) {
				return true
			}
			u, err := url.Parse(ref)
			return err == nil && sameDocument(base.ResolveReference(u).String(), load.URL)
		})
		if ref == "" {
			ref = load.URL
		}
		return schemaErr(path, "reference %q points outside this schema; remote references (http, https, file or any other) are never fetched: "+
			"copy the definition under \"$defs\" and refer to it as \"#/$defs/<name>\"", ref)
	}
	var sve *jsonschema.SchemaValidationError
	if errors.As(err, &sve) {
		var ve *jsonschema.ValidationError
		if errors.As(sve.Err, &ve) {
			probs := explainer{instance: doc}.explain(ve)
			out := &SchemaError{}
			for _, p := range probs {
				out.Problems = append(out.Problems, Violation{Path: p.path, Message: p.msg})
			}
			if len(out.Problems) > 0 {
				out.Problems = capViolations(out.Problems)
				return out
			}
		}
		return schemaErr("", "not a valid JSON Schema: %v", sve.Err)
	}
	var re *jsonschema.InvalidRegexError
	if errors.As(err, &re) {
		return schemaErr(pointerToPath(fragmentOf(re.URL)), "pattern %q is not a regular expression Go's RE2 engine accepts (%v); lookarounds and backreferences are not supported", re.Regex, re.Err)
	}
	var anchor *jsonschema.AnchorNotFoundError
	if errors.As(err, &anchor) {
		local := displayURL(anchor.Reference)
		path, _ := findRef(doc, func(ref string) bool { return ref == local })
		return schemaErr(path, "reference %q names an anchor that does not exist in this schema", local)
	}
	var ptr *jsonschema.JSONPointerNotFoundError
	if errors.As(err, &ptr) {
		local := displayURL(ptr.URL)
		path, _ := findRef(doc, func(ref string) bool { return ref == local })
		return schemaErr(path, "reference %q points to nothing in this schema; check the JSON pointer after '#'", local)
	}
	var unsup *jsonschema.UnsupportedDraftError
	if errors.As(err, &unsup) {
		return schemaErr("$schema", "%q is not a supported draft", unsup.URL)
	}
	return schemaErr("", "%s", strings.ReplaceAll(err.Error(), schemaBase, "#"))
}

// countObjects counts the JSON objects in data, a valid JSON text, by
// counting the '{' that are not inside strings.
func countObjects(data []byte) int {
	n := 0
	inString, escaped := false, false
	for _, b := range data {
		switch {
		case escaped:
			escaped = false
		case inString && b == '\\':
			escaped = true
		case b == '"':
			inString = !inString
		case !inString && b == '{':
			n++
		}
	}
	return n
}

// tooDeep reports whether v nests more than MaxSchemaDepth levels, and the
// path of the first value beyond that depth.
func tooDeep(v any, path string, depth int) (string, bool) {
	if depth > MaxSchemaDepth {
		return path, true
	}
	switch v := v.(type) {
	case map[string]any:
		for k, sub := range v {
			if p, deep := tooDeep(sub, joinPath(path, k), depth+1); deep {
				return p, true
			}
		}
	case []any:
		for i, sub := range v {
			if p, deep := tooDeep(sub, fmt.Sprintf("%s[%d]", path, i), depth+1); deep {
				return p, true
			}
		}
	}
	return "", false
}

// displayURL shows a location inside the compiled schema as a local
// reference ("#/$defs/x") rather than under the internal base URL.
func displayURL(u string) string {
	if rest, ok := strings.CutPrefix(u, schemaBase); ok {
		if rest == "" {
			return "#"
		}
		return rest
	}
	return u
}

func fragmentOf(u string) string {
	if i := strings.IndexByte(u, '#'); i >= 0 {
		return u[i+1:]
	}
	return ""
}

// pointerToPath turns a JSON pointer ("/properties/a b/type") into a dotted
// path ("properties[\"a b\"].type").
func pointerToPath(ptr string) string {
	if ptr == "" || ptr == "/" {
		return ""
	}
	var b strings.Builder
	for _, tok := range strings.Split(strings.TrimPrefix(ptr, "/"), "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		if u, err := url.PathUnescape(tok); err == nil {
			tok = u
		}
		if _, err := strconv.Atoi(tok); err == nil && b.Len() > 0 {
			b.WriteString("[" + tok + "]")
			continue
		}
		appendKey(&b, tok)
	}
	return b.String()
}

// sameDocument reports whether ref and loaded name the same document,
// ignoring fragments and an empty trailing fragment marker.
func sameDocument(ref, loaded string) bool {
	strip := func(s string) string {
		if i := strings.IndexByte(s, '#'); i >= 0 {
			s = s[:i]
		}
		return s
	}
	return strip(ref) == strip(loaded)
}

// findRef walks doc, in a stable order, for the first reference keyword
// whose value satisfies match, returning the keyword's path and its value as
// written ("", "" if there is none).
func findRef(doc any, match func(ref string) bool) (string, string) {
	var walk func(v any, path string) (string, string)
	walk = func(v any, path string) (string, string) {
		switch v := v.(type) {
		case map[string]any:
			for _, k := range []string{"$ref", "$dynamicRef", "$recursiveRef"} {
				if s, ok := v[k].(string); ok && match(s) {
					return joinPath(path, k), s
				}
			}
			keys := make([]string, 0, len(v))
			for k := range v {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				if p, s := walk(v[k], joinPath(path, k)); s != "" {
					return p, s
				}
			}
		case []any:
			for i, item := range v {
				if p, s := walk(item, fmt.Sprintf("%s[%d]", path, i)); s != "" {
					return p, s
				}
			}
		}
		return "", ""
	}
	return walk(doc, "")
}

var plainKey = regexp.MustCompile(`^[A-Za-z0-9_$-]+$`)

// joinPath appends an object key to a path, quoting keys that are not
// plain identifiers: joinPath("a", "b c") is `a["b c"]`.
func joinPath(path, key string) string {
	var b strings.Builder
	b.WriteString(path)
	appendKey(&b, key)
	return b.String()
}

func appendKey(b *strings.Builder, key string) {
	if plainKey.MatchString(key) {
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(key)
		return
	}
	b.WriteString("[" + strconv.Quote(key) + "]")
}

// ArgumentsError reports every way a tool call's arguments fail the tool's
// input schema. Each problem starts with the path of the offending value
// ("arguments.count") and says what to change, so that a model reading it
// can correct its call.
type ArgumentsError struct {
	// Problems holds one "path: what is wrong" line per problem, sorted by
	// path; after ten, a last line says how many more there are.
	Problems []string
}

// Error joins the problems with "; ".
func (e *ArgumentsError) Error() string {
	return "invalid arguments: " + strings.Join(e.Problems, "; ")
}

// Validate checks a tool call's arguments against the schema. The arguments
// must be a JSON object (RAP IN-1). It returns nil or an *ArgumentsError that
// lists every problem found (up to ten, then "and N more"), sorted by path.
func (s *Schema) Validate(args json.RawMessage) error {
	trimmed := bytes.TrimSpace(args)
	if len(trimmed) == 0 {
		return &ArgumentsError{Problems: []string{"arguments: missing; send a JSON object, {} when the tool takes no arguments"}}
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(trimmed))
	if err != nil {
		return &ArgumentsError{Problems: []string{"arguments: not valid JSON (" + err.Error() + "); send a JSON object"}}
	}
	if _, ok := v.(map[string]any); !ok {
		return &ArgumentsError{Problems: []string{"arguments: expected a JSON object, got " + describe(v)}}
	}
	err = s.compiled.Validate(v)
	if err == nil {
		return nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return &ArgumentsError{Problems: []string{"arguments: " + err.Error()}}
	}
	probs := explainer{index: s.index, instance: v, root: "arguments"}.explain(ve)
	out := make([]string, 0, len(probs))
	for _, p := range probs {
		out = append(out, p.String())
	}
	if len(out) == 0 {
		out = []string{"arguments: do not match the input schema"}
	}
	return &ArgumentsError{Problems: capStrings(out)}
}

func capStrings(p []string) []string {
	if len(p) <= maxProblems {
		return p
	}
	rest := len(p) - maxProblems
	return append(p[:maxProblems:maxProblems], fmt.Sprintf("and %d more", rest))
}

func capViolations(p []Violation) []Violation {
	if len(p) <= maxProblems {
		return p
	}
	rest := len(p) - maxProblems
	return append(p[:maxProblems:maxProblems], Violation{Message: fmt.Sprintf("and %d more", rest)})
}

// problem is one explained validation failure.
type problem struct{ path, msg string }

// String returns "path: message", or the message alone for an empty path.
func (p problem) String() string {
	if p.path == "" {
		return p.msg
	}
	return p.path + ": " + p.msg
}

// explainer turns a validation error tree into problems a model or a person
// can act on.
type explainer struct {
	index    schemaIndex // may be nil
	instance any         // the value that was validated
	root     string      // path prefix for the instance root, e.g. "arguments"
}

// explain flattens a validation error tree into problems: one per failing
// keyword, with the instance path rendered under root, sorted and deduplicated.
func (x explainer) explain(ve *jsonschema.ValidationError) []problem {
	var out []problem
	x.into(&out, ve)
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].path != out[j].path {
			return out[i].path < out[j].path
		}
		return out[i].msg < out[j].msg
	})
	dedup := out[:0]
	for i, p := range out {
		if i > 0 && p == out[i-1] {
			continue
		}
		dedup = append(dedup, p)
	}
	return dedup
}

func (x explainer) into(out *[]problem, ve *jsonschema.ValidationError) {
	path, value := locate(x.instance, ve.InstanceLocation, x.root)
	switch k := ve.ErrorKind.(type) {
	case *kind.Schema, *kind.Group, *kind.AllOf, *kind.Reference:
		for _, c := range ve.Causes {
			x.into(out, c)
		}
		if len(ve.Causes) == 0 {
			*out = append(*out, problem{path, "does not match the schema"})
		}
	case *kind.AnyOf, *kind.OneOf:
		if one, ok := k.(*kind.OneOf); ok && len(one.Subschemas) > 1 {
			*out = append(*out, problem{path, fmt.Sprintf("matches more than one of the \"oneOf\" alternatives (%d and %d); it must match exactly one", one.Subschemas[0], one.Subschemas[1])})
			return
		}
		var alts []string
		for i, c := range ve.Causes {
			if i == maxAlternatives {
				alts = append(alts, fmt.Sprintf("and %d more", len(ve.Causes)-maxAlternatives))
				break
			}
			var sub []problem
			x.into(&sub, c)
			var parts []string
			for _, p := range sub {
				if p.path == path {
					parts = append(parts, p.msg)
				} else {
					parts = append(parts, p.String())
				}
			}
			alts = append(alts, fmt.Sprintf("(%d) %s", i+1, excerpt(strings.Join(parts, ", "), 200)))
		}
		msg := "matches none of the allowed alternatives"
		if len(alts) > 0 {
			msg = fmt.Sprintf("must match one of %d alternatives: %s", len(ve.Causes), strings.Join(alts, "; "))
		}
		*out = append(*out, problem{path, msg})
	case *kind.Required:
		for _, name := range k.Missing {
			*out = append(*out, problem{joinPath(path, name), fmt.Sprintf("missing required property %q", name)})
		}
	case *kind.AdditionalProperties:
		allowed := allowedProperties(x.index[ve.SchemaURL])
		for _, name := range k.Properties {
			*out = append(*out, problem{path, fmt.Sprintf("unknown property %q (%s)", name, allowed)})
		}
	case *kind.Type:
		*out = append(*out, problem{path, fmt.Sprintf("expected %s, got %s", strings.Join(k.Want, " or "), describe(value))})
	case *kind.Enum, *kind.Const:
		*out = append(*out, problem{path, fmt.Sprintf("%s; got %s", ve.ErrorKind.LocalizedString(printer), describe(value))})
	case *kind.FalseSchema:
		*out = append(*out, problem{path, "is not allowed here; remove it"})
	case *kind.Not:
		*out = append(*out, problem{path, "must not match the schema under \"not\""})
	case *kind.MinLength:
		*out = append(*out, problem{path, fmt.Sprintf("must be at least %d characters long, got %d", k.Want, k.Got)})
	case *kind.MaxLength:
		*out = append(*out, problem{path, fmt.Sprintf("must be at most %d characters long, got %d", k.Want, k.Got)})
	case *kind.MinItems:
		*out = append(*out, problem{path, fmt.Sprintf("must have at least %s, got %d", plural(k.Want, "item"), k.Got)})
	case *kind.MaxItems:
		*out = append(*out, problem{path, fmt.Sprintf("must have at most %s, got %d", plural(k.Want, "item"), k.Got)})
	case *kind.MinProperties:
		*out = append(*out, problem{path, fmt.Sprintf("must have at least %s, got %d", plural(k.Want, "property"), k.Got)})
	case *kind.MaxProperties:
		*out = append(*out, problem{path, fmt.Sprintf("must have at most %s, got %d", plural(k.Want, "property"), k.Got)})
	case *kind.MultipleOf:
		*out = append(*out, problem{path, fmt.Sprintf("must be a multiple of %s, got %s", ratString(k.Want), describe(value))})
	case *kind.Contains:
		*out = append(*out, problem{path, "must contain at least one item that matches the \"contains\" schema"})
	case *kind.PropertyNames:
		*out = append(*out, problem{path, fmt.Sprintf("property name %q does not match the \"propertyNames\" schema; rename or remove it", k.Property)})
	case *kind.Minimum:
		*out = append(*out, problem{path, fmt.Sprintf("must be >= %s, got %s", ratString(k.Want), describe(value))})
	case *kind.Maximum:
		*out = append(*out, problem{path, fmt.Sprintf("must be <= %s, got %s", ratString(k.Want), describe(value))})
	case *kind.ExclusiveMinimum:
		*out = append(*out, problem{path, fmt.Sprintf("must be > %s, got %s", ratString(k.Want), describe(value))})
	case *kind.ExclusiveMaximum:
		*out = append(*out, problem{path, fmt.Sprintf("must be < %s, got %s", ratString(k.Want), describe(value))})
	case *kind.Format:
		msg := ve.ErrorKind.LocalizedString(printer)
		if k.Want == "regex" {
			msg += "; Go's RE2 engine supports no lookarounds or backreferences"
		}
		*out = append(*out, problem{path, msg})
	case *kind.UniqueItems:
		*out = append(*out, problem{path, fmt.Sprintf("must not repeat items: items %d and %d are equal", k.Duplicates[0], k.Duplicates[1])})
	case *kind.Pattern:
		*out = append(*out, problem{path, fmt.Sprintf("must match the pattern %q, got %s", k.Want, describe(value))})
	default:
		*out = append(*out, problem{path, ve.ErrorKind.LocalizedString(printer)})
	}
}

// plural returns "1 item" or "n items"; "property" becomes "properties".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	if strings.HasSuffix(noun, "y") {
		return fmt.Sprintf("%d %sies", n, strings.TrimSuffix(noun, "y"))
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// ratString prints a schema bound such as 1/2 as a decimal.
func ratString(r interface{ FloatString(int) string }) string {
	s := r.FloatString(6)
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	return s
}

// allowedProperties describes the properties the failing schema declares,
// for an "unknown property" message.
func allowedProperties(sch *jsonschema.Schema) string {
	if sch == nil {
		return "remove it"
	}
	names := make([]string, 0, len(sch.Properties))
	for n := range sch.Properties {
		names = append(names, n)
	}
	sort.Strings(names)
	switch {
	case len(names) == 0 && len(sch.PatternProperties) == 0:
		return "no properties are allowed here; send {}"
	case len(names) == 0:
		return "only names matching the declared patterns are allowed"
	case len(names) > 20:
		return "allowed: " + strings.Join(names[:20], ", ") + fmt.Sprintf(" and %d more", len(names)-20)
	default:
		return "allowed: " + strings.Join(names, ", ")
	}
}

// schemaIndex maps a compiled schema's location to the schema; it lets the
// explainer reach the keywords of the schema that failed.
type schemaIndex map[string]*jsonschema.Schema

// indexSchemas records root and every subschema reachable from it.
func indexSchemas(root *jsonschema.Schema) schemaIndex {
	idx := schemaIndex{}
	var walk func(s *jsonschema.Schema)
	visit := func(v any) {
		switch v := v.(type) {
		case *jsonschema.Schema:
			walk(v)
		case []*jsonschema.Schema:
			for _, s := range v {
				walk(s)
			}
		}
	}
	walk = func(s *jsonschema.Schema) {
		if s == nil || idx[s.Location] != nil {
			return
		}
		idx[s.Location] = s
		for _, sub := range []*jsonschema.Schema{s.Ref, s.RecursiveRef, s.Not, s.If, s.Then, s.Else,
			s.PropertyNames, s.UnevaluatedProperties, s.Contains, s.Items2020, s.UnevaluatedItems, s.ContentSchema} {
			walk(sub)
		}
		if s.DynamicRef != nil {
			walk(s.DynamicRef.Ref)
		}
		for _, list := range [][]*jsonschema.Schema{s.AllOf, s.AnyOf, s.OneOf, s.PrefixItems} {
			for _, sub := range list {
				walk(sub)
			}
		}
		for _, sub := range s.Properties {
			walk(sub)
		}
		for _, sub := range s.PatternProperties {
			walk(sub)
		}
		for _, sub := range s.DependentSchemas {
			walk(sub)
		}
		for _, dep := range s.Dependencies {
			visit(dep)
		}
		visit(s.AdditionalProperties)
		visit(s.Items)
		visit(s.AdditionalItems)
	}
	walk(root)
	return idx
}

// locate renders the instance location as a path under root and returns the
// value found there (nil if the location does not exist).
func locate(instance any, loc []string, root string) (string, any) {
	var b strings.Builder
	b.WriteString(root)
	v := instance
	for _, tok := range loc {
		switch cur := v.(type) {
		case []any:
			i, err := strconv.Atoi(tok)
			b.WriteString("[" + tok + "]")
			if err == nil && i >= 0 && i < len(cur) {
				v = cur[i]
			} else {
				v = nil
			}
		case map[string]any:
			appendKey(&b, tok)
			v = cur[tok]
		default:
			appendKey(&b, tok)
			v = nil
		}
	}
	return b.String(), v
}

// describe names a JSON value's type and, for scalars, shows a short excerpt
// of it: `string "3"`, `number 4.5`, `boolean true`, `null`, `object`.
func describe(v any) string {
	switch v := v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean " + strconv.FormatBool(v)
	case json.Number:
		if _, err := v.Int64(); err == nil {
			return "integer " + excerpt(v.String(), 40)
		}
		return "number " + excerpt(v.String(), 40)
	case float64:
		return "number " + strconv.FormatFloat(v, 'g', -1, 64)
	case string:
		return "string " + strconv.Quote(excerpt(v, 40))
	case []any:
		return "array"
	case map[string]any:
		return "object"
	default:
		return fmt.Sprintf("%T", v)
	}
}

// excerpt shortens s to at most n runes, marking the cut with "…".
func excerpt(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n]) + "…"
}
