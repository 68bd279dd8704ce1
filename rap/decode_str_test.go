package rap

import (
	"encoding/json"
	"testing"
)

// A string member reads the same whether it takes the unescaped fast path
// or the decoder: escapes, control characters, invalid UTF-8 and other
// types all go to the decoder, which judges them as before.
func TestStringMembersReadAsTheDecoderReadsThem(t *testing.T) {
	for _, raw := range []string{
		`"call_1"`, `""`, ` "spaced" `, `"héllo wörld ✓"`, `"a\"b"`, `"tab\there"`, `"\u00e9"`, `"line\nbreak"`,
		"\"raw\x01control\"", "\"bad\xffutf8\"", `"unterminated`, `12`, `true`, `{"a":1}`, `["x"]`, `"` + "\xe2\x82" + `"`,
	} {
		o := &object{members: map[string]json.RawMessage{"f": json.RawMessage(raw)}}
		got, err := o.str("f", true)
		var want string
		wantErr := json.Unmarshal([]byte(raw), &want)
		if (err != nil) != (wantErr != nil) || got != want {
			t.Errorf("str(%q) = %q, %v; the decoder gives %q, %v", raw, got, err, want, wantErr)
		}
		if s, ok := unescapedString([]byte(raw)); ok && s != want {
			t.Errorf("unescapedString(%q) = %q, want %q", raw, s, want)
		}
	}
}
