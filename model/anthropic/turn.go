package anthropic

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/gorap/gorap/internal/jsonenc"
	"github.com/gorap/gorap/model"
)

// appendTurn appends the encoding of turn t: the bytes json.Marshal gives
// for p.message(t), written straight from the turn without building the
// SDK's parameter types (TestWireCacheSendsFromScratchBytes
// and TestAppendTurnAgreesWithSDK hold the two equal). It also returns
// where in the appended bytes a cache_control goes to make the turn a
// cache breakpoint (setCacheControl's block, the last), or -1 when the
// turn has no block; such a turn is encoded by the SDK's types instead.
func (p *Provider) appendTurn(b []byte, t model.Turn) ([]byte, int, error) {
	start := len(b)
	at := -1
	b = append(b, `{"content":[`...)
	first := true
	sep := func() {
		if !first {
			b = append(b, ',')
		}
		first = false
	}
	if t.Role == model.RoleAssistant {
		if t.Text != "" {
			sep()
			b, at = appendTextBlock(b, t.Text)
		}
		for j, c := range t.ToolCalls {
			args := []byte(c.Arguments)
			if len(bytes.TrimSpace(args)) == 0 {
				args = []byte(`{}`)
			}
			if !isJSONObject(args) {
				return b[:start], -1, fmt.Errorf("tool call %d (id %s, tool %s): arguments are not a JSON object", j, c.ID, c.Name)
			}
			sep()
			b = append(b, `{"id":`...)
			b = appendJSONString(b, c.ID)
			b = append(b, `,"input":`...)
			b = appendCompactJSON(b, args)
			b = append(b, `,"name":`...)
			b = appendJSONString(b, c.Name)
			b = append(b, ',')
			at = len(b)
			b = append(b, `"type":"tool_use"}`...)
		}
	} else {
		for _, r := range t.ToolResults {
			sep()
			b = append(b, `{"tool_use_id":`...)
			b = appendJSONString(b, r.CallID)
			b = append(b, ',')
			if r.IsError {
				b = append(b, `"is_error":true,`...)
			}
			at = len(b) // the cache_control goes before the content
			b = append(b, `"content":[`...)
			n := 0
			for _, part := range r.Parts() {
				switch {
				case part.Type == "image":
					if n > 0 {
						b = append(b, ',')
					}
					n++
					if p.imageOK(part) {
						b, _ = appendImageBlock(b, part)
					} else {
						b, _ = appendTextBlock(b, p.placeholder(part))
					}
				case part.Text != "":
					if n > 0 {
						b = append(b, ',')
					}
					n++
					b, _ = appendTextBlock(b, part.Text)
				}
			}
			if n == 0 {
				b = b[:at] // no content: the SDK leaves the field out
			} else {
				b = append(b, `],`...)
			}
			b = append(b, `"type":"tool_result"}`...)
		}
		for _, part := range t.Content {
			switch {
			case part.Type == "image":
				sep()
				if p.imageOK(part) {
					b, at = appendImageBlock(b, part)
				} else {
					b, at = appendTextBlock(b, p.placeholder(part))
				}
			case part.Text != "":
				sep()
				b, at = appendTextBlock(b, part.Text)
			}
		}
	}
	if first { // no block: the SDK's encoding of an empty message
		b = b[:start]
		m, err := p.message(t)
		if err != nil {
			return b, -1, err
		}
		enc, err := json.Marshal(m)
		return append(b, enc...), -1, err
	}
	b = append(b, `],"role":`...)
	if t.Role == model.RoleAssistant {
		b = append(b, `"assistant"}`...)
	} else {
		b = append(b, `"user"}`...)
	}
	return b, at - start, nil
}

// imageOK reports whether an image part goes to the API as an image (else
// as a placeholder text), as p.image decides.
func (p *Provider) imageOK(part model.ContentPart) bool {
	return p.images && anthropicImageTypes[part.MediaType] && part.Data != ""
}

// appendTextBlock appends a text block and returns where in b its
// cache_control would go.
func appendTextBlock(b []byte, text string) ([]byte, int) {
	b = append(b, `{"text":`...)
	b = appendJSONString(b, text)
	b = append(b, ',')
	at := len(b)
	return append(b, `"type":"text"}`...), at
}

// appendImageBlock appends a base64 image block and returns where in b its
// cache_control would go.
func appendImageBlock(b []byte, part model.ContentPart) ([]byte, int) {
	b = append(b, `{"source":{"data":`...)
	b = appendJSONString(b, part.Data)
	b = append(b, `,"media_type":`...)
	b = appendJSONString(b, part.MediaType)
	b = append(b, `,"type":"base64"},`...)
	at := len(b)
	return append(b, `"type":"image"}`...), at
}

// cacheControlJSON is a cache_control breakpoint as the SDK writes it
// inside a block, before the block's "type" (or a tool result's
// "content"); cacheControl is the same as bytes, to insert.
const cacheControlJSON = `"cache_control":{"type":"ephemeral"},`

var cacheControl = []byte(cacheControlJSON)

// withBreakpoint appends enc, a turn's encoding, with a cache_control
// inserted at at.
func withBreakpoint(b, enc []byte, at int) []byte {
	b = append(b, enc[:at]...)
	b = append(b, cacheControlJSON...)
	return append(b, enc[at:]...)
}

const hexDigits = "0123456789abcdef"

// appendJSONString appends s as a JSON string, escaped exactly as
// encoding/json escapes it (and so the SDK), the HTML characters <, > and
// & included.
func appendJSONString(b []byte, s string) []byte { return jsonenc.AppendString(b, s, true) }

// appendCompactJSON appends src, valid JSON, as json.Marshal writes a
// json.RawMessage: without the spaces between tokens, and with <, >, &,
// U+2028 and U+2029 escaped (they can only be inside strings).
func appendCompactJSON(b, src []byte) []byte {
	inString, escaped := false, false
	start := 0
	for i := 0; i < len(src); i++ {
		c := src[i]
		switch {
		case c == '<' || c == '>' || c == '&':
			b = append(b, src[start:i]...)
			b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			start = i + 1
		case c == 0xE2 && i+2 < len(src) && src[i+1] == 0x80 && src[i+2]&^1 == 0xA8:
			b = append(b, src[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[src[i+2]&0xF])
			i += 2
			start = i + 1
		case inString:
			if escaped {
				escaped = false
			} else if c == '\\' {
				escaped = true
			} else if c == '"' {
				inString = false
			}
		case c == '"':
			inString = true
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			b = append(b, src[start:i]...)
			start = i + 1
		}
	}
	return append(b, src[start:]...)
}
