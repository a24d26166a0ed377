package filter

import (
	"strconv"
	"strings"
)

// This file writes a compiled expression back as normalised text:
// upper-case keywords, single spaces, <> for both spellings of "not
// equal", and only the parentheses that precedence needs. The text
// compiles to an equivalent expression.

func (n *andNode) prec() int     { return precAnd }
func (n *orNode) prec() int      { return precOr }
func (n *notNode) prec() int     { return precNot }
func (n *constNode) prec() int   { return precPredicate }
func (n *cmpNode) prec() int     { return precPredicate }
func (n *betweenNode) prec() int { return precPredicate }
func (n *inNode) prec() int      { return precPredicate }
func (n *strNode) prec() int     { return precPredicate }
func (n *isNullNode) prec() int  { return precPredicate }

// writeChild writes x, in parentheses when it binds looser than parent.
func writeChild(b *strings.Builder, x node, parent int) {
	if x.prec() < parent {
		b.WriteByte('(')
		x.write(b)
		b.WriteByte(')')
		return
	}
	x.write(b)
}

func writeList(b *strings.Builder, xs []node, sep string, parent int) {
	for i, x := range xs {
		if i > 0 {
			b.WriteString(sep)
		}
		// Children of an n-ary node are never of the same kind (the parser
		// flattens them), so binding looser is the only reason for parens.
		writeChild(b, x, parent)
	}
}

func (n *andNode) write(b *strings.Builder) { writeList(b, n.xs, " AND ", precAnd) }
func (n *orNode) write(b *strings.Builder)  { writeList(b, n.xs, " OR ", precOr) }

func (n *notNode) write(b *strings.Builder) {
	b.WriteString("NOT ")
	writeChild(b, n.x, precNot)
}

func (n *constNode) write(b *strings.Builder) {
	if n.v {
		b.WriteString("TRUE")
	} else {
		b.WriteString("FALSE")
	}
}

func (n *cmpNode) write(b *strings.Builder) {
	n.l.write(b)
	b.WriteString(" " + opText[n.op] + " ")
	n.r.write(b)
}

func writeNot(b *strings.Builder, neg bool) {
	if neg {
		b.WriteString(" NOT")
	}
}

func (n *betweenNode) write(b *strings.Builder) {
	n.x.write(b)
	writeNot(b, n.neg)
	b.WriteString(" BETWEEN ")
	n.lo.write(b)
	b.WriteString(" AND ")
	n.hi.write(b)
}

func (n *inNode) write(b *strings.Builder) {
	n.x.write(b)
	writeNot(b, n.neg)
	b.WriteString(" IN (")
	for i, s := range n.list {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(quote(s))
	}
	b.WriteByte(')')
}

func (n *strNode) write(b *strings.Builder) {
	n.x.write(b)
	writeNot(b, n.neg)
	b.WriteString(" " + strOpText[n.op] + " ")
	b.WriteString(quote(n.arg))
}

func (n *isNullNode) write(b *strings.Builder) {
	n.x.write(b)
	b.WriteString(" IS")
	writeNot(b, n.neg)
	b.WriteString(" NULL")
}

func (o *operand) write(b *strings.Builder) {
	if o.isProp() {
		b.WriteString(o.name)
		return
	}
	v := o.lit
	switch v.kind {
	case vNull:
		b.WriteString("NULL")
	case vString:
		b.WriteString(quote(v.s))
	case vBool:
		if v.b {
			b.WriteString("TRUE")
		} else {
			b.WriteString("FALSE")
		}
	case vInt:
		b.WriteString(strconv.FormatInt(v.i, 10))
	case vFloat:
		s := strconv.FormatFloat(v.f, 'g', -1, 64)
		if !strings.ContainsAny(s, ".eE") {
			s += ".0" // keep it a float literal when compiled again
		}
		b.WriteString(s)
	}
}
