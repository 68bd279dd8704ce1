package display

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
	"unicode/utf8"
)

// Sentinel errors wrapped by *EvalError / *SyntaxError; test with errors.Is.
var (
	// ErrTooManyOperations: Limits.MaxOperations was exceeded.
	ErrTooManyOperations = errors.New("too many operations")
	// ErrCallDepth: script functions nested deeper than Limits.MaxCallDepth.
	ErrCallDepth = errors.New("function calls nested too deeply")
	// ErrExprTooDeep: source nested deeper than Limits.MaxExprDepth (compile time).
	ErrExprTooDeep = errors.New("expression nested too deeply")
	// ErrStringTooLong: a string would exceed Limits.MaxStringLen.
	ErrStringTooLong = errors.New("string too long")
	// ErrArrayTooLarge: an array would exceed Limits.MaxArrayLen.
	ErrArrayTooLarge = errors.New("array too large")
	// ErrMapTooLarge: an object map would exceed Limits.MaxMapLen.
	ErrMapTooLarge = errors.New("object map too large")
	// ErrTimeout: Limits.Timeout elapsed or the context was cancelled.
	ErrTimeout = errors.New("script timed out")
	// ErrNotString: the script's result is not a string (RAP DS-2).
	ErrNotString = errors.New("script did not return a string")
	// ErrThrown: the script executed `throw`.
	ErrThrown = errors.New("script threw an exception")
)

// EvalError is a runtime error of a display script.
type EvalError struct {
	Pos Pos
	Msg string
	Err error // sentinel, if any

	thrown value // the value of a `throw`, for try/catch
}

// Error formats the error with its position, e.g. "runtime error at 1:5: ...".
func (e *EvalError) Error() string {
	if e.Pos.Line == 0 {
		return "runtime error: " + e.Msg
	}
	return fmt.Sprintf("runtime error at %d:%d: %s", e.Pos.Line, e.Pos.Col, e.Msg)
}

// Unwrap returns the sentinel error, if any.
func (e *EvalError) Unwrap() error { return e.Err }

type ctrlKind uint8

const (
	cBreak ctrlKind = iota
	cContinue
	cReturn
)

// ctrl carries break/continue/return through the evaluator as an error.
type ctrl struct {
	kind ctrlKind
	val  value
}

func (c *ctrl) Error() string { return "control flow" }

var continueSig = &ctrl{kind: cContinue}

type binding struct {
	name   string
	v      value
	cnst   bool
	shared *cell // non-nil once captured by an anonymous function
}

// cell holds a variable shared between a scope and the closures that
// captured it (Rhai makes captured variables shared).
type cell struct{ v value }

func (b *binding) get() value {
	if b.shared != nil {
		return b.shared.v
	}
	return b.v
}

func (b *binding) set(v value) {
	if b.shared != nil {
		b.shared.v = v
		return
	}
	b.v = v
}

type interp struct {
	ctx       context.Context
	lim       Limits
	ops       int64
	deadline  time.Time
	callDepth int
	fns       map[string]*fnDef
	scope     []binding
	this      *value
}

func rtErr(p Pos, format string, a ...any) error {
	return &EvalError{Pos: p, Msg: fmt.Sprintf(format, a...)}
}

func limitErr(p Pos, sentinel error, format string, a ...any) error {
	return &EvalError{Pos: p, Msg: fmt.Sprintf(format, a...), Err: sentinel}
}

// charge counts n operations against the limits and periodically checks the
// wall-clock deadline and context cancellation.
func (in *interp) charge(p Pos, n int64) error {
	before := in.ops
	in.ops += n
	if in.ops > in.lim.MaxOperations {
		return limitErr(p, ErrTooManyOperations, "too many operations (limit %d)", in.lim.MaxOperations)
	}
	if before>>8 != in.ops>>8 {
		if err := in.ctx.Err(); err != nil {
			return limitErr(p, ErrTimeout, "script cancelled: %v", err)
		}
		if time.Now().After(in.deadline) {
			return limitErr(p, ErrTimeout, "script exceeded its time limit of %v", in.lim.Timeout)
		}
	}
	return nil
}

func (in *interp) checkStr(p Pos, n int) error {
	if n > in.lim.MaxStringLen {
		return limitErr(p, ErrStringTooLong, "string length %d exceeds the limit of %d bytes", n, in.lim.MaxStringLen)
	}
	return nil
}

// newStr checks and charges a freshly built string.
func (in *interp) newStr(p Pos, s string) (value, error) {
	if err := in.checkStr(p, len(s)); err != nil {
		return nil, err
	}
	if len(s) >= 256 {
		if err := in.charge(p, int64(len(s)>>8)); err != nil {
			return nil, err
		}
	}
	return s, nil
}

func (in *interp) checkArr(p Pos, n int) error {
	if n > in.lim.MaxArrayLen {
		return limitErr(p, ErrArrayTooLarge, "array size %d exceeds the limit of %d", n, in.lim.MaxArrayLen)
	}
	return nil
}

func (in *interp) checkMap(p Pos, n int) error {
	if n > in.lim.MaxMapLen {
		return limitErr(p, ErrMapTooLarge, "object map size %d exceeds the limit of %d", n, in.lim.MaxMapLen)
	}
	return nil
}

// own returns a value safe to store: arrays and maps are deep-copied
// (Rhai values have value semantics); copying is charged as operations.
func (in *interp) own(p Pos, v value) (value, error) {
	switch v.(type) {
	case *array, *object:
		var n int64
		c := cloneValue(v, &n)
		if err := in.charge(p, n); err != nil {
			return nil, err
		}
		return c, nil
	}
	return v, nil
}

// isFresh reports whether evaluating n always yields a newly built value
// that does not alias any variable (so storing it needs no copy).
func isFresh(n node) bool {
	switch x := n.(type) {
	case *litNode, *arrayNode, *mapNode, *interpNode, *unaryNode:
		return true
	case *binaryNode:
		return x.op != "??"
	}
	return false
}

func (in *interp) ownNode(n node, v value) (value, error) {
	if isFresh(n) {
		return v, nil
	}
	return in.own(n.position(), v)
}

// toStr renders v with to_string semantics, bounded by MaxStringLen.
func (in *interp) toStr(p Pos, v value, debug bool) (string, error) {
	switch x := v.(type) {
	case string:
		if !debug {
			return x, nil
		}
	case unitT, bool, int64, float64, charT, rangeT, *fnPtr:
		if debug {
			return toDebug(v), nil
		}
		return toDisplay(v), nil
	}
	f := &formatter{max: in.lim.MaxStringLen}
	f.write(v)
	if f.over {
		return "", limitErr(p, ErrStringTooLong, "string representation exceeds the limit of %d bytes", in.lim.MaxStringLen)
	}
	s := f.b.String()
	if _, err := in.newStr(p, s); err != nil {
		return "", err
	}
	return s, nil
}

type formatter struct {
	b    strings.Builder
	max  int
	over bool
}

func (f *formatter) write(v value) {
	if f.over {
		return
	}
	switch x := v.(type) {
	case *array:
		f.b.WriteByte('[')
		for i, it := range x.items {
			if i > 0 {
				f.b.WriteString(", ")
			}
			f.write(it)
			if f.over {
				return
			}
		}
		f.b.WriteByte(']')
	case *object:
		f.b.WriteString("#{")
		for i, k := range sortedKeys(x.m) {
			if i > 0 {
				f.b.WriteString(", ")
			}
			writeQuoted(&f.b, k, '"')
			f.b.WriteString(": ")
			f.write(x.m[k])
			if f.over {
				return
			}
		}
		f.b.WriteByte('}')
	default:
		writeDebug(&f.b, v)
	}
	if f.b.Len() > f.max {
		f.over = true
	}
}

// writeJSON mirrors Rhai's format_map_as_json (used by Map::to_json without
// the `metadata` feature): keys and strings in Rust Debug quoting, () as
// null, nested maps/arrays recursively, everything else in Debug form.
func (f *formatter) writeJSON(v value) {
	if f.over {
		return
	}
	switch x := v.(type) {
	case unitT:
		f.b.WriteString("null")
	case *object:
		f.b.WriteByte('{')
		for i, k := range sortedKeys(x.m) {
			if i > 0 {
				f.b.WriteByte(',')
			}
			writeQuoted(&f.b, k, '"')
			f.b.WriteByte(':')
			f.writeJSON(x.m[k])
			if f.over {
				return
			}
		}
		f.b.WriteByte('}')
	case *array:
		f.b.WriteByte('[')
		for i, it := range x.items {
			if i > 0 {
				f.b.WriteByte(',')
			}
			f.writeJSON(it)
			if f.over {
				return
			}
		}
		f.b.WriteByte(']')
	case *fnPtr:
		writeQuoted(&f.b, x.name, '"')
	default:
		writeDebug(&f.b, v)
	}
	if f.b.Len() > f.max {
		f.over = true
	}
}

// ---- scope ----

func (in *interp) lookup(name string) int {
	for i := len(in.scope) - 1; i >= 0; i-- {
		if in.scope[i].name == name {
			return i
		}
	}
	return -1
}

func (in *interp) isConst(name string) bool {
	j := in.lookup(name)
	return j >= 0 && in.scope[j].cnst
}

// ---- evaluation ----

func (in *interp) eval(n node) (value, error) {
	if err := in.charge(n.position(), 1); err != nil {
		return nil, err
	}
	switch x := n.(type) {
	case *litNode:
		return x.v, nil
	case *varNode:
		i := in.lookup(x.name)
		if i < 0 {
			return nil, rtErr(x.p, "variable not found: %s", x.name)
		}
		return in.scope[i].get(), nil
	case *thisNode:
		if in.this == nil {
			return nil, rtErr(x.p, "'this' is not bound (function not called in method-call style)")
		}
		return *in.this, nil
	case *interpNode:
		var b strings.Builder
		for _, part := range x.parts {
			v, err := in.eval(part)
			if err != nil {
				return nil, err
			}
			s, err := in.toStr(part.position(), v, false)
			if err != nil {
				return nil, err
			}
			if err := in.checkStr(x.p, b.Len()+len(s)); err != nil {
				return nil, err
			}
			b.WriteString(s)
		}
		return in.newStr(x.p, b.String())
	case *arrayNode:
		if err := in.checkArr(x.p, len(x.elems)); err != nil {
			return nil, err
		}
		items := make([]value, len(x.elems))
		for i, e := range x.elems {
			v, err := in.eval(e)
			if err != nil {
				return nil, err
			}
			if items[i], err = in.ownNode(e, v); err != nil {
				return nil, err
			}
		}
		return &array{items: items}, nil
	case *mapNode:
		if err := in.checkMap(x.p, len(x.keys)); err != nil {
			return nil, err
		}
		m := make(map[string]value, len(x.keys))
		for i, k := range x.keys {
			v, err := in.eval(x.vals[i])
			if err != nil {
				return nil, err
			}
			if m[k], err = in.ownNode(x.vals[i], v); err != nil {
				return nil, err
			}
		}
		return &object{m: m}, nil
	case *unaryNode:
		v, err := in.eval(x.x)
		if err != nil {
			return nil, err
		}
		return in.unary(x.p, x.op, v)
	case *binaryNode:
		l, err := in.eval(x.l)
		if err != nil {
			return nil, err
		}
		r, err := in.eval(x.r)
		if err != nil {
			return nil, err
		}
		return in.binary(x.p, x.op, l, r)
	case *andNode:
		l, err := in.evalBool(x.l, "&&")
		if err != nil || !l {
			return false, err
		}
		r, err := in.evalBool(x.r, "&&")
		return r, err
	case *orNode:
		l, err := in.evalBool(x.l, "||")
		if err != nil || l {
			return true, err
		}
		r, err := in.evalBool(x.r, "||")
		return r, err
	case *coalesceNode:
		l, err := in.eval(x.l)
		if err != nil {
			return nil, err
		}
		if _, ok := l.(unitT); !ok {
			return l, nil
		}
		return in.eval(x.r)
	case *propNode:
		v, err := in.eval(x.x)
		if err != nil {
			return nil, err
		}
		return in.getProp(x, v)
	case *indexNode:
		v, err := in.eval(x.x)
		if err != nil {
			return nil, err
		}
		if _, ok := v.(unitT); ok && x.elvis {
			return unit, nil
		}
		idx, err := in.eval(x.idx)
		if err != nil {
			return nil, err
		}
		return in.index(x.p, v, idx)
	case *callNode:
		return in.call(x)
	case *methodNode:
		return in.method(x)
	case *assignNode:
		return unit, in.assign(x)
	case *letNode:
		var v value = unit
		if x.val != nil {
			var err error
			if v, err = in.eval(x.val); err != nil {
				return nil, err
			}
			if v, err = in.ownNode(x.val, v); err != nil {
				return nil, err
			}
		}
		in.scope = append(in.scope, binding{name: x.name, v: v, cnst: x.isCon})
		return unit, nil
	case *blockNode:
		return in.block(x)
	case *ifNode:
		c, err := in.evalBool(x.cond, "if")
		if err != nil {
			return nil, err
		}
		if c {
			return in.eval(x.then)
		}
		if x.els_ != nil {
			return in.eval(x.els_)
		}
		return unit, nil
	case *switchNode:
		return in.evalSwitch(x)
	case *whileNode:
		for {
			if x.cond != nil {
				c, err := in.evalBool(x.cond, "while")
				if err != nil {
					return nil, err
				}
				if !c {
					return unit, nil
				}
			} else if err := in.charge(x.p, 1); err != nil {
				return nil, err
			}
			if _, err := in.eval(x.body); err != nil {
				if v, brk, ok := loopCtrl(err); ok {
					if brk {
						return v, nil
					}
					continue
				}
				return nil, err
			}
		}
	case *doNode:
		for {
			if _, err := in.eval(x.body); err != nil {
				if v, brk, ok := loopCtrl(err); ok {
					if brk {
						return v, nil
					}
				} else {
					return nil, err
				}
			}
			c, err := in.evalBool(x.cond, "do")
			if err != nil {
				return nil, err
			}
			if c == x.until {
				return unit, nil
			}
		}
	case *forNode:
		return in.evalFor(x)
	case *breakNode:
		var v value = unit
		if x.val != nil {
			var err error
			if v, err = in.eval(x.val); err != nil {
				return nil, err
			}
		}
		return nil, &ctrl{kind: cBreak, val: v}
	case *continueNode:
		return nil, continueSig
	case *returnNode:
		var v value = unit
		if x.val != nil {
			var err error
			if v, err = in.eval(x.val); err != nil {
				return nil, err
			}
		}
		return nil, &ctrl{kind: cReturn, val: v}
	case *tryNode:
		v, err := in.eval(x.body)
		if err == nil {
			return v, nil
		}
		ev, ok := err.(*EvalError)
		if !ok || !catchable(ev) {
			return nil, err
		}
		errVal := ev.thrown
		if ev.Err != ErrThrown {
			errVal = &object{m: map[string]value{
				"message":  ev.Msg,
				"line":     int64(ev.Pos.Line),
				"position": int64(ev.Pos.Col),
			}}
		}
		mark := len(in.scope)
		in.scope = append(in.scope, binding{name: x.errVar, v: errVal})
		r, err := in.eval(x.catch)
		clear(in.scope[mark:])
		in.scope = in.scope[:mark]
		return r, err
	case *closureNode:
		f := &fnPtr{name: "anonymous", def: x.def}
		for _, name := range x.captures {
			if j := in.lookup(name); j >= 0 {
				b := &in.scope[j]
				if b.shared == nil {
					b.shared = &cell{v: b.v}
					b.v = nil
				}
				f.env = append(f.env, binding{name: name, cnst: b.cnst, shared: b.shared})
			}
		}
		return f, nil
	case *throwNode:
		var v value = unit
		if x.val != nil {
			var err error
			if v, err = in.eval(x.val); err != nil {
				return nil, err
			}
		}
		s, err := in.toStr(x.p, v, false)
		if err != nil {
			s = typeName(v)
		}
		return nil, &EvalError{Pos: x.p, Msg: "exception thrown: " + s, Err: ErrThrown, thrown: v}
	}
	return nil, rtErr(n.position(), "unsupported construct")
}

// catchable reports whether try/catch may intercept err: sandbox limit
// overruns never are (book "Catch Exceptions": non-catchable exceptions).
func catchable(e *EvalError) bool {
	switch e.Err {
	case ErrTooManyOperations, ErrCallDepth, ErrExprTooDeep, ErrStringTooLong,
		ErrArrayTooLarge, ErrMapTooLarge, ErrTimeout:
		return false
	}
	return true
}

// loopCtrl interprets a loop body error: (value, isBreak, isLoopControl).
func loopCtrl(err error) (value, bool, bool) {
	c, ok := err.(*ctrl)
	if !ok || c.kind == cReturn {
		return nil, false, false
	}
	if c.kind == cBreak {
		return c.val, true, true
	}
	return nil, false, true
}

func (in *interp) evalBool(n node, what string) (bool, error) {
	v, err := in.eval(n)
	if err != nil {
		return false, err
	}
	b, ok := v.(bool)
	if !ok {
		return false, rtErr(n.position(), "%s expects a bool but got %s", what, typeName(v))
	}
	return b, nil
}

func (in *interp) block(x *blockNode) (value, error) {
	mark := len(in.scope)
	var last value = unit
	var err error
	for _, st := range x.stmts {
		if last, err = in.eval(st); err != nil {
			break
		}
	}
	clear(in.scope[mark:])
	in.scope = in.scope[:mark]
	return last, err
}

func (in *interp) evalSwitch(x *switchNode) (value, error) {
	v, err := in.eval(x.x)
	if err != nil {
		return nil, err
	}
	run := func(c *switchCase) (bool, value, error) {
		if c.cond != nil {
			ok, err := in.evalBool(c.cond, "switch case condition")
			if err != nil || !ok {
				return false, nil, err
			}
		}
		r, err := in.eval(c.body)
		return true, r, err
	}
	for i := range x.cases {
		c := &x.cases[i]
		if c.isDef {
			continue
		}
		for _, cv := range c.vals {
			if strictEqual(v, cv) {
				if ok, r, err := run(c); ok || err != nil {
					return r, err
				}
				break
			}
		}
	}
	if isNumeric(v) {
		for i := range x.cases {
			c := &x.cases[i]
			hit := false
			for _, r := range c.rngs {
				if inRange(r, v) {
					hit = true
					break
				}
			}
			if !hit {
				continue
			}
			if ok, r, err := run(c); ok || err != nil {
				return r, err
			}
		}
	}
	if n := len(x.cases); n > 0 && x.cases[n-1].isDef {
		return in.eval(x.cases[n-1].body)
	}
	return unit, nil
}

func inRange(r rangeT, v value) bool {
	switch x := v.(type) {
	case int64:
		if r.inclusive {
			return x >= r.start && x <= r.end
		}
		return x >= r.start && x < r.end
	case float64:
		if r.inclusive {
			return x >= float64(r.start) && x <= float64(r.end)
		}
		return x >= float64(r.start) && x < float64(r.end)
	}
	return false
}

func (in *interp) evalFor(x *forNode) (value, error) {
	it, err := in.eval(x.iter)
	if err != nil {
		return nil, err
	}
	mark := len(in.scope)
	defer func() {
		clear(in.scope[mark:])
		in.scope = in.scope[:mark]
	}()
	in.scope = append(in.scope, binding{name: x.name, v: unit})
	if x.counter != "" {
		in.scope = append(in.scope, binding{name: x.counter, v: int64(0)})
	}
	var count int64
	body := func(v value) (value, bool, error) {
		if err := in.charge(x.p, 1); err != nil {
			return nil, true, err
		}
		in.scope = in.scope[:mark]
		in.scope = append(in.scope, binding{name: x.name, v: v})
		if x.counter != "" {
			in.scope = append(in.scope, binding{name: x.counter, v: count})
		}
		count++
		if _, err := in.eval(x.body); err != nil {
			if v, brk, ok := loopCtrl(err); ok {
				if brk {
					return v, true, nil
				}
				return nil, false, nil
			}
			return nil, true, err
		}
		return nil, false, nil
	}
	switch c := it.(type) {
	case *array:
		items := append([]value(nil), c.items...)
		for _, e := range items {
			e, err := in.own(x.p, e)
			if err != nil {
				return nil, err
			}
			if v, stop, err := body(e); stop || err != nil {
				return orUnit(v), err
			}
		}
	case string:
		for _, r := range c {
			if v, stop, err := body(charT(r)); stop || err != nil {
				return orUnit(v), err
			}
		}
	case rangeT:
		step := c.step
		if step == 0 {
			step = 1
		}
		for i := c.start; ; {
			if step > 0 && (i > c.end || !c.inclusive && i == c.end) || step < 0 && (i < c.end || !c.inclusive && i == c.end) {
				break
			}
			if v, stop, err := body(i); stop || err != nil {
				return orUnit(v), err
			}
			n := i + step
			if (step > 0) != (n > i) {
				break // overflow
			}
			i = n
		}
	default:
		return nil, rtErr(x.iter.position(), "cannot iterate over a value of type %s", typeName(it))
	}
	return unit, nil
}

func orUnit(v value) value {
	if v == nil {
		return unit
	}
	return v
}

// ---- properties and indexing ----

var getters = map[string]bool{
	"len": true, "is_empty": true, "bytes": true, "is_odd": true, "is_even": true,
	"is_zero": true, "start": true, "end": true, "is_inclusive": true, "is_exclusive": true,
	"floor": true, "ceiling": true, "round": true, "int": true, "fraction": true,
	"is_nan": true, "is_finite": true, "is_infinite": true, "chars": true,
}

func (in *interp) getProp(x *propNode, v value) (value, error) {
	switch o := v.(type) {
	case *object:
		if r, ok := o.m[x.name]; ok {
			return r, nil
		}
		return unit, nil
	case unitT:
		if x.elvis {
			return unit, nil
		}
	}
	if getters[x.name] {
		if b, ok := builtins[x.name]; ok {
			r, err := b.fn(in, x.p, []value{v})
			if err != errNoMatch {
				return r, err
			}
		}
	}
	return nil, rtErr(x.p, "unknown property '%s' for a value of type %s", x.name, typeName(v))
}

func normIndex(i int64, n int) (int, bool) {
	if i < 0 {
		i += int64(n)
	}
	if i < 0 || i >= int64(n) {
		return 0, false
	}
	return int(i), true
}

func (in *interp) index(p Pos, v, idx value) (value, error) {
	switch c := v.(type) {
	case *array:
		i, ok := idx.(int64)
		if !ok {
			return nil, rtErr(p, "array index must be an integer, not %s", typeName(idx))
		}
		j, ok := normIndex(i, len(c.items))
		if !ok {
			return nil, rtErr(p, "array index %d out of bounds for array of length %d", i, len(c.items))
		}
		return c.items[j], nil
	case *object:
		var key string
		switch k := idx.(type) {
		case string:
			key = k
		case charT:
			key = string(rune(k))
		default:
			return nil, rtErr(p, "object map key must be a string, not %s", typeName(idx))
		}
		if r, ok := c.m[key]; ok {
			return r, nil
		}
		return unit, nil
	case string:
		if r, ok := idx.(rangeT); ok {
			return stringSlice(p, c, r)
		}
		i, ok := idx.(int64)
		if !ok {
			return nil, rtErr(p, "string index must be an integer, not %s", typeName(idx))
		}
		n := utf8.RuneCountInString(c)
		j, ok := normIndex(i, n)
		if !ok {
			return nil, rtErr(p, "string index %d out of bounds for string of %d characters", i, n)
		}
		for _, r := range c {
			if j == 0 {
				return charT(r), nil
			}
			j--
		}
	case int64:
		i, ok := idx.(int64)
		if !ok {
			return nil, rtErr(p, "bit-field index must be an integer, not %s", typeName(idx))
		}
		j, ok := normIndex(i, 64)
		if !ok {
			return nil, rtErr(p, "bit-field index %d out of bounds", i)
		}
		return c&(1<<uint(j)) != 0, nil
	}
	return nil, rtErr(p, "cannot index into a value of type %s", typeName(v))
}

// stringSlice follows Rhai's string range indexing (src/eval/chaining.rs):
// negative bounds count from the end; a negative start beyond the string is
// an error, a negative end beyond it means 0.
func stringSlice(p Pos, s string, r rangeT) (value, error) {
	if s == "" {
		return s, nil
	}
	n := int64(utf8.RuneCountInString(s))
	start, end := r.start, r.end
	if start < 0 {
		if start == math.MinInt64 || -start > n {
			return nil, rtErr(p, "string index %d out of bounds for string of %d characters", start, n)
		}
		start += n
	}
	if end < 0 {
		if end == math.MinInt64 || -end > n {
			end = 0
		} else {
			end += n
		}
	}
	var take int64
	if r.inclusive {
		if start == 0 && end >= n-1 {
			return s, nil
		}
		if end > start {
			take = end - start + 1
		}
	} else {
		if start == 0 && end >= n {
			return s, nil
		}
		if end > start {
			take = end - start
		}
	}
	if start >= n || take == 0 {
		return "", nil
	}
	rs := []rune(s)
	stop := start + take
	if stop > n || stop < 0 {
		stop = n
	}
	return string(rs[start:stop]), nil
}

// ---- places (assignment targets) ----

type placeKind uint8

const (
	plVar placeKind = iota
	plThis
	plMap
	plArr
	plStr
	plBit
)

type place struct {
	kind   placeKind
	cnst   bool
	si     int
	m      *object
	key    string
	arr    *array
	idx    int
	parent *place
}

func (in *interp) placeOf(n node) (*place, error) {
	switch x := n.(type) {
	case *varNode:
		i := in.lookup(x.name)
		if i < 0 {
			return nil, rtErr(x.p, "variable not found: %s", x.name)
		}
		return &place{kind: plVar, si: i, cnst: in.scope[i].cnst}, nil
	case *thisNode:
		if in.this == nil {
			return nil, rtErr(x.p, "'this' is not bound (function not called in method-call style)")
		}
		return &place{kind: plThis}, nil
	case *propNode:
		par, err := in.placeOf(x.x)
		if err != nil || par == nil {
			return nil, err
		}
		pv := in.get(par)
		if _, isUnit := pv.(unitT); isUnit && x.elvis {
			return nil, nil // `x?.p = v` does nothing when x is ()
		}
		o, ok := pv.(*object)
		if !ok {
			return nil, rtErr(x.p, "cannot set property '%s' of a value of type %s", x.name, typeName(pv))
		}
		return &place{kind: plMap, m: o, key: x.name, cnst: par.cnst}, nil
	case *indexNode:
		par, err := in.placeOf(x.x)
		if err != nil || par == nil {
			return nil, err
		}
		if _, isUnit := in.get(par).(unitT); isUnit && x.elvis {
			return nil, nil
		}
		idx, err := in.eval(x.idx)
		if err != nil {
			return nil, err
		}
		pv := in.get(par)
		switch c := pv.(type) {
		case *array:
			i, ok := idx.(int64)
			if !ok {
				return nil, rtErr(x.p, "array index must be an integer, not %s", typeName(idx))
			}
			j, ok := normIndex(i, len(c.items))
			if !ok {
				return nil, rtErr(x.p, "array index %d out of bounds for array of length %d", i, len(c.items))
			}
			return &place{kind: plArr, arr: c, idx: j, cnst: par.cnst}, nil
		case *object:
			var key string
			switch k := idx.(type) {
			case string:
				key = k
			case charT:
				key = string(rune(k))
			default:
				return nil, rtErr(x.p, "object map key must be a string, not %s", typeName(idx))
			}
			return &place{kind: plMap, m: c, key: key, cnst: par.cnst}, nil
		case string:
			i, ok := idx.(int64)
			if !ok {
				return nil, rtErr(x.p, "string index must be an integer, not %s", typeName(idx))
			}
			n := utf8.RuneCountInString(c)
			j, ok := normIndex(i, n)
			if !ok {
				return nil, rtErr(x.p, "string index %d out of bounds for string of %d characters", i, n)
			}
			return &place{kind: plStr, idx: j, parent: par, cnst: par.cnst}, nil
		case int64:
			i, ok := idx.(int64)
			if !ok {
				return nil, rtErr(x.p, "bit-field index must be an integer, not %s", typeName(idx))
			}
			j, ok := normIndex(i, 64)
			if !ok {
				return nil, rtErr(x.p, "bit-field index %d out of bounds", i)
			}
			return &place{kind: plBit, idx: j, parent: par, cnst: par.cnst}, nil
		}
		return nil, rtErr(x.p, "cannot index into a value of type %s", typeName(pv))
	}
	return nil, rtErr(n.position(), "not assignable")
}

func (in *interp) get(pl *place) value {
	switch pl.kind {
	case plVar:
		return in.scope[pl.si].get()
	case plThis:
		return *in.this
	case plMap:
		if v, ok := pl.m.m[pl.key]; ok {
			return v
		}
		return unit
	case plArr:
		if pl.idx < len(pl.arr.items) {
			return pl.arr.items[pl.idx]
		}
		return unit
	case plStr:
		s, _ := in.get(pl.parent).(string)
		j := pl.idx
		for _, r := range s {
			if j == 0 {
				return charT(r)
			}
			j--
		}
		return unit
	case plBit:
		i, _ := in.get(pl.parent).(int64)
		return i&(1<<uint(pl.idx)) != 0
	}
	return unit
}

func (in *interp) set(p Pos, pl *place, v value) error {
	if pl.cnst {
		return rtErr(p, "cannot modify a constant")
	}
	switch pl.kind {
	case plVar:
		in.scope[pl.si].set(v)
	case plThis:
		*in.this = v
	case plMap:
		if _, ok := pl.m.m[pl.key]; !ok {
			if err := in.checkMap(p, len(pl.m.m)+1); err != nil {
				return err
			}
		}
		pl.m.m[pl.key] = v
	case plArr:
		if pl.idx >= len(pl.arr.items) {
			return rtErr(p, "array index out of bounds")
		}
		pl.arr.items[pl.idx] = v
	case plStr:
		c, ok := v.(charT)
		if !ok {
			return rtErr(p, "can only assign a character into a string, not %s", typeName(v))
		}
		s, _ := in.get(pl.parent).(string)
		rs := []rune(s)
		if pl.idx >= len(rs) {
			return rtErr(p, "string index out of bounds")
		}
		rs[pl.idx] = rune(c)
		ns, err := in.newStr(p, string(rs))
		if err != nil {
			return err
		}
		return in.set(p, pl.parent, ns)
	case plBit:
		b, ok := v.(bool)
		if !ok {
			return rtErr(p, "can only assign a bool into a bit-field, not %s", typeName(v))
		}
		i, _ := in.get(pl.parent).(int64)
		if b {
			i |= 1 << uint(pl.idx)
		} else {
			i &^= 1 << uint(pl.idx)
		}
		return in.set(p, pl.parent, i)
	}
	return nil
}

func (in *interp) assign(x *assignNode) error {
	rhs, err := in.eval(x.val)
	if err != nil {
		return err
	}
	if rhs, err = in.ownNode(x.val, rhs); err != nil {
		return err
	}
	pl, err := in.placeOf(x.target)
	if err != nil || pl == nil {
		return err
	}
	if x.op == "=" {
		return in.set(x.p, pl, rhs)
	}
	if pl.cnst {
		return rtErr(x.p, "cannot modify a constant")
	}
	cur := in.get(pl)
	// In-place array / map growth (Rhai `+=` = append / push / mixin).
	switch c := cur.(type) {
	case *array:
		if x.op == "+" {
			if o, ok := rhs.(*array); ok {
				if err := in.checkArr(x.p, len(c.items)+len(o.items)); err != nil {
					return err
				}
				c.items = append(c.items, o.items...)
			} else {
				if err := in.checkArr(x.p, len(c.items)+1); err != nil {
					return err
				}
				c.items = append(c.items, rhs)
			}
			return nil
		}
	case *object:
		if o, ok := rhs.(*object); ok && x.op == "+" {
			for k, v := range o.m {
				if _, ok := c.m[k]; !ok {
					if err := in.checkMap(x.p, len(c.m)+1); err != nil {
						return err
					}
				}
				c.m[k] = v
			}
			return nil
		}
	case string:
		if _, ok := rhs.(unitT); ok && x.op == "+" {
			return nil
		}
	}
	nv, err := in.binary(x.p, x.op, cur, rhs)
	if err != nil {
		return err
	}
	return in.set(x.p, pl, nv)
}

// ---- operators ----

func (in *interp) unary(p Pos, op string, v value) (value, error) {
	switch op {
	case "-":
		switch x := v.(type) {
		case int64:
			if x == math.MinInt64 {
				return nil, rtErr(p, "negation overflow: -%d", x)
			}
			return -x, nil
		case float64:
			return -x, nil
		}
	case "+":
		switch v.(type) {
		case int64, float64:
			return v, nil
		}
	case "!":
		if b, ok := v.(bool); ok {
			return !b, nil
		}
	}
	return nil, rtErr(p, "function not found: %s (%s)", op, typeName(v))
}

func noOp(p Pos, op string, a, b value) error {
	return rtErr(p, "function not found: %s (%s, %s)", op, typeName(a), typeName(b))
}

func (in *interp) binary(p Pos, op string, a, b value) (value, error) {
	// integer fast path
	if x, ok := a.(int64); ok {
		if y, ok := b.(int64); ok {
			return intOp(p, op, x, y)
		}
	}
	switch op {
	case "==", "!=":
		var n int64
		eq := valuesEqualN(a, b, &n)
		if n > 0 {
			if err := in.charge(p, n); err != nil {
				return nil, err
			}
		}
		return eq == (op == "=="), nil
	case "in", "!in":
		r, err := in.contains(p, b, a)
		if err != nil {
			return nil, err
		}
		return r != (op == "!in"), nil
	}
	if isNumeric(a) && isNumeric(b) {
		x, _ := asFloat(a)
		y, _ := asFloat(b)
		switch op {
		case "+":
			return x + y, nil
		case "-":
			return x - y, nil
		case "*":
			return x * y, nil
		case "/":
			return x / y, nil
		case "%":
			return math.Mod(x, y), nil
		case "**":
			return math.Pow(x, y), nil
		case "<", "<=", ">", ">=":
			return floatOp(op, x, y), nil
		}
		return nil, noOp(p, op, a, b)
	}
	switch op {
	case "+":
		return in.add(p, a, b)
	case "-":
		if s, ok := a.(string); ok {
			switch y := b.(type) {
			case string:
				return strings.ReplaceAll(s, y, ""), nil
			case charT:
				return strings.ReplaceAll(s, string(rune(y)), ""), nil
			}
		}
	case "<", "<=", ">", ">=":
		return in.compare(p, op, a, b)
	case "&", "|", "^":
		if x, ok := a.(bool); ok {
			if y, ok := b.(bool); ok {
				switch op {
				case "&":
					return x && y, nil
				case "|":
					return x || y, nil
				default:
					return x != y, nil
				}
			}
		}
	case "..", "..=":
		var lo, hi int64 = 0, math.MaxInt64
		okLo, okHi := true, true
		switch x := a.(type) {
		case int64:
			lo = x
		case unitT:
		default:
			okLo = false
		}
		switch y := b.(type) {
		case int64:
			hi = y
		case unitT:
		default:
			okHi = false
		}
		if okLo && okHi {
			return rangeT{start: lo, end: hi, inclusive: op == "..="}, nil
		}
	}
	return nil, noOp(p, op, a, b)
}

func intOp(p Pos, op string, x, y int64) (value, error) {
	switch op {
	case "+":
		r := x + y
		if (r > x) != (y > 0) {
			return nil, rtErr(p, "addition overflow: %d + %d", x, y)
		}
		return r, nil
	case "-":
		r := x - y
		if (r < x) != (y > 0) {
			return nil, rtErr(p, "subtraction overflow: %d - %d", x, y)
		}
		return r, nil
	case "*":
		if x == 0 || y == 0 {
			return int64(0), nil
		}
		r := x * y
		if r/y != x || (x == -1 && y == math.MinInt64) || (y == -1 && x == math.MinInt64) {
			return nil, rtErr(p, "multiplication overflow: %d * %d", x, y)
		}
		return r, nil
	case "/":
		if y == 0 {
			return nil, rtErr(p, "division by zero: %d / %d", x, y)
		}
		if x == math.MinInt64 && y == -1 {
			return nil, rtErr(p, "division overflow: %d / %d", x, y)
		}
		return x / y, nil
	case "%":
		if y == 0 || x == math.MinInt64 && y == -1 {
			return nil, rtErr(p, "modulo division by zero or overflow: %d %% %d", x, y)
		}
		return x % y, nil
	case "**":
		if y > math.MaxUint32 {
			return nil, rtErr(p, "exponential overflow: %d ** %d", x, y)
		}
		if y < 0 {
			return nil, rtErr(p, "integer raised to a negative power: %d ** %d", x, y)
		}
		r := int64(1)
		base := x
		e := y
		for e > 0 {
			if e&1 == 1 {
				nr := r * base
				if base != 0 && (nr/base != r || (base == -1 && r == math.MinInt64)) {
					return nil, rtErr(p, "exponential overflow: %d ** %d", x, y)
				}
				r = nr
			}
			e >>= 1
			if e > 0 {
				nb := base * base
				if base != 0 && (nb/base != base || base == math.MinInt64) {
					return nil, rtErr(p, "exponential overflow: %d ** %d", x, y)
				}
				base = nb
			}
		}
		return r, nil
	case "<<":
		return shiftLeft(x, y), nil
	case ">>":
		return shiftRight(x, y), nil
	case "&":
		return x & y, nil
	case "|":
		return x | y, nil
	case "^":
		return x ^ y, nil
	case "==":
		return x == y, nil
	case "!=":
		return x != y, nil
	case "<":
		return x < y, nil
	case "<=":
		return x <= y, nil
	case ">":
		return x > y, nil
	case ">=":
		return x >= y, nil
	case "..":
		return rangeT{start: x, end: y}, nil
	case "..=":
		return rangeT{start: x, end: y, inclusive: true}, nil
	case "in", "!in":
		return nil, noOp(p, "contains", y, x)
	}
	return nil, noOp(p, op, x, y)
}

// shiftLeft / shiftRight follow Rhai's checked shifts: negative amounts
// shift the other way, over-long shifts give 0 (left) or the sign (right).
func shiftLeft(x, y int64) int64 {
	if y < 0 {
		if y == math.MinInt64 {
			return shiftRight(x, math.MaxInt64)
		}
		return shiftRight(x, -y)
	}
	if y >= 64 {
		return 0
	}
	return x << uint(y)
}

func shiftRight(x, y int64) int64 {
	if y < 0 {
		if y == math.MinInt64 {
			return shiftLeft(x, math.MaxInt64)
		}
		return shiftLeft(x, -y)
	}
	if y >= 64 {
		return x >> 63
	}
	return x >> uint(y)
}

func (in *interp) add(p Pos, a, b value) (value, error) {
	switch x := a.(type) {
	case string:
		if _, ok := b.(unitT); ok {
			return x, nil
		}
		s, err := in.toStr(p, b, false)
		if err != nil {
			return nil, err
		}
		if err := in.checkStr(p, len(x)+len(s)); err != nil {
			return nil, err
		}
		return in.newStr(p, x+s)
	case charT:
		switch y := b.(type) {
		case charT:
			return string([]rune{rune(x), rune(y)}), nil
		}
	case *array:
		if y, ok := b.(*array); ok {
			if err := in.checkArr(p, len(x.items)+len(y.items)); err != nil {
				return nil, err
			}
			items := make([]value, 0, len(x.items)+len(y.items))
			items = append(append(items, x.items...), y.items...)
			return in.own(p, &array{items: items})
		}
	case *object:
		if y, ok := b.(*object); ok {
			m := make(map[string]value, len(x.m)+len(y.m))
			for k, v := range x.m {
				m[k] = v
			}
			for k, v := range y.m {
				m[k] = v
			}
			if err := in.checkMap(p, len(m)); err != nil {
				return nil, err
			}
			return in.own(p, &object{m: m})
		}
	case unitT:
		if y, ok := b.(string); ok {
			return y, nil
		}
	}
	if y, ok := b.(string); ok {
		s, err := in.toStr(p, a, false)
		if err != nil {
			return nil, err
		}
		if err := in.checkStr(p, len(y)+len(s)); err != nil {
			return nil, err
		}
		return in.newStr(p, s+y)
	}
	return nil, noOp(p, "+", a, b)
}

// compare handles <, <=, >, >= for non-numeric operands.
func (in *interp) compare(p Pos, op string, a, b value) (value, error) {
	c, ok := 0, false
	switch x := a.(type) {
	case string:
		switch y := b.(type) {
		case string:
			c, ok = strings.Compare(x, y), true
		case charT:
			c, ok = cmpFirst2(x, string(rune(y))), true
		}
	case charT:
		switch y := b.(type) {
		case charT:
			c, ok = int(x)-int(y), true
		case string:
			c, ok = cmpFirst2(string(rune(x)), y), true
		}
	case bool:
		if y, isB := b.(bool); isB {
			c, ok = b2i(x)-b2i(y), true
		}
	case unitT:
		if _, isU := b.(unitT); isU {
			return false, nil
		}
	}
	if !ok {
		if typeName(a) != typeName(b) {
			return false, nil // different, non-numeric types: false
		}
		return nil, noOp(p, op, a, b)
	}
	switch op {
	case "<":
		return c < 0, nil
	case "<=":
		return c <= 0, nil
	case ">":
		return c > 0, nil
	}
	return c >= 0, nil
}

// cmpFirst2 compares the first two characters, as Rhai's char-vs-string ops do.
func cmpFirst2(a, b string) int {
	first2 := func(s string) []int {
		out := []int{-1, -1}
		i := 0
		for _, r := range s {
			if i == 2 {
				break
			}
			out[i] = int(r)
			i++
		}
		return out
	}
	x, y := first2(a), first2(b)
	for i := 0; i < 2; i++ {
		if x[i] != y[i] {
			return x[i] - y[i]
		}
	}
	return 0
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// contains implements `x in container`.
func (in *interp) contains(p Pos, container, x value) (bool, error) {
	switch c := container.(type) {
	case string:
		switch y := x.(type) {
		case string:
			return strings.Contains(c, y), nil
		case charT:
			return strings.ContainsRune(c, rune(y)), nil
		}
	case *array:
		var n int64
		found := false
		for _, it := range c.items {
			n++
			if valuesEqualN(it, x, &n) {
				found = true
				break
			}
		}
		return found, in.charge(p, n)
	case *object:
		switch y := x.(type) {
		case string:
			_, ok := c.m[y]
			return ok, nil
		case charT:
			_, ok := c.m[string(rune(y))]
			return ok, nil
		}
	case rangeT:
		if i, ok := x.(int64); ok {
			return inRange(c, i), nil
		}
		return false, nil
	}
	return false, rtErr(p, "function not found: contains (%s, %s)", typeName(container), typeName(x))
}

// ---- function calls ----

func (in *interp) evalArgs(args []node) ([]value, error) {
	vals := make([]value, len(args)+1)
	for i, a := range args {
		v, err := in.eval(a)
		if err != nil {
			return nil, err
		}
		vals[i+1] = v
	}
	return vals, nil
}

func (in *interp) call(x *callNode) (value, error) {
	if fd := in.fns[x.key]; fd != nil {
		vals, err := in.evalArgs(x.args)
		if err != nil {
			return nil, err
		}
		return in.callScript(x.p, fd, vals[1:], nil, nil)
	}
	b, ok := builtins[x.name]
	if !ok || len(x.args) == 0 {
		return nil, in.fnNotFound(x.p, x.name, x.args)
	}
	// A mutating built-in called function-style on a variable mutates it
	// (Rhai converts `f(x, ...)` to method-call style for a variable x).
	// (For a constant a copy is passed instead - book "Constants".)
	if b.mut && len(x.args) > 0 {
		if v, ok := x.args[0].(*varNode); ok && !in.isConst(v.name) {
			return in.method(&methodNode{base: x.base, recv: v, name: x.name, args: x.args[1:]}) // empty key: built-in only
		}
	}
	vals, err := in.evalArgs(x.args)
	if err != nil {
		return nil, err
	}
	args := vals[1:]
	if b.mut && len(args) > 0 {
		if args[0], err = in.own(x.p, args[0]); err != nil {
			return nil, err
		}
	}
	r, err := b.fn(in, x.p, args)
	if err == errNoMatch {
		return nil, in.fnNotFoundVals(x.p, x.name, args)
	}
	return r, err
}

func (in *interp) fnNotFound(p Pos, name string, args []node) error {
	return rtErr(p, "function not found: %s (%d arguments)", name, len(args))
}

func (in *interp) fnNotFoundVals(p Pos, name string, args []value) error {
	ts := make([]string, len(args))
	for i, a := range args {
		ts[i] = typeName(a)
	}
	return rtErr(p, "function not found: %s (%s)", name, strings.Join(ts, ", "))
}

func (in *interp) callScript(p Pos, fd *fnDef, args []value, this *value, env []binding) (value, error) {
	if in.callDepth >= in.lim.MaxCallDepth {
		return nil, limitErr(p, ErrCallDepth, "function calls nested deeper than %d levels (in '%s')", in.lim.MaxCallDepth, fd.name)
	}
	scope := make([]binding, 0, len(env)+len(args)+8)
	scope = append(scope, env...) // shared cells: captured variables stay shared
	for i, a := range args {
		v, err := in.own(p, a)
		if err != nil {
			return nil, err
		}
		scope = append(scope, binding{name: fd.params[i], v: v})
	}
	saveScope, saveThis := in.scope, in.this
	in.scope, in.this = scope, this
	in.callDepth++
	r, err := in.block(fd.body)
	in.callDepth--
	in.scope, in.this = saveScope, saveThis
	if err != nil {
		if c, ok := err.(*ctrl); ok && c.kind == cReturn {
			return c.val, nil
		}
		return nil, err
	}
	return r, nil
}

// callFnPtr calls a function pointer: an anonymous function, a script
// function by name and arity, or a built-in by name.
func (in *interp) callFnPtr(p Pos, f *fnPtr, args []value) (value, error) {
	return in.callFnPtrThis(p, f, args, nil)
}

// callFnPtrThis is callFnPtr with `this` bound (for script functions).
func (in *interp) callFnPtrThis(p Pos, f *fnPtr, args []value, this *value) (value, error) {
	if f.def != nil {
		if len(args) != len(f.def.params) {
			return nil, rtErr(p, "anonymous function takes %d arguments, called with %d", len(f.def.params), len(args))
		}
		return in.callScript(p, f.def, args, this, f.env)
	}
	if fd := in.fns[fnKey(f.name, len(args))]; fd != nil {
		return in.callScript(p, fd, args, this, nil)
	}
	if b, ok := builtins[f.name]; ok && len(args) > 0 {
		var err error
		if b.mut {
			if args[0], err = in.own(p, args[0]); err != nil {
				return nil, err
			}
		}
		r, err := b.fn(in, p, args)
		if err == errNoMatch {
			return nil, in.fnNotFoundVals(p, f.name, args)
		}
		return r, err
	}
	return nil, rtErr(p, "function not found: %s (%d arguments)", f.name, len(args))
}

// fnArity is the number of parameters a callback accepts (1 or 2 for
// array callbacks that may take the index as well).
func (in *interp) fnArity(f *fnPtr, n int) int {
	if f.def != nil {
		return len(f.def.params)
	}
	for _, k := range []int{n, n + 1, 0} {
		if in.fns[fnKey(f.name, k)] != nil {
			return k
		}
	}
	return n
}

func isPlaceNode(n node) bool {
	return checkAssignable(n) == nil
}

func (in *interp) method(x *methodNode) (value, error) {
	var fd *fnDef
	if len(in.fns) > 0 {
		fd = in.fns[x.key]
	}
	b, isB := builtins[x.name]
	if fd == nil && !isB {
		return nil, in.fnNotFound(x.p, x.name, x.args)
	}
	// Receivers that are variables / properties / elements are passed by
	// reference to script methods (`this`) and mutating built-ins.
	if (fd != nil || b.mut) && isPlaceNode(x.recv) {
		pl, err := in.placeOf(x.recv)
		if err != nil {
			return nil, err
		}
		if pl == nil { // receiver chain short-circuited by `?.`
			return unit, nil
		}
		if _, ok := in.get(pl).(unitT); ok && x.elvis {
			return unit, nil
		}
		vals, err := in.evalArgs(x.args)
		if err != nil {
			return nil, err
		}
		cur := in.get(pl)
		if fd != nil {
			this := cur
			if pl.cnst { // a constant receiver gets a copy (book "Constants")
				if this, err = in.own(x.p, cur); err != nil {
					return nil, err
				}
			}
			r, err := in.callScript(x.p, fd, vals[1:], &this, nil)
			if err != nil {
				return nil, err
			}
			if !pl.cnst && !sameRef(this, cur) {
				if err := in.set(x.p, pl, this); err != nil {
					return nil, err
				}
			}
			return r, nil
		}
		if pl.cnst {
			return nil, rtErr(x.p, "cannot call mutating method '%s' on a constant", x.name)
		}
		vals[0] = cur
		r, err := b.fn(in, x.p, vals)
		if err == errNoMatch {
			return nil, in.fnNotFoundVals(x.p, x.name, vals)
		}
		if err != nil {
			return nil, err
		}
		if !sameRef(vals[0], cur) {
			if err := in.set(x.p, pl, vals[0]); err != nil {
				return nil, err
			}
		}
		return r, nil
	}
	recv, err := in.eval(x.recv)
	if err != nil {
		return nil, err
	}
	if _, ok := recv.(unitT); ok && x.elvis {
		return unit, nil
	}
	vals, err := in.evalArgs(x.args)
	if err != nil {
		return nil, err
	}
	if fd != nil {
		this, err := in.own(x.p, recv) // a temporary: never alias a variable
		if err != nil {
			return nil, err
		}
		return in.callScript(x.p, fd, vals[1:], &this, nil)
	}
	if b.mut {
		if recv, err = in.own(x.p, recv); err != nil {
			return nil, err
		}
	}
	vals[0] = recv
	r, err := b.fn(in, x.p, vals)
	if err == errNoMatch {
		return nil, in.fnNotFoundVals(x.p, x.name, vals)
	}
	return r, err
}

// sameRef reports whether a and b are the same value for write-back purposes.
func sameRef(a, b value) bool {
	switch x := a.(type) {
	case *array:
		y, ok := b.(*array)
		return ok && x == y
	case *object:
		y, ok := b.(*object)
		return ok && x == y
	case string:
		y, ok := b.(string)
		return ok && x == y
	}
	return false
}
