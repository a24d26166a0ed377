package filter

import (
	"slices"
	"strings"

	"github.com/mqlite/mqlite/message"
)

// tri is a three-valued truth value.
type tri uint8

const (
	triFalse tri = iota
	triTrue
	triUnknown
)

func triOf(b bool) tri {
	if b {
		return triTrue
	}
	return triFalse
}

// not is SQL negation: NOT UNKNOWN is UNKNOWN.
func (t tri) not() tri {
	switch t {
	case triTrue:
		return triFalse
	case triFalse:
		return triTrue
	}
	return triUnknown
}

// node is a compiled boolean expression.
type node interface {
	eval(m *message.Message) tri
	// write appends the normalised source text.
	write(b *strings.Builder)
	// prec is the binding strength, for parentheses when writing.
	prec() int
}

// Precedence levels, loosest first.
const (
	precOr = iota + 1
	precAnd
	precNot
	precPredicate
)

// andNode is an n-ary AND: FALSE wins, then UNKNOWN.
type andNode struct{ xs []node }

func (n *andNode) eval(m *message.Message) tri { return junction(n.xs, m, triFalse, triTrue) }

// junction evaluates the operands xs of an AND or an OR: the first that is
// wins returns wins, else UNKNOWN if any is, else the value all have.
func junction(xs []node, m *message.Message, wins, all tri) tri {
	r := all
	for _, x := range xs {
		switch x.eval(m) {
		case wins:
			return wins
		case triUnknown:
			r = triUnknown
		}
	}
	return r
}

// orNode is an n-ary OR: TRUE wins, then UNKNOWN.
type orNode struct{ xs []node }

func (n *orNode) eval(m *message.Message) tri { return junction(n.xs, m, triTrue, triFalse) }

type notNode struct{ x node }

func (n *notNode) eval(m *message.Message) tri { return n.x.eval(m).not() }

// constNode is a bare TRUE or FALSE.
type constNode struct{ v bool }

func (n *constNode) eval(*message.Message) tri { return triOf(n.v) }

// cmpOp is a comparison operator.
type cmpOp uint8

const (
	opEq cmpOp = iota
	opNe
	opLt
	opLe
	opGt
	opGe
)

var opText = [...]string{opEq: "=", opNe: "<>", opLt: "<", opLe: "<=", opGt: ">", opGe: ">="}

// holds reports whether the operator accepts an ordering result c
// (negative, zero, positive).
func (op cmpOp) holds(c int) bool {
	switch op {
	case opEq:
		return c == 0
	case opNe:
		return c != 0
	case opLt:
		return c < 0
	case opLe:
		return c <= 0
	case opGt:
		return c > 0
	}
	return c >= 0
}

// cmpClass is the type a comparison converts both sides to; the parser
// chooses it from the literal side.
type cmpClass uint8

const (
	clsNull   cmpClass = iota // a NULL literal is involved: always UNKNOWN
	clsNumber                 // both sides parsed as numbers
	clsString                 // = and <> only
	clsBool                   // = and <> only
)

type cmpNode struct {
	op   cmpOp
	cls  cmpClass
	l, r operand
}

func (n *cmpNode) eval(m *message.Message) tri {
	return compare(n.op, n.cls, n.l.get(m), n.r.get(m))
}

// compare applies op after converting both values to cls. NULL or a value
// that does not convert makes the result UNKNOWN.
func compare(op cmpOp, cls cmpClass, l, r value) tri {
	if l.kind == vNull || r.kind == vNull {
		return triUnknown
	}
	switch cls {
	case clsNumber:
		ln, ok1 := toNumber(l)
		rn, ok2 := toNumber(r)
		if !ok1 || !ok2 {
			return triUnknown
		}
		return triOf(op.holds(compareNumbers(ln, rn)))
	case clsString:
		ls, ok1 := toString(l)
		rs, ok2 := toString(r)
		if !ok1 || !ok2 {
			return triUnknown
		}
		return triOf((ls == rs) == (op == opEq))
	case clsBool:
		lb, ok1 := toBool(l)
		rb, ok2 := toBool(r)
		if !ok1 || !ok2 {
			return triUnknown
		}
		return triOf((lb == rb) == (op == opEq))
	}
	return triUnknown
}

// betweenNode is x [NOT] BETWEEN lo AND hi, i.e. x >= lo AND x <= hi.
type betweenNode struct {
	x, lo, hi operand
	neg       bool
}

func (n *betweenNode) eval(m *message.Message) tri {
	x := n.x.get(m)
	r := triTrue
	switch compare(opGe, clsNumber, x, n.lo.get(m)) {
	case triFalse:
		r = triFalse
	case triUnknown:
		r = triUnknown
	}
	if r != triFalse {
		switch compare(opLe, clsNumber, x, n.hi.get(m)) {
		case triFalse:
			r = triFalse
		case triUnknown:
			r = triUnknown
		}
	}
	if n.neg {
		return r.not()
	}
	return r
}

// inNode is x [NOT] IN (list) over strings.
type inNode struct {
	x    operand
	list []string            // as written, for String
	set  map[string]struct{} // for long lists; nil means scan list
	neg  bool
}

func (n *inNode) eval(m *message.Message) tri {
	s, ok := toString(n.x.get(m))
	if !ok {
		return triUnknown
	}
	var found bool
	if n.set != nil {
		_, found = n.set[s]
	} else {
		found = slices.Contains(n.list, s)
	}
	return triOf(found != n.neg)
}

// strOp is a string predicate.
type strOp uint8

const (
	opContains strOp = iota
	opStartsWith
	opEndsWith
)

var strOpText = [...]string{opContains: "CONTAINS", opStartsWith: "STARTSWITH", opEndsWith: "ENDSWITH"}

// strNode is x [NOT] CONTAINS|STARTSWITH|ENDSWITH arg.
type strNode struct {
	op  strOp
	x   operand
	arg string
	neg bool
}

func (n *strNode) eval(m *message.Message) tri {
	s, ok := toString(n.x.get(m))
	if !ok {
		return triUnknown
	}
	var r bool
	switch n.op {
	case opContains:
		r = strings.Contains(s, n.arg)
	case opStartsWith:
		r = strings.HasPrefix(s, n.arg)
	case opEndsWith:
		r = strings.HasSuffix(s, n.arg)
	}
	return triOf(r != n.neg)
}

// isNullNode is x IS [NOT] NULL; never UNKNOWN.
type isNullNode struct {
	x   operand
	neg bool
}

func (n *isNullNode) eval(m *message.Message) tri {
	return triOf((n.x.get(m).kind == vNull) != n.neg)
}
