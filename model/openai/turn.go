package openai

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/gorap/gorap/internal/jsonenc"
	"github.com/gorap/gorap/model"
)

// Encoding turns without the SDK's types. Building
// p.messages(t) and marshalling it took the SDK's reflection-driven
// encoder through four levels of union and parameter types for every
// message; appendTurn writes the very bytes that path gives, straight from
// the turn. The SDK's encoder, a patched copy of encoding/json, has three
// habits the code below copies: fields come in the order its structs
// declare them, fields that are zero are left out (omitzero), and strings
// are escaped as encoding/json escapes them except that <, > and & are
// left as they are. TestAppendTurnAgreesWithSDK and FuzzAppendTurn compare
// the two encodings; TestWireCacheSendsFromScratchBytes compares whole
// request bodies.

// appendTurn appends the messages of turn t, each followed by a comma,
// exactly as p.messages(t) marshals through the SDK. On error b is
// returned as it was.
func (p *Provider) appendTurn(b []byte, t model.Turn) ([]byte, error) {
	if t.Role == model.RoleAssistant {
		return appendAssistant(b, t)
	}
	return p.appendUser(b, t), nil
}

// appendAssistant appends an assistant message: its text, then its tool
// calls (ChatCompletionAssistantMessageParam: content, tool_calls, role).
func appendAssistant(b []byte, t model.Turn) ([]byte, error) {
	start := len(b)
	b = append(b, '{')
	if t.Text != "" {
		b = append(b, `"content":`...)
		b = appendJSONString(b, t.Text)
		b = append(b, ',')
	}
	if len(t.ToolCalls) > 0 {
		b = append(b, `"tool_calls":[`...)
		for j, c := range t.ToolCalls {
			// As messages does with strings.TrimSpace, but on the bytes,
			// which spares a copy: both trim the same Unicode spaces.
			args := bytes.TrimSpace(c.Arguments)
			if len(args) == 0 {
				args = emptyArgs
			}
			if !json.Valid(args) {
				return b[:start], fmt.Errorf("tool call %d (id %s, tool %s): arguments are not valid JSON", j, c.ID, c.Name)
			}
			if j > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"id":`...)
			b = appendJSONString(b, c.ID)
			b = append(b, `,"function":{"arguments":`...)
			b = appendJSONString(b, args) // a string holding the JSON, as the API wants
			b = append(b, `,"name":`...)
			b = appendJSONString(b, wireName(c.Name))
			b = append(b, `},"type":"function"}`...)
		}
		b = append(b, `],`...)
	}
	return append(b, `"role":"assistant"},`...), nil
}

// emptyArgs stands for arguments that are empty or only white space.
var emptyArgs = []byte(`{}`)

// appendUser appends what a user turn becomes: one tool message per tool
// result, then one user message for the images of those results and the
// turn's own content, if there is any.
func (p *Provider) appendUser(b []byte, t model.Turn) []byte {
	// The tool messages (ChatCompletionToolMessageParam: content,
	// tool_call_id, role). Their text is the pieces messages joins with
	// "\n", escaped piece by piece: every separator is ASCII, so escaping
	// the pieces one after another gives the bytes of escaping the joined
	// string (an invalid UTF-8 sequence cannot run across a separator).
	n := 0 // images attached so far, numbered from 1 across the turn
	var one [1]model.ContentPart
	for _, r := range t.ToolResults {
		b = append(b, `{"content":"`...)
		pieces := 0
		sep := func() {
			if pieces > 0 {
				b = append(b, `\n`...)
			}
			pieces++
		}
		if r.IsError {
			sep()
			b = append(b, "Error (reported by the tool):"...)
		}
		for _, part := range resultParts(r, &one) {
			switch {
			case part.Type == "image" && p.attachable(part):
				n++
				sep()
				b = append(b, "[image "...)
				b = strconv.AppendInt(b, int64(n), 10)
				b = append(b, ": attached in the next user message]"...)
			case part.Type == "image":
				sep()
				b = appendEscaped(b, p.placeholder(part))
			case part.Text != "":
				sep()
				b = appendEscaped(b, part.Text)
			}
		}
		if pieces == 0 {
			b = append(b, "(the tool returned no output)"...)
		}
		b = append(b, `","tool_call_id":`...)
		b = appendJSONString(b, r.CallID)
		b = append(b, `,"role":"tool"},`...)
	}

	// The user message (ChatCompletionUserMessageParam: content, role):
	// an array of parts when there is an image to attach, else the texts
	// joined by blank lines as one string.
	attach := n > 0
	text := false
	for _, part := range t.Content {
		switch {
		case part.Type == "image" && p.attachable(part):
			attach = true
		case part.Type == "image" || part.Text != "":
			text = true
		}
	}
	switch {
	case attach:
		b = append(b, `{"content":[`...)
		first := true
		sep := func() {
			if !first {
				b = append(b, ',')
			}
			first = false
		}
		n = 0
		for _, r := range t.ToolResults {
			for _, part := range resultParts(r, &one) {
				if part.Type != "image" || !p.attachable(part) {
					continue
				}
				n++
				sep()
				b = append(b, `{"text":"Image `...)
				b = strconv.AppendInt(b, int64(n), 10)
				b = append(b, `, from the result of tool call `...)
				b = appendEscaped(b, r.CallID)
				b = append(b, `:","type":"text"},`...)
				b = appendImagePart(b, part)
			}
		}
		for _, part := range t.Content {
			switch {
			case part.Type == "image" && p.attachable(part):
				sep()
				b = appendImagePart(b, part)
			case part.Type == "image":
				sep()
				b = appendTextPart(b, p.placeholder(part))
			case part.Text != "":
				sep()
				b = appendTextPart(b, part.Text)
			}
		}
		b = append(b, `],"role":"user"},`...)
	case text:
		b = append(b, `{"content":"`...)
		first := true
		for _, part := range t.Content {
			var s string
			switch {
			case part.Type == "image":
				s = p.placeholder(part) // not attachable: attach is false
			case part.Text != "":
				s = part.Text
			default:
				continue
			}
			if !first {
				b = append(b, `\n\n`...)
			}
			first = false
			b = appendEscaped(b, s)
		}
		b = append(b, `","role":"user"},`...)
	}
	return b
}

// resultParts is r.Parts() without allocating, for a result that has only
// Text: one, the caller's, holds its part.
func resultParts(r model.ToolResult, one *[1]model.ContentPart) []model.ContentPart {
	if len(r.Content) > 0 {
		return r.Content
	}
	one[0] = model.ContentPart{Type: "text", Text: r.Text}
	return one[:]
}

// appendTextPart appends a text content part
// (ChatCompletionContentPartTextParam: text, type).
func appendTextPart(b []byte, text string) []byte {
	b = append(b, `{"text":`...)
	b = appendJSONString(b, text)
	return append(b, `,"type":"text"}`...)
}

// appendImagePart appends an image content part holding part's data as a
// data URL, as imagePart builds it (ChatCompletionContentPartImageParam:
// image_url, type; its image_url has no detail).
func appendImagePart(b []byte, part model.ContentPart) []byte {
	b = append(b, `{"image_url":{"url":"data:`...)
	b = appendEscaped(b, part.MediaType)
	b = append(b, ";base64,"...)
	b = appendEscaped(b, part.Data)
	return append(b, `"},"type":"image_url"}`...)
}

// appendSystem appends the system message for system, as
// sdk.SystemMessage(system) marshals (content, role), followed by a comma.
func appendSystem(b []byte, system string) []byte {
	b = append(b, `{"content":`...)
	b = appendJSONString(b, system)
	return append(b, `,"role":"system"},`...)
}

// appendJSONString appends s as a JSON string, escaped as the SDK's
// encoder (encoding/json with HTML escaping off) escapes strings: <, > and
// & are left as they are.
func appendJSONString[S string | []byte](b []byte, s S) []byte {
	return jsonenc.AppendString(b, s, false)
}

// appendEscaped is appendJSONString without the quotes.
func appendEscaped[S string | []byte](b []byte, s S) []byte {
	return jsonenc.AppendEscaped(b, s, false)
}
