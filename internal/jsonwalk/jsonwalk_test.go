package jsonwalk

import (
	"encoding/json"
	"fmt"
	"testing"
)

// walk reads b as one value, skipping it.
func walk(b []byte) error {
	var r Reader
	r.Reset(b, "test")
	if err := r.Skip(); err != nil {
		return err
	}
	return r.End()
}

var seeds = []string{
	`{}`, `[]`, `null`, `true`, `false`, `0`, `-1.5e3`, `"a\u00e9\"\\"`, `{"a":[1,{"b":null}],"c":"d"}`,
	`{"a":}`, `[1,]`, `{"a" 1}`, `"\x"`, `01`, `1.`, `[`, `{"a":1}x`, `tru`, `"\ud800"`, "\"\x01\"", ` [ 1 , 2 ] `,
}

// TestSkipAgreesWithValid: a Reader accepts exactly the documents
// encoding/json calls valid.
func TestSkipAgreesWithValid(t *testing.T) {
	for _, s := range seeds {
		if got, want := walk([]byte(s)) == nil, json.Valid([]byte(s)); got != want {
			t.Errorf("%q: Reader accepts %v, json.Valid %v", s, got, want)
		}
	}
}

func FuzzSkipAgreesWithValid(f *testing.F) {
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, want := walk(b) == nil, json.Valid(b); got != want {
			t.Errorf("%q: Reader accepts %v, json.Valid %v", b, got, want)
		}
	})
}

// TestStrAgreesWithUnmarshal: strings read by Str equal encoding/json's,
// escapes, invalid UTF-8 and lone surrogates included.
func TestStrAgreesWithUnmarshal(t *testing.T) {
	for _, s := range []string{`"plain"`, `"tab\there"`, `"\u00e9\u4e2d"`, `"\ud83d\ude00"`, `"\ud800x"`, "\"\xff\xfe\"", `"\/"`} {
		var got, want string
		var r Reader
		r.Reset([]byte(s), "test")
		if err := r.Str(&got); err != nil {
			t.Fatalf("%q: %v", s, err)
		}
		if err := json.Unmarshal([]byte(s), &want); err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("%q: Str %q, encoding/json %q", s, got, want)
		}
	}
}

// TestErrorsNameWhatAndWhere: an error names the document and the byte.
func TestErrorsNameWhatAndWhere(t *testing.T) {
	var r Reader
	r.Reset([]byte(`{"a" 1}`), "request body")
	err := r.Skip()
	if err == nil || err.Error() != "request body: want a colon after an object key at byte 5" {
		t.Errorf("error %v", err)
	}
}

// A Reader keeps only what the caller asks for.
func ExampleReader() {
	var r Reader
	r.Reset([]byte(`{"model":"m","messages":[{"role":"user"},{"role":"assistant","content":[1,2]}]}`), "request")
	var roles []string
	err := r.Object(func(key []byte) error {
		if !KeyIs(key, "messages") {
			return r.Skip()
		}
		return r.Array(func() error {
			return r.Object(func(key []byte) error {
				if KeyIs(key, "role") {
					var role string
					err := r.Str(&role)
					roles = append(roles, role)
					return err
				}
				return r.Skip()
			})
		})
	})
	fmt.Println(roles, err)
	// Output: [user assistant] <nil>
}

// TestRawIsTheValueAsWritten: Raw returns a member's value byte for byte,
// white space inside it kept and around it left out, as encoding/json's
// RawMessage does.
func TestRawIsTheValueAsWritten(t *testing.T) {
	for _, s := range []string{`{"k": {"a" : [1, 2],"b":"\u00e9"} , "z":1}`, `{"k":"x"}`, `{"k":null}`, `{"k":-1.5e3 }`} {
		var got []byte
		var r Reader
		r.Reset([]byte(s), "test")
		err := r.Object(func(key []byte) error {
			if string(key) != "k" {
				return r.Skip()
			}
			var err error
			got, err = r.Raw()
			return err
		})
		if err != nil {
			t.Fatalf("%q: %v", s, err)
		}
		var want struct{ K json.RawMessage }
		if err := json.Unmarshal([]byte(s), &want); err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want.K) {
			t.Errorf("%q: Raw %q, encoding/json %q", s, got, want.K)
		}
	}
}
