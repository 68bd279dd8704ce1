package rap_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/gorap/gorap/rap"
)

// Run with, one target at a time:
//
//	go test ./rap -run '^$' -fuzz '^FuzzDecodeInvocation$' -fuzztime 60s -parallel 1
//	go test ./rap -run '^$' -fuzz '^FuzzDecodeCallback$' -fuzztime 60s -parallel 1
//	go test ./rap -run '^$' -fuzz '^FuzzParseToolset$' -fuzztime 60s -parallel 1

// canonical re-encodes a JSON value with sorted keys, so that two raw
// messages holding the same value compare equal whatever their spacing,
// member order or escaping.
func canonical(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	if raw == nil {
		return ""
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("raw member %q is not JSON: %v", raw, err)
	}
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// normalize returns a copy of a decoded message with every raw JSON member
// replaced by its canonical form.
func normalize(t *testing.T, v any) any {
	t.Helper()
	switch m := v.(type) {
	case *rap.Invocation:
		c := *m
		c.Arguments = json.RawMessage(canonical(t, c.Arguments))
		return &c
	case *rap.ToolResult:
		c := *m
		c.DisplayAs = nil
		for _, s := range m.DisplayAs {
			c.DisplayAs = append(c.DisplayAs, rap.DisplaySegment{Type: s.Type, Content: json.RawMessage(canonical(t, s.Content))})
		}
		return &c
	case *rap.ViewUpdate:
		c := *m
		c.Content = json.RawMessage(canonical(t, c.Content))
		return &c
	case *rap.Toolset:
		c := *m
		c.Tools = nil
		for _, tool := range m.Tools {
			tool.InputSchema = json.RawMessage(canonical(t, tool.InputSchema))
			if tool.Annotations != nil {
				a := *tool.Annotations
				a.Custom = nil
				for k, raw := range tool.Annotations.Custom {
					if a.Custom == nil {
						a.Custom = map[string]json.RawMessage{}
					}
					a.Custom[k] = json.RawMessage(canonical(t, raw))
				}
				tool.Annotations = &a
			}
			c.Tools = append(c.Tools, tool)
		}
		return &c
	}
	return v
}

// seedFiles adds every file matching pattern to the corpus.
func seedFiles(f *testing.F, pattern string) {
	paths, err := filepath.Glob(pattern)
	if err != nil || len(paths) == 0 {
		f.Fatalf("no seed files match %s (%v)", pattern, err)
	}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
}

// FuzzDecodeInvocation: decoding never panics, and a decoded invocation
// re-encodes to JSON that decodes to an equal value, whose encoding is the
// same bytes (RAP IN-1).
func FuzzDecodeInvocation(f *testing.F) {
	f.Add([]byte(validInvocation))
	f.Add([]byte(`{"operation":"now","arguments":{},"id":"i","callback_url":"u","group_id":"g"}`))
	f.Add([]byte(`{"operation":"x","arguments":{"s":"<a & b>","n":1e400,"u":"\u00e9\ud800"},"id":"i","call_id":null,"callback_url":"u","group_id":"g","thread_ancestors":[],"user_id":null}`))
	f.Add([]byte(`{"operation":"x","arguments":[],"id":"i"}`))
	f.Add([]byte(`{"operation":"x","arguments":{"a":{"b":[1,2,{"c":null}]}},"id":"i","callback_url":"u","group_id":"g","thread_ancestors":["r","p"]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		inv, err := rap.DecodeInvocation(data)
		if err != nil {
			var fe *rap.FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("error %v is %T, want *rap.FieldError", err, err)
			}
			return
		}
		enc, err := json.Marshal(inv)
		if err != nil {
			t.Fatalf("encoding a decoded invocation: %v", err)
		}
		again, err := rap.DecodeInvocation(enc)
		if err != nil {
			t.Fatalf("re-decoding %s: %v", enc, err)
		}
		if a, b := normalize(t, inv), normalize(t, again); !reflect.DeepEqual(a, b) {
			t.Fatalf("round trip changed the invocation:\n %#v\n %#v", a, b)
		}
		enc2, err := json.Marshal(again)
		if err != nil || !bytes.Equal(enc, enc2) {
			t.Fatalf("encoding is not stable:\n %s\n %s (%v)", enc, enc2, err)
		}
	})
}

// FuzzDecodeCallback: decoding never panics, and a decoded callback
// re-encodes to JSON that decodes to an equal value of the same type
// (RAP TR-5).
func FuzzDecodeCallback(f *testing.F) {
	for _, s := range []string{
		`{"type":"tool_result","group_id":"g","id":"call_1","text":"done"}`,
		`{"type":"tool_result","group_id":"g","id":"i","call_id":"c","text":"","content":[{"type":"text","text":""},{"type":"image","data":"AA==","mediaType":"image/png"}],"display_as":[{"type":"diff","content":{"path":"a","patch":"@@"}},{"type":"text","content":"x"},{"type":"other","content":[1,{"a":"<"}]}],"subscription":true}`,
		`{"type":"subscription_event","group_id":"g","tool_call_id":"call_1","text":"{\"n\":1}","associative":true,"final":false}`,
		`{"type":"oauth","group_id":"g","id":"call_1","call_id":null,"auth_url":"https://idp/authorize"}`,
		`{"type":"user_choice","group_id":"g","id":"i","prompt":"Deploy?","choices":["yes","no"],"default":1,"response_url":"https://t/c"}`,
		`{"type":"view_update","group_id":"g","view_type":"diff","content":{"files":[{"path":"a.go"}]}}`,
		`{"type":"tool_result","group_id":"g","id":"i","content":[]}`,
		`{"type":"nope"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cb, err := rap.DecodeCallback(data)
		if err != nil {
			var fe *rap.FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("error %v is %T, want *rap.FieldError", err, err)
			}
			return
		}
		if cb.Thread() == "" {
			t.Fatalf("decoded %#v without a group_id (RAP TR-5)", cb)
		}
		enc, err := json.Marshal(cb)
		if err != nil {
			t.Fatalf("encoding a decoded callback: %v", err)
		}
		again, err := rap.DecodeCallback(enc)
		if err != nil {
			t.Fatalf("re-decoding %s: %v", enc, err)
		}
		if again.MessageType() != cb.MessageType() {
			t.Fatalf("type changed from %s to %s", cb.MessageType(), again.MessageType())
		}
		if a, b := normalize(t, cb), normalize(t, again); !reflect.DeepEqual(a, b) {
			t.Fatalf("round trip changed the message:\n %#v\n %#v", a, b)
		}
		enc2, err := json.Marshal(again)
		if err != nil || !bytes.Equal(enc, enc2) {
			t.Fatalf("encoding is not stable:\n %s\n %s (%v)", enc, enc2, err)
		}
	})
}

// FuzzParseToolset: parsing never panics; a manifest that parses also passes
// Validate, loads whole into a catalog, and re-encodes to a manifest that
// parses to an equal toolset (RAP TS-1, TS-2, TS-5).
func FuzzParseToolset(f *testing.F) {
	seedFiles(f, filepath.Join("testdata", "toolsets", "*.json"))
	f.Add([]byte(`{"name":"t","endpoint":"http://h","tools":[{"name":"n","description":"d","inputSchema":{"type":"object","additionalProperties":false}}]}`))
	f.Add([]byte(`{"name":"t","endpoint":"http://h","tools":[{"name":"n","description":"d","inputSchema":{"$ref":"#/$defs/a","$defs":{"a":{"type":"object"}}},"annotations":{"x-a":null,"b":[1]}}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		ts, err := rap.ParseToolset(data)
		if err != nil {
			var ve *rap.ValidationError
			if !errors.As(err, &ve) || len(ve.Violations) == 0 {
				t.Fatalf("error %v (%T) is not a *rap.ValidationError with violations", err, err)
			}
			if ts != nil {
				t.Fatalf("ParseToolset returned a toolset with an error")
			}
			return
		}
		if err := ts.Validate(); err != nil {
			t.Fatalf("ParseToolset accepted a toolset that Validate rejects: %v", err)
		}
		_ = ts.Warnings()
		cat, errs := rap.NewCatalog([]*rap.Toolset{ts})
		if len(errs) != 0 || len(cat.Tools()) != len(ts.Tools) {
			t.Fatalf("a valid toolset did not load whole: %v", errs)
		}
		enc, err := json.Marshal(ts)
		if err != nil {
			t.Fatalf("encoding a parsed toolset: %v", err)
		}
		again, err := rap.ParseToolset(enc)
		if err != nil {
			t.Fatalf("re-parsing %s: %v", enc, err)
		}
		if a, b := normalize(t, ts), normalize(t, again); !reflect.DeepEqual(a, b) {
			t.Fatalf("round trip changed the toolset:\n %#v\n %#v", a, b)
		}
	})
}
