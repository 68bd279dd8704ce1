package display

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

type tokKind uint8

const (
	tEOF tokKind = iota
	tInt
	tFloat
	tStr
	tChar
	tInterp // back-tick string; parts in tok.parts
	tIdent
	tPunct
)

// Pos is a 1-based line:column position in a script.
type Pos struct{ Line, Col int }

// String formats the position as "line:col".
func (p Pos) String() string { return fmt.Sprintf("%d:%d", p.Line, p.Col) }

type interpPart struct {
	lit    string
	isExpr bool
	toks   []token // expression tokens, terminated by tEOF
}

type token struct {
	kind  tokKind
	text  string // identifier / punctuation / raw number text
	str   string // decoded string or char literal
	i     int64
	f     float64
	pos   Pos
	parts []interpPart
}

// SyntaxError is returned by Compile for malformed scripts.
type SyntaxError struct {
	Pos Pos
	Msg string
	Err error // optional sentinel (e.g. ErrExprTooDeep)
}

// Error formats the error with its position, e.g. "syntax error at 2:9: ...".
func (e *SyntaxError) Error() string {
	return fmt.Sprintf("syntax error at %d:%d: %s", e.Pos.Line, e.Pos.Col, e.Msg)
}

// Unwrap returns the sentinel error, if any.
func (e *SyntaxError) Unwrap() error { return e.Err }

type lexer struct {
	src      string
	off      int
	line     int
	col      int
	depth    int
	maxDepth int
	maxStr   int // maximum string literal length in bytes (0: unlimited)
}

func (lx *lexer) errf(p Pos, format string, a ...any) error {
	return &SyntaxError{Pos: p, Msg: fmt.Sprintf(format, a...)}
}

func (lx *lexer) pos() Pos { return Pos{lx.line, lx.col} }

func (lx *lexer) peekRune(k int) rune {
	off := lx.off
	for ; k > 0; k-- {
		if off >= len(lx.src) {
			return -1
		}
		_, n := utf8.DecodeRuneInString(lx.src[off:])
		off += n
	}
	if off >= len(lx.src) {
		return -1
	}
	r, _ := utf8.DecodeRuneInString(lx.src[off:])
	return r
}

func (lx *lexer) next() rune {
	if lx.off >= len(lx.src) {
		return -1
	}
	r, n := utf8.DecodeRuneInString(lx.src[lx.off:])
	lx.off += n
	if r == '\n' {
		lx.line++
		lx.col = 1
	} else {
		lx.col++
	}
	return r
}

var puncts = []string{
	"**=", "<<=", ">>=", "..=",
	"==", "!=", "<=", ">=", "&&", "||", "<<", ">>", "+=", "-=", "*=", "/=", "%=",
	"&=", "|=", "^=", "**", "..", "=>", "??", "?.", "?[", "::", "#{",
	"+", "-", "*", "/", "%", "<", ">", "=", "!", "&", "|", "^", "(", ")", "[", "]",
	"{", "}", ",", ";", ".", ":", "?", "#", "@", "$", "~",
}

func isIdentStart(r rune) bool { return r == '_' || r < 128 && unicode.IsLetter(r) }
func isIdentChar(r rune) bool  { return isIdentStart(r) || r >= '0' && r <= '9' }

// skipSpace skips whitespace and (nested) comments.
func (lx *lexer) skipSpace() error {
	for {
		r := lx.peekRune(0)
		switch {
		case r == ' ' || r == '\t' || r == '\n' || r == '\r' || r != -1 && unicode.IsSpace(r):
			lx.next()
		case r == '/' && lx.peekRune(1) == '/':
			for r := lx.peekRune(0); r != -1 && r != '\n'; r = lx.peekRune(0) {
				lx.next()
			}
		case r == '/' && lx.peekRune(1) == '*':
			p := lx.pos()
			lx.next()
			lx.next()
			level := 1
			for level > 0 {
				c := lx.next()
				switch {
				case c == -1:
					return lx.errf(p, "unterminated block comment")
				case c == '/' && lx.peekRune(0) == '*':
					lx.next()
					level++
				case c == '*' && lx.peekRune(0) == '/':
					lx.next()
					level--
				}
			}
		default:
			return nil
		}
	}
}

// nextToken lexes one token (tEOF at the end of the source).
func (lx *lexer) nextToken() (token, error) {
	if err := lx.skipSpace(); err != nil {
		return token{}, err
	}
	p := lx.pos()
	r := lx.peekRune(0)
	switch {
	case r == -1:
		return token{kind: tEOF, pos: p}, nil
	case r >= '0' && r <= '9':
		return lx.number()
	case isIdentStart(r):
		start := lx.off
		for isIdentChar(lx.peekRune(0)) {
			lx.next()
		}
		return token{kind: tIdent, text: lx.src[start:lx.off], pos: p}, nil
	case r == '"':
		lx.next()
		s, err := lx.quoted('"', p)
		if err != nil {
			return token{}, err
		}
		return token{kind: tStr, str: s, pos: p}, nil
	case r == '\'':
		lx.next()
		s, err := lx.quoted('\'', p)
		if err != nil {
			return token{}, err
		}
		if utf8.RuneCountInString(s) != 1 {
			return token{}, lx.errf(p, "invalid character literal")
		}
		return token{kind: tChar, str: s, pos: p}, nil
	case r == '`':
		lx.next()
		return lx.backtick(p)
	}
	rest := lx.src[lx.off:]
	if strings.HasPrefix(rest, "!in") && !isIdentChar(lx.peekRune(3)) {
		lx.next()
		lx.next()
		lx.next()
		return token{kind: tPunct, text: "!in", pos: p}, nil
	}
	for _, c := range puncts {
		if c[0] == rest[0] && strings.HasPrefix(rest, c) {
			for range c {
				lx.next()
			}
			return token{kind: tPunct, text: c, pos: p}, nil
		}
	}
	return token{}, lx.errf(p, "unexpected character %q", r)
}

// tokenizeInterp lexes the tokens of a `${ ... }` interpolation up to and
// including its closing '}', returning them terminated by tEOF.
func (lx *lexer) tokenizeInterp() ([]token, error) {
	lx.depth++
	defer func() { lx.depth-- }()
	if lx.depth > lx.maxDepth {
		return nil, &SyntaxError{Pos: lx.pos(), Msg: "string interpolation nested too deeply", Err: ErrExprTooDeep}
	}
	var toks []token
	braces := 0
	for {
		t, err := lx.nextToken()
		if err != nil {
			return nil, err
		}
		switch {
		case t.kind == tEOF:
			return nil, lx.errf(t.pos, "unterminated string interpolation")
		case t.kind == tPunct && (t.text == "{" || t.text == "#{"):
			braces++
		case t.kind == tPunct && t.text == "}":
			if braces == 0 {
				return append(toks, token{kind: tEOF, pos: t.pos}), nil
			}
			braces--
		}
		if len(toks) >= 1<<20 {
			return nil, lx.errf(t.pos, "string interpolation too long")
		}
		toks = append(toks, t)
	}
}

func (lx *lexer) number() (token, error) {
	p := lx.pos()
	var b strings.Builder
	radix := 10
	hasPeriod, hasE := false, false
	first := lx.next()
	b.WriteRune(first)
	valid := func(r rune) bool { return r >= '0' && r <= '9' }
	for {
		r := lx.peekRune(0)
		switch {
		case r == '_':
			lx.next()
		case valid(r):
			b.WriteRune(r)
			lx.next()
		case r == '.' && !hasPeriod && radix == 10:
			n := lx.peekRune(1)
			switch {
			case n >= '0' && n <= '9':
				lx.next()
				b.WriteByte('.')
				hasPeriod = true
			case n == '_' || n == '.' || n == -1 || isIdentStart(n):
				goto done
			default:
				// a symbol after the period: still a float (e.g. `1.;`)
				lx.next()
				b.WriteString(".0")
				hasPeriod = true
			}
		case (r == 'e' || r == 'E') && !hasE && radix == 10:
			n := lx.peekRune(1)
			switch {
			case n >= '0' && n <= '9':
				lx.next()
				b.WriteByte('e')
			case n == '+' || n == '-':
				lx.next()
				lx.next()
				b.WriteByte('e')
				b.WriteRune(n)
			default:
				goto done
			}
			hasE, hasPeriod = true, true
		case (r == 'x' || r == 'X' || r == 'o' || r == 'O' || r == 'b' || r == 'B') && first == '0' && b.Len() == 1:
			lx.next()
			switch r {
			case 'x', 'X':
				radix = 16
				valid = func(r rune) bool {
					return r >= '0' && r <= '9' || r >= 'a' && r <= 'f' || r >= 'A' && r <= 'F'
				}
			case 'o', 'O':
				radix = 8
				valid = func(r rune) bool { return r >= '0' && r <= '7' }
			default:
				radix = 2
				valid = func(r rune) bool { return r == '0' || r == '1' }
			}
			b.Reset()
		default:
			goto done
		}
	}
done:
	text := b.String()
	if radix != 10 {
		u, err := strconv.ParseUint(text, radix, 64)
		if err != nil {
			return token{}, lx.errf(p, "malformed number")
		}
		return token{kind: tInt, i: int64(u), text: text, pos: p}, nil
	}
	if !hasPeriod {
		if i, err := strconv.ParseInt(text, 10, 64); err == nil {
			return token{kind: tInt, i: i, text: text, pos: p}, nil
		}
	}
	f, err := strconv.ParseFloat(text, 64)
	if err != nil && !(hasPeriod || hasE) && math.IsInf(f, 0) {
		err = nil
	}
	if err != nil {
		if ne, ok := err.(*strconv.NumError); !ok || ne.Err != strconv.ErrRange {
			return token{}, lx.errf(p, "malformed number %q", text)
		}
	}
	return token{kind: tFloat, f: f, text: text, pos: p}, nil
}

// escape decodes one escape sequence after '\' (Rhai: \n \r \t \\ \xHH
// \uHHHH \UHHHHHHHH and the quote character itself).
func (lx *lexer) escape(term rune, out *strings.Builder) error {
	p := lx.pos()
	c := lx.next()
	switch c {
	case 'n':
		out.WriteByte('\n')
	case 'r':
		out.WriteByte('\r')
	case 't':
		out.WriteByte('\t')
	case '\\':
		out.WriteByte('\\')
	case 'x', 'u', 'U':
		n := map[rune]int{'x': 2, 'u': 4, 'U': 8}[c]
		var v uint32
		for i := 0; i < n; i++ {
			d := lx.next()
			var dv uint32
			switch {
			case d >= '0' && d <= '9':
				dv = uint32(d - '0')
			case d >= 'a' && d <= 'f':
				dv = uint32(d-'a') + 10
			case d >= 'A' && d <= 'F':
				dv = uint32(d-'A') + 10
			default:
				return lx.errf(p, "malformed escape sequence")
			}
			v = v*16 + dv
		}
		if v > unicode.MaxRune || v >= 0xD800 && v <= 0xDFFF {
			return lx.errf(p, "malformed escape sequence")
		}
		out.WriteRune(rune(v))
	default:
		if c == term {
			out.WriteRune(term)
			return nil
		}
		return lx.errf(p, "malformed escape sequence \\%c", c)
	}
	return nil
}

// quoted lexes a "..." string or '...' char literal body (opening quote consumed).
func (lx *lexer) quoted(term rune, start Pos) (string, error) {
	var out strings.Builder
	startCol := start.Col
	for {
		c := lx.next()
		switch {
		case c == -1:
			return "", lx.errf(start, "unterminated string")
		case c == term:
			if lx.peekRune(0) == term {
				lx.next()
				out.WriteRune(term)
				continue
			}
			if err := lx.checkLen(start, out.Len()); err != nil {
				return "", err
			}
			return out.String(), nil
		case c == '\n':
			return "", lx.errf(start, "unterminated string")
		case c == '\r' && lx.peekRune(0) == '\n':
		case c == '\\':
			if term == '"' && (lx.peekRune(0) == '\n' || lx.peekRune(0) == '\r' && lx.peekRune(1) == '\n') {
				// line continuation: skip the newline and indentation up to the
				// column of the opening quote
				if lx.peekRune(0) == '\r' {
					lx.next()
				}
				lx.next()
				for r := lx.peekRune(0); (r == ' ' || r == '\t') && lx.col <= startCol; r = lx.peekRune(0) {
					lx.next()
				}
				continue
			}
			if err := lx.escape(term, &out); err != nil {
				return "", err
			}
		default:
			out.WriteRune(c)
		}
	}
}

// checkLen rejects string literals longer than the string limit
// (Rhai: LexError::StringTooLong).
func (lx *lexer) checkLen(p Pos, n int) error {
	if lx.maxStr > 0 && n > lx.maxStr {
		return &SyntaxError{Pos: p, Msg: fmt.Sprintf("string literal of %d bytes exceeds the limit of %d", n, lx.maxStr), Err: ErrStringTooLong}
	}
	return nil
}

// backtick lexes a literal string with `${ }` interpolation (opening ` consumed).
func (lx *lexer) backtick(start Pos) (token, error) {
	var parts []interpPart
	var out strings.Builder
	for {
		c := lx.next()
		switch {
		case c == -1:
			return token{}, lx.errf(start, "unterminated string")
		case c == '`':
			if lx.peekRune(0) == '`' {
				lx.next()
				out.WriteByte('`')
				continue
			}
			if err := lx.checkLen(start, out.Len()); err != nil {
				return token{}, err
			}
			if len(parts) == 0 {
				return token{kind: tStr, str: out.String(), pos: start}, nil
			}
			if out.Len() > 0 {
				parts = append(parts, interpPart{lit: out.String()})
			}
			return token{kind: tInterp, parts: parts, pos: start}, nil
		case c == '\r' && lx.peekRune(0) == '\n':
		case c == '\\' && lx.peekRune(0) == '$' && lx.peekRune(1) == '{':
			lx.next()
			out.WriteByte('$')
		case c == '$' && lx.peekRune(0) == '{':
			lx.next()
			if out.Len() > 0 {
				parts = append(parts, interpPart{lit: out.String()})
				out.Reset()
			}
			toks, err := lx.tokenizeInterp()
			if err != nil {
				return token{}, err
			}
			parts = append(parts, interpPart{isExpr: true, toks: toks})
		default:
			out.WriteRune(c)
		}
	}
}
