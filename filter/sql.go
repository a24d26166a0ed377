package filter

import (
	"slices"
	"strings"

	"github.com/mqlite/mqlite/message"
)

// sqlExpr is a compiled SQL92 expression.
type sqlExpr struct {
	root node
	src  string // normalised text

	// codes, when non-nil, holds the tags codes a matching message can
	// have: the expression implies TAGS IN (...). nil means any code.
	codes   []uint32
	codeSet map[uint32]struct{}
}

// SQL compiles a SQL92 expression (see the package documentation for the
// grammar and the evaluation rules). Errors are *SyntaxError values that
// match ErrInvalidExpression; expressions beyond MaxExpressionLen,
// MaxDepth or MaxInList are errors too.
func SQL(expr string) (Expression, error) {
	if len(expr) > MaxExpressionLen {
		return nil, sqlError(expr, MaxExpressionLen, "expression is %d bytes, the limit is %d", len(expr), MaxExpressionLen)
	}
	toks, err := lex(expr)
	if err != nil {
		return nil, err
	}
	p := &parser{src: expr, toks: toks}
	root, err := p.parse()
	if err != nil {
		return nil, err
	}
	var b strings.Builder
	root.write(&b)
	e := &sqlExpr{root: root, src: b.String()}
	if tags, ok := impliedTags(root); ok {
		for _, t := range tags {
			if c := message.TagsCode(t); !slices.Contains(e.codes, c) {
				e.codes = append(e.codes, c)
			}
		}
		if len(e.codes) > smallSet {
			e.codeSet = make(map[uint32]struct{}, len(e.codes))
			for _, c := range e.codes {
				e.codeSet[c] = struct{}{}
			}
		}
	}
	return e, nil
}

// MatchCode reports whether a message with this tags code can match: true
// unless the expression requires TAGS to be one of a set of strings (as in
// TAGS = 'a' AND x > 1, or TAGS IN ('a', 'b')) whose codes exclude it.
func (e *sqlExpr) MatchCode(tagsCode uint32) bool {
	switch {
	case e.codes == nil:
		return true
	case e.codeSet != nil:
		_, ok := e.codeSet[tagsCode]
		return ok
	}
	return slices.Contains(e.codes, tagsCode)
}

// Match reports whether the expression is TRUE for m; FALSE and UNKNOWN
// do not match.
func (e *sqlExpr) Match(m *message.Message) bool {
	if m == nil {
		m = &emptyMessage
	}
	return e.root.eval(m) == triTrue
}

// Type returns TypeSQL92.
func (e *sqlExpr) Type() string { return TypeSQL92 }

// String returns the normalised expression.
func (e *sqlExpr) String() string { return e.src }

// impliedTags returns the set of strings TAGS must equal for n to be TRUE,
// and false when n does not restrict TAGS to a finite set. A TRUE result
// is only possible when TAGS is present and equals one of them, so the set
// never excludes a matching message (MatchCode must not give false
// negatives).
func impliedTags(n node) ([]string, bool) {
	switch n := n.(type) {
	case *cmpNode:
		if n.op != opEq || n.cls != clsString {
			return nil, false
		}
		switch {
		case n.l.prop == propTags && !n.r.isProp():
			return []string{n.r.lit.s}, true
		case n.r.prop == propTags && !n.l.isProp():
			return []string{n.l.lit.s}, true
		}
	case *inNode:
		if n.x.prop == propTags && !n.neg {
			return n.list, true
		}
	case *andNode:
		// Every child must be TRUE: any restricting child restricts the
		// whole; keep the smallest.
		var best []string
		found := false
		for _, x := range n.xs {
			if s, ok := impliedTags(x); ok && (!found || len(s) < len(best)) {
				best, found = s, true
			}
		}
		return best, found
	case *orNode:
		// Some child is TRUE: all children must restrict.
		var all []string
		for _, x := range n.xs {
			s, ok := impliedTags(x)
			if !ok {
				return nil, false
			}
			all = append(all, s...)
		}
		return all, true
	}
	return nil, false
}
