package filter

import (
	"strconv"
	"strings"
)

// parser is a recursive-descent parser over the token list. Every
// recursion (a parenthesis or a NOT) counts against MaxDepth, so the Go
// stack stays bounded whatever the input.
type parser struct {
	src   string
	toks  []token
	i     int // index of the current token
	depth int
}

func (p *parser) tok() token  { return p.toks[p.i] }
func (p *parser) peek() token { return p.toks[min(p.i+1, len(p.toks)-1)] }
func (p *parser) advance()    { p.i = min(p.i+1, len(p.toks)-1) }

func (p *parser) errAt(t token, format string, args ...any) error {
	return sqlError(p.src, t.pos, format, args...)
}

// parse compiles the whole token list.
func (p *parser) parse() (node, error) {
	if p.tok().kind == tEOF {
		return nil, p.errAt(p.tok(), "empty expression")
	}
	n, err := p.parseOr()
	if err != nil {
		return nil, err
	}
	if t := p.tok(); t.kind != tEOF {
		return nil, p.errAt(t, "unexpected %s; expected AND, OR or the end", t.describe())
	}
	return n, nil
}

func (p *parser) enter(t token) error {
	p.depth++
	if p.depth > MaxDepth {
		return p.errAt(t, "nesting deeper than %d", MaxDepth)
	}
	return nil
}

func (p *parser) parseOr() (node, error) {
	var xs []node
	for {
		x, err := p.parseAnd()
		if err != nil {
			return nil, err
		}
		if o, ok := x.(*orNode); ok {
			xs = append(xs, o.xs...) // (a OR b) OR c is a OR b OR c
		} else {
			xs = append(xs, x)
		}
		if p.tok().kind != tOr {
			break
		}
		p.advance()
	}
	if len(xs) == 1 {
		return xs[0], nil
	}
	return &orNode{xs: xs}, nil
}

func (p *parser) parseAnd() (node, error) {
	var xs []node
	for {
		x, err := p.parseNot()
		if err != nil {
			return nil, err
		}
		if a, ok := x.(*andNode); ok {
			xs = append(xs, a.xs...)
		} else {
			xs = append(xs, x)
		}
		if p.tok().kind != tAnd {
			break
		}
		p.advance()
	}
	if len(xs) == 1 {
		return xs[0], nil
	}
	return &andNode{xs: xs}, nil
}

func (p *parser) parseNot() (node, error) {
	t := p.tok()
	if t.kind != tNot {
		return p.parsePredicate()
	}
	if err := p.enter(t); err != nil {
		return nil, err
	}
	p.advance()
	x, err := p.parseNot()
	if err != nil {
		return nil, err
	}
	p.depth--
	return &notNode{x: x}, nil
}

func (p *parser) parsePredicate() (node, error) {
	t := p.tok()
	if t.kind == tLParen {
		if err := p.enter(t); err != nil {
			return nil, err
		}
		p.advance()
		x, err := p.parseOr()
		if err != nil {
			return nil, err
		}
		if c := p.tok(); c.kind != tRParen {
			return nil, p.errAt(c, "unexpected %s; expected ')' to close the '(' at %d", c.describe(), t.pos)
		}
		p.advance()
		p.depth--
		return x, nil
	}
	if !startsOperand(t.kind) {
		return nil, p.errAt(t, "expected a condition, found %s", t.describe())
	}
	l, err := p.parseOperand()
	if err != nil {
		return nil, err
	}
	return p.parseTail(l)
}

func startsOperand(k tokKind) bool {
	switch k {
	case tIdent, tInt, tFloat, tString, tTrue, tFalse, tNull, tPlus, tMinus:
		return true
	}
	return false
}

// parseOperand reads a property or a literal (numbers may be signed).
func (p *parser) parseOperand() (operand, error) {
	t := p.tok()
	switch t.kind {
	case tIdent:
		p.advance()
		return operand{prop: propIDOf(t.text), name: t.text, pos: t.pos}, nil
	case tString:
		p.advance()
		return operand{lit: value{kind: vString, s: t.text}, pos: t.pos}, nil
	case tTrue, tFalse:
		p.advance()
		return operand{lit: value{kind: vBool, b: t.kind == tTrue}, pos: t.pos}, nil
	case tNull:
		p.advance()
		return operand{pos: t.pos}, nil
	case tPlus, tMinus, tInt, tFloat:
		return p.parseNumber()
	}
	return operand{}, p.errAt(t, "expected a property or a literal, found %s", t.describe())
}

func (p *parser) parseNumber() (operand, error) {
	t := p.tok()
	sign := ""
	if t.kind == tPlus || t.kind == tMinus {
		p.advance()
		if n := p.tok(); n.kind != tInt && n.kind != tFloat {
			return operand{}, p.errAt(n, "expected a number after '%s', found %s", t.text, n.describe())
		}
		if t.kind == tMinus {
			sign = "-"
		}
	}
	n := p.tok()
	p.advance()
	if n.kind == tInt {
		i, err := strconv.ParseInt(sign+n.text, 10, 64)
		if err != nil {
			return operand{}, p.errAt(n, "integer %s%s out of range", sign, n.text)
		}
		return operand{lit: value{kind: vInt, i: i}, pos: t.pos}, nil
	}
	f, err := strconv.ParseFloat(sign+n.text, 64)
	if err != nil {
		return operand{}, p.errAt(n, "number %s%s out of range", sign, n.text)
	}
	return operand{lit: value{kind: vFloat, f: f}, pos: t.pos}, nil
}

// parseTail reads what follows the first operand l of a predicate.
func (p *parser) parseTail(l operand) (node, error) {
	t := p.tok()
	switch t.kind {
	case tEq, tNe, tLt, tLe, tGt, tGe:
		p.advance()
		if !startsOperand(p.tok().kind) {
			return nil, p.errAt(p.tok(), "expected a property or a literal after '%s', found %s", t.text, p.tok().describe())
		}
		r, err := p.parseOperand()
		if err != nil {
			return nil, err
		}
		return p.comparison(t, l, r)
	case tIs:
		p.advance()
		neg := false
		if p.tok().kind == tNot {
			neg = true
			p.advance()
		}
		if n := p.tok(); n.kind != tNull {
			return nil, p.errAt(n, "expected NULL after %s, found %s", p.toks[p.i-1].describe(), n.describe())
		}
		p.advance()
		return &isNullNode{x: l, neg: neg}, nil
	case tNot:
		switch p.peek().kind {
		case tBetween, tIn, tContains, tStartsWith, tEndsWith:
			p.advance()
			return p.parseNegatable(l, true)
		}
		return nil, p.errAt(p.peek(), "expected BETWEEN, IN, CONTAINS, STARTSWITH or ENDSWITH after NOT, found %s", p.peek().describe())
	case tBetween, tIn, tContains, tStartsWith, tEndsWith:
		return p.parseNegatable(l, false)
	}
	if !l.isProp() && l.lit.kind == vBool {
		return &constNode{v: l.lit.b}, nil
	}
	var b strings.Builder
	l.write(&b)
	if l.isProp() {
		return nil, p.errAt(t, "expected an operator after property %s (a property alone is not a condition), found %s", b.String(), t.describe())
	}
	return nil, p.errAt(t, "expected an operator after %s, found %s", b.String(), t.describe())
}

// parseNegatable reads BETWEEN, IN or a string predicate; the current
// token is its keyword.
func (p *parser) parseNegatable(l operand, neg bool) (node, error) {
	t := p.tok()
	p.advance()
	switch t.kind {
	case tBetween:
		return p.parseBetween(t, l, neg)
	case tIn:
		return p.parseIn(t, l, neg)
	}
	if err := p.checkStringOperand(t, l); err != nil {
		return nil, err
	}
	arg, err := p.stringLiteral(t)
	if err != nil {
		return nil, err
	}
	op := opContains
	switch t.kind {
	case tStartsWith:
		op = opStartsWith
	case tEndsWith:
		op = opEndsWith
	}
	return &strNode{op: op, x: l, arg: arg, neg: neg}, nil
}

func (p *parser) stringLiteral(after token) (string, error) {
	t := p.tok()
	if t.kind != tString {
		return "", p.errAt(t, "expected a string literal after %s, found %s", after.describe(), t.describe())
	}
	p.advance()
	return t.text, nil
}

func (p *parser) parseBetween(kw token, x operand, neg bool) (node, error) {
	if err := p.checkNumberOperand(kw, x); err != nil {
		return nil, err
	}
	bound := func() (operand, error) {
		if !startsOperand(p.tok().kind) {
			return operand{}, p.errAt(p.tok(), "expected a number or property in BETWEEN, found %s", p.tok().describe())
		}
		o, err := p.parseOperand()
		if err != nil {
			return operand{}, err
		}
		if !o.isProp() && o.lit.kind == vNull {
			return operand{}, p.errAt(p.toks[p.i-1], "BETWEEN bounds cannot be NULL")
		}
		return o, p.checkNumberOperand(kw, o)
	}
	lo, err := bound()
	if err != nil {
		return nil, err
	}
	if a := p.tok(); a.kind != tAnd {
		return nil, p.errAt(a, "expected AND in BETWEEN, found %s", a.describe())
	}
	p.advance()
	hi, err := bound()
	if err != nil {
		return nil, err
	}
	if !lo.isProp() && !hi.isProp() && compareNumbers(lo.lit, hi.lit) > 0 {
		return nil, p.errAt(kw, "BETWEEN bounds out of order: low bound is above high bound")
	}
	return &betweenNode{x: x, lo: lo, hi: hi, neg: neg}, nil
}

func (p *parser) parseIn(kw token, x operand, neg bool) (node, error) {
	if err := p.checkStringOperand(kw, x); err != nil {
		return nil, err
	}
	if t := p.tok(); t.kind != tLParen {
		return nil, p.errAt(t, "expected '(' after IN, found %s", t.describe())
	}
	p.advance()
	n := &inNode{x: x, neg: neg}
	for {
		t := p.tok()
		if t.kind != tString {
			return nil, p.errAt(t, "expected a string literal in the IN list, found %s", t.describe())
		}
		if len(n.list) == MaxInList {
			return nil, p.errAt(t, "IN list longer than %d elements", MaxInList)
		}
		n.list = append(n.list, t.text)
		p.advance()
		if t = p.tok(); t.kind == tRParen {
			p.advance()
			break
		}
		if t.kind != tComma {
			return nil, p.errAt(t, "expected ',' or ')' in the IN list, found %s", t.describe())
		}
		p.advance()
	}
	if len(n.list) > smallSet {
		n.set = make(map[string]struct{}, len(n.list))
		for _, s := range n.list {
			n.set[s] = struct{}{}
		}
	}
	return n, nil
}

// checkNumberOperand accepts a property, a number or NULL.
func (p *parser) checkNumberOperand(op token, o operand) error {
	if o.isProp() || o.lit.kind == vNull || o.lit.kind == vInt || o.lit.kind == vFloat {
		return nil
	}
	return sqlError(p.src, o.pos, "%s compares numbers, not %s", op.describe(), kindName(o.lit.kind))
}

// checkStringOperand accepts a property, a string or NULL.
func (p *parser) checkStringOperand(op token, o operand) error {
	if o.isProp() || o.lit.kind == vNull || o.lit.kind == vString {
		return nil
	}
	return sqlError(p.src, o.pos, "%s takes a string, not %s", op.describe(), kindName(o.lit.kind))
}

func kindName(k valKind) string {
	return [...]string{vNull: "NULL", vString: "a string", vInt: "a number", vFloat: "a number", vBool: "a boolean"}[k]
}

// comparison type-checks l op r and chooses the class both sides convert
// to: a NULL literal makes it always UNKNOWN; otherwise the ordering
// operators compare numbers, and = and <> take the type of the literal
// side (strings for two properties; two literals must agree).
func (p *parser) comparison(op token, l, r operand) (node, error) {
	n := &cmpNode{op: cmpOps[op.kind], l: l, r: r}
	isNull := func(o operand) bool { return !o.isProp() && o.lit.kind == vNull }
	switch {
	case isNull(l) || isNull(r):
		n.cls = clsNull
		return n, nil
	case n.op != opEq && n.op != opNe:
		for _, o := range []operand{l, r} {
			if err := p.checkNumberOperand(op, o); err != nil {
				return nil, err
			}
		}
		n.cls = clsNumber
		return n, nil
	case l.isProp() && r.isProp():
		n.cls = clsString
		return n, nil
	}
	lk, rk := litClass(l), litClass(r)
	switch {
	case lk == clsNull:
		n.cls = rk
	case rk == clsNull, lk == rk:
		n.cls = lk
	default:
		return nil, sqlError(p.src, r.pos, "cannot compare %s with %s", kindName(l.lit.kind), kindName(r.lit.kind))
	}
	return n, nil
}

var cmpOps = map[tokKind]cmpOp{tEq: opEq, tNe: opNe, tLt: opLt, tLe: opLe, tGt: opGt, tGe: opGe}

// litClass is the comparison class a literal operand imposes; clsNull for
// a property (which imposes none).
func litClass(o operand) cmpClass {
	if o.isProp() {
		return clsNull
	}
	switch o.lit.kind {
	case vString:
		return clsString
	case vBool:
		return clsBool
	}
	return clsNumber
}
