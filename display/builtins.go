package display

import (
	"errors"
	"math"
	"sort"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// errNoMatch signals that a built-in has no overload for the argument types.
var errNoMatch = errors.New("no matching overload")

type builtinFn func(in *interp, p Pos, args []value) (value, error)

type builtin struct {
	fn  builtinFn
	mut bool // mutates its first argument (the receiver); may replace args[0]
}

var builtins map[string]builtin

func init() {
	builtins = map[string]builtin{
		// conversions and inspection (Rhai book: "Value Conversions", "type_of")
		"to_string":   {fn: bToString},
		"to_debug":    {fn: bToDebug},
		"type_of":     {fn: bTypeOf},
		"to_int":      {fn: bToInt},
		"to_float":    {fn: bToFloat},
		"parse_int":   {fn: bParseInt},
		"parse_float": {fn: bParseFloat},
		"len":         {fn: bLen},
		"is_empty":    {fn: bIsEmpty},
		"bytes":       {fn: bBytes},
		"contains":    {fn: bContains},
		"index_of":    {fn: bIndexOf},
		"get":         {fn: bGet},
		"range":       {fn: bRange},
		"start":       {fn: bRangeStart},
		"end":         {fn: bRangeEnd},
		"is_inclusive": {fn: func(in *interp, p Pos, a []value) (value, error) {
			if r, ok := one[rangeT](a); ok {
				return r.inclusive, nil
			}
			return nil, errNoMatch
		}},
		"is_exclusive": {fn: func(in *interp, p Pos, a []value) (value, error) {
			if r, ok := one[rangeT](a); ok {
				return !r.inclusive, nil
			}
			return nil, errNoMatch
		}},
		// numbers (Rhai book: "Numeric Functions")
		"abs":         {fn: bAbs},
		"sign":        {fn: bSign},
		"min":         {fn: bMinMax(false)},
		"max":         {fn: bMinMax(true)},
		"is_odd":      {fn: intPred(func(i int64) bool { return i%2 != 0 })},
		"is_even":     {fn: intPred(func(i int64) bool { return i%2 == 0 })},
		"is_zero":     {fn: bIsZero},
		"floor":       {fn: floatFn(math.Floor)},
		"ceiling":     {fn: floatFn(math.Ceil)},
		"round":       {fn: floatFn(roundHalfAway)},
		"int":         {fn: floatFn(math.Trunc)},
		"fraction":    {fn: floatFn(func(f float64) float64 { return f - math.Trunc(f) })},
		"sqrt":        {fn: floatFn(math.Sqrt)},
		"is_nan":      {fn: floatPred(math.IsNaN)},
		"is_infinite": {fn: floatPred(func(f float64) bool { return math.IsInf(f, 0) })},
		"is_finite":   {fn: floatPred(func(f float64) bool { return !math.IsInf(f, 0) && !math.IsNaN(f) })},
		// strings (Rhai book: "Built-in String Functions")
		"to_upper":    {fn: bCase(true)},
		"to_lower":    {fn: bCase(false)},
		"make_upper":  {fn: bMakeCase(true), mut: true},
		"make_lower":  {fn: bMakeCase(false), mut: true},
		"trim":        {fn: bTrim, mut: true},
		"starts_with": {fn: bStartsEnds(true)},
		"ends_with":   {fn: bStartsEnds(false)},
		"sub_string":  {fn: bSubString},
		"split":       {fn: bSplit},
		"replace":     {fn: bReplace, mut: true},
		"pad":         {fn: bPad, mut: true},
		"chars":       {fn: bToChars},
		"to_chars":    {fn: bToChars},
		"truncate":    {fn: bTruncate, mut: true},
		"clear":       {fn: bClear, mut: true},
		"remove":      {fn: bRemove, mut: true},
		"pop":         {fn: bPop, mut: true},
		// arrays (Rhai book: "Arrays")
		"push":    {fn: bPush, mut: true},
		"append":  {fn: bAppend, mut: true},
		"shift":   {fn: bShift, mut: true},
		"insert":  {fn: bInsert, mut: true},
		"reverse": {fn: bReverse, mut: true},
		"sort":    {fn: bSort, mut: true},
		"extract": {fn: bExtract},
		// object maps (Rhai book: "Object Maps")
		"keys":      {fn: bKeys},
		"values":    {fn: bValues},
		"set":       {fn: bSet, mut: true},
		"mixin":     {fn: bMixin, mut: true},
		"to_hex":    {fn: bRadix(16)},
		"to_octal":  {fn: bRadix(8)},
		"to_binary": {fn: bRadix(2)},
		// function pointers and callbacks (book "Function Pointers", "Arrays")
		"Fn":       {fn: bFn},
		"call":     {fn: bCall},
		"map":      {fn: bMap},
		"filter":   {fn: bFilter},
		"reduce":   {fn: bReduce},
		"some":     {fn: bSomeAll(true)},
		"all":      {fn: bSomeAll(false)},
		"find":     {fn: bFind},
		"for_each": {fn: bForEach, mut: true},
		"to_json": {fn: func(in *interp, p Pos, a []value) (value, error) {
			m, ok := one[*object](a)
			if !ok {
				return nil, errNoMatch
			}
			f := &formatter{max: in.lim.MaxStringLen}
			f.writeJSON(m)
			if f.over {
				return nil, limitErr(p, ErrStringTooLong, "JSON text exceeds the limit of %d bytes", in.lim.MaxStringLen)
			}
			return in.newStr(p, f.b.String())
		}},
	}
}

func one[T any](a []value) (T, bool) {
	var zero T
	if len(a) != 1 {
		return zero, false
	}
	v, ok := a[0].(T)
	return v, ok
}

func runeLen(s string) int { return utf8.RuneCountInString(s) }

func bToString(in *interp, p Pos, a []value) (value, error) {
	if len(a) != 1 {
		return nil, errNoMatch
	}
	s, err := in.toStr(p, a[0], false)
	return s, err
}

func bToDebug(in *interp, p Pos, a []value) (value, error) {
	if len(a) != 1 {
		return nil, errNoMatch
	}
	s, err := in.toStr(p, a[0], true)
	return s, err
}

func bTypeOf(in *interp, p Pos, a []value) (value, error) {
	if len(a) != 1 {
		return nil, errNoMatch
	}
	return typeName(a[0]), nil
}

func bToInt(in *interp, p Pos, a []value) (value, error) {
	if len(a) != 1 {
		return nil, errNoMatch
	}
	switch x := a[0].(type) {
	case int64:
		return x, nil
	case float64:
		t := math.Trunc(x)
		if math.IsNaN(t) || t >= 9.223372036854775807e18 || t < -9.223372036854775808e18 {
			return nil, rtErr(p, "integer overflow: %s", floatDisplay(x))
		}
		return int64(t), nil
	case charT:
		return int64(x), nil
	}
	return nil, errNoMatch
}

func bToFloat(in *interp, p Pos, a []value) (value, error) {
	if len(a) != 1 {
		return nil, errNoMatch
	}
	switch x := a[0].(type) {
	case int64:
		return float64(x), nil
	case float64:
		return x, nil
	}
	return nil, errNoMatch
}

func bParseInt(in *interp, p Pos, a []value) (value, error) {
	if len(a) < 1 || len(a) > 2 {
		return nil, errNoMatch
	}
	s, ok := a[0].(string)
	if !ok {
		return nil, errNoMatch
	}
	radix := int64(10)
	if len(a) == 2 {
		r, ok := a[1].(int64)
		if !ok {
			return nil, errNoMatch
		}
		if r < 2 || r > 36 {
			return nil, rtErr(p, "invalid radix: %d", r)
		}
		radix = r
	}
	t := strings.TrimSpace(s)
	if strings.Contains(t, "_") { // Go accepts '_' only with base prefixes; Rust never
		return nil, rtErr(p, "error parsing integer number '%s'", s)
	}
	i, err := strconv.ParseInt(t, int(radix), 64)
	if err != nil {
		return nil, rtErr(p, "error parsing integer number '%s'", s)
	}
	return i, nil
}

func bParseFloat(in *interp, p Pos, a []value) (value, error) {
	s, ok := one[string](a)
	if !ok {
		return nil, errNoMatch
	}
	t := strings.TrimSpace(s)
	lt := strings.ToLower(t)
	if strings.Contains(t, "_") || strings.Contains(lt, "0x") || strings.Contains(lt, "p") {
		return nil, rtErr(p, "error parsing floating-point number '%s'", s)
	}
	f, err := strconv.ParseFloat(t, 64)
	if err != nil {
		if ne, ok := err.(*strconv.NumError); !ok || ne.Err != strconv.ErrRange {
			return nil, rtErr(p, "error parsing floating-point number '%s'", s)
		}
	}
	return f, nil
}

func bLen(in *interp, p Pos, a []value) (value, error) {
	if len(a) != 1 {
		return nil, errNoMatch
	}
	switch x := a[0].(type) {
	case string:
		return int64(runeLen(x)), nil
	case *array:
		return int64(len(x.items)), nil
	case *object:
		return int64(len(x.m)), nil
	}
	return nil, errNoMatch
}

func bIsEmpty(in *interp, p Pos, a []value) (value, error) {
	if len(a) != 1 {
		return nil, errNoMatch
	}
	switch x := a[0].(type) {
	case string:
		return len(x) == 0, nil
	case *array:
		return len(x.items) == 0, nil
	case *object:
		return len(x.m) == 0, nil
	case rangeT:
		if x.inclusive {
			return x.start > x.end, nil
		}
		return x.start >= x.end, nil
	}
	return nil, errNoMatch
}

func bBytes(in *interp, p Pos, a []value) (value, error) {
	if s, ok := one[string](a); ok {
		return int64(len(s)), nil
	}
	return nil, errNoMatch
}

func bContains(in *interp, p Pos, a []value) (value, error) {
	if len(a) != 2 {
		return nil, errNoMatch
	}
	switch a[0].(type) {
	case string, *array, *object, rangeT:
	default:
		return nil, errNoMatch
	}
	r, err := in.contains(p, a[0], a[1])
	if err != nil {
		return nil, errNoMatch
	}
	return r, nil
}

// charOffset converts a char index into a byte offset (clamped).
func charOffset(s string, n int) int {
	if n <= 0 {
		return 0
	}
	i := 0
	for off := range s {
		if i == n {
			return off
		}
		i++
	}
	return len(s)
}

func bIndexOf(in *interp, p Pos, a []value) (value, error) {
	if len(a) < 2 || len(a) > 3 {
		return nil, errNoMatch
	}
	if arr, ok := a[0].(*array); ok {
		if f, ok := a[1].(*fnPtr); ok && len(a) == 2 {
			return bFindIndex(in, p, arr, f)
		}
		start := 0
		if len(a) == 3 {
			st, ok := a[2].(int64)
			if !ok {
				return nil, errNoMatch
			}
			s, _ := calcOffsetLen(len(arr.items), st, 0)
			start = s
		}
		var n int64
		for i := start; i < len(arr.items); i++ {
			n++
			if valuesEqualN(arr.items[i], a[1], &n) {
				return int64(i), in.charge(p, n)
			}
		}
		return int64(-1), in.charge(p, n)
	}
	s, ok := a[0].(string)
	if !ok {
		return nil, errNoMatch
	}
	find, isText := textArg(a[1])
	if !isText {
		return nil, errNoMatch
	}
	if s == "" {
		return int64(-1), nil
	}
	startByte := 0
	if len(a) == 3 {
		st, ok := a[2].(int64)
		if !ok {
			return nil, errNoMatch
		}
		n := runeLen(s)
		switch {
		case st < 0:
			abs := -st
			if st == math.MinInt64 || abs > int64(n) {
				startByte = 0
			} else {
				startByte = charOffset(s, n-int(abs))
			}
		case st == 0:
		default:
			if st >= int64(n) {
				return int64(-1), nil
			}
			startByte = charOffset(s, int(st))
		}
	}
	i := strings.Index(s[startByte:], find)
	if i < 0 {
		return int64(-1), nil
	}
	return int64(runeLen(s[:startByte+i])), nil
}

func bGet(in *interp, p Pos, a []value) (value, error) {
	if len(a) != 2 {
		return nil, errNoMatch
	}
	switch c := a[0].(type) {
	case *array:
		i, ok := a[1].(int64)
		if !ok {
			return nil, errNoMatch
		}
		j, ok := normIndex(i, len(c.items))
		if !ok {
			return unit, nil
		}
		return c.items[j], nil
	case *object:
		k, ok := a[1].(string)
		if !ok {
			return nil, errNoMatch
		}
		if v, ok := c.m[k]; ok {
			return v, nil
		}
		return unit, nil
	case string:
		i, ok := a[1].(int64)
		if !ok {
			return nil, errNoMatch
		}
		r, err := in.index(p, c, i)
		if err != nil {
			return unit, nil
		}
		return r, nil
	}
	return nil, errNoMatch
}

func bRange(in *interp, p Pos, a []value) (value, error) {
	if len(a) < 2 || len(a) > 3 {
		return nil, errNoMatch
	}
	from, ok1 := a[0].(int64)
	to, ok2 := a[1].(int64)
	if !ok1 || !ok2 {
		return nil, errNoMatch
	}
	r := rangeT{start: from, end: to}
	if len(a) == 3 {
		step, ok := a[2].(int64)
		if !ok {
			return nil, errNoMatch
		}
		if step == 0 {
			return nil, rtErr(p, "range step cannot be zero")
		}
		r.step = step
	}
	return r, nil
}

func bRangeStart(in *interp, p Pos, a []value) (value, error) {
	if r, ok := one[rangeT](a); ok {
		return r.start, nil
	}
	return nil, errNoMatch
}

func bRangeEnd(in *interp, p Pos, a []value) (value, error) {
	if r, ok := one[rangeT](a); ok {
		return r.end, nil
	}
	return nil, errNoMatch
}

func bAbs(in *interp, p Pos, a []value) (value, error) {
	if len(a) != 1 {
		return nil, errNoMatch
	}
	switch x := a[0].(type) {
	case int64:
		if x == math.MinInt64 {
			return nil, rtErr(p, "negation overflow: -%d", x)
		}
		if x < 0 {
			return -x, nil
		}
		return x, nil
	case float64:
		return math.Abs(x), nil
	}
	return nil, errNoMatch
}

func bSign(in *interp, p Pos, a []value) (value, error) {
	if len(a) != 1 {
		return nil, errNoMatch
	}
	switch x := a[0].(type) {
	case int64:
		switch {
		case x > 0:
			return int64(1), nil
		case x < 0:
			return int64(-1), nil
		}
		return int64(0), nil
	case float64:
		switch {
		case math.IsNaN(x):
			return nil, rtErr(p, "sign of NaN is undefined")
		case x > 0:
			return int64(1), nil
		case x < 0:
			return int64(-1), nil
		}
		return int64(0), nil
	}
	return nil, errNoMatch
}

func bMinMax(isMax bool) builtinFn {
	return func(in *interp, p Pos, a []value) (value, error) {
		if len(a) != 2 {
			return nil, errNoMatch
		}
		switch x := a[0].(type) {
		case int64:
			if y, ok := a[1].(int64); ok {
				if (x >= y) == isMax {
					return x, nil
				}
				return y, nil
			}
		case string:
			if y, ok := a[1].(string); ok {
				if isMax && x >= y || !isMax && x <= y {
					return x, nil
				}
				return y, nil
			}
		case charT:
			if y, ok := a[1].(charT); ok {
				if isMax && x >= y || !isMax && x <= y {
					return x, nil
				}
				return y, nil
			}
		}
		if isNumeric(a[0]) && isNumeric(a[1]) {
			x, _ := asFloat(a[0])
			y, _ := asFloat(a[1])
			if isMax {
				return math.Max(x, y), nil
			}
			return math.Min(x, y), nil
		}
		return nil, errNoMatch
	}
}

func intPred(f func(int64) bool) builtinFn {
	return func(in *interp, p Pos, a []value) (value, error) {
		if i, ok := one[int64](a); ok {
			return f(i), nil
		}
		return nil, errNoMatch
	}
}

func bIsZero(in *interp, p Pos, a []value) (value, error) {
	if len(a) != 1 {
		return nil, errNoMatch
	}
	switch x := a[0].(type) {
	case int64:
		return x == 0, nil
	case float64:
		return x == 0, nil
	}
	return nil, errNoMatch
}

func roundHalfAway(f float64) float64 { return math.Round(f) }

func floatFn(f func(float64) float64) builtinFn {
	return func(in *interp, p Pos, a []value) (value, error) {
		if x, ok := one[float64](a); ok {
			return f(x), nil
		}
		return nil, errNoMatch
	}
}

func floatPred(f func(float64) bool) builtinFn {
	return func(in *interp, p Pos, a []value) (value, error) {
		if x, ok := one[float64](a); ok {
			return f(x), nil
		}
		return nil, errNoMatch
	}
}

func bCase(upper bool) builtinFn {
	return func(in *interp, p Pos, a []value) (value, error) {
		if len(a) != 1 {
			return nil, errNoMatch
		}
		switch x := a[0].(type) {
		case string:
			if upper {
				return in.newStr(p, strings.ToUpper(x))
			}
			return in.newStr(p, strings.ToLower(x))
		case charT:
			if upper {
				return charT(unicode.ToUpper(rune(x))), nil
			}
			return charT(unicode.ToLower(rune(x))), nil
		}
		return nil, errNoMatch
	}
}

func bMakeCase(upper bool) builtinFn {
	conv := bCase(upper)
	return func(in *interp, p Pos, a []value) (value, error) {
		r, err := conv(in, p, a)
		if err != nil {
			return nil, err
		}
		a[0] = r
		return unit, nil
	}
}

func bTrim(in *interp, p Pos, a []value) (value, error) {
	if s, ok := one[string](a); ok {
		a[0] = strings.TrimSpace(s)
		return unit, nil
	}
	return nil, errNoMatch
}

func bStartsEnds(start bool) builtinFn {
	return func(in *interp, p Pos, a []value) (value, error) {
		if len(a) != 2 {
			return nil, errNoMatch
		}
		s, ok := a[0].(string)
		if !ok {
			return nil, errNoMatch
		}
		t, isText := textArg(a[1])
		if !isText {
			return nil, errNoMatch
		}
		if start {
			return strings.HasPrefix(s, t), nil
		}
		return strings.HasSuffix(s, t), nil
	}
}

// subString follows Rhai's sub_string(string, start, len) exactly.
func subString(s string, start, n int64) string {
	if s == "" || n <= 0 {
		return ""
	}
	chars := []rune(s)
	var offset int
	if start < 0 {
		if start == math.MinInt64 || -start > int64(len(chars)) {
			offset = 0
		} else {
			offset = len(chars) - int(-start)
		}
	} else {
		if start >= int64(len(chars)) {
			return ""
		}
		offset = int(start)
	}
	l := int64(len(chars) - offset)
	if n < l {
		l = n
	}
	return string(chars[offset : offset+int(l)])
}

func bSubString(in *interp, p Pos, a []value) (value, error) {
	if len(a) < 2 || len(a) > 3 {
		return nil, errNoMatch
	}
	s, ok := a[0].(string)
	if !ok {
		return nil, errNoMatch
	}
	if err := in.charge(p, int64(len(s)>>8)); err != nil {
		return nil, err
	}
	switch x := a[1].(type) {
	case int64:
		if len(a) == 2 {
			return subString(s, x, int64(len(s))), nil
		}
		n, ok := a[2].(int64)
		if !ok {
			return nil, errNoMatch
		}
		return subString(s, x, n), nil
	case rangeT:
		if len(a) != 2 {
			return nil, errNoMatch
		}
		start := max(x.start, 0)
		if x.inclusive {
			end := min(max(x.end, start), math.MaxInt64-1)
			return subString(s, start, end-start+1), nil
		}
		end := max(x.end, start)
		return subString(s, start, end-start), nil
	}
	return nil, errNoMatch
}

func strArray(in *interp, p Pos, parts []string) (value, error) {
	if err := in.checkArr(p, len(parts)); err != nil {
		return nil, err
	}
	if err := in.charge(p, int64(len(parts))); err != nil {
		return nil, err
	}
	items := make([]value, len(parts))
	for i, s := range parts {
		items[i] = s
	}
	return &array{items: items}, nil
}

// rustSplit mimics Rust's str::split / splitn (including an empty delimiter).
func rustSplit(s, d string, n int) []string {
	if d != "" {
		return strings.SplitN(s, d, n)
	}
	// Rust: "abc".split("") == ["", "a", "b", "c", ""]
	out := []string{""}
	for i, r := range s {
		if n > 0 && len(out) == n-1 {
			out = append(out, s[i:])
			return out
		}
		out = append(out, string(r))
	}
	if n > 0 && len(out) >= n {
		return out
	}
	return append(out, "")
}

func bSplit(in *interp, p Pos, a []value) (value, error) {
	if len(a) < 1 || len(a) > 3 {
		return nil, errNoMatch
	}
	s, ok := a[0].(string)
	if !ok {
		return nil, errNoMatch
	}
	if len(a) == 1 {
		if s == "" {
			return strArray(in, p, []string{""})
		}
		return strArray(in, p, strings.FieldsFunc(s, unicode.IsSpace))
	}
	var delim string
	switch d := a[1].(type) {
	case string:
		delim = d
	case charT:
		delim = string(rune(d))
	case int64:
		if len(a) != 2 {
			return nil, errNoMatch
		}
		n := runeLen(s)
		var k int
		switch {
		case d <= 0:
			if d == math.MinInt64 || -d > int64(n) {
				return strArray(in, p, []string{"", s})
			}
			k = n - int(-d)
		case d >= int64(n):
			k = n
		default:
			k = int(d)
		}
		off := charOffset(s, k)
		return strArray(in, p, []string{s[:off], s[off:]})
	default:
		return nil, errNoMatch
	}
	segments := -1
	if len(a) == 3 {
		n, ok := a[2].(int64)
		if !ok {
			return nil, errNoMatch
		}
		if n <= 1 {
			return strArray(in, p, []string{s})
		}
		if n < int64(in.lim.MaxArrayLen)+2 {
			segments = int(n)
		}
	}
	if s == "" || delim != "" && !strings.Contains(s, delim) {
		return strArray(in, p, []string{s})
	}
	if delim == "" && runeLen(s)+2 > in.lim.MaxArrayLen {
		return nil, in.checkArr(p, runeLen(s)+2)
	}
	if delim != "" && strings.Count(s, delim)+1 > in.lim.MaxArrayLen && segments < 0 {
		return nil, in.checkArr(p, strings.Count(s, delim)+1)
	}
	return strArray(in, p, rustSplit(s, delim, segments))
}

func bReplace(in *interp, p Pos, a []value) (value, error) {
	if len(a) != 3 {
		return nil, errNoMatch
	}
	s, ok := a[0].(string)
	if !ok {
		return nil, errNoMatch
	}
	find, ok1 := textArg(a[1])
	sub, ok2 := textArg(a[2])
	if !ok1 || !ok2 {
		return nil, errNoMatch
	}
	if s == "" {
		return unit, nil
	}
	// Bound the result size before building it.
	count := strings.Count(s, find)
	if n := len(s) + count*(len(sub)-len(find)); n > in.lim.MaxStringLen {
		return nil, in.checkStr(p, n)
	}
	r, err := in.newStr(p, strings.ReplaceAll(s, find, sub))
	if err != nil {
		return nil, err
	}
	a[0] = r
	return unit, nil
}

func bPad(in *interp, p Pos, a []value) (value, error) {
	if len(a) != 3 {
		return nil, errNoMatch
	}
	n, ok := a[1].(int64)
	if !ok {
		return nil, errNoMatch
	}
	switch x := a[0].(type) {
	case *array:
		if n <= 0 || n <= int64(len(x.items)) {
			return unit, nil
		}
		if err := in.checkArr(p, int(min(n, math.MaxInt32))); err != nil {
			return nil, err
		}
		for int64(len(x.items)) < n {
			v, err := in.own(p, a[2])
			if err != nil {
				return nil, err
			}
			if err := in.charge(p, 1); err != nil {
				return nil, err
			}
			x.items = append(x.items, v)
		}
		return unit, nil
	case string:
		pad, isText := textArg(a[2])
		if !isText {
			return nil, errNoMatch
		}
		if n <= 0 {
			return unit, nil
		}
		if n > int64(in.lim.MaxStringLen) {
			return nil, limitErr(p, ErrStringTooLong, "padded length %d exceeds the limit of %d", n, in.lim.MaxStringLen)
		}
		cur := runeLen(x)
		if int(n) <= cur || pad == "" {
			return unit, nil
		}
		var b strings.Builder
		b.WriteString(x)
		padRunes := []rune(pad)
		for i := 0; cur < int(n); i++ {
			b.WriteRune(padRunes[i%len(padRunes)])
			cur++
			if b.Len() > in.lim.MaxStringLen {
				return nil, in.checkStr(p, b.Len())
			}
		}
		r, err := in.newStr(p, b.String())
		if err != nil {
			return nil, err
		}
		a[0] = r
		return unit, nil
	}
	return nil, errNoMatch
}

func bToChars(in *interp, p Pos, a []value) (value, error) {
	s, ok := one[string](a)
	if !ok {
		return nil, errNoMatch
	}
	n := runeLen(s)
	if err := in.checkArr(p, n); err != nil {
		return nil, err
	}
	if err := in.charge(p, int64(n)); err != nil {
		return nil, err
	}
	items := make([]value, 0, n)
	for _, r := range s {
		items = append(items, charT(r))
	}
	return &array{items: items}, nil
}

func bTruncate(in *interp, p Pos, a []value) (value, error) {
	if len(a) != 2 {
		return nil, errNoMatch
	}
	n, ok := a[1].(int64)
	if !ok {
		return nil, errNoMatch
	}
	switch x := a[0].(type) {
	case string:
		if n <= 0 {
			a[0] = ""
		} else if n < int64(len(x)) {
			a[0] = x[:charOffset(x, int(n))]
		}
		return unit, nil
	case *array:
		if n <= 0 {
			x.items = x.items[:0]
		} else if n < int64(len(x.items)) {
			clear(x.items[n:])
			x.items = x.items[:n]
		}
		return unit, nil
	}
	return nil, errNoMatch
}

func bClear(in *interp, p Pos, a []value) (value, error) {
	if len(a) != 1 {
		return nil, errNoMatch
	}
	switch x := a[0].(type) {
	case string:
		a[0] = ""
	case *array:
		x.items = nil
	case *object:
		x.m = map[string]value{}
	default:
		return nil, errNoMatch
	}
	return unit, nil
}

func bRemove(in *interp, p Pos, a []value) (value, error) {
	if len(a) != 2 {
		return nil, errNoMatch
	}
	switch x := a[0].(type) {
	case string:
		y, ok := textArg(a[1])
		if !ok {
			return nil, errNoMatch
		}
		a[0] = strings.ReplaceAll(x, y, "")
		return unit, nil
	case *array:
		i, ok := a[1].(int64)
		if !ok {
			return nil, errNoMatch
		}
		j, ok := normIndex(i, len(x.items))
		if !ok {
			return unit, nil
		}
		if err := in.charge(p, int64(len(x.items)>>4)); err != nil {
			return nil, err
		}
		r := x.items[j]
		x.items = append(x.items[:j], x.items[j+1:]...)
		return r, nil
	case *object:
		k, ok := a[1].(string)
		if !ok {
			return nil, errNoMatch
		}
		r, ok := x.m[k]
		if !ok {
			return unit, nil
		}
		delete(x.m, k)
		return r, nil
	}
	return nil, errNoMatch
}

func bPop(in *interp, p Pos, a []value) (value, error) {
	if len(a) == 0 {
		return nil, errNoMatch
	}
	switch x := a[0].(type) {
	case *array:
		if len(a) != 1 {
			return nil, errNoMatch
		}
		if len(x.items) == 0 {
			return unit, nil
		}
		r := x.items[len(x.items)-1]
		x.items = x.items[:len(x.items)-1]
		return r, nil
	case string:
		if len(a) == 1 {
			if x == "" {
				return unit, nil
			}
			r, size := utf8.DecodeLastRuneInString(x)
			a[0] = x[:len(x)-size]
			return charT(r), nil
		}
		if len(a) != 2 {
			return nil, errNoMatch
		}
		n, ok := a[1].(int64)
		if !ok {
			return nil, errNoMatch
		}
		if x == "" || n <= 0 {
			return "", nil
		}
		cnt := runeLen(x)
		if n >= int64(cnt) {
			a[0] = ""
			return x, nil
		}
		off := charOffset(x, cnt-int(n))
		a[0] = x[:off]
		return x[off:], nil
	}
	return nil, errNoMatch
}

func bPush(in *interp, p Pos, a []value) (value, error) {
	if len(a) != 2 {
		return nil, errNoMatch
	}
	x, ok := a[0].(*array)
	if !ok {
		return nil, errNoMatch
	}
	if err := in.checkArr(p, len(x.items)+1); err != nil {
		return nil, err
	}
	v, err := in.own(p, a[1])
	if err != nil {
		return nil, err
	}
	x.items = append(x.items, v)
	return unit, nil
}

func bAppend(in *interp, p Pos, a []value) (value, error) {
	if len(a) != 2 {
		return nil, errNoMatch
	}
	switch x := a[0].(type) {
	case *array:
		y, ok := a[1].(*array)
		if !ok {
			return bPush(in, p, a)
		}
		if err := in.checkArr(p, len(x.items)+len(y.items)); err != nil {
			return nil, err
		}
		c, err := in.own(p, y)
		if err != nil {
			return nil, err
		}
		x.items = append(x.items, c.(*array).items...)
		return unit, nil
	case string:
		r, err := in.add(p, x, a[1])
		if err != nil {
			return nil, err
		}
		a[0] = r
		return unit, nil
	}
	return nil, errNoMatch
}

func bShift(in *interp, p Pos, a []value) (value, error) {
	x, ok := one[*array](a)
	if !ok {
		return nil, errNoMatch
	}
	if len(x.items) == 0 {
		return unit, nil
	}
	if err := in.charge(p, int64(len(x.items)>>4)); err != nil {
		return nil, err
	}
	r := x.items[0]
	x.items = append(x.items[:0], x.items[1:]...)
	return r, nil
}

func bInsert(in *interp, p Pos, a []value) (value, error) {
	if len(a) != 3 {
		return nil, errNoMatch
	}
	x, ok := a[0].(*array)
	i, ok2 := a[1].(int64)
	if !ok || !ok2 {
		return nil, errNoMatch
	}
	if err := in.checkArr(p, len(x.items)+1); err != nil {
		return nil, err
	}
	v, err := in.own(p, a[2])
	if err != nil {
		return nil, err
	}
	if err := in.charge(p, int64(len(x.items)>>4)); err != nil {
		return nil, err
	}
	n := int64(len(x.items))
	var j int64
	switch {
	case i < 0:
		j = n + i
		if i == math.MinInt64 || j < 0 {
			j = 0
		}
	case i > n:
		j = n
	default:
		j = i
	}
	x.items = append(x.items, nil)
	copy(x.items[j+1:], x.items[j:])
	x.items[j] = v
	return unit, nil
}

func bReverse(in *interp, p Pos, a []value) (value, error) {
	x, ok := one[*array](a)
	if !ok {
		return nil, errNoMatch
	}
	for i, j := 0, len(x.items)-1; i < j; i, j = i+1, j-1 {
		x.items[i], x.items[j] = x.items[j], x.items[i]
	}
	return unit, nil
}

func bSort(in *interp, p Pos, a []value) (value, error) {
	if len(a) == 2 {
		return bSortBy(in, p, a)
	}
	x, ok := one[*array](a)
	if !ok {
		return nil, errNoMatch
	}
	if len(x.items) <= 1 {
		return unit, nil
	}
	t := typeName(x.items[0])
	for _, it := range x.items {
		if typeName(it) != t {
			return nil, rtErr(p, "elements of different types cannot be sorted")
		}
	}
	n := int64(len(x.items))
	if err := in.charge(p, n*int64(math.Log2(float64(n))+1)); err != nil {
		return nil, err
	}
	var less func(i, j int) bool
	switch t {
	case "i64":
		less = func(i, j int) bool { return x.items[i].(int64) < x.items[j].(int64) }
	case "f64":
		less = func(i, j int) bool { return x.items[i].(float64) < x.items[j].(float64) }
	case "string":
		less = func(i, j int) bool { return x.items[i].(string) < x.items[j].(string) }
	case "char":
		less = func(i, j int) bool { return x.items[i].(charT) < x.items[j].(charT) }
	case "bool":
		less = func(i, j int) bool { return !x.items[i].(bool) && x.items[j].(bool) }
	case "()":
		return unit, nil
	default:
		return nil, rtErr(p, "elements of %s cannot be sorted", t)
	}
	sort.SliceStable(x.items, less)
	return unit, nil
}

// calcOffsetLen mirrors Rhai's calc_offset_len for arrays.
func calcOffsetLen(n int, start int64, l int64) (int, int) {
	var s int
	switch {
	case start < 0:
		if start == math.MinInt64 || -start > int64(n) {
			s = 0
		} else {
			s = n - int(-start)
		}
	case start >= int64(n):
		return n, 0
	default:
		s = int(start)
	}
	if l <= 0 {
		return s, 0
	}
	if l > int64(n-s) {
		return s, n - s
	}
	return s, int(l)
}

func bExtract(in *interp, p Pos, a []value) (value, error) {
	if len(a) < 2 || len(a) > 3 {
		return nil, errNoMatch
	}
	x, ok := a[0].(*array)
	if !ok {
		return nil, errNoMatch
	}
	var s, l int
	switch st := a[1].(type) {
	case int64:
		n := int64(len(x.items))
		if len(a) == 3 {
			ln, ok := a[2].(int64)
			if !ok {
				return nil, errNoMatch
			}
			n = ln
		}
		s, l = calcOffsetLen(len(x.items), st, n)
	case rangeT:
		if len(a) != 2 {
			return nil, errNoMatch
		}
		start := max(st.start, 0)
		end := max(st.end, start)
		if st.inclusive {
			end = min(end, math.MaxInt64-1) + 1
		}
		s, l = calcOffsetLen(len(x.items), start, end-start)
	default:
		return nil, errNoMatch
	}
	return in.own(p, &array{items: append([]value(nil), x.items[s:s+l]...)})
}

func bKeys(in *interp, p Pos, a []value) (value, error) {
	m, ok := one[*object](a)
	if !ok {
		return nil, errNoMatch
	}
	if err := in.charge(p, int64(len(m.m))); err != nil {
		return nil, err
	}
	keys := sortedKeys(m.m)
	items := make([]value, len(keys))
	for i, k := range keys {
		items[i] = k
	}
	return &array{items: items}, nil
}

func bValues(in *interp, p Pos, a []value) (value, error) {
	m, ok := one[*object](a)
	if !ok {
		return nil, errNoMatch
	}
	keys := sortedKeys(m.m)
	items := make([]value, len(keys))
	for i, k := range keys {
		items[i] = m.m[k]
	}
	return in.own(p, &array{items: items})
}

func bSet(in *interp, p Pos, a []value) (value, error) {
	if len(a) != 3 {
		return nil, errNoMatch
	}
	switch x := a[0].(type) {
	case *object:
		k, ok := a[1].(string)
		if !ok {
			return nil, errNoMatch
		}
		if _, exists := x.m[k]; !exists {
			if err := in.checkMap(p, len(x.m)+1); err != nil {
				return nil, err
			}
		}
		v, err := in.own(p, a[2])
		if err != nil {
			return nil, err
		}
		x.m[k] = v
		return unit, nil
	case *array:
		i, ok := a[1].(int64)
		if !ok {
			return nil, errNoMatch
		}
		j, ok := normIndex(i, len(x.items))
		if !ok {
			return unit, nil
		}
		v, err := in.own(p, a[2])
		if err != nil {
			return nil, err
		}
		x.items[j] = v
		return unit, nil
	}
	return nil, errNoMatch
}

func bMixin(in *interp, p Pos, a []value) (value, error) {
	if len(a) != 2 {
		return nil, errNoMatch
	}
	x, ok1 := a[0].(*object)
	y, ok2 := a[1].(*object)
	if !ok1 || !ok2 {
		return nil, errNoMatch
	}
	c, err := in.own(p, y)
	if err != nil {
		return nil, err
	}
	for k, v := range c.(*object).m {
		if _, exists := x.m[k]; !exists {
			if err := in.checkMap(p, len(x.m)+1); err != nil {
				return nil, err
			}
		}
		x.m[k] = v
	}
	return unit, nil
}

func bFn(in *interp, p Pos, a []value) (value, error) {
	name, ok := one[string](a)
	if !ok {
		return nil, errNoMatch
	}
	if !isIdentName(name) {
		return nil, rtErr(p, "invalid function name: %q", name)
	}
	return &fnPtr{name: name}, nil
}

func isIdentName(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		if !isIdentChar(r) || i == 0 && !isIdentStart(r) {
			return false
		}
	}
	return true
}

func bCall(in *interp, p Pos, a []value) (value, error) {
	if len(a) == 0 {
		return nil, errNoMatch
	}
	f, ok := a[0].(*fnPtr)
	if !ok {
		return nil, errNoMatch
	}
	return in.callFnPtr(p, f, append([]value(nil), a[1:]...))
}

// callback calls f with the element (and its index when f takes two args).
// callback calls an array callback the way Rhai's call_raw_with_extra_args
// does: `this` is bound to (a copy of) the element and the arguments are
// (), (element) or (element, index) depending on the function's arity.
func (in *interp) callback(p Pos, f *fnPtr, arity int, v value, i int) (value, error) {
	this, err := in.own(p, v)
	if err != nil {
		return nil, err
	}
	switch {
	case arity <= 0:
		return in.callFnPtrThis(p, f, nil, &this)
	case arity == 1:
		return in.callFnPtrThis(p, f, []value{v}, &this)
	}
	return in.callFnPtrThis(p, f, []value{v, int64(i)}, &this)
}

// bForEach calls f for each element with `this` bound to the element
// itself (mutations are kept) and the index as the optional argument.
func bForEach(in *interp, p Pos, a []value) (value, error) {
	x, f, ok := arrFn(a)
	if !ok {
		return nil, errNoMatch
	}
	arity := in.fnArity(f, 0)
	for i := 0; i < len(x.items); i++ {
		this := x.items[i]
		var args []value
		if arity >= 1 {
			args = []value{int64(i)}
		}
		if _, err := in.callFnPtrThis(p, f, args, &this); err != nil {
			return nil, err
		}
		if i < len(x.items) {
			x.items[i] = this
		}
	}
	return unit, nil
}

func arrFn(a []value) (*array, *fnPtr, bool) {
	if len(a) != 2 {
		return nil, nil, false
	}
	x, ok1 := a[0].(*array)
	f, ok2 := a[1].(*fnPtr)
	return x, f, ok1 && ok2
}

func truthy(v value) bool {
	b, ok := v.(bool)
	return ok && b
}

func bMap(in *interp, p Pos, a []value) (value, error) {
	x, f, ok := arrFn(a)
	if !ok {
		return nil, errNoMatch
	}
	items := append([]value(nil), x.items...)
	arity := in.fnArity(f, 1)
	out := make([]value, 0, len(items))
	for i, v := range items {
		r, err := in.callback(p, f, arity, v, i)
		if err != nil {
			return nil, err
		}
		if r, err = in.own(p, r); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return &array{items: out}, nil
}

func bFilter(in *interp, p Pos, a []value) (value, error) {
	x, f, ok := arrFn(a)
	if !ok {
		return nil, errNoMatch
	}
	items := append([]value(nil), x.items...)
	arity := in.fnArity(f, 1)
	var out []value
	for i, v := range items {
		r, err := in.callback(p, f, arity, v, i)
		if err != nil {
			return nil, err
		}
		if truthy(r) {
			c, err := in.own(p, v)
			if err != nil {
				return nil, err
			}
			out = append(out, c)
		}
	}
	return &array{items: out}, nil
}

func bSomeAll(some bool) builtinFn {
	return func(in *interp, p Pos, a []value) (value, error) {
		x, f, ok := arrFn(a)
		if !ok {
			return nil, errNoMatch
		}
		items := append([]value(nil), x.items...)
		arity := in.fnArity(f, 1)
		for i, v := range items {
			r, err := in.callback(p, f, arity, v, i)
			if err != nil {
				return nil, err
			}
			if truthy(r) == some {
				return some, nil
			}
		}
		return !some, nil
	}
}

func bFind(in *interp, p Pos, a []value) (value, error) {
	x, f, ok := arrFn(a)
	if !ok {
		return nil, errNoMatch
	}
	items := append([]value(nil), x.items...)
	arity := in.fnArity(f, 1)
	for i, v := range items {
		r, err := in.callback(p, f, arity, v, i)
		if err != nil {
			return nil, err
		}
		if truthy(r) {
			return in.own(p, v)
		}
	}
	return unit, nil
}

func bFindIndex(in *interp, p Pos, x *array, f *fnPtr) (value, error) {
	items := append([]value(nil), x.items...)
	arity := in.fnArity(f, 1)
	for i, v := range items {
		r, err := in.callback(p, f, arity, v, i)
		if err != nil {
			return nil, err
		}
		if truthy(r) {
			return int64(i), nil
		}
	}
	return int64(-1), nil
}

func bReduce(in *interp, p Pos, a []value) (value, error) {
	if len(a) != 2 && len(a) != 3 {
		return nil, errNoMatch
	}
	x, ok1 := a[0].(*array)
	f, ok2 := a[1].(*fnPtr)
	if !ok1 || !ok2 {
		return nil, errNoMatch
	}
	var acc value = unit
	if len(a) == 3 {
		acc = a[2]
	}
	items := append([]value(nil), x.items...)
	arity := in.fnArity(f, 2)
	for i, v := range items {
		var err error
		if arity >= 3 {
			acc, err = in.callFnPtr(p, f, []value{acc, v, int64(i)})
		} else {
			acc, err = in.callFnPtr(p, f, []value{acc, v})
		}
		if err != nil {
			return nil, err
		}
	}
	return in.own(p, acc)
}

// bSortBy sorts with a comparer returning an integer (<0, 0, >0).
func bSortBy(in *interp, p Pos, a []value) (value, error) {
	x, f, ok := arrFn(a)
	if !ok {
		return nil, errNoMatch
	}
	var firstErr error
	sort.SliceStable(x.items, func(i, j int) bool {
		if firstErr != nil {
			return false
		}
		r, err := in.callFnPtr(p, f, []value{x.items[i], x.items[j]})
		if err != nil {
			firstErr = err
			return false
		}
		n, ok := r.(int64)
		return ok && n < 0
	})
	if firstErr != nil {
		return nil, firstErr
	}
	return unit, nil
}

// bRadix formats an INT like Rust's {:x} / {:o} / {:b} (two's complement
// for negative numbers), as Rhai's to_hex / to_octal / to_binary.
func bRadix(base int) builtinFn {
	return func(in *interp, p Pos, a []value) (value, error) {
		i, ok := one[int64](a)
		if !ok {
			return nil, errNoMatch
		}
		return strconv.FormatUint(uint64(i), base), nil
	}
}

// textArg reads a string or character argument as a string, the way Rhai's
// string functions accept either.
func textArg(v value) (string, bool) {
	switch x := v.(type) {
	case string:
		return x, true
	case charT:
		return string(rune(x)), true
	}
	return "", false
}
