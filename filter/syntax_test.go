package filter_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mqlite/mqlite/filter"
	"github.com/mqlite/mqlite/internal/errs"
)

// requireSyntaxError checks that err is a *SyntaxError at pos whose
// message contains want.
func requireSyntaxError(t *testing.T, expr string, err error, pos int, want string) {
	t.Helper()
	require.Error(t, err, "expr %q", expr)
	require.ErrorIs(t, err, filter.ErrInvalidExpression)
	require.ErrorIs(t, err, errs.ErrInvalidArgument)
	var se *filter.SyntaxError
	require.ErrorAs(t, err, &se)
	require.Equal(t, expr, se.Expr)
	require.Equal(t, pos, se.Pos, "expr %q: %v", expr, err)
	require.Contains(t, se.Msg, want, "expr %q", expr)
	require.Contains(t, err.Error(), fmt.Sprintf("mqlite/filter: SQL92 syntax error at %d: ", pos))
}

func TestSQLSyntaxErrors(t *testing.T) {
	for _, tc := range []struct {
		expr string
		pos  int
		want string
	}{
		{"", 0, "empty expression"},
		{"   ", 3, "empty expression"},
		{"a = AND b", 4, "expected a property or a literal after '=', found 'AND'"},
		{"a >", 3, "found end of expression"},
		{"a = 'abc", 4, "unterminated string"},
		{"a = 'it''s", 4, "unterminated string"},
		{"(a = 1", 6, "expected ')' to close the '(' at 0"},
		{"a = 1)", 5, "unexpected ')'"},
		{"a = 1 AND", 9, "expected a condition, found end of expression"},
		{"a == 1", 3, "after '=', found '='"},
		{"a # 1", 2, "unexpected character '#'"},
		{"1a = 1", 0, "malformed number"},
		{"a = 1.5.5", 4, "malformed number"},
		{"a = 1e", 4, "exponent without digits"},
		{"a = 5x", 4, "malformed number"},
		{"a IN ()", 6, "expected a string literal in the IN list"},
		{"a IN (1, 2)", 6, "expected a string literal in the IN list, found number 1"},
		{"a IN ('x' 'y')", 10, "expected ',' or ')'"},
		{"a IN 'x'", 5, "expected '(' after IN"},
		{"a BETWEEN 1", 11, "expected AND in BETWEEN"},
		{"a BETWEEN 'x' AND 2", 10, "'BETWEEN' compares numbers, not a string"},
		{"a BETWEEN NULL AND 2", 10, "cannot be NULL"},
		{"a BETWEEN 5 AND 1", 2, "out of order"},
		{"'x' BETWEEN 1 AND 2", 0, "compares numbers"},
		{"a IS 5", 5, "expected NULL after 'IS'"},
		{"a IS NOT 5", 9, "expected NULL after 'NOT'"},
		{"a NOT LIKE 'x'", 6, "expected BETWEEN, IN, CONTAINS, STARTSWITH or ENDSWITH after NOT"},
		{"a > 'x'", 4, "'>' compares numbers, not a string"},
		{"TRUE <= 1", 0, "'<=' compares numbers, not a boolean"},
		{"a CONTAINS 5", 11, "expected a string literal after 'CONTAINS'"},
		{"5 IN ('a')", 0, "'IN' takes a string, not a number"},
		{"TRUE STARTSWITH 'a'", 0, "'STARTSWITH' takes a string"},
		{"'x' = 1", 6, "cannot compare a string with a number"},
		{"TRUE <> 'x'", 8, "cannot compare a boolean with a string"},
		{"a = 99999999999999999999", 4, "out of range"},
		{"a = -9223372036854775809", 5, "out of range"},
		{"a = 1e999", 4, "out of range"},
		{"a", 1, "a property alone is not a condition"},
		{"'x'", 3, "expected an operator after 'x', found end of expression"},
		{"-5", 2, "expected an operator after -5"},
		{"a = 1 b = 2", 6, "unexpected property b; expected AND, OR or the end"},
		{"a = 1 = 2", 6, "unexpected '='"},
		{"a = !1", 4, "unexpected '!'"},
		{"a = -'x'", 5, "expected a number after '-'"},
		{"a = \xff", 4, "invalid UTF-8"},
		{"a\xff = 1", 1, "invalid UTF-8"},
		{"NOT", 3, "expected a condition"},
		{"a < > 1", 4, "after '<'"},
		{"()", 1, "expected a condition, found ')'"},
		{"AND a = 1", 0, "expected a condition, found 'AND'"},
		{".a = 1", 0, "unexpected character '.'"},
		{"a = 1 -- comment", 6, "unexpected '-'"},
	} {
		_, err := filter.SQL(tc.expr)
		requireSyntaxError(t, tc.expr, err, tc.pos, tc.want)
	}
}

func TestSQLErrorMessage(t *testing.T) {
	_, err := filter.SQL("a = AND b")
	require.EqualError(t, err, `mqlite/filter: SQL92 syntax error at 4: expected a property or a literal after '=', found 'AND' in "a = AND b"`)

	// Long sources are quoted as a window around the position.
	long := "a = 1 AND " + strings.Repeat("b = 2 AND ", 50) + "c = = 3"
	_, err = filter.SQL(long)
	require.Error(t, err)
	require.Contains(t, err.Error(), `near "`)
	require.Contains(t, err.Error(), `c = = 3"`)
	require.Less(t, len(err.Error()), 300)
}

func TestSQLLimits(t *testing.T) {
	t.Run("length", func(t *testing.T) {
		fits := "a = '" + strings.Repeat("x", filter.MaxExpressionLen-6) + "'"
		require.Len(t, fits, filter.MaxExpressionLen)
		_, err := filter.SQL(fits)
		require.NoError(t, err)
		over := fits + " "
		_, err = filter.SQL(over)
		requireSyntaxError(t, over, err, filter.MaxExpressionLen, "the limit is 4096")
	})
	t.Run("depth", func(t *testing.T) {
		nest := func(n int) string { return strings.Repeat("(", n) + "a = 1" + strings.Repeat(")", n) }
		_, err := filter.SQL(nest(filter.MaxDepth))
		require.NoError(t, err)
		_, err = filter.SQL(nest(filter.MaxDepth + 1))
		requireSyntaxError(t, nest(filter.MaxDepth+1), err, filter.MaxDepth, "nesting deeper than 64")

		nots := func(n int) string { return strings.Repeat("NOT ", n) + "a = 1" }
		_, err = filter.SQL(nots(filter.MaxDepth))
		require.NoError(t, err)
		_, err = filter.SQL(nots(filter.MaxDepth + 1))
		requireSyntaxError(t, nots(filter.MaxDepth+1), err, 4*filter.MaxDepth, "nesting deeper")

		// Parentheses and NOT count together.
		mixed := strings.Repeat("NOT (", 33) + "a = 1" + strings.Repeat(")", 33)
		_, err = filter.SQL(mixed)
		requireSyntaxError(t, mixed, err, 64*5/2, "nesting deeper")

		// Far beyond the limit: an error, not a stack overflow. The source
		// is cut to MaxExpressionLen so that depth, not length, trips.
		deep := strings.Repeat("(", 10_000) + "a = 1" + strings.Repeat(")", 10_000)
		_, err = filter.SQL(deep)
		require.ErrorIs(t, err, filter.ErrInvalidExpression)
		deep = deep[:filter.MaxExpressionLen]
		_, err = filter.SQL(deep)
		requireSyntaxError(t, deep, err, filter.MaxDepth, "nesting deeper")
	})
	t.Run("in list", func(t *testing.T) {
		list := func(n int) string {
			el := make([]string, n)
			for i := range el {
				el[i] = fmt.Sprintf("'%d'", i)
			}
			return "a IN (" + strings.Join(el, ",") + ")"
		}
		e, err := filter.SQL(list(filter.MaxInList))
		require.NoError(t, err)
		require.True(t, e.Match(msg("", "a", "255")))
		require.False(t, e.Match(msg("", "a", "256")))
		over := list(filter.MaxInList + 1)
		_, err = filter.SQL(over)
		requireSyntaxError(t, over, err, strings.Index(over, "'256'"), "IN list longer than 256")
	})
}
