package display

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

// RAP DS-3: display scripts are untrusted and run in a sandbox with bounded
// operations, time, memory and depth. Each limit has its own error.

// evalErr compiles and runs src within limits (nil: the defaults) and
// returns the error.
func evalErr(t *testing.T, src string, limits *Limits) error {
	t.Helper()
	var lim Limits
	if limits != nil {
		lim = *limits
	}
	// A generous timeout keeps these tests deterministic on a loaded machine
	// (the timeout itself is tested in TestLimitTimeout).
	if lim.Timeout == 0 {
		lim.Timeout = 10 * time.Second
	}
	s, err := Compile(src, &lim)
	if err != nil {
		return err
	}
	start := time.Now()
	_, err = s.Eval(context.Background(), map[string]any{})
	// A hang guard, not a speed test: the limits stop these scripts in
	// milliseconds, and the bound leaves room for a loaded machine.
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("%q took %v", src, d)
	}
	return err
}

func TestLimitOperations(t *testing.T) {
	// RAP DS-3: `loop {}` stops at the operation limit.
	for _, src := range []string{
		`loop {}`,
		`while true { }`,
		`let i = 0; do { i += 1; } while true`,
		`for i in 0..9223372036854775807 { }`,
		`fn f() { loop {} } f()`,
		`let a = [1]; loop { a.insert(0, 1); }`, // element shifting is charged
	} {
		err := evalErr(t, src, nil)
		if !errors.Is(err, ErrTooManyOperations) {
			t.Errorf("%q: got %v, want ErrTooManyOperations", src, err)
		}
	}
	// A custom limit is honoured exactly enough to matter.
	src := `let s = 0; for i in 0..1000 { s += i; } "" + s`
	if err := evalErr(t, src, &Limits{MaxOperations: 500}); !errors.Is(err, ErrTooManyOperations) {
		t.Errorf("custom op limit: got %v", err)
	}
	if err := evalErr(t, src, &Limits{MaxOperations: 100_000}); err != nil {
		t.Errorf("within op limit: %v", err)
	}
}

func TestLimitCallDepth(t *testing.T) {
	// RAP DS-3: recursion stops at the call-depth limit.
	err := evalErr(t, `fn f(n) { f(n + 1) } f(0)`, nil)
	if !errors.Is(err, ErrCallDepth) {
		t.Fatalf("got %v, want ErrCallDepth", err)
	}
	err = evalErr(t, `fn a(n) { b(n) } fn b(n) { a(n) } a(1)`, &Limits{MaxCallDepth: 5, Timeout: 10 * time.Second})
	if !errors.Is(err, ErrCallDepth) {
		t.Fatalf("mutual recursion: got %v, want ErrCallDepth", err)
	}
	// Depth 10 is fine with the default limit of 32.
	if err := evalErr(t, `fn f(n) { if n == 0 { "done" } else { f(n - 1) } } f(10)`, nil); err != nil {
		t.Fatalf("shallow recursion: %v", err)
	}
}

func TestLimitStringLength(t *testing.T) {
	// RAP DS-3: string growth is bounded on every string-producing operation.
	for _, src := range []string{
		`let s = "x"; loop { s += s; }`,
		`let s = "x"; loop { s = s + s; }`,
		"let s = \"x\"; loop { s = `${s}${s}`; }",
		`let s = ""; s.pad(100000, "ab"); s`,
		`let s = "x"; s.pad(70000, 'y'); s`,
		`let s = "x"; for i in 0..20 { s = s + s; } s.replace("x", "xx"); s`,
		`let a = []; a.pad(5000, "0123456789abcdef"); a.to_string()`,
		`let a = ["0123456789abcdef"]; for i in 0..13 { a += a; } "" + a`,
	} {
		err := evalErr(t, src, nil)
		if !errors.Is(err, ErrStringTooLong) {
			t.Errorf("%q: got %v, want ErrStringTooLong", src, err)
		}
	}
	// String literals longer than the limit are rejected at compile time.
	if _, err := Compile(`"`+strings.Repeat("x", 70000)+`"`, nil); !errors.Is(err, ErrStringTooLong) {
		t.Errorf("long literal: got %v", err)
	}
	if _, err := Compile("`"+strings.Repeat("\xa5", 100)+"`", &Limits{MaxStringLen: 50}); !errors.Is(err, ErrStringTooLong) {
		t.Errorf("long back-tick literal: got %v", err)
	}
	// A string passed straight through from args is checked too.
	s, _ := Compile(`args.s`, &Limits{MaxStringLen: 10})
	if _, err := s.Eval(context.Background(), map[string]any{"s": strings.Repeat("x", 11)}); !errors.Is(err, ErrStringTooLong) {
		t.Errorf("long result from args: got %v", err)
	}
	err := evalErr(t, `let s = "x"; s.pad(200, '-'); s`, &Limits{MaxStringLen: 100, Timeout: 10 * time.Second})
	if !errors.Is(err, ErrStringTooLong) {
		t.Errorf("custom string limit: got %v", err)
	}
}

func TestLimitArrayAndMapSize(t *testing.T) {
	// RAP DS-3: arrays and maps are bounded.
	for _, src := range []string{
		`let a = []; for i in 0..20000 { a.push(1); }`,
		`let a = [1]; loop { a += a; }`,
		`let a = [1]; loop { a = a + a; }`,
		`let a = []; a.pad(20000, 0); a`,
		`let a = [1]; loop { a.append(a); }`,
	} {
		err := evalErr(t, src, nil)
		if !errors.Is(err, ErrArrayTooLarge) {
			t.Errorf("%q: got %v, want ErrArrayTooLarge", src, err)
		}
	}
	for _, src := range []string{
		`let m = #{}; let i = 0; loop { m["k" + i] = i; i += 1; }`,
		`let m = #{}; let i = 0; loop { m.set("k" + i, i); i += 1; }`,
	} {
		err := evalErr(t, src, &Limits{MaxOperations: 1_000_000})
		if !errors.Is(err, ErrMapTooLarge) {
			t.Errorf("%q: got %v, want ErrMapTooLarge", src, err)
		}
	}
	err := evalErr(t, `[1, 2, 3, 4]`, &Limits{MaxArrayLen: 3})
	if !errors.Is(err, ErrArrayTooLarge) {
		t.Errorf("custom array limit: got %v", err)
	}
}

func TestLimitExpressionDepth(t *testing.T) {
	// RAP DS-3: deeply nested source is rejected at compile time, so a
	// 100k-deep input cannot overflow the Go stack.
	for _, src := range []string{
		strings.Repeat("(", 100_000) + "1" + strings.Repeat(")", 100_000),
		strings.Repeat("[", 100_000) + strings.Repeat("]", 100_000),
		strings.Repeat("{", 100_000) + strings.Repeat("}", 100_000),
		strings.Repeat("-", 100_000) + "1",
		strings.Repeat("!", 100_000) + "true",
		strings.Repeat("if true { ", 50_000) + strings.Repeat("}", 50_000),
		strings.Repeat("`${", 50_000) + strings.Repeat("}`", 50_000),
		strings.Repeat("#{a:", 50_000) + strings.Repeat("}", 50_000),
		"1" + strings.Repeat(" + 1", 100_000),
		"x" + strings.Repeat(".y", 100_000),
		"f" + strings.Repeat("(f", 50_000) + strings.Repeat(")", 50_001),
	} {
		start := time.Now()
		_, err := Compile(src, nil)
		// A guard against work quadratic in the nesting (seconds at this
		// size), not a speed test: a linear compile takes a millisecond,
		// and the bound leaves room for a loaded machine.
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("%.30q...: compile took %v", src, d)
		}
		if !errors.Is(err, ErrExprTooDeep) {
			t.Errorf("%.30q...: got %v, want ErrExprTooDeep", src, err)
		}
		var se *SyntaxError
		if !errors.As(err, &se) || se.Pos.Line == 0 {
			t.Errorf("%.30q...: want a *SyntaxError with a position, got %v", src, err)
		}
	}
	if _, err := Compile("((((1))))", &Limits{MaxExprDepth: 5}); !errors.Is(err, ErrExprTooDeep) {
		t.Errorf("custom depth limit: got %v", err)
	}
	if _, err := Compile("((((1))))", nil); err != nil {
		t.Errorf("shallow nesting: %v", err)
	}
}

func TestLimitTimeout(t *testing.T) {
	// RAP DS-3: wall time is bounded by Limits.Timeout and by the context.
	lim := Limits{MaxOperations: 1 << 40, Timeout: 20 * time.Millisecond}
	start := time.Now()
	err := evalErr(t, `loop {}`, &lim)
	if !errors.Is(err, ErrTimeout) {
		t.Fatalf("got %v, want ErrTimeout", err)
	}
	// The 20 ms timeout must cut the endless loop; 5 s leaves room for
	// a loaded machine while the operation limit of 1<<40 is far off.
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("timeout took %v", d)
	}
	s, _ := Compile(`loop {}`, &Limits{MaxOperations: 1 << 40, Timeout: time.Hour})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if _, err := s.Eval(ctx, nil); !errors.Is(err, ErrTimeout) {
		t.Fatalf("context deadline: got %v, want ErrTimeout", err)
	}
	ctx2, cancel2 := context.WithCancel(context.Background())
	cancel2()
	if _, err := s.Eval(ctx2, nil); !errors.Is(err, ErrTimeout) {
		t.Fatalf("cancelled context: got %v, want ErrTimeout", err)
	}
}

func TestLimitsDefaultsAndZeroValues(t *testing.T) {
	d := DefaultLimits()
	if d.MaxOperations != 100_000 || d.MaxCallDepth != 32 || d.MaxExprDepth != 64 ||
		d.MaxStringLen != 64<<10 || d.MaxArrayLen != 10_000 || d.MaxMapLen != 10_000 ||
		d.Timeout != 50*time.Millisecond {
		t.Fatalf("unexpected defaults %+v", d)
	}
	s, err := Compile(`"x"`, &Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if s.Limits() != d {
		t.Fatalf("zero Limits should mean defaults, got %+v", s.Limits())
	}
}

// Nil limits are DefaultLimits(); a Limits with some fields set takes the
// defaults for the others; and neither Compile nor NewCache changes the
// caller's Limits.
func TestLimitsNilAndCallersUnchanged(t *testing.T) {
	d := DefaultLimits()
	s, err := Compile(`"x"`, nil)
	if err != nil {
		t.Fatal(err)
	}
	if s.Limits() != d {
		t.Errorf("Compile with nil limits: %+v, want the defaults %+v", s.Limits(), d)
	}
	if s, err = NewCache(4, nil).Compile(`"x"`); err != nil || s.Limits() != d {
		t.Errorf("NewCache with nil limits compiled %v with %+v, want the defaults", err, s.Limits())
	}

	given := Limits{Timeout: time.Second}
	want := d
	want.Timeout = time.Second
	lim := given
	if s, err = Compile(`"x"`, &lim); err != nil || s.Limits() != want {
		t.Errorf("Compile with %+v: %v, %+v; want %+v", given, err, s.Limits(), want)
	}
	if lim != given {
		t.Errorf("Compile changed the caller's Limits to %+v", lim)
	}
	c := NewCache(4, &lim)
	if lim != given {
		t.Errorf("NewCache changed the caller's Limits to %+v", lim)
	}
	lim.MaxOperations = 1 // the cache keeps its own copy
	if s, err = c.Compile(`"x"`); err != nil || s.Limits() != want {
		t.Errorf("the cache compiled with %+v (%v), want %+v", s.Limits(), err, want)
	}
}

func TestRenderFallsBackOnLimits(t *testing.T) {
	// RAP DS-2: a failing script (including a limit overrun) is not an error;
	// the default rendering is shown instead.
	args := json.RawMessage(`{"a": 1, "b": "x"}`)
	for _, src := range []string{`loop {}`, `fn f() { f() } f()`, `let s = "x"; loop { s += s; }`} {
		if got := Render(context.Background(), "my_tool", src, args); got != `my_tool({"a":1,"b":"x"})` {
			t.Errorf("%q: Render = %q", src, got)
		}
	}
}
