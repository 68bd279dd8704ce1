package display

// AST node types. Every node records its source position for errors.

type node interface{ position() Pos }

type base struct{ p Pos }

func (b base) position() Pos { return b.p }

type (
	litNode struct {
		base
		v value
	}
	interpNode struct {
		base
		parts []node
	}
	arrayNode struct {
		base
		elems []node
	}
	mapNode struct {
		base
		keys []string
		vals []node
	}
	varNode struct {
		base
		name string
	}
	thisNode  struct{ base }
	unaryNode struct {
		base
		op string
		x  node
	}
	binaryNode struct {
		base
		op   string
		l, r node
	}
	andNode struct {
		base
		l, r node
	}
	orNode struct {
		base
		l, r node
	}
	coalesceNode struct {
		base
		l, r node
	}
	indexNode struct {
		base
		x, idx node
		elvis  bool
	}
	propNode struct {
		base
		x     node
		name  string
		elvis bool
	}
	callNode struct {
		base
		name string
		args []node
		key  string // fnKey(name, len(args)), for script-function lookup
	}
	methodNode struct {
		base
		recv  node
		name  string
		args  []node
		elvis bool
		key   string
	}
	assignNode struct {
		base
		target node
		op     string // "=" or the binary operator of a compound assignment
		val    node
	}
	letNode struct {
		base
		name  string
		val   node
		isCon bool
	}
	blockNode struct {
		base
		stmts []node
	}
	ifNode struct {
		base
		cond       node
		then, els_ node // els_ may be nil
	}
	switchCase struct {
		vals  []value  // exact-match values
		rngs  []rangeT // integer range cases
		cond  node     // optional
		body  node
		isDef bool
	}
	switchNode struct {
		base
		x     node
		cases []switchCase
	}
	whileNode struct {
		base
		cond node // nil for `loop`
		body node
	}
	doNode struct {
		base
		body  node
		cond  node
		until bool
	}
	forNode struct {
		base
		name, counter string
		iter          node
		body          node
	}
	breakNode struct {
		base
		val node
	}
	continueNode struct{ base }
	returnNode   struct {
		base
		val node
	}
	closureNode struct {
		base
		def      *fnDef
		captures []string // outer variable names referenced by the body
	}
	throwNode struct {
		base
		val node
	}
	tryNode struct {
		base
		body, catch *blockNode
		errVar      string // "" when the error value is discarded
	}
)

type fnDef struct {
	name   string
	params []string
	body   *blockNode
	pos    Pos
}
