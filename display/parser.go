package display

import (
	"fmt"
	"math"
	"sort"
	"strconv"
)

type parser struct {
	toks      []token // lookahead buffer (or all tokens of an interpolation)
	i         int
	lx        *lexer // nil when toks holds every token
	depth     int
	maxDepth  int
	loopDepth int
	inFn      bool
	noPipe    bool // parsing switch case values: `|` separates alternatives
	fns       map[string]*fnDef
	captures  []map[string]bool // names referenced inside the closures being parsed
	catchVar  string            // error variable of the innermost enclosing catch block
}

var keywords = map[string]bool{
	"let": true, "const": true, "if": true, "else": true, "switch": true, "while": true,
	"loop": true, "do": true, "until": true, "for": true, "in": true, "break": true,
	"continue": true, "return": true, "throw": true, "fn": true, "private": true,
	"true": true, "false": true, "this": true, "import": true, "export": true, "as": true,
	"global": true, "try": true, "catch": true, "Fn": true, "call": true, "curry": true,
	"is_def_var": true, "is_def_fn": true, "eval": true, "print": true, "debug": true,
	"type_of": true, "is_shared": true, "var": true, "static": true, "shared": true,
	"with": true, "goto": true, "exit": true, "match": true, "case": true, "public": true,
	"protected": true, "new": true, "use": true, "module": true, "package": true,
	"super": true, "thread": true, "spawn": true, "go": true, "sync": true, "async": true,
	"await": true, "yield": true, "default": true, "void": true, "null": true, "nil": true,
}

func fnKey(name string, arity int) string { return name + "/" + strconv.Itoa(arity) }

// parseAbort carries a lexing error out of the parser (recovered in parse).
type parseAbort struct{ err error }

// fill makes sure the lookahead buffer holds token p.i+k (streaming lexing
// means deeply nested input fails after reading only a few tokens).
func (p *parser) fill(k int) {
	if p.lx == nil {
		return
	}
	if p.i > 64 && p.i == len(p.toks) {
		p.toks, p.i = make([]token, 0, 64), 0 // fresh array: callers may hold *token
	}
	for len(p.toks) <= p.i+k {
		if n := len(p.toks); n > 0 && p.toks[n-1].kind == tEOF {
			return
		}
		t, err := p.lx.nextToken()
		if err != nil {
			panic(parseAbort{err})
		}
		p.toks = append(p.toks, t)
	}
}

func (p *parser) peek() *token {
	p.fill(0)
	return &p.toks[p.i]
}

func (p *parser) next() *token {
	t := p.peek()
	if t.kind != tEOF {
		p.i++
	}
	return t
}

func (p *parser) is(text string) bool {
	t := p.peek()
	return (t.kind == tPunct || t.kind == tIdent) && t.text == text
}

func (p *parser) isAt(k int, text string) bool {
	p.fill(k)
	if p.i+k >= len(p.toks) {
		return false
	}
	t := &p.toks[p.i+k]
	return (t.kind == tPunct || t.kind == tIdent) && t.text == text
}

func (p *parser) errf(pos Pos, format string, a ...any) error {
	return &SyntaxError{Pos: pos, Msg: fmt.Sprintf(format, a...)}
}

func describe(t *token) string {
	switch t.kind {
	case tEOF:
		return "end of script"
	case tInt, tFloat:
		return "number " + t.text
	case tStr, tInterp:
		return "string"
	case tChar:
		return "character"
	}
	return "'" + t.text + "'"
}

func (p *parser) expect(text string) (*token, error) {
	if !p.is(text) {
		t := p.peek()
		return nil, p.errf(t.pos, "expecting '%s' but found %s", text, describe(t))
	}
	return p.next(), nil
}

func (p *parser) enter(pos Pos) error {
	p.depth++
	if p.depth > p.maxDepth {
		return &SyntaxError{Pos: pos, Msg: fmt.Sprintf("expression nested deeper than %d levels", p.maxDepth), Err: ErrExprTooDeep}
	}
	return nil
}

func (p *parser) leave() { p.depth-- }

func (p *parser) ident() (string, Pos, error) {
	t := p.peek()
	if t.kind != tIdent || keywords[t.text] {
		return "", t.pos, p.errf(t.pos, "expecting a name but found %s", describe(t))
	}
	p.next()
	return t.text, t.pos, nil
}

// parseProgram parses the top level of a script.
func (p *parser) parseProgram() (*blockNode, error) {
	blk := &blockNode{base: base{p.peek().pos}}
	for p.peek().kind != tEOF {
		st, err := p.parseStmt(true)
		if err != nil {
			return nil, err
		}
		if st != nil {
			blk.stmts = append(blk.stmts, st)
		}
	}
	return blk, nil
}

// parseBlock parses `{ stmts }`.
func (p *parser) parseBlock() (*blockNode, error) {
	open, err := p.expect("{")
	if err != nil {
		return nil, err
	}
	if err := p.enter(open.pos); err != nil {
		return nil, err
	}
	defer p.leave()
	blk := &blockNode{base: base{open.pos}}
	for !p.is("}") {
		if p.peek().kind == tEOF {
			return nil, p.errf(p.peek().pos, "expecting '}' to close the block opened at %s", open.pos)
		}
		st, err := p.parseStmt(false)
		if err != nil {
			return nil, err
		}
		if st != nil {
			blk.stmts = append(blk.stmts, st)
		}
	}
	p.next()
	return blk, nil
}

func selfTerminated(n node) bool {
	switch x := n.(type) {
	case *ifNode, *switchNode, *whileNode, *forNode, *blockNode, *doNode, *tryNode:
		return true
	case nil:
		return true
	case *letNode:
		_ = x
	}
	return false
}

// parseStmt parses one statement including its terminating ';'.
func (p *parser) parseStmt(top bool) (node, error) {
	t := p.peek()
	if p.is(";") {
		p.next()
		return nil, nil
	}
	if err := p.enter(t.pos); err != nil {
		return nil, err
	}
	defer p.leave()
	var st node
	var err error
	switch {
	case p.is("fn") || p.is("private") && p.isAt(1, "fn"):
		if !top {
			return nil, p.errf(t.pos, "functions can only be defined at global level")
		}
		if p.is("private") {
			p.next()
		}
		return nil, p.parseFn()
	case p.is("let") || p.is("const"):
		st, err = p.parseLet()
	case p.is("if"), p.is("switch"), p.is("while"), p.is("loop"), p.is("do"), p.is("for"), p.is("{"):
		st, err = p.parsePrimary()
		if err == nil && !selfTerminated(st) {
			err = p.errf(t.pos, "unexpected statement")
		}
	case p.is("break") || p.is("continue"):
		p.next()
		if p.loopDepth == 0 {
			return nil, p.errf(t.pos, "'%s' used outside of a loop", t.text)
		}
		if t.text == "continue" {
			st = &continueNode{base{t.pos}}
		} else {
			bn := &breakNode{base: base{t.pos}}
			if !p.stmtEnd() {
				bn.val, err = p.parseExpr()
			}
			st = bn
		}
	case p.is("return") || p.is("throw"):
		p.next()
		var v node
		if !p.stmtEnd() {
			v, err = p.parseExpr()
		}
		if t.text == "return" {
			st = &returnNode{base{t.pos}, v}
		} else {
			if v == nil && p.catchVar != "" {
				v = &varNode{base{t.pos}, p.catchVar} // `throw;` in catch re-throws
			}
			st = &throwNode{base{t.pos}, v}
		}
	case p.is("import") || p.is("export"):
		return nil, p.errf(t.pos, "'%s' is not supported", t.text)
	case p.is("try"):
		st, err = p.parseTry()
	default:
		st, err = p.parseExprStmt()
	}
	if err != nil {
		return nil, err
	}
	if p.is(";") {
		p.next()
		return st, nil
	}
	if selfTerminated(st) || p.is("}") || p.peek().kind == tEOF {
		return st, nil
	}
	nt := p.peek()
	return nil, p.errf(nt.pos, "expecting ';' to terminate statement but found %s", describe(nt))
}

func (p *parser) stmtEnd() bool {
	return p.is(";") || p.is("}") || p.peek().kind == tEOF || p.is(",")
}

var compoundOps = map[string]string{
	"+=": "+", "-=": "-", "*=": "*", "/=": "/", "%=": "%", "**=": "**",
	"<<=": "<<", ">>=": ">>", "&=": "&", "|=": "|", "^=": "^",
}

func (p *parser) parseExprStmt() (node, error) {
	x, err := p.parseExpr()
	if err != nil {
		return nil, err
	}
	t := p.peek()
	if t.kind != tPunct {
		return x, nil
	}
	op := ""
	if t.text == "=" {
		op = "="
	} else if o, ok := compoundOps[t.text]; ok {
		op = o
	} else {
		return x, nil
	}
	if err := checkAssignable(x); err != nil {
		return nil, p.errf(t.pos, "%v", err)
	}
	p.next()
	v, err := p.parseExpr()
	if err != nil {
		return nil, err
	}
	return &assignNode{base{t.pos}, x, op, v}, nil
}

func checkAssignable(x node) error {
	switch n := x.(type) {
	case *varNode, *thisNode:
		return nil
	case *propNode:
		return checkAssignable(n.x)
	case *indexNode:
		return checkAssignable(n.x)
	}
	return fmt.Errorf("left-hand side of an assignment is not assignable")
}

func (p *parser) parseLet() (node, error) {
	t := p.next()
	name, _, err := p.ident()
	if err != nil {
		return nil, err
	}
	ln := &letNode{base: base{t.pos}, name: name, isCon: t.text == "const"}
	if p.is("=") {
		p.next()
		if ln.val, err = p.parseExpr(); err != nil {
			return nil, err
		}
	} else if ln.isCon {
		return nil, p.errf(p.peek().pos, "expecting '=' after constant name")
	}
	return ln, nil
}

func (p *parser) parseFn() error {
	t := p.next() // fn
	name, npos, err := p.ident()
	if err != nil {
		return err
	}
	if _, err := p.expect("("); err != nil {
		return err
	}
	var params []string
	seen := map[string]bool{}
	for !p.is(")") {
		pn, ppos, err := p.ident()
		if err != nil {
			return err
		}
		if seen[pn] {
			return p.errf(ppos, "duplicated parameter '%s'", pn)
		}
		seen[pn] = true
		params = append(params, pn)
		if p.is(",") {
			p.next()
		} else if !p.is(")") {
			return p.errf(p.peek().pos, "expecting ',' or ')' in parameter list")
		}
	}
	p.next()
	key := fnKey(name, len(params))
	if _, dup := p.fns[key]; dup {
		return p.errf(npos, "function '%s' with %d parameters is already defined", name, len(params))
	}
	saveLoop, saveFn, saveCatch := p.loopDepth, p.inFn, p.catchVar
	p.loopDepth, p.inFn, p.catchVar = 0, true, ""
	body, err := p.parseBlock()
	p.loopDepth, p.inFn, p.catchVar = saveLoop, saveFn, saveCatch
	if err != nil {
		return err
	}
	p.fns[key] = &fnDef{name: name, params: params, body: body, pos: t.pos}
	return nil
}

// ---- expressions ----

func (p *parser) parseExpr() (node, error) {
	t := p.peek()
	if err := p.enter(t.pos); err != nil {
		return nil, err
	}
	defer p.leave()
	lhs, err := p.parseUnary()
	if err != nil {
		return nil, err
	}
	return p.parseBinary(1, lhs)
}

func (p *parser) opPrec() (string, int) {
	t := p.peek()
	if t.kind == tIdent && t.text == "in" {
		return "in", 110
	}
	if t.kind != tPunct {
		return "", 0
	}
	switch t.text {
	case "||", "^":
		return t.text, 30
	case "|":
		if p.noPipe {
			return "", 0
		}
		return t.text, 30
	case "&&", "&":
		return t.text, 60
	case "==", "!=":
		return t.text, 90
	case "!in":
		return t.text, 110
	case "<", "<=", ">", ">=":
		return t.text, 130
	case "??":
		return t.text, 135
	case "..", "..=":
		return t.text, 140
	case "+", "-":
		return t.text, 150
	case "*", "/", "%":
		return t.text, 180
	case "**":
		return t.text, 190
	case "<<", ">>":
		return t.text, 210
	}
	return "", 0
}

func (p *parser) parseBinary(parent int, lhs node) (node, error) {
	root := lhs
	extra := 0
	defer func() { p.depth -= extra }()
	for {
		op, prec := p.opPrec()
		if prec == 0 || prec < parent || prec == parent && op != "**" {
			return root, nil
		}
		opTok := p.next()
		extra++
		if err := p.enter(opTok.pos); err != nil {
			return nil, err
		}
		var rhs node
		var err error
		if op == "??" && (p.is("break") || p.is("continue") || p.is("return") || p.is("throw")) {
			// `x ?? break 42` (tests/looping.rs): the right side is a statement
			if rhs, err = p.parseCaseStmt(); err != nil {
				return nil, err
			}
		} else if (op == ".." || op == "..=") && (p.is("]") || p.is(")") || p.is("}") || p.is(",") || p.is(";") || p.is("=>") || p.peek().kind == tEOF) {
			rhs = &litNode{base{p.peek().pos}, unit}
		} else if rhs, err = p.parseUnary(); err != nil {
			return nil, err
		}
		_, next := p.opPrec()
		if next > prec || next == prec && op == "**" {
			if rhs, err = p.parseBinary(prec, rhs); err != nil {
				return nil, err
			}
		}
		switch op {
		case "&&":
			root = &andNode{base{opTok.pos}, root, rhs}
		case "||":
			root = &orNode{base{opTok.pos}, root, rhs}
		case "??":
			root = &coalesceNode{base{opTok.pos}, root, rhs}
		default:
			root = &binaryNode{base{opTok.pos}, op, root, rhs}
		}
	}
}

func (p *parser) parseUnary() (node, error) {
	t := p.peek()
	if t.kind == tPunct && (t.text == "-" || t.text == "+" || t.text == "!") {
		p.next()
		if err := p.enter(t.pos); err != nil {
			return nil, err
		}
		defer p.leave()
		if t.text == "-" {
			nt := p.peek()
			// Like Rhai's tokenizer, a '-' directly before a number literal
			// makes a negative literal (so `-1.abs()` is 1 and `-2 ** 2` is 4).
			if nt.kind == tInt {
				p.next()
				return p.parsePostfix(&litNode{base{t.pos}, -nt.i})
			}
			if nt.kind == tFloat {
				p.next()
				if nt.text == "9223372036854775808" {
					return p.parsePostfix(&litNode{base{t.pos}, int64(math.MinInt64)})
				}
				return p.parsePostfix(&litNode{base{t.pos}, -nt.f})
			}
		}
		x, err := p.parseUnary()
		if err != nil {
			return nil, err
		}
		return &unaryNode{base{t.pos}, t.text, x}, nil
	}
	prim, err := p.parsePrimary()
	if err != nil {
		return nil, err
	}
	return p.parsePostfix(prim)
}

func (p *parser) parsePostfix(x node) (node, error) {
	extra := 0
	defer func() { p.depth -= extra }()
	for {
		t := p.peek()
		if t.kind != tPunct {
			return x, nil
		}
		switch t.text {
		case ".", "?.":
			p.next()
			extra++
			if err := p.enter(t.pos); err != nil {
				return nil, err
			}
			nt := p.peek()
			if nt.kind != tIdent {
				return nil, p.errf(nt.pos, "expecting a property or method name after '%s'", t.text)
			}
			p.next()
			if p.is("(") {
				args, err := p.parseArgs()
				if err != nil {
					return nil, err
				}
				x = &methodNode{base{nt.pos}, x, nt.text, args, t.text == "?.", fnKey(nt.text, len(args))}
			} else {
				x = &propNode{base{nt.pos}, x, nt.text, t.text == "?."}
			}
		case "[", "?[":
			p.next()
			extra++
			if err := p.enter(t.pos); err != nil {
				return nil, err
			}
			save := p.noPipe
			p.noPipe = false
			idx, err := p.parseExpr()
			p.noPipe = save
			if err != nil {
				return nil, err
			}
			if _, err := p.expect("]"); err != nil {
				return nil, err
			}
			x = &indexNode{base{t.pos}, x, idx, t.text == "?["}
		default:
			return x, nil
		}
	}
}

func (p *parser) parseArgs() ([]node, error) {
	if _, err := p.expect("("); err != nil {
		return nil, err
	}
	save := p.noPipe
	p.noPipe = false
	defer func() { p.noPipe = save }()
	var args []node
	for !p.is(")") {
		a, err := p.parseExpr()
		if err != nil {
			return nil, err
		}
		args = append(args, a)
		if p.is(",") {
			p.next()
		} else if !p.is(")") {
			t := p.peek()
			return nil, p.errf(t.pos, "expecting ',' or ')' in argument list but found %s", describe(t))
		}
	}
	p.next()
	return args, nil
}

func (p *parser) parsePrimary() (node, error) {
	t := p.peek()
	if err := p.enter(t.pos); err != nil {
		return nil, err
	}
	defer p.leave()
	switch t.kind {
	case tInt:
		p.next()
		return &litNode{base{t.pos}, t.i}, nil
	case tFloat:
		p.next()
		return &litNode{base{t.pos}, t.f}, nil
	case tStr:
		p.next()
		return &litNode{base{t.pos}, t.str}, nil
	case tChar:
		p.next()
		r := []rune(t.str)
		return &litNode{base{t.pos}, charT(r[0])}, nil
	case tInterp:
		p.next()
		return p.parseInterp(t)
	case tEOF:
		return nil, p.errf(t.pos, "unexpected end of script")
	case tIdent:
		return p.parseIdentExpr()
	}
	switch t.text {
	case "..", "..=":
		// prefix range `..x` / `..`: the start is (), the operator is left
		// for parseBinary to consume
		return &litNode{base{t.pos}, unit}, nil
	case "(":
		p.next()
		if p.is(")") {
			p.next()
			return &litNode{base{t.pos}, unit}, nil
		}
		save := p.noPipe
		p.noPipe = false
		x, err := p.parseExpr()
		p.noPipe = save
		if err != nil {
			return nil, err
		}
		if _, err := p.expect(")"); err != nil {
			return nil, err
		}
		return x, nil
	case "[":
		p.next()
		save := p.noPipe
		p.noPipe = false
		defer func() { p.noPipe = save }()
		an := &arrayNode{base: base{t.pos}}
		for !p.is("]") {
			e, err := p.parseExpr()
			if err != nil {
				return nil, err
			}
			an.elems = append(an.elems, e)
			if p.is(",") {
				p.next()
			} else if !p.is("]") {
				nt := p.peek()
				return nil, p.errf(nt.pos, "expecting ',' or ']' in array literal but found %s", describe(nt))
			}
		}
		p.next()
		return an, nil
	case "#{":
		p.next()
		save := p.noPipe
		p.noPipe = false
		defer func() { p.noPipe = save }()
		mn := &mapNode{base: base{t.pos}}
		seen := map[string]bool{}
		for !p.is("}") {
			kt := p.next()
			var key string
			switch kt.kind {
			case tIdent, tStr:
				key = kt.text
				if kt.kind == tStr {
					key = kt.str
				}
			default:
				return nil, p.errf(kt.pos, "expecting a property name in object map literal but found %s", describe(kt))
			}
			if seen[key] {
				return nil, p.errf(kt.pos, "duplicated property '%s' in object map literal", key)
			}
			seen[key] = true
			if _, err := p.expect(":"); err != nil {
				return nil, err
			}
			v, err := p.parseExpr()
			if err != nil {
				return nil, err
			}
			mn.keys = append(mn.keys, key)
			mn.vals = append(mn.vals, v)
			if p.is(",") {
				p.next()
			} else if !p.is("}") {
				nt := p.peek()
				return nil, p.errf(nt.pos, "expecting ',' or '}' in object map literal but found %s", describe(nt))
			}
		}
		p.next()
		return mn, nil
	case "{":
		return p.parseBlock()
	case "|", "||":
		return p.parseClosure()
	}
	return nil, p.errf(t.pos, "unexpected %s", describe(t))
}

// parseTry parses `try { } catch { }` / `try { } catch (err) { }`.
func (p *parser) parseTry() (node, error) {
	t := p.next()
	body, err := p.parseBlock()
	if err != nil {
		return nil, err
	}
	if _, err := p.expect("catch"); err != nil {
		return nil, err
	}
	tn := &tryNode{base: base{t.pos}, body: body, errVar: "$err"}
	if p.is("(") {
		p.next()
		if tn.errVar, _, err = p.ident(); err != nil {
			return nil, err
		}
		if _, err := p.expect(")"); err != nil {
			return nil, err
		}
	}
	save := p.catchVar
	p.catchVar = tn.errVar
	tn.catch, err = p.parseBlock()
	p.catchVar = save
	if err != nil {
		return nil, err
	}
	return tn, nil
}

// parseClosure parses an anonymous function `|a, b| body` (or `|| body`).
// Outer variables it mentions are captured by value when it is created.
func (p *parser) parseClosure() (node, error) {
	t := p.next()
	var params []string
	if t.text == "|" {
		seen := map[string]bool{}
		for !p.is("|") {
			name, npos, err := p.ident()
			if err != nil {
				return nil, err
			}
			if seen[name] {
				return nil, p.errf(npos, "duplicated parameter '%s'", name)
			}
			seen[name] = true
			params = append(params, name)
			if p.is(",") {
				p.next()
			} else if !p.is("|") {
				return nil, p.errf(p.peek().pos, "expecting ',' or '|' in closure parameters")
			}
		}
		p.next()
	}
	set := map[string]bool{}
	p.captures = append(p.captures, set)
	saveLoop, saveFn, savePipe := p.loopDepth, p.inFn, p.noPipe
	p.loopDepth, p.inFn, p.noPipe = 0, true, false
	body, err := p.parseExprStmt()
	p.loopDepth, p.inFn, p.noPipe = saveLoop, saveFn, savePipe
	p.captures = p.captures[:len(p.captures)-1]
	if err != nil {
		return nil, err
	}
	isParam := map[string]bool{}
	for _, n := range params {
		isParam[n] = true
	}
	cn := &closureNode{base: base{t.pos}}
	for name := range set {
		if !isParam[name] {
			cn.captures = append(cn.captures, name)
		}
	}
	sort.Strings(cn.captures)
	cn.def = &fnDef{name: "anonymous", params: params, pos: t.pos,
		body: &blockNode{base: base{t.pos}, stmts: []node{body}}}
	return cn, nil
}

func (p *parser) parseInterp(t *token) (node, error) {
	in := &interpNode{base: base{t.pos}}
	for _, part := range t.parts {
		if !part.isExpr {
			in.parts = append(in.parts, &litNode{base{t.pos}, part.lit})
			continue
		}
		sub := &parser{toks: part.toks, depth: p.depth, maxDepth: p.maxDepth, fns: p.fns, inFn: p.inFn}
		blk := &blockNode{base: base{t.pos}}
		for sub.peek().kind != tEOF {
			st, err := sub.parseStmt(false)
			if err != nil {
				return nil, err
			}
			if st != nil {
				blk.stmts = append(blk.stmts, st)
			}
		}
		in.parts = append(in.parts, blk)
	}
	return in, nil
}

func (p *parser) parseIdentExpr() (node, error) {
	t := p.next()
	switch t.text {
	case "true":
		return &litNode{base{t.pos}, true}, nil
	case "false":
		return &litNode{base{t.pos}, false}, nil
	case "this":
		if !p.inFn {
			return nil, p.errf(t.pos, "'this' can only be used inside a function")
		}
		return &thisNode{base{t.pos}}, nil
	case "if":
		return p.parseIf(t)
	case "switch":
		return p.parseSwitch(t)
	case "while":
		cond, err := p.parseExpr()
		if err != nil {
			return nil, err
		}
		body, err := p.loopBody()
		if err != nil {
			return nil, err
		}
		return &whileNode{base{t.pos}, cond, body}, nil
	case "loop":
		body, err := p.loopBody()
		if err != nil {
			return nil, err
		}
		return &whileNode{base{t.pos}, nil, body}, nil
	case "do":
		body, err := p.loopBody()
		if err != nil {
			return nil, err
		}
		until := false
		switch {
		case p.is("while"):
		case p.is("until"):
			until = true
		default:
			return nil, p.errf(p.peek().pos, "expecting 'while' or 'until' after do block")
		}
		p.next()
		cond, err := p.parseExpr()
		if err != nil {
			return nil, err
		}
		return &doNode{base{t.pos}, body, cond, until}, nil
	case "for":
		return p.parseFor(t)
	case "fn":
		return nil, p.errf(t.pos, "functions can only be defined at global level")
	case "curry", "eval", "import", "export", "catch", "global":
		return nil, p.errf(t.pos, "'%s' is not supported", t.text)
	}
	if p.is("::") {
		return nil, p.errf(t.pos, "modules are not supported")
	}
	if p.is("(") {
		args, err := p.parseArgs()
		if err != nil {
			return nil, err
		}
		return &callNode{base{t.pos}, t.text, args, fnKey(t.text, len(args))}, nil
	}
	if keywords[t.text] {
		return nil, p.errf(t.pos, "'%s' is a reserved keyword", t.text)
	}
	for _, set := range p.captures {
		set[t.text] = true
	}
	return &varNode{base{t.pos}, t.text}, nil
}

func (p *parser) loopBody() (node, error) {
	p.loopDepth++
	defer func() { p.loopDepth-- }()
	return p.parseBlock()
}

func (p *parser) parseIf(t *token) (node, error) {
	save := p.noPipe
	p.noPipe = false
	defer func() { p.noPipe = save }()
	cond, err := p.parseExpr()
	if err != nil {
		return nil, err
	}
	then, err := p.parseBlock()
	if err != nil {
		return nil, err
	}
	in := &ifNode{base: base{t.pos}, cond: cond, then: then}
	if p.is("else") {
		p.next()
		if p.is("if") {
			et := p.next()
			if err := p.enter(et.pos); err != nil {
				return nil, err
			}
			defer p.leave()
			in.els_, err = p.parseIf(et)
		} else {
			in.els_, err = p.parseBlock()
		}
		if err != nil {
			return nil, err
		}
	}
	return in, nil
}

func (p *parser) parseFor(t *token) (node, error) {
	fn := &forNode{base: base{t.pos}}
	var err error
	if p.is("(") {
		p.next()
		if fn.name, _, err = p.ident(); err != nil {
			return nil, err
		}
		if _, err = p.expect(","); err != nil {
			return nil, err
		}
		if fn.counter, _, err = p.ident(); err != nil {
			return nil, err
		}
		if _, err = p.expect(")"); err != nil {
			return nil, err
		}
	} else if fn.name, _, err = p.ident(); err != nil {
		return nil, err
	}
	if _, err = p.expect("in"); err != nil {
		return nil, err
	}
	if fn.iter, err = p.parseExpr(); err != nil {
		return nil, err
	}
	if fn.body, err = p.loopBody(); err != nil {
		return nil, err
	}
	return fn, nil
}

// constValue folds a switch case expression into a constant.
func constValue(n node) (value, bool) {
	switch x := n.(type) {
	case *litNode:
		return x.v, true
	case *unaryNode:
		v, ok := constValue(x.x)
		if !ok {
			return nil, false
		}
		switch x.op {
		case "-":
			switch y := v.(type) {
			case int64:
				if y == math.MinInt64 {
					return nil, false
				}
				return -y, true
			case float64:
				return -y, true
			}
		case "+":
			if isNumeric(v) {
				return v, true
			}
		case "!":
			if b, ok := v.(bool); ok {
				return !b, true
			}
		}
		return nil, false
	case *arrayNode:
		a := &array{}
		for _, e := range x.elems {
			v, ok := constValue(e)
			if !ok {
				return nil, false
			}
			a.items = append(a.items, v)
		}
		return a, true
	case *mapNode:
		m := &object{m: map[string]value{}}
		for i, k := range x.keys {
			v, ok := constValue(x.vals[i])
			if !ok {
				return nil, false
			}
			m.m[k] = v
		}
		return m, true
	}
	return nil, false
}

func (p *parser) parseSwitch(t *token) (node, error) {
	save := p.noPipe
	p.noPipe = false
	x, err := p.parseExpr()
	p.noPipe = save
	if err != nil {
		return nil, err
	}
	sn := &switchNode{base: base{t.pos}, x: x}
	if _, err := p.expect("{"); err != nil {
		return nil, err
	}
	hasDefault, sawRange := false, false
	for !p.is("}") {
		ct := p.peek()
		if ct.kind == tEOF {
			return nil, p.errf(ct.pos, "expecting '}' to close switch")
		}
		if hasDefault {
			return nil, p.errf(ct.pos, "the default case '_' must be the last case")
		}
		var sc switchCase
		if p.is("_") {
			p.next()
			sc.isDef = true
			hasDefault = true
			if p.is("if") {
				return nil, p.errf(p.peek().pos, "the default case cannot have a condition")
			}
		} else {
			p.noPipe = true
			for {
				e, err := p.parseExpr()
				if err != nil {
					p.noPipe = save
					return nil, err
				}
				if b, ok := e.(*binaryNode); ok && (b.op == ".." || b.op == "..=") {
					lo, ok1 := constValue(b.l)
					hi, ok2 := constValue(b.r)
					li, ok3 := lo.(int64)
					hiI, ok4 := hi.(int64)
					if !ok1 || !ok2 || !ok3 || !ok4 {
						p.noPipe = save
						return nil, p.errf(e.position(), "switch range case must be an integer range literal")
					}
					sc.rngs = append(sc.rngs, rangeT{start: li, end: hiI, inclusive: b.op == "..="})
					sawRange = true
				} else {
					v, ok := constValue(e)
					if !ok {
						p.noPipe = save
						return nil, p.errf(e.position(), "switch case value must be a constant literal")
					}
					if sawRange && isNumeric(v) {
						p.noPipe = save
						return nil, p.errf(e.position(), "numeric switch cases cannot follow range cases")
					}
					sc.vals = append(sc.vals, v)
				}
				if !p.is("|") {
					break
				}
				p.next()
			}
			p.noPipe = save
			if p.is("if") {
				p.next()
				if sc.cond, err = p.parseExpr(); err != nil {
					return nil, err
				}
			}
		}
		if _, err := p.expect("=>"); err != nil {
			return nil, err
		}
		var body node
		if p.is("{") {
			body, err = p.parseBlock()
		} else {
			body, err = p.parseCaseStmt()
		}
		if err != nil {
			return nil, err
		}
		if body == nil {
			body = &litNode{base{ct.pos}, unit}
		}
		sc.body = body
		sn.cases = append(sn.cases, sc)
		if p.is(",") {
			p.next()
		} else if !p.is("}") {
			if _, ok := body.(*blockNode); !ok {
				nt := p.peek()
				return nil, p.errf(nt.pos, "expecting ',' or '}' in switch but found %s", describe(nt))
			}
		}
	}
	p.next()
	return sn, nil
}

// parseCaseStmt parses a switch case body that is a single statement without ';'.
func (p *parser) parseCaseStmt() (node, error) {
	t := p.peek()
	if err := p.enter(t.pos); err != nil {
		return nil, err
	}
	defer p.leave()
	switch {
	case p.is("break") || p.is("continue"):
		p.next()
		if p.loopDepth == 0 {
			return nil, p.errf(t.pos, "'%s' used outside of a loop", t.text)
		}
		if t.text == "continue" {
			return &continueNode{base{t.pos}}, nil
		}
		bn := &breakNode{base: base{t.pos}}
		if !p.stmtEnd() {
			v, err := p.parseExpr()
			if err != nil {
				return nil, err
			}
			bn.val = v
		}
		return bn, nil
	case p.is("return") || p.is("throw"):
		p.next()
		var v node
		if !p.stmtEnd() {
			var err error
			if v, err = p.parseExpr(); err != nil {
				return nil, err
			}
		}
		if t.text == "return" {
			return &returnNode{base{t.pos}, v}, nil
		}
		if v == nil && p.catchVar != "" {
			v = &varNode{base{t.pos}, p.catchVar}
		}
		return &throwNode{base{t.pos}, v}, nil
	case p.is("let") || p.is("const") || p.is("fn"):
		return nil, p.errf(t.pos, "'%s' is not allowed as a switch case body", t.text)
	}
	return p.parseExprStmt()
}

func parse(src string, maxDepth, maxStr int) (prog *blockNode, fns map[string]*fnDef, err error) {
	lx := &lexer{src: src, line: 1, col: 1, maxDepth: maxDepth, maxStr: maxStr}
	p := &parser{lx: lx, maxDepth: maxDepth, fns: map[string]*fnDef{}}
	defer func() {
		if r := recover(); r != nil {
			pa, ok := r.(parseAbort)
			if !ok {
				panic(r)
			}
			prog, fns, err = nil, nil, pa.err
		}
	}()
	prog, err = p.parseProgram()
	if err != nil {
		return nil, nil, err
	}
	return prog, p.fns, nil
}
