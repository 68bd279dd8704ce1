package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/gorap/gorap/rap"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Form elicitation as a user input: when the runtime's invocation lists
// the user_input gorap extension, an elicitation form whose fields are
// strings, numbers, integers, booleans or string enums (MCP's restricted
// schema) is asked as one RAP user_input with the same fields, and the
// values the user entered return to the server as the content. Optional
// fields of other kinds (multi-select arrays) are left out of the form,
// and the tool result says so. Otherwise (or for a form whose required
// fields the extension cannot carry) the bridge asks multiple-choice
// questions or declines, as elicit.go says.

// elicitInput asks the form of p as a user_input. ok is false when the
// form does not fit the extension's fields; the caller then goes on as
// without it.
func (b *Bridge) elicitInput(ctx context.Context, f *inflight, p *sdk.ElicitParams) (res *sdk.ElicitResult, ok bool, err error) {
	fields, left, why := inputFields(p.RequestedSchema)
	if why != "" {
		b.log.Debug("mcp bridge: elicitation form not asked as a user input", "reason", why)
		return nil, false, nil
	}
	f.ask.Lock()
	defer f.ask.Unlock()
	askCtx, stop := context.WithCancel(ctx)
	defer stop()
	defer context.AfterFunc(f.ctx, stop)()
	a, err := f.call.AskInput(askCtx, truncate(strings.TrimSpace(p.Message), rap.MaxPromptBytes), fields, 0)
	if err != nil {
		return nil, true, fmt.Errorf("asking the user: %w", err)
	}
	if a.Dismissed {
		f.note(fmt.Sprintf("The user declined the MCP server's request for input (%q).", p.Message))
		return &sdk.ElicitResult{Action: "decline"}, true, nil
	}
	if len(left) > 0 {
		f.note(fmt.Sprintf("The form the user filled in for the MCP server %q left out its optional fields %s, which the runtime's forms cannot ask for.", b.opts.Name, strings.Join(left, ", ")))
	}
	content := make(map[string]any, len(a.Values))
	for name, raw := range a.Values {
		var v any
		if err := json.Unmarshal(raw, &v); err != nil {
			return nil, true, fmt.Errorf("the answer's value of %q: %w", name, err)
		}
		content[name] = v
	}
	return &sdk.ElicitResult{Action: "accept", Content: content}, true, nil
}

// inputFields returns the fields of an elicitation schema as user_input
// fields (required fields first, then by name) and the names of the
// optional fields it left out, or says why it cannot.
func inputFields(schema any) (fields []rap.InputField, left []string, why string) {
	raw, err := json.Marshal(schema)
	if err != nil || schema == nil {
		return nil, nil, "no form"
	}
	var s struct {
		Properties map[string]struct {
			Type        string          `json:"type"`
			Title       string          `json:"title"`
			Description string          `json:"description"`
			Default     json.RawMessage `json:"default"`
			Enum        []any           `json:"enum"`
			OneOf       []struct {
				Const any `json:"const"`
			} `json:"oneOf"`
			MinLength *int     `json:"minLength"`
			MaxLength *int     `json:"maxLength"`
			Format    string   `json:"format"`
			Minimum   *float64 `json:"minimum"`
			Maximum   *float64 `json:"maximum"`
		} `json:"properties"`
		Required []string `json:"required"`
	}
	if err := json.Unmarshal(raw, &s); err != nil || len(s.Properties) == 0 {
		return nil, nil, "a form without fields"
	}
	required := map[string]bool{}
	for _, r := range s.Required {
		required[r] = true
	}
	names := make([]string, 0, len(s.Properties))
	for n := range s.Properties {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool {
		if required[names[i]] != required[names[j]] {
			return required[names[i]]
		}
		return names[i] < names[j]
	})
	for _, n := range names {
		p := s.Properties[n]
		f := rap.InputField{Name: n, Title: p.Title, Description: p.Description, Required: required[n], Default: p.Default}
		var options []any
		switch {
		case len(p.Enum) > 0:
			options = p.Enum
		case len(p.OneOf) > 0:
			for _, o := range p.OneOf {
				options = append(options, o.Const)
			}
		}
		switch {
		case options != nil:
			f.Type = rap.InputEnum
			for _, o := range options {
				str, ok := o.(string)
				if !ok {
					return nil, nil, fmt.Sprintf("the field %q has an option that is not a string", n)
				}
				f.Options = append(f.Options, str)
			}
		case p.Type == "string":
			f.Type, f.MinLength, f.MaxLength = rap.InputString, p.MinLength, p.MaxLength
			switch p.Format {
			case "", rap.FormatEmail, rap.FormatURI, rap.FormatDate, rap.FormatDateTime:
				f.Format = p.Format
			default:
				f.Format = "" // a format the form cannot check: the server checks it
			}
		case p.Type == "number" || p.Type == "integer":
			f.Type, f.Minimum, f.Maximum = rap.InputType(p.Type), p.Minimum, p.Maximum
		case p.Type == "boolean":
			f.Type = rap.InputBoolean
		case !f.Required:
			left = append(left, n)
			continue
		default:
			return nil, nil, fmt.Sprintf("the required field %q of type %q", n, p.Type)
		}
		fields = append(fields, f)
	}
	if err := rap.ValidateInputFields(fields); err != nil {
		return nil, nil, err.Error()
	}
	return fields, left, ""
}
