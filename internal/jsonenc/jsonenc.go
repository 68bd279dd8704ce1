// Package jsonenc appends JSON strings exactly as encoding/json writes
// them, for the providers that write request bodies by hand
// (model/anthropic, model/openai) and must send the bytes their SDKs would.
package jsonenc

import "unicode/utf8"

const hexDigits = "0123456789abcdef"

// AppendString appends s as a JSON string, escaped as encoding/json
// escapes it: quotes, backslashes and control characters, U+2028 and
// U+2029, each byte of invalid UTF-8 as \ufffd, and, when html is true,
// the characters <, > and & (json.Marshal does; an Encoder with
// SetEscapeHTML(false), as the OpenAI SDK's, does not).
func AppendString[S string | []byte](b []byte, s S, html bool) []byte {
	b = append(b, '"')
	b = AppendEscaped(b, s, html)
	return append(b, '"')
}

// AppendEscaped is AppendString without the quotes around it.
func AppendEscaped[S string | []byte](b []byte, s S, html bool) []byte {
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && (!html || c != '<' && c != '>' && c != '&') {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		// Only the rune's bytes are converted, which needs no allocation.
		r, size := utf8.DecodeRuneInString(string(s[i : i+min(len(s)-i, utf8.UTFMax)]))
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	return append(b, s[start:]...)
}
