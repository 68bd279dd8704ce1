// Package jsonwalk reads JSON values in place, in one pass, keeping only
// what the caller asks for and checking that the rest is valid JSON. It
// is for hot decoders that read a few fields of a large or frequent
// document (a model's stream events, a benchmark's stand-in for a model
// API), where encoding/json's reflection and its separate validation pass
// cost more than the work itself.
//
// Its results match encoding/json's for the fields read: object keys are
// compared as encoding/json matches them to struct fields (KeyIs), a later
// duplicate key overwrites an earlier one when the caller stores each,
// null leaves a destination alone, and strings are unescaped the same way
// (Unquote).
package jsonwalk

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// MaxDepth bounds the nesting of arrays and objects, as encoding/json
// does, so that no document can exhaust the stack.
const MaxDepth = 10000

// Reader reads one JSON document in place (see Reset).
type Reader struct {
	b     []byte
	i     int
	depth int
	what  string
}

// Reset makes r read b from its start; what names the document in errors
// ("anthropic stream event": "anthropic stream event: not an object at
// byte 0"). A Reader's zero value reads an empty document.
func (r *Reader) Reset(b []byte, what string) {
	*r = Reader{b: b, what: what}
}

// End checks that nothing but white space follows.
func (r *Reader) End() error {
	if r.ws(); r.i != len(r.b) {
		return r.Fail("data after the value")
	}
	return nil
}

// Fail returns an error naming the document, what is wrong and where.
func (r *Reader) Fail(what string) error {
	return fmt.Errorf("%s: %s at byte %d", r.what, what, r.i)
}

func (r *Reader) enter() error {
	if r.depth++; r.depth > MaxDepth {
		return r.Fail("nested too deeply")
	}
	return nil
}

func (r *Reader) leave() { r.depth-- }

// ws skips white space.
func (r *Reader) ws() {
	for r.i < len(r.b) {
		switch r.b[r.i] {
		case ' ', '\t', '\n', '\r':
			r.i++
		default:
			return
		}
	}
}

// Peek returns the first byte of the next value (0 at the end).
func (r *Reader) Peek() byte {
	r.ws()
	if r.i < len(r.b) {
		return r.b[r.i]
	}
	return 0
}

// Null consumes a null and reports whether there was one.
func (r *Reader) Null() bool {
	if r.Peek() == 'n' && bytes.HasPrefix(r.b[r.i:], []byte("null")) {
		r.i += 4
		return true
	}
	return false
}

// Object reads an object, calling member for each key (unescaped) with r
// at its value; member must consume the value. A null is no object and no
// error.
func (r *Reader) Object(member func(key []byte) error) error {
	if more, err := r.open('{', '}', "not an object"); !more {
		return err
	}
	defer r.leave()
	for {
		if r.Peek() != '"' {
			return r.Fail("want an object key")
		}
		raw, plain, err := r.RawString()
		if err != nil {
			return err
		}
		key := raw[1 : len(raw)-1]
		if !plain {
			key = Unquote(key)
		}
		if r.Peek() != ':' {
			return r.Fail("want a colon after an object key")
		}
		r.i++
		if err := member(key); err != nil {
			return err
		}
		switch r.Peek() {
		case ',':
			r.i++
		case '}':
			r.i++
			return nil
		default:
			return r.Fail("want a comma or the end of the object")
		}
	}
}

// open starts reading a container that begins with start and ends with
// end (an object or an array). It reports false, having read it whole,
// for a null or an empty container, and with the error notA when the
// value is another kind; otherwise r is at the first member and the caller
// must call r.leave once the container is read.
func (r *Reader) open(start, end byte, notA string) (bool, error) {
	if r.Null() {
		return false, nil
	}
	if r.Peek() != start {
		return false, r.Fail(notA)
	}
	if err := r.enter(); err != nil {
		return false, err
	}
	r.i++
	if r.Peek() == end {
		r.i++
		r.leave()
		return false, nil
	}
	return true, nil
}

// Array reads an array, calling elem with r at each element; elem must
// consume it. A null is no array and no error.
func (r *Reader) Array(elem func() error) error {
	if more, err := r.open('[', ']', "not an array"); !more {
		return err
	}
	defer r.leave()
	for {
		if err := elem(); err != nil {
			return err
		}
		switch r.Peek() {
		case ',':
			r.i++
		case ']':
			r.i++
			return nil
		default:
			return r.Fail("want a comma or the end of the array")
		}
	}
}

// RawString reads a string, returning it with its quotes; plain is true
// when its bytes are its value (no escapes, valid UTF-8). r must be at
// the opening quote (Peek() == '"').
func (r *Reader) RawString() (raw []byte, plain bool, err error) {
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
				return nil, false, r.Fail("unterminated string")
			}
			switch r.b[r.i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				r.i += 2
			case 'u':
				if hex4(r.b[r.i+2:]) < 0 {
					return nil, false, r.Fail("malformed \\u escape")
				}
				r.i += 6
			default:
				return nil, false, r.Fail("unknown escape")
			}
		case c < 0x20:
			return nil, false, r.Fail("control character in a string")
		default:
			r.i++
		}
	}
	return nil, false, r.Fail("unterminated string")
}

// Str reads a string into dst; null leaves dst alone.
func (r *Reader) Str(dst *string) error {
	return r.StrOf(dst, nil)
}

// StrOf reads a string into dst as Str does, without allocating when the
// string is one of known.
func (r *Reader) StrOf(dst *string, known []string) error {
	if r.Null() {
		return nil
	}
	if r.Peek() != '"' {
		return r.Fail("not a string")
	}
	raw, plain, err := r.RawString()
	if err != nil {
		return err
	}
	if !plain {
		*dst = string(Unquote(raw[1 : len(raw)-1]))
		return nil
	}
	v := raw[1 : len(raw)-1]
	for _, k := range known {
		if string(v) == k {
			*dst = k
			return nil
		}
	}
	*dst = string(v)
	return nil
}

// Bool reads true or false into dst; null leaves dst alone.
func (r *Reader) Bool(dst *bool) error {
	switch {
	case r.Null():
	case bytes.HasPrefix(r.b[r.i:], []byte("true")):
		*dst, r.i = true, r.i+4
	case bytes.HasPrefix(r.b[r.i:], []byte("false")):
		*dst, r.i = false, r.i+5
	default:
		return r.Fail("not a boolean")
	}
	return nil
}

// Int reads an integer into dst; null leaves dst alone.
func (r *Reader) Int(dst *int64) error {
	if r.Null() {
		return nil
	}
	start := r.i
	if err := r.Number(); err != nil {
		return err
	}
	end := r.i
	n, err := strconv.ParseInt(string(r.b[start:end]), 10, 64)
	if err != nil {
		r.i = start // the error names where the number starts
		return r.Fail(fmt.Sprintf("%s is not an integer", r.b[start:end]))
	}
	*dst = n
	return nil
}

// Number reads a number.
func (r *Reader) Number() error {
	if c := r.Peek(); c != '-' && (c < '0' || c > '9') {
		return r.Fail("not a number")
	}
	start := r.i
	for r.i < len(r.b) && bytes.IndexByte([]byte("+-.0123456789eE"), r.b[r.i]) >= 0 {
		r.i++
	}
	if !json.Valid(r.b[start:r.i]) {
		return r.Fail("malformed number")
	}
	return nil
}

// Skip reads a value of any kind.
func (r *Reader) Skip() error {
	switch c := r.Peek(); {
	case c == '"':
		_, _, err := r.RawString()
		return err
	case c == '{':
		return r.Object(func([]byte) error { return r.Skip() })
	case c == '[':
		return r.Array(r.Skip)
	case c == 't', c == 'f', c == 'n':
		for _, lit := range []string{"true", "false", "null"} {
			if bytes.HasPrefix(r.b[r.i:], []byte(lit)) {
				r.i += len(lit)
				return nil
			}
		}
		return r.Fail("unknown literal")
	default:
		return r.Number()
	}
}

// Offset returns how many bytes of the document the reader has read.
func (r *Reader) Offset() int { return r.i }

// Raw reads a value of any kind and returns its bytes as they are in the
// document: a slice of it, not a copy.
func (r *Reader) Raw() ([]byte, error) {
	r.ws()
	start := r.i
	if err := r.Skip(); err != nil {
		return nil, err
	}
	return r.b[start:r.i], nil
}

// KeyIs reports whether an object key names field as encoding/json
// matches them: exactly, or else case-insensitively.
func KeyIs(key []byte, field string) bool {
	return string(key) == field || bytes.EqualFold(key, []byte(field))
}

// Unquote decodes the inside of a string that RawString read, as
// encoding/json does: escapes decoded, a lone or broken surrogate and each
// byte that is not UTF-8 replaced by U+FFFD.
func Unquote(s []byte) []byte {
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
					return b // not valid JSON: RawString refused it
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
