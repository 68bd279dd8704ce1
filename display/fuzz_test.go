package display

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// FuzzEval checks that no script/args input can panic the evaluator, hang
// it, or make it produce a string longer than MaxStringLen (RAP DS-3).
func FuzzEval(f *testing.F) {
	for _, c := range tableCases {
		if len(c.src) > 2000 {
			continue
		}
		args := c.args
		if args == "" {
			args = "{}"
		}
		f.Add(c.src, args)
	}
	f.Add(`let s = "x"; loop { s += s; }`, `{}`)
	f.Add(`fn f(n) { f(n + 1) } f(0)`, `{}`)
	f.Add("`${args.a}-${args.b[0]}`", `{"a":"x","b":[1.5,null,true]}`)
	f.Add(`args.a.b.c ?? "z"`, `{"a":{"b":{"c":9223372036854775807}}}`)

	lim := DefaultLimits()
	lim.MaxStringLen = 4096
	lim.MaxArrayLen = 1000
	lim.MaxMapLen = 1000
	lim.Timeout = 100 * time.Millisecond
	cache := NewCache(64, &lim)

	f.Fuzz(func(t *testing.T, src, args string) {
		m, ok := decodeArgs(json.RawMessage(args))
		if !ok {
			m = map[string]any{}
		}
		start := time.Now()
		s, err := Compile(src, &lim)
		if err != nil {
			if strings.Contains(err.Error(), "internal error") {
				t.Fatalf("compile panicked: %v", err)
			}
			return
		}
		out, err := s.Eval(context.Background(), m)
		// A hang guard with room for a loaded machine: the 100 ms timeout
		// bounds the evaluation.
		if d := time.Since(start); d > 10*time.Second {
			t.Fatalf("evaluation took %v", d)
		}
		if err != nil {
			if strings.Contains(err.Error(), "internal error") {
				t.Fatalf("eval panicked: %v", err)
			}
			return
		}
		if len(out) > lim.MaxStringLen {
			t.Fatalf("result of %d bytes exceeds MaxStringLen %d", len(out), lim.MaxStringLen)
		}
		r := cache.Render(context.Background(), "tool", src, json.RawMessage(args))
		if ok && r != out {
			t.Fatalf("Render %q != Eval %q", r, out)
		}
	})
}
