package rap

import (
	"reflect"
	"testing"
)

// The one-pass decoder of the common invocation agrees with the strict
// decoder on everything it accepts (it hands the rest to the strict one),
// so the fast path changes no verdict of DecodeInvocation (RAP IN-1).
func FuzzFastVsStrict(f *testing.F) {
	for _, s := range []string{
		`{"operation":"now","arguments":{},"id":"i","callback_url":"http://h/cb","group_id":"g"}`,
		`{"operation":"x","arguments":{"s":"<a & b>","n":1e400,"u":"\u00e9\ud800"},"id":"i","call_id":null,"callback_url":"u","group_id":"g","thread_ancestors":[],"user_id":null}`,
		`{"operation":"x","arguments":{"a":{"b":[1,2,{"c":null}]}},"id":"i","callback_url":"u","group_id":"g","thread_ancestors":["r","p"]}`,
		` { "operation" : "x" , "arguments" : { "a" : [ 1 , "b c" ] } , "id":"i","callback_url":"u","group_id":"g","thread_ancestors":[ "r" , "p" ] , "call_id":"c","user_id":"u1","extra":[{"x":"\""}]}`,
		`{"operation":"x","arguments":{},"id":"i","callback_url":"u","group_id":"g","operation":"y","arguments":{"z":1}}`,
		`{"Operation":"x","arguments":{},"id":"i","callback_url":"u","group_id":"g"}`,
		`{"operation":"","arguments":{},"id":"i","callback_url":"u","group_id":"g"}`,
		`{"operation":"x","arguments":{"a":"\t"},"id":"i","callback_url":"u","group_id":"g"}`,
		"{\"operation\":\"x\",\"arguments\":{\n\"a\":1},\"id\":\"i\",\"callback_url\":\"u\",\"group_id\":\"g\"}",
		`{"operation":"x","arguments":{},"id":"i","callback_url":"u","group_id":"g","thread_ancestors":["a"],"thread_ancestors":[]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		fast, ok := decodeInvocationFast(data)
		if !ok {
			return
		}
		strict, err := decodeInvocationStrict(data)
		if err != nil {
			t.Fatalf("fast accepted what strict rejects (%v): %q", err, data)
		}
		if !reflect.DeepEqual(fast, strict) {
			t.Fatalf("differ on %q:\n%#v\n%#v", data, fast, strict)
		}
	})
}
