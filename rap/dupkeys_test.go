package rap

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"
)

// A duplicate key anywhere in a body is an error of every
// rap decoder, naming the key; both invocation decoders agree on it.
func TestDuplicateKeysRefused(t *testing.T) {
	const inv = `"operation":"x","arguments":{},"id":"i","callback_url":"http://h/cb","group_id":"g"`
	decoders := map[string]func([]byte) error{
		"invocation": func(b []byte) error { _, err := DecodeInvocation(b); return err },
		"callback":   func(b []byte) error { _, err := DecodeCallback(b); return err },
		"close":      func(b []byte) error { _, err := DecodeCloseThread(b); return err },
		"cancel":     func(b []byte) error { _, err := DecodeCancelToolCall(b); return err },
		"status":     func(b []byte) error { _, err := DecodeToolCallStatus(b); return err },
		"migrate":    func(b []byte) error { _, err := DecodeMigrate(b); return err },
		"choice":     func(b []byte) error { _, err := DecodeUserChoiceResponse(b); return err },
	}
	tests := []struct{ decoder, body, field string }{
		{"invocation", `{` + inv + `,"operation":"y"}`, "operation"},
		{"invocation", `{` + inv + `,"callback_url":"http://evil/cb"}`, "callback_url"},
		{"invocation", `{` + inv + `,"extra":1,"extra":2}`, "extra"}, // unknown members too
		{"invocation", `{"operation":"x","arguments":{"a":1,"b":{"c":[{"d":1,"d":2}]}},"id":"i","callback_url":"http://h/cb","group_id":"g"}`, "arguments.b.c[0].d"},
		{"invocation", `{"operation":"x","arguments":{"a":1,"\u0061":2},"id":"i","callback_url":"http://h/cb","group_id":"g"}`, "arguments.a"},
		{"invocation", ` { "operation" : "x" , "arguments" : { } , "id" : "i" , "callback_url" : "u" , "group_id" : "g" , "id" : "j" } `, "id"},
		{"callback", `{"type":"tool_result","group_id":"g","id":"i","text":"a","text":"b"}`, "text"},
		{"callback", `{"type":"tool_result","group_id":"g","id":"i","content":[{"type":"text","text":"a","type":"image"}]}`, "content[0].type"},
		{"callback", `{"type":"tool_result","group_id":"g","group_id":"h","id":"i","text":""}`, "group_id"},
		{"callback", `{"type":"subscription_event","group_id":"g","tool_call_id":"i","text":"t","final":false,"final":true}`, "final"},
		{"callback", `{"type":"oauth","group_id":"g","id":"i","auth_url":"https://a","auth_url":"https://b"}`, "auth_url"},
		{"callback", `{"type":"user_choice","group_id":"g","id":"i","prompt":"p","choices":["a","b"],"default":0,"default":1,"response_url":"https://r"}`, "default"},
		{"callback", `{"type":"view_update","group_id":"g","view_type":"v","content":{"k":1,"k":2}}`, "content.k"},
		{"callback", `{"type":"view_update","type":"tool_result","group_id":"g","view_type":"v","content":{}}`, "type"},
		{"close", `{"thread_id":"a","thread_id":"b"}`, "thread_id"},
		{"cancel", `{"thread_id":"a","tool_call_id":"b","tool_call_id":"c"}`, "tool_call_id"},
		{"status", `{"thread_id":"a","thread_id":"a","tool_call_id":"b"}`, "thread_id"},
		{"migrate", `{"session_id":"s","destination_url":"http://a","session_id":"t"}`, "session_id"},
		{"choice", `{"id":"i","selected":0,"selected":1}`, "selected"},
	}
	for _, tc := range tests {
		t.Run(tc.decoder+" "+tc.field, func(t *testing.T) {
			err := decoders[tc.decoder]([]byte(tc.body))
			var fe *FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("decoded a body with a duplicate key, or not a *FieldError: %v", err)
			}
			if fe.Field != tc.field || !strings.Contains(fe.Problem, "more than once") {
				t.Errorf("error %q, want field %q and a word on the duplicate", err, tc.field)
			}
			if tc.decoder == "invocation" {
				// The fast path hands it to the strict one, which refuses it.
				if _, ok := decodeInvocationFast([]byte(tc.body)); ok {
					t.Errorf("the fast decoder accepted it")
				}
				if _, err := decodeInvocationStrict([]byte(tc.body)); err == nil {
					t.Errorf("the strict decoder accepted it")
				}
			}
		})
	}
}

// The same name in different objects, and many distinct names, are fine;
// a duplicate among many names is found.
func TestDuplicateKeyScan(t *testing.T) {
	ok := []string{
		`{"a":{"x":1},"b":{"x":1},"c":[{"x":1},{"x":2}],"x":[["x"]],"s":"\"x\":1,\"x\":2"}`,
		`{"a\"b":1,"a\\b":2,"ab":3}`,
		`{}`, `{"a":{}}`, `{"a":[{},[],""]}`,
	}
	var many strings.Builder
	many.WriteString(`{`)
	for i := range 1000 {
		fmt.Fprintf(&many, `"k%d":{"k%d":1,"n":2},`, i, i)
	}
	ok = append(ok, many.String()+`"end":1}`)
	for _, body := range ok {
		if err := duplicateKey([]byte(body)); err != nil {
			t.Errorf("duplicateKey(%.60q) = %v, want nil", body, err)
		}
	}
	for _, tc := range []struct{ body, field string }{
		{many.String() + `"k999":1}`, "k999"},
		{many.String() + `"k17":1}`, "k17"},
		{`{"a":[1,{"b":[{},{"c":1,"c":1}]}]}`, "a[1].b[1].c"},
	} {
		err := duplicateKey([]byte(tc.body))
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != tc.field {
			t.Errorf("duplicateKey(%.60q) = %v, want one naming %q", tc.body, err, tc.field)
		}
	}
}

// refDuplicate finds a duplicate key with encoding/json's token stream:
// slow and simple, the reference for duplicateKey.
func refDuplicate(data []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(data))
	type frame struct {
		object  bool
		keys    map[string]bool
		wantKey bool
	}
	var stack []*frame
	for {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		top := (*frame)(nil)
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if top != nil && top.object && top.wantKey {
			if k, ok := tok.(string); ok {
				if top.keys[k] {
					return true
				}
				top.keys[k] = true
				top.wantKey = false
				continue
			}
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, &frame{object: true, keys: map[string]bool{}, wantKey: true})
			continue
		case json.Delim('['):
			stack = append(stack, &frame{})
			continue
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
		}
		if len(stack) == 0 {
			return false
		}
		if top := stack[len(stack)-1]; top.object {
			top.wantKey = true // the value is done: a key comes next
		}
	}
}

// duplicateKey agrees with the token-stream reference on valid JSON.
func FuzzDuplicateKey(f *testing.F) {
	for _, s := range []string{
		`{"a":1,"a":2}`, `{"a":{"a":1},"b":[{"a":1,"a":2}]}`, `{"a":1,"\u0061":2}`,
		`{"a\"":1,"a\\":2}`, `[{"x":[],"y":{}},{"x":1}]`, `{"k":"v","l":[1,"a",{"m":null}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if !json.Valid(data) || !utf8.Valid(data) { // rap refuses invalid UTF-8 first (RAP TR-1)
			return
		}
		got := duplicateKey(data) != nil
		if want := refDuplicate(data); got != want {
			t.Fatalf("duplicateKey(%q) found one: %v, the reference: %v", data, got, want)
		}
	})
}

// The duplicate-key scan's share of decoding an invocation.
func BenchmarkDuplicateKey(b *testing.B) {
	body := []byte(`{"operation":"deploy","arguments":{"service":"api","version":"1.4.2","replicas":3,"env":{"REGION":"eu-west-1"}},"id":"call_abc123","call_id":"c","callback_url":"https://runtime.example/callback/abc","group_id":"thread_xyz"}`)
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if duplicateKey(body) != nil {
			b.Fatal("duplicate")
		}
	}
}
