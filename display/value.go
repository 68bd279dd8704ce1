package display

import (
	"math"
	"sort"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Runtime values are plain Go values of these dynamic types:
//
//	unitT    Rhai ()
//	bool     Rhai bool
//	int64    Rhai INT (i64)
//	float64  Rhai FLOAT (f64)
//	string   Rhai ImmutableString
//	charT    Rhai char
//	*array   Rhai Array (value semantics: copied when stored)
//	*object  Rhai object map (value semantics: copied when stored)
//	rangeT   Rhai exclusive / inclusive INT range
type value = any

type unitT struct{}

type charT rune

type array struct{ items []value }

type object struct{ m map[string]value }

// fnPtr is a Rhai function pointer: Fn("name") or an anonymous function
// (closure) with the outer variables it uses captured by value.
type fnPtr struct {
	name string
	def  *fnDef    // nil for Fn("name")
	env  []binding // captured variables (anonymous functions)
}

type rangeT struct {
	start, end int64
	inclusive  bool
	step       int64 // 0 means 1 (plain range); set only by range(a, b, step)
}

var unit value = unitT{}

func typeName(v value) string {
	switch x := v.(type) {
	case unitT:
		return "()"
	case bool:
		return "bool"
	case int64:
		return "i64"
	case float64:
		return "f64"
	case string:
		return "string"
	case charT:
		return "char"
	case *array:
		return "array"
	case *object:
		return "map"
	case rangeT:
		if x.inclusive {
			return "range="
		}
		return "range"
	case *fnPtr:
		return "Fn"
	}
	return "?"
}

// sortedKeys returns map keys in Rhai's (BTreeMap) order.
func sortedKeys(m map[string]value) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// toDisplay renders v as Rhai's to_string / string concatenation does.
func toDisplay(v value) string {
	switch x := v.(type) {
	case unitT:
		return ""
	case bool:
		if x {
			return "true"
		}
		return "false"
	case int64:
		return strconv.FormatInt(x, 10)
	case float64:
		return floatDisplay(x)
	case string:
		return x
	case charT:
		return string(rune(x))
	case rangeT:
		return rangeString(x)
	case *fnPtr:
		return "Fn(" + x.name + ")"
	}
	var b strings.Builder
	writeDebug(&b, v)
	return b.String()
}

// toDebug renders v as Rhai's debug / to_debug does.
func toDebug(v value) string {
	var b strings.Builder
	writeDebug(&b, v)
	return b.String()
}

func rangeString(r rangeT) string {
	s := strconv.FormatInt(r.start, 10)
	if r.inclusive {
		s += "..="
	} else {
		s += ".."
	}
	s += strconv.FormatInt(r.end, 10)
	if r.step != 0 && r.step != 1 {
		s += " step " + strconv.FormatInt(r.step, 10)
	}
	return s
}

func writeDebug(b *strings.Builder, v value) {
	switch x := v.(type) {
	case unitT:
		b.WriteString("()")
	case float64:
		b.WriteString(floatDebug(x))
	case string:
		writeQuoted(b, x, '"')
	case charT:
		// Rhai's to_debug for char (debug_char in string_basic.rs) is the bare
		// character, so chars inside arrays and maps print unquoted.
		b.WriteRune(rune(x))
	case *array:
		b.WriteByte('[')
		for i, it := range x.items {
			if i > 0 {
				b.WriteString(", ")
			}
			writeDebug(b, it)
		}
		b.WriteByte(']')
	case *object:
		b.WriteString("#{")
		for i, k := range sortedKeys(x.m) {
			if i > 0 {
				b.WriteString(", ")
			}
			writeQuoted(b, k, '"')
			b.WriteString(": ")
			writeDebug(b, x.m[k])
		}
		b.WriteByte('}')
	default:
		b.WriteString(toDisplay(v))
	}
}

// writeQuoted approximates Rust's escape_debug quoting.
func writeQuoted(b *strings.Builder, s string, q byte) {
	b.WriteByte(q)
	for _, r := range s {
		switch r {
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		case 0:
			b.WriteString(`\0`)
		case rune(q):
			b.WriteByte('\\')
			b.WriteByte(q)
		default:
			if r == utf8.RuneError || !unicode.IsPrint(r) && r != ' ' {
				b.WriteString(`\u{`)
				b.WriteString(strconv.FormatInt(int64(r), 16))
				b.WriteByte('}')
			} else {
				b.WriteRune(r)
			}
		}
	}
	b.WriteByte(q)
}

// Rhai's FloatWrapper Display switches to scientific notation outside
// (MIN_NATURAL_FLOAT_FOR_DISPLAY, MAX_NATURAL_FLOAT_FOR_DISPLAY), both f32 constants.
var (
	maxNaturalFloat = float64(float32(10_000_000_000_000.0))
	minNaturalFloat = float64(float32(0.000_000_000_000_1))
)

// floatDisplay mirrors Rhai's `impl Display for FloatWrapper`.
func floatDisplay(f float64) string {
	if math.IsNaN(f) {
		return "NaN"
	}
	abs := math.Abs(f)
	if abs == 0 {
		return "0.0"
	}
	if abs > maxNaturalFloat || abs < minNaturalFloat {
		return rustExp(f)
	}
	s := strconv.FormatFloat(f, 'f', -1, 64)
	if abs == math.Trunc(abs) {
		s += ".0"
	}
	return s
}

// floatDebug mirrors Rust's `{:?}` for f64 (used inside arrays and maps).
func floatDebug(f float64) string {
	if math.IsNaN(f) {
		return "NaN"
	}
	abs := math.Abs(f)
	if abs != 0 && (abs < 1e-4 || abs >= 1e16) {
		return rustExp(f)
	}
	if math.IsInf(f, 0) {
		return rustExp(f)
	}
	s := strconv.FormatFloat(f, 'f', -1, 64)
	if !strings.ContainsAny(s, ".") {
		s += ".0"
	}
	return s
}

// rustExp mirrors Rust's `{:e}` for f64: shortest digits, no '+' and no
// leading zeros in the exponent ("1e-7", "1.5e16").
func rustExp(f float64) string {
	if math.IsInf(f, 1) {
		return "inf"
	}
	if math.IsInf(f, -1) {
		return "-inf"
	}
	s := strconv.FormatFloat(f, 'e', -1, 64)
	i := strings.IndexByte(s, 'e')
	mant, exp := s[:i], s[i+1:]
	neg := false
	if exp[0] == '+' || exp[0] == '-' {
		neg = exp[0] == '-'
		exp = exp[1:]
	}
	exp = strings.TrimLeft(exp, "0")
	if exp == "" {
		exp = "0"
	}
	if neg {
		exp = "-" + exp
	}
	return mant + "e" + exp
}

// cloneValue deep-copies arrays and maps (Rhai values have value semantics).
// It reports the number of elements copied so callers can charge operations.
func cloneValue(v value, n *int64) value {
	switch x := v.(type) {
	case *array:
		items := make([]value, len(x.items))
		*n += int64(len(x.items))
		for i, it := range x.items {
			items[i] = cloneValue(it, n)
		}
		return &array{items: items}
	case *object:
		m := make(map[string]value, len(x.m))
		*n += int64(len(x.m))
		for k, it := range x.m {
			m[k] = cloneValue(it, n)
		}
		return &object{m: m}
	}
	return v
}

func isNumeric(v value) bool {
	switch v.(type) {
	case int64, float64:
		return true
	}
	return false
}

func asFloat(v value) (float64, bool) {
	switch x := v.(type) {
	case int64:
		return float64(x), true
	case float64:
		return x, true
	}
	return 0, false
}

// floatOp implements Rhai's (checked build) epsilon-based float comparison
// operators (src/func/builtin.rs, impl_float).
func floatOp(op string, x, y float64) bool {
	const eps = 2.220446049250313e-16
	max := 1.0
	if x*y != 0 {
		max = math.Max(math.Abs(x), math.Abs(y))
	}
	if max == 0 {
		return op == "==" || op == ">=" || op == "<="
	}
	switch op {
	case "==":
		return math.Abs(x-y)/max <= eps
	case "!=":
		return math.Abs(x-y)/max > eps
	case ">":
		return (x-y)/max > eps
	case ">=":
		return (x-y)/max > -eps
	case "<":
		return (y-x)/max > eps
	case "<=":
		return (y-x)/max > -eps
	}
	return false
}

// valuesEqual implements `==` for any two values; values of different,
// non-numeric types are simply not equal.
func valuesEqual(a, b value) bool {
	var n int64
	return valuesEqualN(a, b, &n)
}

// valuesEqualN is valuesEqual that also counts the container elements it
// visits (so the evaluator can charge operations for deep comparisons).
func valuesEqualN(a, b value, n *int64) bool {
	switch x := a.(type) {
	case unitT:
		_, ok := b.(unitT)
		return ok
	case bool:
		y, ok := b.(bool)
		return ok && x == y
	case int64:
		switch y := b.(type) {
		case int64:
			return x == y
		case float64:
			return floatOp("==", float64(x), y)
		}
		return false
	case float64:
		if y, ok := asFloat(b); ok {
			return floatOp("==", x, y)
		}
		return false
	case string:
		switch y := b.(type) {
		case string:
			return x == y
		case charT:
			return x == string(rune(y))
		}
		return false
	case charT:
		switch y := b.(type) {
		case charT:
			return x == y
		case string:
			return string(rune(x)) == y
		}
		return false
	case *array:
		y, ok := b.(*array)
		if !ok || len(x.items) != len(y.items) {
			return false
		}
		*n += int64(len(x.items))
		for i := range x.items {
			if !valuesEqualN(x.items[i], y.items[i], n) {
				return false
			}
		}
		return true
	case *object:
		y, ok := b.(*object)
		if !ok || len(x.m) != len(y.m) {
			return false
		}
		*n += int64(len(x.m))
		for k, v := range x.m {
			w, ok := y.m[k]
			if !ok || !valuesEqualN(v, w, n) {
				return false
			}
		}
		return true
	case rangeT:
		y, ok := b.(rangeT)
		return ok && x == y
	case *fnPtr:
		y, ok := b.(*fnPtr)
		return ok && (x == y || x.def == nil && y.def == nil && x.name == y.name)
	}
	return false
}

// strictEqual is used by switch: Rhai matches cases by hashing, so the
// types must be identical (1 does not match 1.0).
func strictEqual(a, b value) bool {
	if typeName(a) != typeName(b) {
		return false
	}
	switch x := a.(type) {
	case float64:
		return x == b.(float64)
	case *array:
		y := b.(*array)
		if len(x.items) != len(y.items) {
			return false
		}
		for i := range x.items {
			if !strictEqual(x.items[i], y.items[i]) {
				return false
			}
		}
		return true
	case *object:
		y := b.(*object)
		if len(x.m) != len(y.m) {
			return false
		}
		for k, v := range x.m {
			w, ok := y.m[k]
			if !ok || !strictEqual(v, w) {
				return false
			}
		}
		return true
	}
	return valuesEqual(a, b)
}
