package display

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
)

// Script is immutable and safe for concurrent Eval; Render's cache is shared.
func TestConcurrentEval(t *testing.T) {
	s, err := Compile(`
		fn label(n) { if n > 1 { "items" } else { "item" } }
		let a = args.list; a.push(99); a.sort();
		let m = #{k: a}; m.k.push(1);
		switch args.n { 1 => "one", 2..10 => `+"`${args.n} ${label(args.n)} ${a.len()}`"+`, _ => "many" }`, nil)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				n := i%12 + 1
				args := map[string]any{"n": float64(n), "list": []any{3.0, 1.0, 2.0}}
				out, err := s.Eval(context.Background(), args)
				want := "one"
				if n >= 2 && n < 10 {
					want = fmt.Sprintf("%d items 4", n)
				} else if n >= 10 {
					want = "many"
				}
				if err != nil || out != want {
					t.Errorf("g%d n=%d: %q %v, want %q", g, n, out, err, want)
					return
				}
				raw, _ := json.Marshal(args)
				if r := Render(context.Background(), "t", `"n=" + args.n`, raw); r != fmt.Sprintf("n=%d", n) {
					t.Errorf("Render: %q", r)
					return
				}
			}
		}(g)
	}
	wg.Wait()
}

func TestCacheEviction(t *testing.T) {
	c := NewCache(2, nil)
	for i := 0; i < 5; i++ {
		src := fmt.Sprintf(`"v%d"`, i)
		if got := c.Render(context.Background(), "t", src, nil); got != fmt.Sprintf("v%d", i) {
			t.Fatalf("got %q", got)
		}
	}
	if c.Len() != 2 {
		t.Fatalf("cache holds %d entries, want 2", c.Len())
	}
	if got := c.Render(context.Background(), "t", `"v"+`, json.RawMessage(`{"a":[1, 2]}`)); got != `t({"a":[1,2]})` {
		t.Fatalf("compile error fallback: %q", got)
	}
	// Huge scripts are rejected (DS-3) and never cached.
	huge := `"` + strings.Repeat(" ", 2<<20) + `"`
	if got := c.Render(context.Background(), "t", huge, nil); got != `t({})` {
		t.Fatalf("huge script: %q", got)
	}
	if _, err := Compile(huge, nil); err == nil {
		t.Fatal("huge script compiled")
	}
	big := `"x" // ` + strings.Repeat("y", 100<<10)
	if got := c.Render(context.Background(), "t", big, nil); got != "x" || c.Len() != 2 {
		t.Fatalf("big script: %q, cache len %d", got, c.Len())
	}
	if _, ok := c.items[big]; ok {
		t.Fatal("big script was cached")
	}
}

func TestDefaultRendering(t *testing.T) {
	// RAP DS-2: the default is `tool_name(args)` with args as compact JSON.
	for _, c := range []struct{ args, want string }{
		{``, `t({})`},
		{`null`, `t({})`},
		{`  {}  `, `t({})`},
		{`{ "a" : [1, 2 ,3], "b": {"c": "d e"} }`, `t({"a":[1,2,3],"b":{"c":"d e"}})`},
		{`{"n": 1.50}`, `t({"n":1.50})`},
	} {
		if got := Default("t", json.RawMessage(c.args)); got != c.want {
			t.Errorf("Default(%q) = %q, want %q", c.args, got, c.want)
		}
		if got := Render(context.Background(), "t", "", json.RawMessage(c.args)); got != c.want {
			t.Errorf("Render with no script (%q) = %q, want %q", c.args, got, c.want)
		}
	}
	// Non-object args cannot be bound to `args`: fall back.
	if got := Render(context.Background(), "t", `"x"`, json.RawMessage(`[1,2]`)); got != `t([1,2])` {
		t.Errorf("array args: %q", got)
	}
}

func TestEvalArgsNumberForms(t *testing.T) {
	// Brief: accept json.Number and float64; integers -> i64, others -> f64.
	s, _ := Compile(`type_of(args.a) + " " + args.a + " " + type_of(args.b) + " " + args.b`, nil)
	for _, args := range []map[string]any{
		{"a": json.Number("42"), "b": json.Number("2.5")},
		{"a": float64(42), "b": 2.5},
		{"a": 42, "b": float32(2.5)},
	} {
		out, err := s.Eval(context.Background(), args)
		if err != nil || out != "i64 42 f64 2.5" {
			t.Errorf("%v: %q %v", args, out, err)
		}
	}
	if _, err := s.Eval(context.Background(), map[string]any{"a": struct{}{}}); err == nil {
		t.Error("unsupported Go type should fail")
	}
}

func TestSyntaxErrorPosition(t *testing.T) {
	_, err := Compile("let x = 1;\nlet y = ;", nil)
	se, ok := err.(*SyntaxError)
	if !ok || se.Pos != (Pos{2, 9}) {
		t.Fatalf("got %v", err)
	}
	if se.Error() != "syntax error at 2:9: unexpected ';'" {
		t.Fatalf("message %q", se.Error())
	}
}
