package filter

import (
	"fmt"

	"github.com/mqlite/mqlite/internal/errs"
)

// Limits on SQL92 expressions. Exceeding one is a *SyntaxError, so hostile
// or generated subscriptions fail at compile time instead of exhausting the
// stack or the CPU at match time. MaxExpressionLen also bounds tag
// expressions.
const (
	// MaxExpressionLen is the longest accepted source text, in bytes.
	MaxExpressionLen = 4096
	// MaxDepth is the deepest nesting of parentheses and NOT operators.
	MaxDepth = 64
	// MaxInList is the most elements an IN list may hold.
	MaxInList = 256
)

// ErrInvalidExpression reports a tag or SQL92 expression that does not
// compile. It wraps errs.ErrInvalidArgument, so errors.Is matches either.
var ErrInvalidExpression = fmt.Errorf("%w: invalid filter expression", errs.ErrInvalidArgument)

// SyntaxError locates the problem in an expression that does not compile.
// It matches ErrInvalidExpression and errs.ErrInvalidArgument.
type SyntaxError struct {
	Expr string // the source text as given
	Pos  int    // byte offset of the offending token in Expr
	Msg  string // what was wrong

	lang string // "TAG" or "SQL92"; empty means SQL92
}

// excerptLen is the longest source text quoted whole in an error message;
// longer sources are quoted as a window around Pos.
const excerptLen = 100

// Error names the language, the position and the problem, and quotes the
// source (or, for long sources, the text around the position).
func (e *SyntaxError) Error() string {
	lang := e.lang
	if lang == "" {
		lang = TypeSQL92
	}
	if len(e.Expr) <= excerptLen {
		return fmt.Sprintf("mqlite/filter: %s syntax error at %d: %s in %q", lang, e.Pos, e.Msg, e.Expr)
	}
	lo, hi := max(e.Pos-excerptLen/2, 0), min(e.Pos+excerptLen/2, len(e.Expr))
	lo = min(lo, hi)
	return fmt.Sprintf("mqlite/filter: %s syntax error at %d: %s near %q", lang, e.Pos, e.Msg, e.Expr[lo:hi])
}

// Is makes errors.Is(err, ErrInvalidExpression) and
// errors.Is(err, errs.ErrInvalidArgument) true.
func (e *SyntaxError) Is(target error) bool {
	return target == ErrInvalidExpression || target == errs.ErrInvalidArgument
}

func sqlError(src string, pos int, format string, args ...any) *SyntaxError {
	return &SyntaxError{Expr: src, Pos: pos, Msg: fmt.Sprintf(format, args...), lang: TypeSQL92}
}

func tagError(src string, pos int, format string, args ...any) *SyntaxError {
	return &SyntaxError{Expr: src, Pos: pos, Msg: fmt.Sprintf(format, args...), lang: TypeTag}
}
