package anthropic

import (
	"encoding/json"
	"strconv"

	sdk "github.com/anthropics/anthropic-sdk-go"
)

// marshalMessage encodes m exactly as the SDK does (json.Marshal(m)),
// without its reflection: the fields gorap sets are written by hand, in
// the SDK's order and with its escaping; a message using anything else
// goes to the SDK. TestWireCacheSendsFromScratchBytes holds the two equal.
func marshalMessage(m sdk.MessageParam) ([]byte, error) {
	if len(m.Content) == 0 || (m.Role != sdk.MessageParamRoleUser && m.Role != sdk.MessageParamRoleAssistant) {
		return json.Marshal(m)
	}
	b := make([]byte, 0, 256)
	b = append(b, `{"content":[`...)
	for i, c := range m.Content {
		if i > 0 {
			b = append(b, ',')
		}
		var ok bool
		if b, ok = appendBlock(b, c); !ok {
			return json.Marshal(m)
		}
	}
	b = append(b, `],"role":`...)
	b = appendString(b, string(m.Role))
	return append(b, '}'), nil
}

const cacheControlJSON = `"cache_control":{"type":"ephemeral"},`

func appendCacheControl(b []byte, cc sdk.CacheControlEphemeralParam) ([]byte, bool) {
	if cc == (sdk.CacheControlEphemeralParam{}) {
		return b, true
	}
	if cc != sdk.NewCacheControlEphemeralParam() {
		return b, false
	}
	return append(b, cacheControlJSON...), true
}

// appendBlock writes one content block; false means it uses a field this
// encoder does not know.
func appendBlock(b []byte, c sdk.ContentBlockParamUnion) ([]byte, bool) {
	ok := true
	switch {
	case c.OfText != nil:
		return appendText(b, c.OfText)
	case c.OfToolUse != nil:
		t := c.OfToolUse
		raw, isRaw := t.Input.(json.RawMessage)
		if !isRaw || t.Type != "" || !sameJSONFields(t) {
			return b, false
		}
		in, err := json.Marshal(raw) // compacted and escaped as the SDK does
		if err != nil {
			return b, false
		}
		b = append(b, `{"id":`...)
		b = appendString(b, t.ID)
		b = append(b, `,"input":`...)
		b = append(b, in...)
		b = append(b, `,"name":`...)
		b = appendString(b, t.Name)
		b = append(b, ',')
		if b, ok = appendCacheControl(b, t.CacheControl); !ok {
			return b, false
		}
		return append(b, `"type":"tool_use"}`...), true
	case c.OfToolResult != nil:
		r := c.OfToolResult
		if r.Type != "" || r.ExtraFields() != nil {
			return b, false
		}
		b = append(b, `{"tool_use_id":`...)
		b = appendString(b, r.ToolUseID)
		b = append(b, ',')
		if r.IsError.Valid() {
			b = append(b, `"is_error":`...)
			b = strconv.AppendBool(b, r.IsError.Value)
			b = append(b, ',')
		}
		if b, ok = appendCacheControl(b, r.CacheControl); !ok {
			return b, false
		}
		if len(r.Content) > 0 {
			b = append(b, `"content":[`...)
			for i, part := range r.Content {
				if i > 0 {
					b = append(b, ',')
				}
				switch {
				case part.OfText != nil:
					b, ok = appendText(b, part.OfText)
				case part.OfImage != nil:
					b, ok = appendImage(b, part.OfImage)
				default:
					ok = false
				}
				if !ok {
					return b, false
				}
			}
			b = append(b, `],`...)
		}
		return append(b, `"type":"tool_result"}`...), true
	case c.OfImage != nil:
		return appendImage(b, c.OfImage)
	}
	return b, false
}

func appendText(b []byte, t *sdk.TextBlockParam) ([]byte, bool) {
	if t.Type != "" || len(t.Citations) > 0 || t.ExtraFields() != nil {
		return b, false
	}
	b = append(b, `{"text":`...)
	b = appendString(b, t.Text)
	b = append(b, ',')
	b, ok := appendCacheControl(b, t.CacheControl)
	return append(b, `"type":"text"}`...), ok
}

func appendImage(b []byte, img *sdk.ImageBlockParam) ([]byte, bool) {
	src := img.Source.OfBase64
	if src == nil || img.Type != "" || src.Type != "" || img.ExtraFields() != nil {
		return b, false
	}
	b = append(b, `{"source":{"data":`...)
	b = appendString(b, src.Data)
	b = append(b, `,"media_type":`...)
	b = appendString(b, string(src.MediaType))
	b = append(b, `,"type":"base64"},`...)
	b, ok := appendCacheControl(b, img.CacheControl)
	return append(b, `"type":"image"}`...), ok
}

func sameJSONFields(t *sdk.ToolUseBlockParam) bool { return t.ExtraFields() == nil }

// appendString writes s as a JSON string escaped as encoding/json does
// (HTML characters included).
func appendString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x80 || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			enc, _ := json.Marshal(s)
			return append(b, enc...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}
