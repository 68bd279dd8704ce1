package anthropic

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// Decoding stream events (issue 11 item 4). A completion's stream is a
// dozen small events, and encoding/json's reflection over the event struct
// was a third of the provider's own CPU. ssestream decodes each event with
// json.Unmarshal, which checks that the data is valid JSON before it calls
// event.UnmarshalJSON; UnmarshalJSON then walks the object once and keeps
// only the fields the accumulator reads, with the same results as
// encoding/json for every input (keys matched case-insensitively, a later
// duplicate key winning, null leaving a field alone, a value of the wrong
// type an error): TestEventDecodingAgreesWithEncodingJSON and
// FuzzEventDecoding compare the two.

// UnmarshalJSON decodes one stream event (see above).
func (e *event) UnmarshalJSON(data []byte) error {
	r := jsonReader{b: data}
	if r.null() {
		return r.end()
	}
	err := r.object(func(key []byte) error {
		switch {
		case keyIs(key, "type"):
			return r.kind(&e.Type)
		case keyIs(key, "index"):
			return r.int(&e.Index)
		case keyIs(key, "message"):
			return r.object(func(key []byte) error {
				switch {
				case keyIs(key, "stop_reason"):
					return r.str(&e.Message.StopReason)
				case keyIs(key, "usage"):
					return r.usage(&e.Message.Usage)
				}
				return r.skip()
			})
		case keyIs(key, "content_block"):
			cb := &e.ContentBlock
			return r.object(func(key []byte) error {
				switch {
				case keyIs(key, "type"):
					return r.kind(&cb.Type)
				case keyIs(key, "id"):
					return r.str(&cb.ID)
				case keyIs(key, "name"):
					return r.str(&cb.Name)
				case keyIs(key, "text"):
					return r.str(&cb.Text)
				}
				return r.skip()
			})
		case keyIs(key, "delta"):
			d := &e.Delta
			return r.object(func(key []byte) error {
				switch {
				case keyIs(key, "type"):
					return r.kind(&d.Type)
				case keyIs(key, "text"):
					return r.str(&d.Text)
				case keyIs(key, "partial_json"):
					return r.str(&d.PartialJSON)
				case keyIs(key, "stop_reason"):
					return r.kind(&d.StopReason)
				}
				return r.skip()
			})
		case keyIs(key, "usage"):
			return r.usage(&e.Usage)
		}
		return r.skip()
	})
	if err != nil {
		return err
	}
	return r.end()
}

// usage decodes an eventUsage object.
func (r *jsonReader) usage(u *eventUsage) error {
	return r.object(func(key []byte) error {
		switch {
		case keyIs(key, "input_tokens"):
			return r.int(&u.InputTokens)
		case keyIs(key, "output_tokens"):
			return r.int(&u.OutputTokens)
		case keyIs(key, "cache_read_input_tokens"):
			return r.int(&u.CacheReadInputTokens)
		case keyIs(key, "cache_creation_input_tokens"):
			return r.int(&u.CacheCreationInputTokens)
		}
		return r.skip()
	})
}

// keyIs reports whether an object key names field as encoding/json
// matches them: exactly, or else case-insensitively.
func keyIs(key []byte, field string) bool {
	return string(key) == field || bytes.EqualFold(key, []byte(field))
}

// maxDepth bounds the nesting of arrays and objects, as encoding/json
// does, so that no event can exhaust the stack.
const maxDepth = 10000

// jsonReader reads JSON values in place, from b[i:], checking that they
// are valid JSON.
type jsonReader struct {
	b     []byte
	i     int
	depth int
}

// end checks that nothing but white space follows.
func (r *jsonReader) end() error {
	if r.ws(); r.i != len(r.b) {
		return r.fail("data after the event")
	}
	return nil
}

// enter counts one level of nesting; leave undoes it.
func (r *jsonReader) enter() error {
	if r.depth++; r.depth > maxDepth {
		return r.fail("nested too deeply")
	}
	return nil
}

func (r *jsonReader) leave() { r.depth-- }

func (r *jsonReader) fail(what string) error {
	return fmt.Errorf("anthropic stream event: %s at byte %d", what, r.i)
}

// ws skips white space.
func (r *jsonReader) ws() {
	for r.i < len(r.b) {
		switch r.b[r.i] {
		case ' ', '\t', '\n', '\r':
			r.i++
		default:
			return
		}
	}
}

// peek returns the first byte of the next value (0 at the end).
func (r *jsonReader) peek() byte {
	r.ws()
	if r.i < len(r.b) {
		return r.b[r.i]
	}
	return 0
}

// null consumes a null and reports whether there was one.
func (r *jsonReader) null() bool {
	if r.peek() == 'n' && bytes.HasPrefix(r.b[r.i:], []byte("null")) {
		r.i += 4
		return true
	}
	return false
}

// object reads an object, calling member for each key with r at its value;
// member must consume the value. A null is no object and no error.
func (r *jsonReader) object(member func(key []byte) error) error {
	if r.null() {
		return nil
	}
	if r.peek() != '{' {
		return r.fail("not an object")
	}
	if err := r.enter(); err != nil {
		return err
	}
	defer r.leave()
	r.i++
	if r.peek() == '}' {
		r.i++
		return nil
	}
	for {
		if r.peek() != '"' {
			return r.fail("want an object key")
		}
		raw, plain, err := r.rawString()
		if err != nil {
			return err
		}
		key := raw[1 : len(raw)-1]
		if !plain {
			key = unquote(key)
		}
		if r.peek() != ':' {
			return r.fail("want a colon after an object key")
		}
		r.i++
		if err := member(key); err != nil {
			return err
		}
		switch r.peek() {
		case ',':
			r.i++
		case '}':
			r.i++
			return nil
		default:
			return r.fail("want a comma or the end of the object")
		}
	}
}

// rawString reads a string, returning it with its quotes; plain is true
// when its bytes are its value (no escapes, valid UTF-8).
func (r *jsonReader) rawString() (raw []byte, plain bool, err error) {
	start := r.i
	r.i++ // the opening quote
	plain = true
	for r.i < len(r.b) {
		c := r.b[r.i]
		switch {
		case c == '"':
			r.i++
			raw = r.b[start:r.i]
			if plain && !utf8.Valid(raw) {
				plain = false
			}
			return raw, plain, nil
		case c == '\\':
			plain = false
			if r.i+1 >= len(r.b) {
				return nil, false, r.fail("unterminated string")
			}
			switch r.b[r.i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				r.i += 2
			case 'u':
				if hex4(r.b[r.i+2:]) < 0 {
					return nil, false, r.fail("malformed \\u escape")
				}
				r.i += 6
			default:
				return nil, false, r.fail("unknown escape")
			}
		case c < 0x20:
			return nil, false, r.fail("control character in a string")
		default:
			r.i++
		}
	}
	return nil, false, r.fail("unterminated string")
}

// str reads a string into dst; null leaves dst alone.
func (r *jsonReader) str(dst *string) error {
	if r.null() {
		return nil
	}
	if r.peek() != '"' {
		return r.fail("not a string")
	}
	raw, plain, err := r.rawString()
	if err != nil {
		return err
	}
	if plain {
		*dst = string(raw[1 : len(raw)-1])
	} else {
		*dst = string(unquote(raw[1 : len(raw)-1]))
	}
	return nil
}

// kind reads a string that is usually one of the API's names for event,
// block, delta and stop kinds, without allocating for those; null leaves
// dst alone.
func (r *jsonReader) kind(dst *string) error {
	if r.peek() != '"' {
		return r.str(dst)
	}
	start := r.i
	raw, plain, err := r.rawString()
	if err != nil || !plain {
		r.i = start
		return r.str(dst)
	}
	switch v := raw[1 : len(raw)-1]; string(v) {
	case "message_start":
		*dst = "message_start"
	case "message_delta":
		*dst = "message_delta"
	case "message_stop":
		*dst = "message_stop"
	case "content_block_start":
		*dst = "content_block_start"
	case "content_block_delta":
		*dst = "content_block_delta"
	case "content_block_stop":
		*dst = "content_block_stop"
	case "text":
		*dst = "text"
	case "tool_use":
		*dst = "tool_use"
	case "text_delta":
		*dst = "text_delta"
	case "input_json_delta":
		*dst = "input_json_delta"
	case "end_turn":
		*dst = "end_turn"
	default:
		*dst = string(v)
	}
	return nil
}

// unquote decodes the inside of a string that rawString read, as
// encoding/json does: escapes decoded, a lone or broken surrogate and each
// byte that is not UTF-8 replaced by U+FFFD.
func unquote(s []byte) []byte {
	b := make([]byte, 0, len(s))
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '\\' && i+1 < len(s):
			e := s[i+1]
			i += 2
			switch e {
			case 'b':
				b = append(b, '\b')
			case 'f':
				b = append(b, '\f')
			case 'n':
				b = append(b, '\n')
			case 'r':
				b = append(b, '\r')
			case 't':
				b = append(b, '\t')
			case 'u':
				r := hex4(s[i:])
				if r < 0 {
					return b // not valid JSON: encoding/json refused it before
				}
				i += 4
				if utf16.IsSurrogate(r) {
					r2 := rune(-1)
					if i+6 <= len(s) && s[i] == '\\' && s[i+1] == 'u' {
						r2 = hex4(s[i+2:])
					}
					if d := utf16.DecodeRune(r, r2); d != utf8.RuneError {
						r = d
						i += 6
					} else {
						r = utf8.RuneError
					}
				}
				b = utf8.AppendRune(b, r)
			default: // '"', '\\', '/'
				b = append(b, e)
			}
		case c < utf8.RuneSelf:
			b = append(b, c)
			i++
		default:
			r, n := utf8.DecodeRune(s[i:])
			if r == utf8.RuneError && n == 1 {
				b = utf8.AppendRune(b, utf8.RuneError)
			} else {
				b = append(b, s[i:i+n]...)
			}
			i += n
		}
	}
	return b
}

// hex4 decodes the four hex digits at the start of s, or returns -1.
func hex4(s []byte) rune {
	if len(s) < 4 {
		return -1
	}
	var r rune
	for _, c := range s[:4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return -1
		}
		r = r<<4 | rune(c)
	}
	return r
}

// int reads an integer into dst; null leaves dst alone.
func (r *jsonReader) int(dst *int64) error {
	if r.null() {
		return nil
	}
	start := r.i
	if err := r.number(); err != nil {
		return err
	}
	n, err := strconv.ParseInt(string(r.b[start:r.i]), 10, 64)
	if err != nil {
		return fmt.Errorf("anthropic stream event: %s is not an integer", r.b[start:r.i])
	}
	*dst = n
	return nil
}

// number reads a number.
func (r *jsonReader) number() error {
	if c := r.peek(); c != '-' && (c < '0' || c > '9') {
		return r.fail("not a number")
	}
	start := r.i
	for r.i < len(r.b) && bytes.IndexByte([]byte("+-.0123456789eE"), r.b[r.i]) >= 0 {
		r.i++
	}
	if !json.Valid(r.b[start:r.i]) {
		return r.fail("malformed number")
	}
	return nil
}

// skip reads a value of any kind.
func (r *jsonReader) skip() error {
	switch c := r.peek(); {
	case c == '"':
		_, _, err := r.rawString()
		return err
	case c == '{':
		return r.object(func([]byte) error { return r.skip() })
	case c == '[':
		if err := r.enter(); err != nil {
			return err
		}
		defer r.leave()
		r.i++
		if r.peek() == ']' {
			r.i++
			return nil
		}
		for {
			if err := r.skip(); err != nil {
				return err
			}
			switch r.peek() {
			case ',':
				r.i++
			case ']':
				r.i++
				return nil
			default:
				return r.fail("want a comma or the end of the array")
			}
		}
	case c == 't', c == 'f', c == 'n':
		for _, lit := range []string{"true", "false", "null"} {
			if bytes.HasPrefix(r.b[r.i:], []byte(lit)) {
				r.i += len(lit)
				return nil
			}
		}
		return r.fail("unknown literal")
	default:
		return r.number()
	}
}
