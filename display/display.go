// Package display evaluates RAP tool display scripts.
//
// A RAP toolset may carry a `displayScript` per tool: a Rhai script whose
// scope holds one object map, `args`, and which returns the string shown to
// a person instead of the raw JSON call (RAP DS-1, DS-2). Display scripts
// are untrusted and purely cosmetic (DS-3, DS-4), so this package implements
// a sandboxed, standard-library-only interpreter for a subset of Rhai with
// bounded operations, call depth, expression depth, data sizes and wall
// time, and no I/O at all. Render never fails: on any problem it returns the
// default rendering `tool_name(args)` with args as compact JSON.
//
// See docs/display.md for the supported language subset and the exact
// deviations from Rhai.
package display

import (
	"bytes"
	"container/list"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"time"
)

// Limits bounds the resources a display script may use (RAP DS-3).
// A zero or negative field means "use the default" (see DefaultLimits);
// there is deliberately no way to switch a limit off.
type Limits struct {
	// MaxOperations bounds the number of evaluation steps (every expression
	// evaluation and loop iteration counts; copying data counts per element).
	MaxOperations int64
	// MaxCallDepth bounds nested script-function calls (recursion).
	MaxCallDepth int
	// MaxExprDepth bounds the syntactic nesting depth, enforced at compile time.
	MaxExprDepth int
	// MaxStringLen bounds the length in bytes of any string produced.
	MaxStringLen int
	// MaxArrayLen bounds the number of elements of any array.
	MaxArrayLen int
	// MaxMapLen bounds the number of properties of any object map.
	MaxMapLen int
	// Timeout bounds the wall-clock time of one evaluation.
	Timeout time.Duration
}

// DefaultLimits returns the default sandbox limits: 100_000 operations,
// call depth 32, expression depth 64, 64 KiB strings, 10_000-element arrays
// and maps, and a 50ms timeout.
func DefaultLimits() Limits {
	return Limits{
		MaxOperations: 100_000,
		MaxCallDepth:  32,
		MaxExprDepth:  64,
		MaxStringLen:  64 << 10,
		MaxArrayLen:   10_000,
		MaxMapLen:     10_000,
		Timeout:       50 * time.Millisecond,
	}
}

func (l Limits) normalized() Limits {
	d := DefaultLimits()
	if l.MaxOperations <= 0 {
		l.MaxOperations = d.MaxOperations
	}
	if l.MaxCallDepth <= 0 {
		l.MaxCallDepth = d.MaxCallDepth
	}
	if l.MaxExprDepth <= 0 {
		l.MaxExprDepth = d.MaxExprDepth
	}
	if l.MaxStringLen <= 0 {
		l.MaxStringLen = d.MaxStringLen
	}
	if l.MaxArrayLen <= 0 {
		l.MaxArrayLen = d.MaxArrayLen
	}
	if l.MaxMapLen <= 0 {
		l.MaxMapLen = d.MaxMapLen
	}
	if l.Timeout <= 0 {
		l.Timeout = d.Timeout
	}
	return l
}

// limitsOrDefault returns the limits a constructor works with: a copy of
// *l with its zero fields set to the defaults, or DefaultLimits() for nil.
func limitsOrDefault(l *Limits) Limits {
	if l == nil {
		return DefaultLimits()
	}
	return l.normalized()
}

// Script is a compiled display script. It is immutable and safe for
// concurrent use by multiple goroutines.
type Script struct {
	src    string
	prog   *blockNode
	fns    map[string]*fnDef
	limits Limits
}

const (
	// maxScriptLen bounds the size of a script accepted by Compile.
	maxScriptLen = 1 << 20
	// maxCachedScriptLen bounds the size of scripts kept in a Cache, so a
	// cache's memory stays bounded (larger scripts are compiled every time).
	maxCachedScriptLen = 64 << 10
)

// Compile parses a display script. Syntax errors are *SyntaxError values
// whose message includes the line:column of the problem; scripts nested
// deeper than Limits.MaxExprDepth fail with an error wrapping ErrExprTooDeep
// and scripts over 1 MiB are rejected. The script runs within limits: nil
// means DefaultLimits(), and a zero or negative field takes its default.
// Compile does not change *limits.
func Compile(src string, limits *Limits) (s *Script, err error) {
	lim := limitsOrDefault(limits)
	if len(src) > maxScriptLen {
		return nil, &SyntaxError{Pos: Pos{1, 1}, Msg: fmt.Sprintf("script of %d bytes exceeds the limit of %d", len(src), maxScriptLen)}
	}
	defer func() {
		if r := recover(); r != nil {
			s, err = nil, fmt.Errorf("display: internal error while compiling: %v", r)
		}
	}()
	prog, fns, err := parse(src, lim.MaxExprDepth, lim.MaxStringLen)
	if err != nil {
		return nil, err
	}
	return &Script{src: src, prog: prog, fns: fns, limits: lim}, nil
}

// Limits returns the limits the script was compiled with.
func (s *Script) Limits() Limits { return s.limits }

// Eval runs the script with `args` in scope and returns the string it
// produces. args is typically decoded from JSON (json.Number or float64
// numbers are both accepted; integral numbers become Rhai INT, others
// FLOAT). A result that is not a string is an error wrapping ErrNotString.
// Limit overruns return errors wrapping ErrTooManyOperations, ErrCallDepth,
// ErrStringTooLong, ErrArrayTooLarge, ErrMapTooLarge or ErrTimeout.
func (s *Script) Eval(ctx context.Context, args map[string]any) (string, error) {
	v, err := s.evalValue(ctx, args)
	if err != nil {
		return "", err
	}
	str, ok := v.(string)
	if !ok {
		return "", &EvalError{Msg: "script returned " + typeName(v) + ", not a string", Err: ErrNotString}
	}
	if len(str) > s.limits.MaxStringLen { // e.g. a huge string passed through from args
		return "", &EvalError{Msg: fmt.Sprintf("result of %d bytes exceeds the limit of %d", len(str), s.limits.MaxStringLen), Err: ErrStringTooLong}
	}
	return str, nil
}

// evalValue runs the script and returns its raw result value.
func (s *Script) evalValue(ctx context.Context, args map[string]any) (v value, err error) {
	if ctx == nil {
		ctx = context.Background()
	}
	defer func() {
		if r := recover(); r != nil {
			v, err = nil, fmt.Errorf("display: internal error while evaluating: %v", r)
		}
	}()
	av, err := fromGo(args, 0)
	if err != nil {
		return nil, err
	}
	in := &interp{
		ctx:      ctx,
		lim:      s.limits,
		deadline: time.Now().Add(s.limits.Timeout),
		fns:      s.fns,
		scope:    make([]binding, 1, 16),
	}
	if dl, ok := ctx.Deadline(); ok && dl.Before(in.deadline) {
		in.deadline = dl
	}
	if err := ctx.Err(); err != nil {
		return nil, &EvalError{Msg: "script cancelled: " + err.Error(), Err: ErrTimeout}
	}
	in.scope[0] = binding{name: "args", v: av}
	v, err = in.block(s.prog)
	if err != nil {
		var c *ctrl
		if errors.As(err, &c) && c.kind == cReturn {
			return c.val, nil
		}
		return nil, err
	}
	return v, nil
}

// fromGo converts decoded JSON (or similar plain Go values) into script values.
func fromGo(v any, depth int) (value, error) {
	if depth > 10_000 {
		return nil, &EvalError{Msg: "args nested too deeply", Err: ErrExprTooDeep}
	}
	switch x := v.(type) {
	case nil:
		return unit, nil
	case bool:
		return x, nil
	case string:
		return x, nil
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return i, nil
		}
		f, err := x.Float64()
		if err != nil {
			if ne, ok := err.(interface{ Unwrap() error }); !ok || ne.Unwrap() == nil {
				return nil, &EvalError{Msg: "invalid number in args: " + x.String()}
			}
		}
		return f, nil
	case float64:
		if x == math.Trunc(x) && math.Abs(x) <= 1<<53 {
			return int64(x), nil
		}
		return x, nil
	case float32:
		return fromGo(float64(x), depth)
	case int:
		return int64(x), nil
	case int64:
		return x, nil
	case int32:
		return int64(x), nil
	case uint32:
		return int64(x), nil
	case map[string]any:
		m := make(map[string]value, len(x))
		for k, e := range x {
			ev, err := fromGo(e, depth+1)
			if err != nil {
				return nil, err
			}
			m[k] = ev
		}
		return &object{m: m}, nil
	case []any:
		items := make([]value, len(x))
		for i, e := range x {
			ev, err := fromGo(e, depth+1)
			if err != nil {
				return nil, err
			}
			items[i] = ev
		}
		return &array{items: items}, nil
	case []string:
		items := make([]value, len(x))
		for i, e := range x {
			items[i] = e
		}
		return &array{items: items}, nil
	}
	return nil, &EvalError{Msg: fmt.Sprintf("unsupported args value of Go type %T", v)}
}

// Default is the fallback rendering `tool_name(args)` with args as compact
// JSON (RAP DS-2); empty or null args render as `{}`.
func Default(toolName string, args json.RawMessage) string {
	trimmed := bytes.TrimSpace(args)
	if len(trimmed) == 0 || bytes.Equal(trimmed, []byte("null")) {
		return toolName + "({})"
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, trimmed); err != nil {
		return toolName + "(" + strings.Join(strings.Fields(string(trimmed)), " ") + ")"
	}
	return toolName + "(" + buf.String() + ")"
}

// decodeArgs parses tool-call arguments for a script (numbers as json.Number).
func decodeArgs(args json.RawMessage) (map[string]any, bool) {
	trimmed := bytes.TrimSpace(args)
	if len(trimmed) == 0 || bytes.Equal(trimmed, []byte("null")) {
		return map[string]any{}, true
	}
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil || m == nil {
		return nil, false
	}
	if dec.More() {
		return nil, false
	}
	return m, true
}

// Cache is a bounded LRU cache of compiled display scripts, keyed by script
// text, with its own limits. It is safe for concurrent use.
type Cache struct {
	mu     sync.Mutex
	size   int
	limits Limits // with the defaults filled in; never changed
	ll     *list.List
	items  map[string]*list.Element
}

type cacheEntry struct {
	src    string
	script *Script
	err    error
}

// NewCache returns a cache holding at most size compiled scripts (size < 1
// means 1). Every script compiled through the cache runs within limits, as
// for Compile: nil means DefaultLimits(), and a zero or negative field
// takes its default. NewCache does not change *limits, nor keep it.
func NewCache(size int, limits *Limits) *Cache {
	if size < 1 {
		size = 1
	}
	return &Cache{size: size, limits: limitsOrDefault(limits), ll: list.New(), items: map[string]*list.Element{}}
}

// Compile returns the compiled script for src, compiling it on a miss.
// Compile errors are cached too; scripts over 64 KiB are not cached.
func (c *Cache) Compile(src string) (*Script, error) {
	c.mu.Lock()
	if el, ok := c.items[src]; ok {
		c.ll.MoveToFront(el)
		e := el.Value.(*cacheEntry)
		c.mu.Unlock()
		return e.script, e.err
	}
	c.mu.Unlock()
	s, err := Compile(src, &c.limits)
	if len(src) > maxCachedScriptLen {
		return s, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.items[src]; ok {
		c.ll.MoveToFront(el)
		e := el.Value.(*cacheEntry)
		return e.script, e.err
	}
	c.items[src] = c.ll.PushFront(&cacheEntry{src: src, script: s, err: err})
	for c.ll.Len() > c.size {
		last := c.ll.Back()
		c.ll.Remove(last)
		delete(c.items, last.Value.(*cacheEntry).src)
	}
	return s, err
}

// Len reports the number of cached scripts.
func (c *Cache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ll.Len()
}

// Render evaluates script against args and returns its string, or the
// default rendering (see Default) when the script is empty, fails to
// compile, fails at run time, exceeds a limit, or returns a non-string
// (RAP DS-2: a failure is not an error). Render never panics.
func (c *Cache) Render(ctx context.Context, toolName, script string, args json.RawMessage) string {
	if strings.TrimSpace(script) == "" {
		return Default(toolName, args)
	}
	m, ok := decodeArgs(args)
	if !ok {
		return Default(toolName, args)
	}
	s, err := c.Compile(script)
	if err != nil {
		return Default(toolName, args)
	}
	out, err := s.Eval(ctx, m)
	if err != nil {
		return Default(toolName, args)
	}
	return out
}

var defaultCache = NewCache(1024, nil)

// Render is Cache.Render on a package-level cache of up to 1024 compiled
// scripts with DefaultLimits. It never fails: it returns the script's
// output or the default `tool_name(compact-json-args)` (RAP DS-2).
func Render(ctx context.Context, toolName, script string, args json.RawMessage) string {
	return defaultCache.Render(ctx, toolName, script, args)
}
