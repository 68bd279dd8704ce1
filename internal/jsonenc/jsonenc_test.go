package jsonenc

import (
	"bytes"
	"encoding/json"
	"testing"
)

// want is what encoding/json writes for s, with or without HTML escaping.
func want(t testing.TB, s string, html bool) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(html)
	if err := enc.Encode(s); err != nil {
		t.Fatal(err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

var cases = []string{
	"", "plain", `quote " and \ backslash`, "<b>&amp;</b>", "tab\tnew\nline\rcr\bbs\fff",
	"\x00\x01\x1f\x7f", "é漢字🙂", "line\u2028para\u2029", "bad \xff utf8 \xe2\x80", "\xe2\x80\xa8",
	"ends in a cut rune \xf0\x9f\x99",
}

func TestAppendStringAgreesWithEncodingJSON(t *testing.T) {
	for _, s := range cases {
		for _, html := range []bool{true, false} {
			w := want(t, s, html)
			if got := AppendString([]byte("x"), s, html); !bytes.Equal(got[1:], w) || got[0] != 'x' {
				t.Errorf("AppendString(%q, html=%v) = %s, want %s", s, html, got[1:], w)
			}
			if got := AppendString(nil, []byte(s), html); !bytes.Equal(got, w) {
				t.Errorf("AppendString([]byte %q, html=%v) = %s, want %s", s, html, got, w)
			}
		}
	}
}

func FuzzAppendString(f *testing.F) {
	for _, s := range cases {
		f.Add(s, true)
	}
	f.Fuzz(func(t *testing.T, s string, html bool) {
		if got, w := AppendString(nil, s, html), want(t, s, html); !bytes.Equal(got, w) {
			t.Errorf("AppendString(%q, html=%v) = %s, want %s", s, html, got, w)
		}
	})
}
