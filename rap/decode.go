package rap

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"
)

// FieldError reports a message field that is missing or has the wrong JSON
// type. Field is a path such as "arguments" or "content[1].mediaType".
type FieldError struct {
	// Field is the path of the member; "" stands for the whole message.
	Field string
	// Problem says what is wrong with it.
	Problem string
}

// Error returns "field: problem", or the problem alone for the whole message.
func (e *FieldError) Error() string {
	if e.Field == "" {
		return e.Problem
	}
	return e.Field + ": " + e.Problem
}

// object is a decoded JSON object whose members are checked one by one, so
// that every error names the member that was wrong.
type object struct {
	prefix  string
	members map[string]json.RawMessage
}

func parseObject(data []byte, prefix string) (*object, error) {
	data = bytes.TrimSpace(data)
	if len(data) == 0 {
		return nil, &FieldError{Field: prefix, Problem: "empty body; expected a JSON object"}
	}
	if data[0] != '{' {
		return nil, &FieldError{Field: prefix, Problem: "expected a JSON object, got " + jsonKind(data)}
	}
	if prefix == "" && !utf8.Valid(data) {
		// RAP TR-1: a decoder would otherwise replace the bad bytes silently,
		// changing ids that route the message.
		return nil, &FieldError{Problem: "body is not valid UTF-8; messages are UTF-8 JSON (RAP TR-1)"}
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, &FieldError{Field: prefix, Problem: "malformed JSON: " + err.Error()}
	}
	if prefix == "" {
		// The whole body, nested objects included; a member's own object
		// (prefix set) lies inside a body already checked.
		if err := duplicateKey(data); err != nil {
			return nil, err
		}
	}
	return &object{prefix: prefix, members: m}, nil
}

func (o *object) path(name string) string {
	if o.prefix == "" {
		return name
	}
	return o.prefix + "." + name
}

// raw returns the member and whether it is present and not null.
func (o *object) raw(name string) (json.RawMessage, bool) {
	v, ok := o.members[name]
	if !ok || string(bytes.TrimSpace(v)) == "null" {
		return nil, false
	}
	return v, true
}

func (o *object) missing(name string) error {
	return &FieldError{Field: o.path(name), Problem: "missing required field"}
}

func (o *object) wrongType(name, want string, got json.RawMessage) error {
	return &FieldError{Field: o.path(name), Problem: "must be " + want + ", got " + jsonKind(got)}
}

// str reads a string member. A required member must be present and not null.
func (o *object) str(name string, required bool) (string, error) {
	v, ok := o.raw(name)
	if !ok {
		if required {
			return "", o.missing(name)
		}
		return "", nil
	}
	if s, ok := unescapedString(v); ok {
		return s, nil
	}
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		return "", o.wrongType(name, "a string", v)
	}
	return s, nil
}

// unescapedString returns the value of v when it is a JSON string without
// escapes, control characters or invalid UTF-8, whose value is then its
// bytes between the quotes: what json.Unmarshal would return, without
// its decoder (the ids of every callback are read this way).
func unescapedString(v []byte) (string, bool) {
	v = bytes.TrimSpace(v)
	if len(v) < 2 || v[0] != '"' || v[len(v)-1] != '"' {
		return "", false
	}
	in := v[1 : len(v)-1]
	for _, b := range in {
		if b == '"' || b == '\\' || b < 0x20 {
			return "", false
		}
	}
	if !utf8.Valid(in) {
		return "", false
	}
	return string(in), true
}

// nonEmpty reads a required string member that must not be empty.
func (o *object) nonEmpty(name string) (string, error) {
	s, err := o.str(name, true)
	if err == nil && s == "" {
		err = &FieldError{Field: o.path(name), Problem: "must not be empty"}
	}
	return s, err
}

func (o *object) boolean(name string) (bool, error) {
	v, ok := o.raw(name)
	if !ok {
		return false, nil
	}
	var b bool
	if err := json.Unmarshal(v, &b); err != nil {
		return false, o.wrongType(name, "a boolean", v)
	}
	return b, nil
}

func (o *object) integer(name string, required bool) (int, bool, error) {
	v, ok := o.raw(name)
	if !ok {
		if required {
			return 0, false, o.missing(name)
		}
		return 0, false, nil
	}
	var n int
	if err := json.Unmarshal(v, &n); err != nil {
		return 0, false, o.wrongType(name, "an integer", v)
	}
	return n, true, nil
}

func (o *object) strings(name string, required bool) ([]string, error) {
	v, ok := o.raw(name)
	if !ok {
		if required {
			return nil, o.missing(name)
		}
		return nil, nil
	}
	var items []json.RawMessage
	if err := json.Unmarshal(v, &items); err != nil {
		return nil, o.wrongType(name, "an array of strings", v)
	}
	out := make([]string, len(items))
	for i, item := range items {
		if err := json.Unmarshal(item, &out[i]); err != nil {
			return nil, &FieldError{Field: fmt.Sprintf("%s[%d]", o.path(name), i), Problem: "must be a string, got " + jsonKind(item)}
		}
	}
	return out, nil
}

// jsonObject reads a member that must be a JSON object and returns it compacted.
func (o *object) jsonObject(name string, required bool) (json.RawMessage, error) {
	v, ok := o.raw(name)
	if !ok {
		if required {
			return nil, o.missing(name)
		}
		return nil, nil
	}
	if jsonKind(v) != "object" {
		return nil, o.wrongType(name, "a JSON object", v)
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, v); err != nil {
		return nil, o.wrongType(name, "a JSON object", v)
	}
	return buf.Bytes(), nil
}

func (o *object) array(name string) ([]json.RawMessage, bool, error) {
	v, ok := o.raw(name)
	if !ok {
		return nil, false, nil
	}
	var items []json.RawMessage
	if err := json.Unmarshal(v, &items); err != nil {
		return nil, false, o.wrongType(name, "an array", v)
	}
	return items, true, nil
}

// jsonKind names the JSON type of a raw value for error messages.
func jsonKind(v json.RawMessage) string {
	v = bytes.TrimSpace(v)
	if len(v) == 0 {
		return "nothing"
	}
	// Composite values are named by their first byte, so a truncated object
	// still reads as an object; a scalar must be valid JSON to be named.
	if v[0] != '{' && v[0] != '[' && v[0] != '"' && !json.Valid(v) {
		return "invalid JSON"
	}
	switch v[0] {
	case '{':
		return "object"
	case '[':
		return "array"
	case '"':
		return "string"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	default:
		if strings.ContainsAny(string(v[:1]), "-0123456789") {
			return "number"
		}
		return "invalid JSON"
	}
}

// decodeInvocationFast decodes the common shape of an invocation in one
// pass without building a map: every member DecodeInvocation reads is a
// string without escapes (or, for arguments, an object; for
// thread_ancestors, an array of such strings), and the body is valid UTF-8
// JSON. It reports false for anything else, and DecodeInvocation then takes
// its strict path, which gives the same result for what both accept and
// names the field for what it rejects (a duplicate key among them). The
// strings share one copy of data.
func decodeInvocationFast(data []byte) (*Invocation, bool) {
	if !utf8.Valid(data) || !json.Valid(data) || duplicateKey(data) != nil {
		return nil, false
	}
	i := skipSpace(data, 0)
	if i >= len(data) || data[i] != '{' {
		return nil, false
	}
	text := string(data) // one copy; the fields are substrings of it
	var (
		inv                              Invocation
		args, ancestors, extensions      []byte
		haveOp, haveArgs, haveID         bool
		haveCallback, haveGroup, haveAnc bool
	)
	i = skipSpace(data, i+1)
	if i < len(data) && data[i] == '}' {
		return nil, false
	}
	for {
		// The member's name: a string without escapes.
		ks, ke, ok := plainString(data, i)
		if !ok {
			return nil, false
		}
		i = skipSpace(data, ke+1)
		if i >= len(data) || data[i] != ':' {
			return nil, false
		}
		i = skipSpace(data, i+1)
		vs := i
		i = skipValue(data, i)
		if i < 0 {
			return nil, false
		}
		val := data[vs:i]
		str := func(dst *string, seen *bool) bool {
			s, e, ok := plainString(data, vs)
			if !ok || e+1 != i {
				return false // not a plain string: let the strict path judge it
			}
			*dst = text[s:e]
			if seen != nil {
				*seen = true
			}
			return true
		}
		switch string(data[ks:ke]) {
		case "operation":
			ok = str(&inv.Operation, &haveOp)
		case "id":
			ok = str(&inv.ID, &haveID)
		case "callback_url":
			ok = str(&inv.CallbackURL, &haveCallback)
		case "group_id":
			ok = str(&inv.GroupID, &haveGroup)
		case "call_id":
			ok = str(&inv.CallID, nil)
		case "user_id":
			ok = str(&inv.UserID, nil)
		case "arguments":
			args, haveArgs, ok = val, true, val[0] == '{'
		case "thread_ancestors":
			ancestors, haveAnc, ok = val, true, val[0] == '['
		case "extensions":
			extensions, ok = val, val[0] == '['
		}
		if !ok {
			return nil, false
		}
		i = skipSpace(data, i)
		if i >= len(data) {
			return nil, false
		}
		if data[i] == '}' {
			break
		}
		if data[i] != ',' {
			return nil, false
		}
		i = skipSpace(data, i+1)
	}
	if !haveOp || !haveArgs || !haveID || !haveCallback || !haveGroup ||
		inv.Operation == "" || inv.ID == "" || inv.CallbackURL == "" || inv.GroupID == "" {
		return nil, false
	}
	if bytes.IndexByte(args, ' ') >= 0 || bytes.ContainsAny(args, "\t\r\n") {
		// Whitespace to remove: json.Compact does it as the strict path does.
		var buf bytes.Buffer
		if json.Compact(&buf, args) != nil {
			return nil, false
		}
		inv.Arguments = buf.Bytes()
	} else {
		inv.Arguments = append(json.RawMessage(nil), args...)
	}
	if haveAnc {
		list, ok := plainStrings(ancestors)
		if !ok {
			return nil, false
		}
		inv.ThreadAncestors = list
	}
	if extensions != nil {
		list, ok := plainStrings(extensions)
		if !ok {
			return nil, false
		}
		inv.Extensions = list
	}
	return &inv, true
}

// plainStrings reads a JSON array of strings without escapes; an empty
// array gives nil, as DecodeInvocation makes it.
func plainStrings(data []byte) ([]string, bool) {
	i := skipSpace(data, 1)
	if i < len(data) && data[i] == ']' {
		return nil, true
	}
	var out []string
	for {
		s, e, ok := plainString(data, i)
		if !ok {
			return nil, false
		}
		out = append(out, string(data[s:e]))
		i = skipSpace(data, e+1)
		if i >= len(data) {
			return nil, false
		}
		if data[i] == ']' {
			return out, true
		}
		if data[i] != ',' {
			return nil, false
		}
		i = skipSpace(data, i+1)
	}
}

func skipSpace(data []byte, i int) int {
	for i < len(data) {
		switch data[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// plainString reports the bounds [s, e) of the contents of the JSON string
// that starts at data[i], and false when there is none or it has escapes;
// data[e] is its closing quote.
func plainString(data []byte, i int) (s, e int, ok bool) {
	if i >= len(data) || data[i] != '"' {
		return 0, 0, false
	}
	j := bytes.IndexByte(data[i+1:], '"')
	if j < 0 {
		return 0, 0, false
	}
	s, e = i+1, i+1+j
	if bytes.IndexByte(data[s:e], '\\') >= 0 {
		return 0, 0, false
	}
	return s, e, true
}

// skipValue returns the index just after the JSON value that starts at
// data[i], which is known to be valid JSON, or -1.
func skipValue(data []byte, i int) int {
	if i >= len(data) {
		return -1
	}
	switch data[i] {
	case '"':
		return skipString(data, i)
	case '{', '[':
		depth := 0
		for i < len(data) {
			switch data[i] {
			case '"':
				i = skipString(data, i)
				if i < 0 {
					return -1
				}
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return -1
	default: // number, true, false, null
		for i < len(data) {
			switch data[i] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return i
			}
			i++
		}
		return i
	}
}

// skipString returns the index just after the JSON string that starts at
// data[i], or -1.
func skipString(data []byte, i int) int {
	for i++; i < len(data); i++ {
		switch data[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return -1
}
