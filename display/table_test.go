package display

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

// errAny marks a case that must fail (any error) and therefore fall back to
// the default rendering (RAP DS-2).
var errAny = errors.New("any error")

type tcase struct {
	src  string
	args string
	want string
	err  error // nil: success with want; errAny or a sentinel: failure
	dbg  bool  // compare the Rhai debug form of the raw result (checks types too)
}

func ok(src, want string) tcase        { return tcase{src: src, want: want} }
func oka(src, args, want string) tcase { return tcase{src: src, args: args, want: want} }
func dbg(src, want string) tcase       { return tcase{src: src, want: want, dbg: true} }
func fail(src string, err error) tcase { return tcase{src: src, err: err} }
func faila(src, args string, err error) tcase {
	return tcase{src: src, args: args, err: err}
}

var prArgs = `{"owner":"acme","repo":"widgets","number":42}`

var tableCases = []tcase{
	// ---- RAP DS-1 / DS-2: canonical display scripts ----
	oka(`"PR #" + args.number + " on " + args.owner + "/" + args.repo`, prArgs, "PR #42 on acme/widgets"),
	oka("`PR #${args.number} on ${args.owner}/${args.repo}`", prArgs, "PR #42 on acme/widgets"),
	oka(`let t = args.title; if t == () { "untitled" } else { t }`, `{}`, "untitled"), // DS-1: missing key is ()
	oka(`args.missing ?? "none"`, `{"a":1}`, "none"),
	oka(`type_of(args.missing)`, `{}`, "()"),
	oka(`type_of(args.n)`, `{"n":1}`, "i64"),
	oka(`type_of(args.n)`, `{"n":1.5}`, "f64"),
	oka(`type_of(args.n)`, `{"n":1e3}`, "f64"),
	oka(`type_of(args.s) + type_of(args.b) + type_of(args.a) + type_of(args.m) + type_of(args.z)`,
		`{"s":"x","b":true,"a":[1],"m":{},"z":null}`, "stringboolarraymap()"),
	oka(`args.items.len() + " items"`, `{"items":[1,2,3]}`, "3 items"),
	oka(`args.user.name`, `{"user":{"name":"ann"}}`, "ann"),
	oka(`args["repo"]`, prArgs, "widgets"),
	faila(`args.number`, prArgs, ErrNotString),     // DS-2: non-string result falls back
	faila(`args.user.name`, `{}`, errAny),          // property of () is an error in Rhai
	oka(`args.user?.name ?? "anon"`, `{}`, "anon"), // Elvis operator (book: "?." chapter)
	oka(`args.list?[0] ?? "empty"`, `{}`, "empty"),
	// book "Object Maps" (Elvis notation): `x?.a?.b = 42` does nothing when x is ()
	dbg(`let x = (); x?.a?.b = 42; x`, "()"),
	dbg(`let x = #{a: ()}; x?.a?.b = 42; x`, `#{"a": ()}`),
	dbg(`let x = #{a: #{}}; x?.a?.b = 42; x`, `#{"a": #{"b": 42}}`),
	fail(`let x = #{}; x.a.b = 42;`, errAny),
	fail(``, ErrNotString), // empty script returns ()
	fail(`42`, ErrNotString),
	fail(`true`, ErrNotString),
	fail(`[1, 2]`, ErrNotString),
	fail(`#{a: 1}`, ErrNotString),
	fail(`'c'`, ErrNotString),

	// ---- literals: tests/number_literals.rs, tests/float.rs, book "Numbers" ----
	dbg(`42`, "42"),
	dbg(`1_000_000`, "1000000"),
	dbg(`0xff`, "255"),
	dbg(`0Xf`, "15"),
	dbg(`0o77`, "63"),
	dbg(`0b1111`, "15"),
	dbg(`0b0011_1100_1010_0101`, "15525"),
	dbg(`0xffffffffffffffff`, "-1"),
	dbg(`-9223372036854775808`, "-9223372036854775808"),
	dbg(`9223372036854775808`, "9.223372036854776e18"), // too big for i64: lexed as a float
	dbg(`1.5`, "1.5"),
	dbg(`1e3`, "1000.0"),
	dbg(`1_000.5`, "1000.5"),
	dbg(`123456e-3`, "123.456"),
	dbg(`1.23456E+2`, "123.456"),
	ok(`(123.456 == 1.23456e2).to_string()`, "true"), // tests/float.rs test_float_scientific
	dbg(`-0.5`, "-0.5"),
	dbg(`()`, "()"),
	dbg(`true`, "true"),
	dbg(`'y'`, "y"), // to_debug of a char is the bare char (string_basic.rs debug_char)
	ok(`type_of('y')`, "char"),
	dbg(`'\u2764'`, "❤"),
	dbg(`'"'`, `"`),
	dbg(`'\''`, `'`),
	dbg(`"a\tb"`, `"a\tb"`),
	fail(`''`, errAny), // tests/chars.rs: empty char literal
	fail(`'\uhello'`, errAny),

	// ---- strings: tests/string.rs, book "Strings and Characters" ----
	ok(`"Test string: \u2764"`, "Test string: ❤"),
	ok(`"Test string: ""\u2764"""`, `Test string: "❤"`),
	ok(`"Test string: \x58"`, "Test string: X"),
	ok(`"\"hello\""`, `"hello"`),
	ok("   \"Test string: \\u2764\\\n     hello, world!\"", "Test string: ❤ hello, world!"), // line continuation
	ok(`"a\\b\nc"`, "a\\b\nc"),
	ok(`"\U0001F600"`, "😀"),
	fail(`"unterminated`, errAny),
	fail(`"bad \q escape"`, errAny),
	ok(`"foo" + "bar"`, "foobar"),
	ok(`"foo" + 123`, "foo123"),
	ok(`"foo" + 123.4556`, "foo123.4556"),
	ok(`123 + "foo"`, "123foo"),
	ok(`"x" + ()`, "x"),
	ok(`() + "x"`, "x"),
	ok(`"x" + true`, "xtrue"),
	ok(`"x" + 'y'`, "xy"),
	ok(`'x' + "y"`, "xy"),
	ok(`'a' + 'b'`, "ab"),
	ok(`"v" + [1, "a", 'c', 2.0, ()]`, `v[1, "a", c, 2.0, ()]`), // format_array uses to_debug per element
	ok(`"m" + #{b: 2, a: "x"}`, `m#{"a": "x", "b": 2}`),
	ok(`"r" + (1..3)`, "r1..3"),
	ok(`to_string(42)`, "42"),
	ok(`let y = "hello"; y[1].to_string()`, "e"),
	ok(`let y = "hello"; y[-1].to_string()`, "o"),
	ok(`let y = "hello"; y[-4].to_string()`, "e"),
	ok(`let y = "hello"; y.len.to_string()`, "5"),
	ok(`let y = "hello"; y.clear(); y.len.to_string()`, "0"),
	ok(`let y = "hello"; len(y).to_string()`, "5"),
	ok(`let y = "hello"; y[y.len-1].to_string()`, "o"),
	fail(`let y = "hello"; y[5]`, errAny), // string index out of bounds is an error
	fail(`let y = "hello"; y[-6]`, errAny),
	ok(`let y = "hello"; y[1] = 'i'; y`, "hillo"),
	ok(`let y = "hello"; y[1..3]`, "el"),
	ok(`let y = "hello"; y[..]`, "hello"),
	ok(`let y = "hello"; y[..2]`, "he"),
	ok(`let y = "hello"; y[1..-1]`, "ell"),
	ok(`let y = "hello"; y[1..-4]`, ""),
	ok(`let y = "hello"; y[2..-18]`, ""),
	ok(`let y = "hello"; y[0..18]`, "hello"),
	ok(`let y = "hello"; y[1..=3]`, "ell"),
	ok(`let y = "hello"; y[..=]`, "hello"),
	ok(`let y = "hello"; y[..=2]`, "hel"),
	ok(`let y = "hello"; y[1..=-1]`, "ello"),
	ok(`let x = "hello, world!"; ("world" in x).to_string()`, "true"),
	ok(`let x = "hello, world!"; ('w' in x).to_string()`, "true"),
	ok(`let x = "hello, world!"; ("hey" in x).to_string()`, "false"),
	ok(`("hey" !in "hello").to_string()`, "true"),
	ok(`let x = "\u2764\u2764\u2764 hello! \u2764\u2764\u2764"; x.sub_string(1, 5)`, "❤❤ he"),
	ok(`let x = "\u2764\u2764\u2764 hello! \u2764\u2764\u2764"; x.sub_string(1)`, "❤❤ hello! ❤❤❤"),
	ok(`let x = "\u2764\u2764\u2764 hello! \u2764\u2764\u2764"; x.sub_string(99)`, ""),
	ok(`let x = "\u2764\u2764\u2764 hello! \u2764\u2764\u2764"; x.sub_string(1, -1)`, ""),
	ok(`let x = "\u2764\u2764\u2764 hello! \u2764\u2764\u2764"; x.sub_string(1, 999)`, "❤❤ hello! ❤❤❤"),
	ok(`let x = "hello! \u2764\u2764\u2764"; x.sub_string(-2, 2)`, "❤❤"),
	ok(`"hello".sub_string(1..3)`, "el"),
	ok(`"hello".sub_string(1..=3)`, "ell"),
	ok(`let x = "\u2764\u2764\u2764 hello! \u2764\u2764\u2764"; x -= 'l'; x`, "❤❤❤ heo! ❤❤❤"),
	ok(`let x = "\u2764\u2764\u2764 hello! \u2764\u2764\u2764"; x -= "\u2764\u2764"; x`, "❤ hello! ❤"),
	ok(`let x = "\u2764\u2764\u2764 hello! \u2764\u2764\u2764"; x.index_of('\u2764').to_string()`, "0"),
	ok(`let x = "\u2764\u2764\u2764 hello! \u2764\u2764\u2764"; x.index_of('\u2764', 5).to_string()`, "11"),
	ok(`let x = "\u2764\u2764\u2764 hello! \u2764\u2764\u2764"; x.index_of('\u2764', -6).to_string()`, "11"),
	ok(`let x = "\u2764\u2764\u2764 hello! \u2764\u2764\u2764"; x.index_of('\u2764', 999).to_string()`, "-1"),
	ok(`let x = "\u2764\u2764\u2764 hello! \u2764\u2764\u2764"; x.index_of('x').to_string()`, "-1"),
	ok(`"hello world".index_of("world").to_string()`, "6"),
	ok(`let x = "\u2764\u2764\u2764 hello! \u2764\u2764\u2764"; x.split(' ').len.to_string()`, "3"),
	ok(`let x = "\u2764\u2764\u2764 hello! \u2764\u2764\u2764"; x.split("hello").len.to_string()`, "2"),
	ok(`const x = "a,b,c"; x.split(",").len.to_string()`, "3"),
	ok(`const x = "a,b,c"; x.split(",", 2).len.to_string()`, "2"),
	ok(`const x = "a,b,c"; x.split(',', 2).to_string()`, `["a", "b,c"]`),
	ok(`const x = "a b  c"; x.split().to_string()`, `["a", "b", "c"]`),
	ok(`const x = "a,b,c"; x.split(3).to_string()`, `["a,b", ",c"]`),
	ok(`"abc".split("").to_string()`, `["", "a", "b", "c", ""]`),
	ok(`"abc".split("x").to_string()`, `["abc"]`),
	ok(`let s = "  hi  "; s.trim(); "[" + s + "]"`, "[hi]"),
	ok(`let s = "  hi  "; let r = s.trim(); type_of(r)`, "()"), // trim mutates and returns ()
	ok(`"Hello".to_upper() + "Hello".to_lower()`, "HELLOhello"),
	ok(`let s = "Hello"; s.make_upper(); s`, "HELLO"),
	ok(`'a'.to_upper().to_string()`, "A"),
	ok(`"hello".contains("ell").to_string() + "hello".contains('z')`, "truefalse"),
	ok(`"hello".starts_with("he").to_string() + "hello".ends_with("lo")`, "truetrue"),
	ok(`let s = "a-b-c"; s.replace("-", "+"); s`, "a+b+c"),
	ok(`let s = "a-b-c"; let r = s.replace('-', '_'); type_of(r) + s`, "()a_b_c"),
	ok(`let s = "42"; s.pad(5, '0'); s`, "42000"),
	ok(`let s = "ab"; s.pad(7, "xyz"); s`, "abxyzxy"),
	ok(`let s = "hello"; s.pad(2, '*'); s`, "hello"),
	ok(`let s = "hello world"; s.truncate(5); s`, "hello"),
	ok(`let s = "❤❤❤"; s.truncate(1); s`, "❤"),
	ok(`let n = ""; for c in "abc".chars() { n = c + n; } n`, "cba"),
	ok(`"abc".to_chars().to_string()`, `[a, b, c]`),
	ok(`pop("hello").to_string()`, "o"),
	ok(`pop("hello", 3)`, "llo"),
	ok(`pop("hello", 10)`, "hello"),
	ok(`pop("hello", -42)`, ""),
	ok(`let s = "hello"; s.pop(); s`, "hell"),
	ok(`"hello".is_empty().to_string() + "".is_empty()`, "falsetrue"),
	dbg(`"a" < "b" && "b" > "a" && "abc" <= "abc"`, "true"),
	ok(`("a" < "b").to_string() + ("b" >= "c")`, "truefalse"),
	ok(`("x" == 'x').to_string()`, "true"),
	ok(`"❤x".len().to_string() + " " + "❤x".bytes`, "2 4"),

	// ---- string interpolation: tests/string.rs test_string_interpolated ----
	ok("`${}`", ""),
	ok("let x = 40; `hello ${x+2} worlds!`", "hello 42 worlds!"),
	ok(`let x = 40; "hello ${x+2} worlds!"`, "hello ${x+2} worlds!"),
	ok("`hello ${}world!`", "hello world!"),
	ok("`hello \\${world}`", "hello ${world}"),
	ok("`price: \\$5`", `price: \$5`),
	ok("let x = 7; `literal \\${a} value ${x}`", "literal ${a} value 7"),
	ok("`trailing$`", "trailing$"),
	ok("const x = 20; `hello ${let y = x + 1; `${y * 2}`} worlds!`", "hello 42 worlds!"),
	ok("`a``b`", "a`b"),
	ok("`line1\nline2`", "line1\nline2"),
	ok("`no \\n escapes`", `no \n escapes`),
	ok("`${[1, 2]} ${#{a: ()}} ${()}|`", `[1, 2] #{"a": ()} |`),
	ok("`${1.0} ${0.1 + 0.2} ${1e20} ${1e-20}`", "1.0 0.30000000000000004 1e20 1e-20"),
	fail("`unterminated ${1", errAny),

	// ---- float printing: Rhai FloatWrapper Display (src/types/float.rs) ----
	ok(`(10.0 / 4.0).to_string()`, "2.5"),
	ok(`(10 / 4.0).to_string()`, "2.5"),
	ok(`(2.0 * 3).to_string()`, "6.0"),
	ok(`1e12.to_string()`, "1000000000000.0"),
	ok(`1e13.to_string()`, "1e13"), // MAX_NATURAL_FLOAT_FOR_DISPLAY is the f32 1e13 (slightly below 1e13)
	ok(`1e14.to_string()`, "1e14"),
	ok(`123456789.125.to_string()`, "123456789.125"),
	ok(`0.0000001.to_string()`, "0.0000001"),
	ok(`1e-14.to_string()`, "1e-14"),
	ok(`(-0.0).to_string()`, "0.0"),
	ok(`(1.0 / 0.0).to_string()`, "inf"),
	ok(`(-1.0 / 0.0).to_string()`, "-inf"),
	ok(`(0.0 / 0.0).to_string()`, "NaN"),
	ok(`[0.00001, 1e16, 1.5, 100.0].to_string()`, "[1e-5, 1e16, 1.5, 100.0]"), // arrays use Debug (Rust {:?})

	// ---- arithmetic: tests/binary_ops.rs, tests/math.rs, tests/power_of.rs ----
	dbg(`10 % 4`, "2"),
	dbg(`10 << 4`, "160"),
	dbg(`10 >> 4`, "0"),
	dbg(`10 & 4`, "0"),
	dbg(`10 | 4`, "14"),
	dbg(`10 ^ 4`, "14"),
	dbg(`1 << -1`, "0"),
	dbg(`-8 >> 1`, "-4"),
	dbg(`1 << 64`, "0"),
	dbg(`10.0 % 4.0`, "2.0"),
	dbg(`10 ** 4.0`, "10000.0"),
	dbg(`10 + 4.0`, "14.0"),
	dbg(`2 ** 3`, "8"),
	dbg(`(-2 ** 3)`, "-8"),
	dbg(`2 ** 3 ** 2`, "512"),
	dbg(`2.0**-2.0`, "0.25"),
	dbg(`(-2.0**-2)`, "0.25"),
	dbg(`1 + 2 * 3 - 4 / 2`, "5"),
	dbg(`(1 + 2) * 3`, "9"),
	dbg(`-7 / 2`, "-3"),
	dbg(`-7 % 3`, "-1"),
	dbg(`5 - -+ + + - -+-5`, "0"), // tests/unary_minus.rs
	dbg(`let x = -5; x`, "-5"),
	dbg(`fn neg(x) { -x } neg(5)`, "-5"),
	dbg(`1 << 2 ** 2`, "16"), // << binds tighter than ** in Rhai (precedence 210 vs 190)
	dbg(`1 + 2 == 3`, "true"),
	dbg(`1 < 2 == true`, "true"),
	fail(`9223372036854775807 + 1`, errAny), // checked arithmetic overflow
	fail(`-9223372036854775807 - 2`, errAny),
	fail(`9223372036854775807 * 2`, errAny),
	fail(`1 / 0`, errAny),
	fail(`1 % 0`, errAny),
	fail(`2 ** -1`, errAny),
	fail(`2 ** 64`, errAny),
	fail(`1 ** 4294967296`, errAny), // arithmetic.rs: exponent beyond u32::MAX overflows even for 1
	dbg(`1 ** 4294967295`, "1"),
	fail(`-(-9223372036854775807 - 1)`, errAny),
	fail(`"a" * 3`, errAny), // no string * int in Rhai
	fail(`[1] - [1]`, errAny),
	fail(`true + 1`, errAny),
	fail(`!1`, errAny),

	// ---- comparison / logic: tests/binary_ops.rs, tests/bool_op.rs, tests/float.rs ----
	dbg(`42 == 42.0`, "true"),
	dbg(`42 != 42.0`, "false"),
	dbg(`42 > 42.0`, "false"),
	dbg(`42 >= 42.0`, "true"),
	dbg(`1 < 1.5`, "true"),
	dbg(`0 < 1e-16`, "false"), // epsilon float comparison (tests/float.rs test_float_epsilon)
	dbg(`0 < 1e-15`, "true"),
	dbg(`1 == "1"`, "false"), // different types: == is false, not an error
	dbg(`1 != "1"`, "true"),
	dbg(`"a" < 1`, "false"),
	dbg(`() == ()`, "true"),
	dbg(`[1, 2] == [1, 2]`, "true"),
	dbg(`[1, 2] == [1, 2.0]`, "true"),
	dbg(`#{a: 1} == #{a: 1}`, "true"),
	dbg(`#{a: 1} != #{a: 2}`, "true"),
	dbg(`true && (false || true)`, "true"),
	dbg(`true & (false | true)`, "true"),
	dbg(`false && (false || true)`, "false"),
	dbg(`true && (true || { throw })`, "true"),
	dbg(`false && (true || { throw })`, "false"),
	dbg(`!!!!true`, "true"),
	dbg(`true ^ true`, "false"),
	fail(`true && (false || 123)`, errAny),
	fail(`123 && (false || true)`, errAny),
	fail(`if 1 { "x" }`, errAny),
	dbg(`() ?? 1`, "1"),
	dbg(`2 ?? 1`, "2"),
	dbg(`2 in [1, 2, 3]`, "true"),
	dbg(`"b" in #{a: 1, b: 2}`, "true"),
	dbg(`5 in 1..5`, "false"),
	dbg(`5 in 1..=5`, "true"),
	fail(`1 in 5`, errAny),

	// ---- variables, constants, scope: tests/constants.rs, tests/var_scope.rs ----
	dbg(`let x = 1; { let x = 2; } x`, "1"),
	dbg(`let x = 1; let x = x + 1; x`, "2"),
	dbg(`let x; x`, "()"),
	dbg(`const x = 123; x`, "123"),
	fail(`const x = 123; x = 42; x`, errAny),
	fail(`const x = [1]; x.push(2); x`, errAny), // plugin &mut parameters reject constants in method style
	dbg(`const x = [1]; push(x, 2); x`, "[1]"),  // book "Constants": function-call style passes a copy
	dbg(`fn double() { this *= 2; } const X = 21; X.double(); X`, "21"),
	dbg(`fn inc() { this.x += 1; } const M = #{x: 1}; M.inc(); M`, `#{"x": 1}`),
	dbg(`fn inc() { this.x += 1; } let m = #{x: 1}; m.inc(); m`, `#{"x": 2}`),
	fail(`const x = #{a: 1}; x.a = 2; x`, errAny),
	dbg(`const x = [1, 2]; x.len()`, "2"),
	fail(`y`, errAny), // variable not found
	fail(`{ let z = 1; } z`, errAny),

	// ---- assignment and compound assignment: tests/assignments.rs, tests/compound_equality.rs ----
	dbg(`let x = 16; x %= 10; x`, "6"),
	dbg(`let x = 2; x **= 3; x`, "8"),
	dbg(`let x = -2; x **= 3; x`, "-8"),
	dbg(`let x = 1; x <<= 3; x`, "8"),
	dbg(`let x = 16; x >>= 2; x`, "4"),
	dbg(`let x = 6; x &= 3; x`, "2"),
	dbg(`let x = 6; x |= 9; x`, "15"),
	dbg(`let x = 6; x ^= 3; x`, "5"),
	dbg(`let x = true; x |= false; x`, "true"),
	dbg(`let x = 10; x /= 4; x`, "2"),
	dbg(`let x = 10; x -= 4.5; x`, "5.5"),
	dbg(`let x = 10; x *= 2; x += 1; x`, "21"),
	dbg(`let s = "a"; s += 1; s += 'c'; s += (); s`, `"a1c"`),
	dbg(`let a = [1]; a += 2; a += [3, 4]; a`, "[1, 2, 3, 4]"),
	dbg(`let m = #{a: 1}; m += #{b: 2}; m`, `#{"a": 1, "b": 2}`),
	dbg(`let m = #{a: #{b: 1}}; m.a.b = 5; m.a.c = 6; m`, `#{"a": #{"b": 5, "c": 6}}`),
	dbg(`let a = [[1, 2], [3]]; a[0][1] += 10; a[-1][0] = "x"; a`, `[[1, 12], ["x"]]`),
	dbg(`let m = #{}; m["k k"] = 1; m`, `#{"k k": 1}`),
	dbg(`let a = [1, 2]; let b = a; b.push(3); a`, "[1, 2]"), // arrays are values
	dbg(`let m = #{a: [1]}; let b = m.a; b.push(2); m`, `#{"a": [1]}`),
	dbg(`let x = 0; x[0] = true; x[2] = true; x`, "5"), // bit-fields (book: "Integer as Bit-Fields")
	dbg(`let x = 5; [x[0], x[1], x[-64]]`, "[true, false, true]"),
	fail(`let a = [1]; a[1] = 2;`, errAny),
	fail(`1 = 2`, errAny),
	fail(`let a = 1; a.b = 2;`, errAny),

	// ---- arrays: tests/arrays.rs, book "Arrays" ----
	dbg(`let x = [1, 2, 3]; x[1]`, "2"),
	dbg(`let x = [1, 2, 3,]; x[1]`, "2"),
	dbg(`let y = [1, 2, 3]; y[-1]`, "3"),
	dbg(`let y = [1, 2, 3]; y[1] = 5; y[1]`, "5"),
	ok(`let y = [1, [ 42, 88, "93" ], 3]; type_of(y[1][2][1]) + y[1][2][1]`, "char3"), // tests/arrays.rs
	dbg(`let y = []; y.len()`, "0"),
	dbg(`let y = [1, 2, 3]; y.len`, "3"),
	dbg(`let y = [1, 2, 3]; y.is_empty`, "false"),
	dbg(`let y = [1, 2, 3]; y.push(4); y`, "[1, 2, 3, 4]"),
	dbg(`let y = [1, 2, 3]; push(y, 4); y`, "[1, 2, 3, 4]"), // function-call style on a variable mutates it
	dbg(`let y = [1, 2, 3]; let v = y.pop(); [v, y]`, "[3, [1, 2]]"),
	dbg(`let y = []; y.pop()`, "()"),
	dbg(`let y = [1, 2, 3]; y.shift(); y`, "[2, 3]"),
	dbg(`let y = [1, 2, 3]; y.insert(1, 9); y.insert(-1, 8); y.insert(99, 7); y`, "[1, 9, 2, 8, 3, 7]"),
	dbg(`let y = [1, 2, 3]; let r = y.remove(0); [r, y]`, "[1, [2, 3]]"),
	dbg(`let y = [1, 2, 3]; y.remove(9)`, "()"),
	dbg(`let y = [3, 1, 2]; y.sort(); y`, "[1, 2, 3]"),
	dbg(`let y = ["b", "c", "a"]; y.sort(); y`, `["a", "b", "c"]`),
	fail(`let y = [1, "a"]; y.sort(); y`, errAny),
	dbg(`let y = [1, 2, 3]; y.reverse(); y`, "[3, 2, 1]"),
	dbg(`let y = [1, 2, 3]; y.truncate(1); y`, "[1]"),
	dbg(`let y = [1, 2, 3]; y.clear(); y`, "[]"),
	dbg(`[1, 2] + [3]`, "[1, 2, 3]"),
	dbg(`let y = [1, 2]; y.append([3, 4]); y`, "[1, 2, 3, 4]"),
	dbg(`[1, 2, 3].contains(2)`, "true"),
	dbg(`[1, 2, 3].index_of(3)`, "2"),
	dbg(`[1, 2, 3].index_of(9)`, "-1"),
	dbg(`[1, 2, 3, 4, 5].extract(1, 2)`, "[2, 3]"),
	dbg(`[1, 2, 3, 4, 5].extract(-2)`, "[4, 5]"),
	dbg(`[1, 2, 3, 4, 5].extract(1..3)`, "[2, 3]"),
	dbg(`let a = [1, 2]; a.pad(4, 0); a`, "[1, 2, 0, 0]"),
	dbg(`[1, 2, 3].get(5)`, "()"),
	dbg(`let a = [1, 2, 3]; a.set(0, 9); a`, "[9, 2, 3]"),
	fail(`let y = [1, 2, 3]; y[3]`, errAny), // out of bounds is an error
	fail(`let y = [1, 2, 3]; y[-4]`, errAny),
	fail(`let y = [1, 2, 3]; y["a"]`, errAny),
	fail(`[1, 2].first()`, errAny), // Rhai core has no first/last/join
	fail(`["a", "b"].join(",")`, errAny),

	// ---- object maps: tests/maps.rs, book "Object Maps" ----
	dbg(`let x = #{a: 1, b: 2, c: 3}; x.b`, "2"),
	dbg(`let x = #{a: 1, b: 2, c: 3,}; x["c"]`, "3"),
	dbg(`let x = #{a: 1, "b c": 2}; x["b c"]`, "2"),
	dbg(`let y = #{a: #{x:9, y:8, z:7}, b: 2, c: 3}; y.a.y`, "8"),
	dbg(`let y = #{a: 1, b: 2, c: 3}; y.z`, "()"),
	dbg(`let y = #{a: 1, b: 2, c: 3}; y["z"]`, "()"),
	dbg(`let y = #{a: 1, b: 2, c: 3}; "c" in y`, "true"),
	dbg(`let y = #{a: 1, b: 2, c: 3}; "z" in y`, "false"),
	dbg(`let y = #{a: 1, b: 2, c: 3}; y.contains("a")`, "true"),
	dbg(`#{c: 1, a: 2, b: 3}.keys()`, `["a", "b", "c"]`),
	dbg(`#{c: 1, a: 2, b: 3}.values()`, "[2, 3, 1]"),
	dbg(`let m = #{a: 1, b: 2}; let r = m.remove("a"); [r, m]`, `[1, #{"b": 2}]`),
	dbg(`#{a: 1, b: 2}.len()`, "2"),
	dbg(`#{len: 7}.len`, "7"), // on a map, .len is a property lookup
	dbg(`#{a: 1} + #{b: 2}`, `#{"a": 1, "b": 2}`),
	dbg(`let m = #{a: 1}; m.mixin(#{a: 2, c: 3}); m`, `#{"a": 2, "c": 3}`),
	dbg("#{`k`: `v`}.k", `"v"`),
	ok(`#{a:[#{b:42}]}.to_json()`, `{"a":[{"b":42}]}`), // tests/maps.rs
	ok(`#{b: "x\"y", a: [(), true, 1.5]}.to_json()`, `{"a":[null,true,1.5],"b":"x\"y"}`),
	oka(`args.to_json()`, prArgs, `{"number":42,"owner":"acme","repo":"widgets"}`),
	fail(`[1].to_json()`, errAny),
	fail(`#{a: 1, a: 2}`, errAny),
	fail(`#{a: 1}[1]`, errAny),

	// ---- if: tests/if_block.rs, book "If Statement" ----
	dbg(`if true { 55 }`, "55"),
	dbg(`if false { 55 }`, "()"),
	dbg(`if false { 55 } else { 44 }`, "44"),
	dbg(`if false { 55 } else if true { 33 } else { 44 }`, "33"),
	dbg(`let x = if 1 > 2 { "a" } else if 1 > 0 { "b" } else { "c" }; x`, `"b"`),
	dbg(`let x = 5; let y = if x > 3 { x * 2 }; y`, "10"),
	dbg(`if true { 1 } else { 2 } + 10`, "10"), // statement-level if ends the statement; `+ 10` is the next one
	fail(`if true 1`, errAny),

	// ---- switch: tests/switch.rs, book "Switch Statement" ----
	ok(`let r = switch 2 { 1 => (), 2 => 'a', 42 => true }; type_of(r) + r`, "chara"), // tests/switch.rs
	dbg(`switch 3 { 1 => (), 2 => 'a', 42 => true, _ => 123 }`, "123"),
	dbg(`switch 3 { 1 => (), 2 => 'a' }`, "()"),
	dbg(`switch 5 { 1 | 2 => "small", 3 | 4 | 5 => "medium", _ => "big" }`, `"medium"`),
	dbg(`let x = 42; switch x { 1 => 1, 0..50 if x > 45 => 2, -10..20 => 3, 0..50 => 4, 30..100 => 5 }`, "4"),
	dbg(`let x = 50; switch x { 0..=50 => "in", _ => "out" }`, `"in"`),
	dbg(`let x = 7; switch x { 7 if x < 5 => "a", 7 => "b", _ => "c" }`, `"b"`),
	dbg(`switch "hi" { "hi" => 1, _ => 2 }`, "1"),
	dbg(`switch 1.0 { 1 => "int", _ => "other" }`, `"other"`), // matching is by hash: types must agree
	dbg(`switch [1, "a"] { [1, "a"] => "yes", _ => "no" }`, `"yes"`),
	dbg(`switch #{a: 1} { #{a: 1} => "yes", _ => "no" }`, `"yes"`),
	dbg(`let v = 3; switch type_of(v) { "string" => "s", "i64" if v > 0 => "pos", "i64" => "int", _ => "?" }`, `"pos"`),
	dbg(`let r = switch 2 { 1 => { let a = 1; a }, 2 => { let b = 40; b + 2 } }; r`, "42"),
	dbg(`let x = 0; switch 1 { 1 => x = 5, _ => () } x`, "5"),
	fail(`switch 1 { _ => 1, 2 => 2 }`, errAny), // default must be last
	fail(`switch 1 { _ if true => 1 }`, errAny),
	fail(`let y = 1; switch 1 { y => 1 }`, errAny),    // case values must be constants
	fail(`switch 42 { 0..50 => 1, 42 => 2 }`, errAny), // numeric cases cannot follow range cases
	dbg(`switch 42 { 0..50 => 1, "x" => 2 }`, "1"),
	dbg(`let x = 42; switch x { 1 | 2 | 3 | 5..50 | 'x' | true => 123, 'z' => 'a' }`, "123"),
	dbg(`let x = 42; switch x { 42 if x < 40 => 1, 42 if x > 40 => 7, 0 if x < 100 => 2, 1 => 3, _ => 9 }`, "7"),
	dbg(`let x = 42; switch x / 2 { 21 if x < 40 => 1, 0 if x < 100 => 2, 1 => 3, _ => 9 }`, "9"),
	dbg(`switch 42 { 42 => 123, 42 => 999 }`, "123"),
	dbg(`let foo = false; switch 42 { 42 if foo => 0, 0..100 => 123, _ => 999 }`, "123"),

	// ---- loops: tests/looping.rs, tests/while_loop.rs, tests/for.rs, book "Loops" ----
	dbg(`let x = 0; while x < 10 { x += 1; } x`, "10"),
	dbg(`let x = 0; let r = while x < 10 { x += 1; if x == 4 { break x * 10; } }; r`, "40"),
	dbg(`let x = 0; while x < 3 { x += 1 }`, "()"),
	dbg(`let x = 0; loop { x += 1; if x >= 5 { break; } } x`, "5"),
	dbg(`let x = 0; loop { x += 1; if x == 7 { break x * 6; } }`, "42"),
	dbg(`do { break 42; } while false`, "42"),
	dbg(`let x = 0; do { x += 1; } while x < 5; x`, "5"),
	dbg(`let x = 10; do { x += 1; } while x < 5; x`, "11"),
	dbg(`let x = 0; do { x += 2; } until x >= 7; x`, "8"),
	dbg(`let s = 0; for i in 0..5 { s += i; } s`, "10"),
	dbg(`let s = 0; for i in 0..=5 { s += i; } s`, "15"),
	dbg(`let s = 0; for i in range(0, 5) { s += i; } s`, "10"),
	dbg(`let s = []; for i in range(0, 10, 3) { s.push(i); } s`, "[0, 3, 6, 9]"),
	dbg(`let s = []; for i in range(5, 0, -2) { s.push(i); } s`, "[5, 3, 1]"),
	dbg(`let s = []; for x in [1, 2, 3] { s.push(x * 2); } s`, "[2, 4, 6]"),
	dbg(`let s = ""; for c in "abc" { s = c + s; } s`, `"cba"`),
	dbg(`let s = []; for (x, i) in ["a", "b"] { s.push(i + ":" + x); } s`, `["0:a", "1:b"]`),
	dbg(`let s = 0; for i in 0..10 { if i % 2 == 0 { continue; } s += i; } s`, "25"),
	dbg(`let s = 0; for i in 0..10 { if i == 3 { break; } s += i; } s`, "3"),
	dbg(`let r = for (x, i) in [5, 6, 7] { if x == 6 { break i; } }; r`, "1"),
	dbg(`let a = [1, 2, 3]; for x in a { a.push(x); } a`, "[1, 2, 3, 1, 2, 3]"), // iterates over a copy
	dbg(`for x in [] { 1 }`, "()"),
	// tests/for.rs
	dbg(`let sum1 = 0; let sum2 = 0; let inputs = [1, 2, 3, 4, 5]; for x in inputs { sum1 += x; } for x in range(1, 6) { sum2 += x; } for x in range(1, 6, 3) { sum2 += x; } sum1 + sum2`, "35"),
	dbg(`let sum = 0; let inputs = [1, 2, 3, 4, 5]; for (x, i) in inputs { sum += x * (i + 1); } sum`, "55"),
	dbg(`let sum = 0; for x in range(1, 10, 2) { sum += x; } sum`, "25"),
	dbg(`let sum = 0; for x in range(10, 1, 2) { sum += x; } sum`, "0"),
	dbg(`let sum = 0; for x in range(1, 10, -2) { sum += x; } sum`, "0"),
	dbg(`let sum = 0; for x in range(10, 1, -2) { sum += x; } sum`, "30"),
	// tests/looping.rs, tests/while_loop.rs
	dbg(`let x = 0; let i = 0; loop { if i < 10 { i += 1; if x > 20 { continue; } x += i; } else { break; } } x`, "21"),
	dbg(`for n in 0..10 { let x = if n <= 5 { n }; x ?? break 42; }`, "42"),
	dbg(`let x = 0; let value = while x < 10 { if x % 5 == 0 { break 42; } x += 1; }; value`, "42"),
	dbg(`let x = 0; while x < 10 { x += 1; if x > 5 { break; } if x > 3 { continue; } x += 3; } x`, "6"),
	dbg(`let x = 0; while x < 10 { x += 1; if x > 5 { break x * 2; } if x > 3 { continue; } x += 3; }`, "12"),
	dbg(`let x = 0; do { x += 1; if x > 5 { break; } if x > 3 { continue; } x += 3; } while x < 10; x`, "6"),
	dbg(`let x = 0; do { x += 1; if x > 5 { break x * 2; } if x > 3 { continue; } x += 3; } while x < 10;`, "12"),
	dbg(`let s = 0; for x in 3..1 { s += 1; } s`, "0"),
	fail(`break;`, errAny),
	fail(`fn f() { continue; }`, errAny),
	fail(`for x in 5 { }`, errAny),
	fail(`for x in #{a: 1} { }`, errAny),
	fail(`while 1 { }`, errAny),

	// ---- blocks and return: book "Statements", "Return Value" ----
	dbg(`let a = { 40 + 2 }; a`, "42"),
	dbg(`let a = { 40 + 2; }; a`, "42"), // trailing ; does not change the block value in Rhai
	dbg(`{ let a = 1; a + 1 }`, "2"),
	dbg(`{}`, "()"),
	dbg(`1; 2; 3`, "3"),
	dbg(`let x = 1;`, "()"),
	ok(`return "early"; "late"`, "early"),
	ok(`if true { return "a"; } "b"`, "a"),
	fail(`return;`, ErrNotString),
	fail(`let x = 1 let y = 2;`, errAny),
	fail(`let = 1;`, errAny),
	fail(`let if = 1;`, errAny),

	// ---- comments: tests/comments.rs ----
	dbg("let x = 42; // comment\n x", "42"),
	dbg("let /* intruder comment */ x = 42; x", "42"),
	dbg("/* outer /* nested */ still comment */ 7", "7"),
	dbg("/// doc comment\n8", "8"),
	fail("/* unterminated", errAny),

	// ---- functions: tests/functions.rs, book "Functions", "this" ----
	dbg(`fn add_me(a, b) { a+b } add_me(3, 4)`, "7"),
	dbg(`fn add_me(a, b,) { a+b } add_me(3, 4,)`, "7"),
	dbg(`fn bob() { return 4; 5 } bob()`, "4"),
	dbg(`fn add(n) { this + n } let x = 40; x.add(2)`, "42"),
	dbg(`fn add(n) { this += n; } let x = 40; x.add(2); x`, "42"),
	dbg(`fn mul2(x) { x *= 2 } let a = 21; mul2(a); a`, "21"), // arguments are passed by value
	dbg(`fn mul2() { this *= 2; } let x = 21; x.mul2(); x`, "42"),
	dbg(`fn change() { this = 42; } let x = 500; x.change(); x`, "42"),
	dbg(`fn f(a) { a.push(1); a } let a = []; let b = f(a); [a, b]`, "[[], [1]]"),
	dbg(`fn fact(n) { if n <= 1 { 1 } else { n * fact(n - 1) } } fact(10)`, "3628800"),
	dbg(`fn fib(n) { if n < 2 { n } else { fib(n-1) + fib(n-2) } } fib(15)`, "610"),
	dbg(`fn f() { 1 } fn f(x) { x } f() + f(2)`, "3"),        // overloading by arity
	dbg(`fn to_string(x) { "mine" } to_string(1)`, `"mine"`), // script functions shadow built-ins
	fail(`let x = 1; fn f() { x } f()`, errAny),              // functions are pure: no outer variables
	fail(`fn f(a, a) { }`, errAny),
	fail(`fn f() { } fn f() { }`, errAny),
	fail(`{ fn f() { } }`, errAny),
	fail(`unknown_fn(1)`, errAny),
	fail(`"x".unknown_method()`, errAny),
	fail(`fn f() { this } f()`, errAny),
	fail(`this`, errAny),
	fail(`print("hi")`, errAny), // no I/O functions (DS-3)
	fail(`debug("hi")`, errAny),
	fail(`eval("1")`, errAny),
	fail(`import "x" as y;`, errAny),

	// ---- function pointers and anonymous functions: book "Function Pointers",
	// "Anonymous Functions", "Arrays" (map/filter/reduce/...) ----
	dbg(`let f = |x| x + 1; f.call(1)`, "2"),
	dbg(`let f = |x, y| x * y; call(f, 6, 7)`, "42"),
	dbg(`let f = || "hi"; f.call()`, `"hi"`),
	dbg(`let f = |x| x + 1; type_of(f)`, `"Fn"`),
	dbg(`fn double(x) { x * 2 } let f = Fn("double"); f.call(21)`, "42"),
	dbg(`[1, 2, 3].map(|x| x * 2)`, "[2, 4, 6]"),
	dbg(`[1, 2, 3].map(|x, i| x + i)`, "[1, 3, 5]"),
	dbg(`[1, 2, 3, 4].filter(|x| x % 2 == 0)`, "[2, 4]"),
	dbg(`[1, 2, 3, 4].reduce(|sum, x| sum + x, 0)`, "10"),
	fail(`[1, 2, 3, 4].reduce(|sum, x| sum + x)`, errAny), // without an initial value the accumulator starts as (); () + 1 is undefined
	dbg(`["a", "b", "c"].reduce(|s, x| if s == () { x } else { s + ", " + x })`, `"a, b, c"`),
	dbg(`[1, 2, 3].some(|x| x > 2)`, "true"),
	dbg(`[1, 2, 3].all(|x| x > 2)`, "false"),
	dbg(`[1, 2, 3].find(|x| x > 1)`, "2"),
	dbg(`[1, 2, 3].index_of(|x| x > 1)`, "1"),
	dbg(`let a = [3, 1, 2]; a.sort(|x, y| y - x); a`, "[3, 2, 1]"),
	dbg(`[1, 2].map(Fn("to_string"))`, `["1", "2"]`),
	// tests/arrays.rs: callbacks see the element as `this`
	dbg(`[1].map(|x| x + 41)[0]`, "42"),
	dbg(`[1].map(|| this + 41)[0]`, "42"),
	dbg(`let x = [1, 2, 3]; x.for_each(|| this += 41); x[0]`, "42"),
	dbg(`let x = [1, 2, 3]; x.for_each(|i| this += i); x[2]`, "5"),
	dbg(`([1].map(|x| x + 41))[0]`, "42"),
	dbg(`let c = 40; let y = 1; [1].map(|x, i| c + x + y + i)[0]`, "42"),
	dbg(`let a = [1, 2]; a.map(|| this *= 10); a`, "[1, 2]"),                                              // map works on copies
	dbg(`let n = 10; let f = |x| x + n; n = 20; f.call(1)`, "21"),                                         // captured variables are shared (book "Closures")
	dbg(`let x = [1, 2, 3]; let sum = 0; let factor = 2; x.for_each(|| sum += this * factor); sum`, "12"), // tests/arrays.rs
	dbg(`let a = [1]; let f = || a.push(2); f.call(); a`, "[1, 2]"),
	dbg(`fn make() { let n = 0; || { n += 1; n } } let c = make(); c.call(); c.call()`, "2"),
	dbg(`let x = [1, 2, 3]; x.filter(|| this > 2)`, "[3]"),
	dbg(`let x = [1, 2, 3]; x.filter(|v, i| v > i)`, "[1, 2, 3]"),
	dbg(`let x = [1, 2, 3]; x.map(|v, i| v * i)`, "[0, 2, 6]"),
	dbg(`let x = [1, 2, 3]; x.reduce(|sum, v| if sum.type_of() == "()" { v * v } else { sum + v * v })`, "14"),
	dbg(`let x = [1, 2, 3]; x.reduce(|sum, v, i| { if i == 0 { sum = 10 } sum + v * v })`, "24"),
	oka(`let k = "id"; "" + args.items.map(|it| it[k]).filter(|v| v != ()).len()`, `{"items":[{"id":1},{},{"id":3}]}`, "2"),
	oka(`args.items?.map(|x| x) ?? "none"`, `{}`, "none"),
	oka("args.files.map(|f| f.path).reduce(|s, p| if s == () { p } else { `${s}, ${p}` })",
		`{"files":[{"path":"a.go"},{"path":"b.go"}]}`, "a.go, b.go"),
	fail(`let f = |x| x; f.call()`, errAny),
	fail(`let f = |x| f.call(x); f.call(1)`, errAny), // f is not captured (not yet defined)
	fail(`Fn("print").call("x")`, errAny),
	fail(`Fn("not a name")`, errAny),
	fail(`let f = |x| { loop {} }; f.call(1)`, ErrTooManyOperations),
	fail(`fn r(f) { f.call(f) } r(Fn("r"))`, ErrCallDepth),

	// ---- throw: tests/throw.rs ----
	fail(`throw "boom"`, ErrThrown),
	fail(`throw`, ErrThrown),
	fail(`let x = 42; if x > 0 { throw x; } "ok"`, ErrThrown),

	// ---- try/catch: book "Catch Exceptions", tests/throw.rs ----
	dbg(`try { throw 42; } catch (err) { err }`, "42"),
	dbg(`try { throw 42; } catch { 7 }`, "7"),
	dbg(`let x = 0; try { x = 1; } catch { x = 2; } x`, "1"),
	dbg(`try { 42 / 0 } catch (err) { type_of(err) }`, `"map"`),
	dbg(`try { 42 / 0 } catch (err) { err.line }`, "1"),
	ok(`try { parse_int(args.n) } catch { "?" }`, "?"),
	fail(`try { throw 1; } catch { throw; }`, ErrThrown),
	fail(`try { throw 1; } catch (e) { throw e + 1; }`, ErrThrown),
	fail(`try { loop {} } catch { "caught" }`, ErrTooManyOperations), // limits are not catchable
	fail(`fn f() { f() } try { f() } catch { "caught" }`, ErrCallDepth),
	fail(`try { let s = "x"; loop { s += s; } } catch { "caught" }`, ErrStringTooLong),
	fail(`try { 1 }`, errAny),

	// ---- built-in conversions: book "Value Conversions", "Built-in Functions" ----
	dbg(`42.to_float()`, "42.0"),
	dbg(`42.9.to_int()`, "42"),
	dbg(`(-42.9).to_int()`, "-42"),
	dbg(`'A'.to_int()`, "65"),
	dbg(`parse_int("123")`, "123"),
	dbg(`parse_int(" -123 ")`, "-123"),
	dbg(`parse_int("ff", 16)`, "255"),
	dbg(`parse_int("1010", 2)`, "10"),
	dbg(`parse_float("9.9999")`, "9.9999"),
	dbg(`parse_float("1e3")`, "1000.0"),
	fail(`parse_int("abc")`, errAny),
	fail(`parse_int("12", 99)`, errAny),
	fail(`parse_float("x")`, errAny),
	dbg(`type_of(42)`, `"i64"`),
	dbg(`42.type_of()`, `"i64"`),
	dbg(`[type_of(1.0), type_of("s"), type_of('c'), type_of(true), type_of(()), type_of([]), type_of(#{})]`,
		`["f64", "string", "char", "bool", "()", "array", "map"]`),
	dbg(`[type_of(1..2), type_of(1..=2)]`, `["range", "range="]`),
	dbg(`(-5).abs()`, "5"),
	dbg(`abs(-2.5)`, "2.5"),
	dbg(`[max(1, 2), min(1, 2), max(1, 2.5), min("a", "b")]`, `[2, 1, 2.5, "a"]`),
	dbg(`[3.7.floor(), 3.2.ceiling(), 2.5.round(), (-2.5).round()]`, "[3.0, 4.0, 3.0, -3.0]"),
	dbg(`let x = 3.75; [x.floor, x.int, x.fraction, x.is_nan, x.is_finite]`, "[3.0, 3.0, 0.75, false, true]"), // getters (math_basic.rs)
	dbg(`parse_int("0b1", 16)`, "177"),
	fail(`true.to_int()`, errAny),
	dbg(`[7.is_odd, 7.is_even, 0.is_zero]`, "[true, false, true]"),
	dbg(`(-7).sign()`, "-1"),
	dbg(`-1.abs()`, "1"),
	dbg(`-2 ** 2`, "4"),
	dbg(`[255.to_hex(), 8.to_octal(), 5.to_binary(), (-1).to_hex()]`, `["ff", "10", "101", "ffffffffffffffff"]`),
	dbg(`[1, "a"].to_debug()`, `"[1, \"a\"]"`),
	dbg(`"a\"b".to_debug()`, `"\"a\\\"b\""`),
	dbg(`().to_string()`, `""`),
	dbg(`().to_debug()`, `"()"`),
	fail(`"5".to_int()`, errAny),
	fail(`1e30.to_int()`, errAny),
	fail(`len(5)`, errAny),
	fail(`"abc".sub_string("x")`, errAny),

	// ---- sandbox limits (DS-3); detailed tests in limits_test.go ----
	fail(`loop {}`, ErrTooManyOperations),
	fail(`let s = "x"; loop { s += s; }`, ErrStringTooLong),
	fail(`fn f(n) { f(n + 1) } f(0)`, ErrCallDepth),
	fail(`let a = []; loop { a.push(1); }`, ErrArrayTooLarge),
	fail(`let m = #{}; let i = 0; loop { m["k" + i] = i; i += 1; }`, ErrMapTooLarge),
	fail(strings.Repeat("(", 200)+"1"+strings.Repeat(")", 200), ErrExprTooDeep),
}

// tableCache renders the table through Cache.Render (the same path as the
// package-level Render) with a generous timeout so the test is not flaky on
// a loaded machine.
var tableCache = NewCache(1024, &Limits{Timeout: 10 * time.Second})

func runCase(t *testing.T, c tcase) (string, error) {
	t.Helper()
	src := c.src
	args := c.args
	if args == "" {
		args = "{}"
	}
	m, okArgs := decodeArgs(json.RawMessage(args))
	if !okArgs {
		t.Fatalf("bad args JSON %s", args)
	}
	// A generous timeout keeps limit cases deterministic on a loaded machine.
	s, err := Compile(src, &Limits{Timeout: 10 * time.Second})
	if err != nil {
		return "", err
	}
	if c.dbg {
		v, err := s.evalValue(context.Background(), m)
		if err != nil {
			return "", err
		}
		return toDebug(v), nil
	}
	return s.Eval(context.Background(), m)
}

func TestTable(t *testing.T) {
	if len(tableCases) < 200 {
		t.Fatalf("only %d table cases", len(tableCases))
	}
	for i, c := range tableCases {
		got, err := runCase(t, c)
		switch {
		case c.err == nil:
			if err != nil {
				t.Errorf("case %d %q: unexpected error: %v", i, c.src, err)
			} else if got != c.want {
				t.Errorf("case %d %q: got %q, want %q", i, c.src, got, c.want)
			}
		case err == nil:
			t.Errorf("case %d %q: expected error, got %q", i, c.src, got)
		case c.err != errAny && !errors.Is(err, c.err):
			t.Errorf("case %d %q: error %v is not %v", i, c.src, err, c.err)
		}
		// Render must agree: output on success, default rendering on failure (DS-2).
		if !c.dbg {
			args := c.args
			if args == "" {
				args = "{}"
			}
			r := tableCache.Render(context.Background(), "tool", c.src, json.RawMessage(args))
			want := c.want
			if c.err != nil {
				want = Default("tool", json.RawMessage(args))
			}
			if c.src == "" {
				want = Default("tool", json.RawMessage(args))
			}
			if r != want {
				t.Errorf("case %d %q: Render = %q, want %q", i, c.src, r, want)
			}
		}
	}
}
