package rap

// This file defines the user_input callback, a gorap extension to RAP: a
// tool asks the user to fill in a small form of typed fields (the shapes
// of MCP elicitation's restricted JSON schema), and the runtime POSTs a
// UserInputResponse to the message's response_url. A runtime that
// understands it lists ExtensionUserInput in Invocation.Extensions.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"net/mail"
	"net/url"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"
)

// TypeUserInput is the type of a UserInput callback (gorap extension).
const TypeUserInput MessageType = "user_input"

// ExtensionUserInput is the name, in Invocation.Extensions, saying that
// the runtime accepts user_input callbacks.
const ExtensionUserInput = "user_input"

// Limits of a user_input message.
const (
	// MaxInputFields is the most fields one user_input may ask for.
	MaxInputFields = 32
	// MaxInputValueBytes is the longest JSON value of one answered field.
	MaxInputValueBytes = 16 << 10
)

// InputType is the type of a user_input field.
type InputType string

// The types a user_input field may have.
const (
	InputString  InputType = "string"
	InputNumber  InputType = "number"
	InputInteger InputType = "integer"
	InputBoolean InputType = "boolean"
	// InputEnum is a string that is one of the field's Options.
	InputEnum InputType = "enum"
)

// The formats a string field may require.
const (
	FormatEmail    = "email"
	FormatURI      = "uri"
	FormatDate     = "date"      // 2006-01-02
	FormatDateTime = "date-time" // RFC 3339
)

// InputField is one field of a UserInput form.
type InputField struct {
	// Name is the key of the field's value in the answer: letters, digits,
	// '_', '-' and '.', at most 64 bytes, unique within the form.
	Name string `json:"name"`
	// Title labels the field for people; clients show Name when empty.
	Title string `json:"title,omitempty"`
	// Description says more about what to enter.
	Description string `json:"description,omitempty"`
	// Type is the JSON type of the value (enum: one of Options).
	Type InputType `json:"type"`
	// Required fields must have a value in an answer that is not dismissed.
	Required bool `json:"required,omitempty"`
	// Default is the value a client proposes; it must be a valid value.
	Default json.RawMessage `json:"default,omitempty"`
	// Options are the values of an enum field (at least one); only enum
	// fields have them.
	Options []string `json:"options,omitempty"`
	// MinLength and MaxLength bound a string's length in characters.
	MinLength *int `json:"min_length,omitempty"`
	MaxLength *int `json:"max_length,omitempty"`
	// Format is what a string must be: email, uri, date or date-time.
	Format string `json:"format,omitempty"`
	// Minimum and Maximum bound a number or integer.
	Minimum *float64 `json:"minimum,omitempty"`
	Maximum *float64 `json:"maximum,omitempty"`
}

// UserInput asks the user to fill in Fields; the runtime POSTs a
// UserInputResponse to ResponseURL (gorap extension, like RAP UC-1).
type UserInput struct {
	// GroupID is the invocation's group_id.
	GroupID string `json:"group_id"`
	// ID is the invocation's id; the call stays pending.
	ID string `json:"id"`
	// CallID echoes the invocation's call_id when it had one.
	CallID string `json:"call_id,omitempty"`
	// Prompt says what the user is asked.
	Prompt string `json:"prompt"`
	// Fields are the values asked for; there is at least one.
	Fields []InputField `json:"fields"`
	// ResponseURL is where the runtime POSTs the UserInputResponse.
	ResponseURL string `json:"response_url"`
}

// MessageType implements Callback.
func (*UserInput) MessageType() MessageType { return TypeUserInput }

// Thread implements Callback.
func (u *UserInput) Thread() string { return u.GroupID }

// MarshalJSON adds the "type" member.
func (u UserInput) MarshalJSON() ([]byte, error) {
	type plain UserInput
	return json.Marshal(struct {
		Type MessageType `json:"type"`
		plain
	}{TypeUserInput, plain(u)})
}

// UserInputResponse is what the runtime POSTs to a user input's
// response_url: the values the user entered, or Dismissed.
type UserInputResponse struct {
	// ID is the user input's id (the tool call id).
	ID string `json:"id"`
	// Values maps field names to their JSON values; fields the user left
	// empty are absent. Nil when Dismissed.
	Values map[string]json.RawMessage `json:"values,omitempty"`
	// Dismissed says the user declined to answer.
	Dismissed bool `json:"dismissed,omitempty"`
}

// DecodeUserInputResponse parses a user-input response strictly.
func DecodeUserInputResponse(data []byte) (*UserInputResponse, error) {
	o, err := parseObject(data, "")
	if err != nil {
		return nil, err
	}
	r := &UserInputResponse{}
	if r.ID, err = o.nonEmpty("id"); err != nil {
		return nil, err
	}
	if r.Dismissed, err = o.boolean("dismissed"); err != nil {
		return nil, err
	}
	if r.Values, err = o.valueMap("values"); err != nil {
		return nil, err
	}
	if r.Dismissed && len(r.Values) > 0 {
		return nil, &FieldError{Field: "values", Problem: "must be absent when dismissed is true"}
	}
	return r, nil
}

// valueMap reads an optional member that is an object of JSON values.
func (o *object) valueMap(name string) (map[string]json.RawMessage, error) {
	v, ok := o.raw(name)
	if !ok {
		return nil, nil
	}
	if jsonKind(v) != "object" {
		return nil, o.wrongType(name, "a JSON object", v)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(v, &m); err != nil {
		return nil, o.wrongType(name, "a JSON object", v)
	}
	for k, val := range m {
		m[k] = compactJSON(val)
	}
	return m, nil
}

func decodeUserInput(o *object, groupID string) (*UserInput, error) {
	var err error
	u := &UserInput{GroupID: groupID}
	if u.ID, err = o.nonEmpty("id"); err != nil {
		return nil, err
	}
	if u.CallID, err = o.str("call_id", false); err != nil {
		return nil, err
	}
	if u.Prompt, err = o.str("prompt", true); err != nil {
		return nil, err
	}
	if len(u.Prompt) > MaxPromptBytes {
		return nil, &FieldError{Field: "prompt", Problem: fmt.Sprintf("is %d bytes, over the limit of %d", len(u.Prompt), MaxPromptBytes)}
	}
	items, ok, err := o.array("fields")
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, o.missing("fields")
	}
	for i, raw := range items {
		f, err := decodeInputField(raw, fmt.Sprintf("fields[%d]", i))
		if err != nil {
			return nil, err
		}
		u.Fields = append(u.Fields, f)
	}
	if err := ValidateInputFields(u.Fields); err != nil {
		return nil, err
	}
	if u.ResponseURL, err = o.nonEmpty("response_url"); err != nil {
		return nil, err
	}
	return u, nil
}

func decodeInputField(raw json.RawMessage, path string) (InputField, error) {
	var f InputField
	o, err := parseObject(raw, path)
	if err != nil {
		return f, err
	}
	if f.Name, err = o.nonEmpty("name"); err != nil {
		return f, err
	}
	if f.Title, err = o.str("title", false); err != nil {
		return f, err
	}
	if f.Description, err = o.str("description", false); err != nil {
		return f, err
	}
	t, err := o.nonEmpty("type")
	if err != nil {
		return f, err
	}
	f.Type = InputType(t)
	if f.Required, err = o.boolean("required"); err != nil {
		return f, err
	}
	if d, ok := o.raw("default"); ok {
		f.Default = compactJSON(d)
	}
	if f.Options, err = o.strings("options", false); err != nil {
		return f, err
	}
	for _, bound := range []struct {
		name string
		dst  **int
	}{{"min_length", &f.MinLength}, {"max_length", &f.MaxLength}} {
		n, ok, err := o.integer(bound.name, false)
		if err != nil {
			return f, err
		}
		if ok {
			*bound.dst = &n
		}
	}
	if f.Format, err = o.str("format", false); err != nil {
		return f, err
	}
	for _, bound := range []struct {
		name string
		dst  **float64
	}{{"minimum", &f.Minimum}, {"maximum", &f.Maximum}} {
		v, ok := o.raw(bound.name)
		if !ok {
			continue
		}
		var x float64
		if err := json.Unmarshal(v, &x); err != nil {
			return f, o.wrongType(bound.name, "a number", v)
		}
		*bound.dst = &x
	}
	return f, nil
}

var inputNameRE = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)

// ValidateInputFields checks a form: at least one field and at most
// MaxInputFields, names valid and unique, known types, options only on
// enums, bounds that fit the type, and defaults that are valid values.
// Its errors are *FieldError naming fields[i].
func ValidateInputFields(fields []InputField) error {
	switch {
	case len(fields) == 0:
		return &FieldError{Field: "fields", Problem: "must contain at least one field"}
	case len(fields) > MaxInputFields:
		return &FieldError{Field: "fields", Problem: fmt.Sprintf("has %d fields, over the limit of %d", len(fields), MaxInputFields)}
	}
	seen := map[string]bool{}
	for i, f := range fields {
		path := fmt.Sprintf("fields[%d]", i)
		bad := func(member, problem string) error {
			return &FieldError{Field: path + "." + member, Problem: problem}
		}
		if !inputNameRE.MatchString(f.Name) {
			return bad("name", fmt.Sprintf("%q is not a field name; use 1 to 64 letters, digits, '_', '-' or '.'", f.Name))
		}
		if seen[f.Name] {
			return bad("name", fmt.Sprintf("%q is used by an earlier field; names must be unique", f.Name))
		}
		seen[f.Name] = true
		if len(f.Title)+len(f.Description) > MaxPromptBytes {
			return bad("description", fmt.Sprintf("title and description are over the limit of %d bytes", MaxPromptBytes))
		}
		switch f.Type {
		case InputString, InputNumber, InputInteger, InputBoolean:
			if len(f.Options) > 0 {
				return bad("options", "only enum fields have options")
			}
		case InputEnum:
			if len(f.Options) == 0 {
				return bad("options", "an enum field needs at least one option")
			}
			if len(f.Options) > MaxChoices {
				return bad("options", fmt.Sprintf("has %d options, over the limit of %d", len(f.Options), MaxChoices))
			}
		default:
			return bad("type", fmt.Sprintf("unknown field type %q; want string, number, integer, boolean or enum", f.Type))
		}
		if f.Type != InputString && (f.MinLength != nil || f.MaxLength != nil || f.Format != "") {
			return bad("type", "min_length, max_length and format apply to string fields only")
		}
		if f.Type != InputNumber && f.Type != InputInteger && (f.Minimum != nil || f.Maximum != nil) {
			return bad("type", "minimum and maximum apply to number and integer fields only")
		}
		if (f.MinLength != nil && *f.MinLength < 0) || (f.MaxLength != nil && *f.MaxLength < 0) {
			return bad("min_length", "lengths must not be negative")
		}
		if f.MinLength != nil && f.MaxLength != nil && *f.MinLength > *f.MaxLength {
			return bad("min_length", fmt.Sprintf("%d is over max_length %d", *f.MinLength, *f.MaxLength))
		}
		if f.Minimum != nil && f.Maximum != nil && *f.Minimum > *f.Maximum {
			return bad("minimum", fmt.Sprintf("%g is over maximum %g", *f.Minimum, *f.Maximum))
		}
		switch f.Format {
		case "", FormatEmail, FormatURI, FormatDate, FormatDateTime:
		default:
			return bad("format", fmt.Sprintf("unknown format %q; want email, uri, date or date-time", f.Format))
		}
		if len(f.Default) > 0 {
			if err := f.Check(f.Default); err != nil {
				return bad("default", err.Error())
			}
		}
	}
	return nil
}

// CheckInputValues checks the values of an answer against the form:
// every name is a field, every required field has a value, and each
// value is of its field's type and within its bounds. Its errors are
// *FieldError naming values.NAME.
func CheckInputValues(fields []InputField, values map[string]json.RawMessage) error {
	byName := make(map[string]*InputField, len(fields))
	for i := range fields {
		byName[fields[i].Name] = &fields[i]
	}
	for name, v := range values {
		f := byName[name]
		if f == nil {
			return &FieldError{Field: "values." + name, Problem: "the form has no such field"}
		}
		if err := f.Check(v); err != nil {
			return &FieldError{Field: "values." + name, Problem: err.Error()}
		}
	}
	for _, f := range fields {
		if _, ok := values[f.Name]; f.Required && !ok {
			return &FieldError{Field: "values." + f.Name, Problem: "is required"}
		}
	}
	return nil
}

// Check reports whether v is a valid value of the field.
func (f *InputField) Check(v json.RawMessage) error {
	v = bytes.TrimSpace(v)
	if len(v) > MaxInputValueBytes {
		return fmt.Errorf("is %d bytes, over the limit of %d", len(v), MaxInputValueBytes)
	}
	switch f.Type {
	case InputString, InputEnum:
		var s string
		if jsonKind(v) != "string" || json.Unmarshal(v, &s) != nil {
			return fmt.Errorf("must be a string, got %s", jsonKind(v))
		}
		if f.Type == InputEnum {
			for _, o := range f.Options {
				if o == s {
					return nil
				}
			}
			return fmt.Errorf("%q is not one of the options %s", s, strings.Join(quoteAll(f.Options), ", "))
		}
		n := utf8.RuneCountInString(s)
		if f.MinLength != nil && n < *f.MinLength {
			return fmt.Errorf("is %d characters; at least %d are needed", n, *f.MinLength)
		}
		if f.MaxLength != nil && n > *f.MaxLength {
			return fmt.Errorf("is %d characters; at most %d are allowed", n, *f.MaxLength)
		}
		return checkFormat(f.Format, s)
	case InputNumber, InputInteger:
		var x float64
		if jsonKind(v) != "number" || json.Unmarshal(v, &x) != nil {
			return fmt.Errorf("must be a number, got %s", jsonKind(v))
		}
		if f.Type == InputInteger && x != math.Trunc(x) {
			return fmt.Errorf("must be a whole number, got %s", v)
		}
		if f.Minimum != nil && x < *f.Minimum {
			return fmt.Errorf("%s is below the minimum %g", v, *f.Minimum)
		}
		if f.Maximum != nil && x > *f.Maximum {
			return fmt.Errorf("%s is above the maximum %g", v, *f.Maximum)
		}
		return nil
	case InputBoolean:
		if jsonKind(v) != "boolean" {
			return fmt.Errorf("must be true or false, got %s", jsonKind(v))
		}
		return nil
	}
	return fmt.Errorf("field type %q is unknown", f.Type)
}

func checkFormat(format, s string) error {
	switch format {
	case FormatEmail:
		if a, err := mail.ParseAddress(s); err != nil || a.Address != s {
			return fmt.Errorf("%q is not an email address such as name@example.com", s)
		}
	case FormatURI:
		if u, err := url.Parse(s); err != nil || u.Scheme == "" || (u.Host == "" && u.Opaque == "") {
			return fmt.Errorf("%q is not an absolute URI such as https://example.com/", s)
		}
	case FormatDate:
		if _, err := time.Parse(time.DateOnly, s); err != nil {
			return fmt.Errorf("%q is not a date in the form 2006-01-02", s)
		}
	case FormatDateTime:
		if _, err := time.Parse(time.RFC3339, s); err != nil {
			return fmt.Errorf("%q is not a date and time in RFC 3339 form, such as 2006-01-02T15:04:05Z", s)
		}
	}
	return nil
}

func quoteAll(list []string) []string {
	out := make([]string, len(list))
	for i, s := range list {
		out[i] = fmt.Sprintf("%q", s)
	}
	return out
}

// HasExtension reports whether the runtime that sent the invocation
// listed the extension name (such as ExtensionUserInput).
func (inv *Invocation) HasExtension(name string) bool {
	for _, e := range inv.Extensions {
		if e == name {
			return true
		}
	}
	return false
}
