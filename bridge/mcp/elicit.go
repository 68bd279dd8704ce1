package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/gorap/gorap/rap"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Form elicitation (first part): an MCP server that asks
// the user for input while a tool call runs gets its answer through RAP
// user_choice messages, one per field, when every field of the form is an
// enum or a boolean. Other forms are declined and the tool result says
// why, unless the runtime accepts user inputs (elicit_input.go). A
// URL-mode elicitation becomes a RAP oauth message with the URL.

// declineChoice is the last choice of every question; it is the default,
// so that a dismissal declines.
const declineChoice = "Decline"

// inflight is one RAP call whose tools/call is running.
type inflight struct {
	call *rap.Call
	ctx  context.Context // the call's context

	ask   sync.Mutex // one question at a time per call (RAP UC-1)
	mu    sync.Mutex
	notes []string // said in the tool result, after the server's content
}

func (f *inflight) note(s string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.notes = append(f.notes, s)
}

func (f *inflight) takeNotes() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.notes
}

type inflightKey struct{}

// calls tracks the bridge's calls in flight, for server requests that
// carry no reference to the call they belong to.
type calls struct {
	mu sync.Mutex
	m  map[*inflight]struct{}
}

func (cs *calls) add(f *inflight) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.m == nil {
		cs.m = map[*inflight]struct{}{}
	}
	cs.m[f] = struct{}{}
}

func (cs *calls) remove(f *inflight) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	delete(cs.m, f)
}

// only returns the one call in flight, or nil when there are none or
// several.
func (cs *calls) only() *inflight {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if len(cs.m) != 1 {
		return nil
	}
	for f := range cs.m {
		return f
	}
	return nil
}

// elicit answers an MCP elicitation. With the 2026-07-28 protocol
// (multi round-trip requests) the SDK calls it under the tools/call's own
// context, which names the RAP call. An older server sends
// elicitation/create on its own; the bridge then attributes it to the one
// call in flight, and declines it when several calls run at once.
func (b *Bridge) elicit(ctx context.Context, req *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
	p := req.Params
	f, _ := ctx.Value(inflightKey{}).(*inflight)
	if f == nil {
		f = b.inflight.only()
	}
	if f == nil {
		b.log.Warn("mcp bridge: declined an elicitation that no single call in flight can answer", "message", p.Message)
		return &sdk.ElicitResult{Action: "decline"}, nil
	}
	if p.Mode == "url" {
		// The link goes to the user as a RAP oauth message (RAP OA-1);
		// the call stays pending until the server, told out of band that
		// the user finished, completes it. The URL is never logged.
		if err := f.call.RequestOAuth(ctx, p.URL); err != nil {
			f.note(fmt.Sprintf("The MCP server %q asked the user to open a link the bridge could not pass on (%v), so it was declined.", b.opts.Name, err))
			return &sdk.ElicitResult{Action: "decline"}, nil
		}
		return &sdk.ElicitResult{Action: "accept"}, nil
	}
	if f.call.Invocation.HasExtension(rap.ExtensionUserInput) {
		if res, ok, err := b.elicitInput(ctx, f, p); ok {
			return res, err
		}
	}
	fields, why := formFields(p.RequestedSchema)
	if why != "" {
		f.note(fmt.Sprintf("The MCP server %q asked the user for input (%q) with %s; the bridge can only ask multiple-choice questions, so it declined.", b.opts.Name, p.Message, why))
		return &sdk.ElicitResult{Action: "decline"}, nil
	}
	f.ask.Lock()
	defer f.ask.Unlock()
	askCtx, stop := context.WithCancel(ctx)
	defer stop()
	defer context.AfterFunc(f.ctx, stop)()
	content := map[string]any{}
	for _, fld := range fields {
		prompt := strings.TrimSpace(p.Message)
		if label := fld.label(); label != "" {
			prompt += "\n" + label
		}
		choices := append(append([]string(nil), fld.labels...), declineChoice)
		i, err := f.call.AskUser(askCtx, truncate(prompt, rap.MaxPromptBytes-8), choices, len(choices)-1, 0)
		if err != nil {
			return nil, fmt.Errorf("asking the user: %w", err)
		}
		if i == len(choices)-1 {
			f.note(fmt.Sprintf("The user declined the MCP server's request for input (%q).", p.Message))
			return &sdk.ElicitResult{Action: "decline"}, nil
		}
		content[fld.name] = fld.values[i]
	}
	return &sdk.ElicitResult{Action: "accept", Content: content}, nil
}

// formField is one multiple-choice field of an elicitation form.
type formField struct {
	name, title, description string
	labels                   []string // what the user sees
	values                   []any    // what the server gets
}

func (f formField) label() string {
	t := f.title
	if t == "" {
		t = f.name
	}
	if f.description != "" {
		t += ": " + f.description
	}
	return t
}

// formFields returns the fields of an elicitation schema when every one
// is an enum or a boolean (required fields first, then by name), or says
// what makes it unsupported.
func formFields(schema any) ([]formField, string) {
	raw, err := json.Marshal(schema)
	if err != nil || schema == nil {
		return nil, "no form"
	}
	var s struct {
		Properties map[string]struct {
			Type        string   `json:"type"`
			Title       string   `json:"title"`
			Description string   `json:"description"`
			Enum        []any    `json:"enum"`
			EnumNames   []string `json:"enumNames"`
			OneOf       []struct {
				Const any    `json:"const"`
				Title string `json:"title"`
			} `json:"oneOf"`
		} `json:"properties"`
		Required []string `json:"required"`
	}
	if err := json.Unmarshal(raw, &s); err != nil || len(s.Properties) == 0 {
		return nil, "a form without fields"
	}
	names := make([]string, 0, len(s.Properties))
	for n := range s.Properties {
		names = append(names, n)
	}
	req := map[string]int{}
	for i, r := range s.Required {
		req[r] = i + 1
	}
	sort.Slice(names, func(i, j int) bool {
		ri, rj := req[names[i]], req[names[j]]
		if (ri > 0) != (rj > 0) {
			return ri > 0
		}
		if ri != rj {
			return ri < rj
		}
		return names[i] < names[j]
	})
	var out []formField
	for _, n := range names {
		p := s.Properties[n]
		f := formField{name: n, title: p.Title, description: p.Description}
		switch {
		case p.Type == "boolean":
			f.labels, f.values = []string{"Yes", "No"}, []any{true, false}
		case len(p.Enum) > 0:
			for i, v := range p.Enum {
				label := fmt.Sprint(v)
				if i < len(p.EnumNames) && p.EnumNames[i] != "" {
					label = p.EnumNames[i]
				}
				f.labels, f.values = append(f.labels, label), append(f.values, v)
			}
		case len(p.OneOf) > 0:
			for _, o := range p.OneOf {
				label := o.Title
				if label == "" {
					label = fmt.Sprint(o.Const)
				}
				f.labels, f.values = append(f.labels, label), append(f.values, o.Const)
			}
		default:
			t := p.Type
			if t == "" {
				t = "untyped"
			}
			return nil, fmt.Sprintf("the free-form %s field %q", t, n)
		}
		if len(f.labels)+1 > rap.MaxChoices {
			return nil, fmt.Sprintf("the field %q, which has more choices than RAP allows", n)
		}
		out = append(out, f)
	}
	return out, ""
}
