package filter_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mqlite/mqlite/filter"
	"github.com/mqlite/mqlite/internal/errs"
	"github.com/mqlite/mqlite/message"
)

func TestTagCompile(t *testing.T) {
	for _, tc := range []struct {
		expr   string
		want   string // String(); "" when an error is expected
		errPos int
	}{
		{expr: "", want: "*"},
		{expr: "*", want: "*"},
		{expr: "  *  ", want: "*"},
		{expr: "   ", want: "*"},
		{expr: "TagA", want: "TagA"},
		{expr: "TagA || TagB", want: "TagA || TagB"},
		{expr: "TagA||TagB||TagC", want: "TagA || TagB || TagC"},
		{expr: "  TagA  ||\tTagB ", want: "TagA || TagB"},
		{expr: "TagA || TagA", want: "TagA"},
		{expr: "tag with space", want: "tag with space"},
		{expr: "a|b", want: "a|b"}, // a single bar is part of the tag
		{expr: "TagA ||", errPos: 7},
		{expr: "|| TagA", errPos: 0},
		{expr: "TagA || || TagB", errPos: 8},
		{expr: "TagA ||   ", errPos: 10},
		{expr: "TagA || *", errPos: 8},
		{expr: "Tag\x01A", errPos: 3},
		{expr: "TagA || B\x02", errPos: 9},
		{expr: "TagA || B\nC", errPos: 9},
		{expr: "Tag\xffA", errPos: 3},
	} {
		t.Run(tc.expr, func(t *testing.T) {
			e, err := filter.Tag(tc.expr)
			if tc.want != "" {
				require.NoError(t, err)
				require.Equal(t, tc.want, e.String())
				require.Equal(t, filter.TypeTag, e.Type())
				return
			}
			require.Error(t, err)
			require.Nil(t, e)
			require.ErrorIs(t, err, filter.ErrInvalidExpression)
			require.ErrorIs(t, err, errs.ErrInvalidArgument)
			var se *filter.SyntaxError
			require.ErrorAs(t, err, &se)
			require.Equal(t, tc.errPos, se.Pos, "error: %v", err)
			require.Equal(t, tc.expr, se.Expr)
			require.Contains(t, err.Error(), "mqlite/filter: TAG syntax error at ")
		})
	}
}

func TestTagTooLong(t *testing.T) {
	long := make([]byte, filter.MaxExpressionLen+1)
	for i := range long {
		long[i] = 'a'
	}
	_, err := filter.Tag(string(long))
	require.ErrorIs(t, err, filter.ErrInvalidExpression)
	_, err = filter.Tag(string(long[:filter.MaxExpressionLen]))
	require.NoError(t, err)
}

func TestTagMatch(t *testing.T) {
	msgs := map[string]*message.Message{
		"none": {Topic: "T"},
		"A":    {Topic: "T", Tags: "TagA"},
		"B":    {Topic: "T", Tags: "TagB"},
		"C":    {Topic: "T", Tags: "TagC"},
		"AB":   {Topic: "T", Tags: "TagA || TagB"}, // not a list: one odd tag
		"a":    {Topic: "T", Tags: "taga"},
		"pre":  {Topic: "T", Tags: "Tag"},
		"sp":   {Topic: "T", Tags: " TagA"},
	}
	for _, tc := range []struct {
		expr string
		want []string // names of the matching messages
	}{
		{"*", []string{"none", "A", "B", "C", "AB", "a", "pre", "sp"}},
		{"", []string{"none", "A", "B", "C", "AB", "a", "pre", "sp"}},
		{"TagA", []string{"A"}},
		{"TagA || TagB", []string{"A", "B"}},
		{" TagC ||TagA ", []string{"A", "C"}},
		{"TagX", nil},
		{"t1||t2||t3||t4||t5||t6||t7||t8||t9||TagB", []string{"B"}}, // map path
	} {
		e, err := filter.Tag(tc.expr)
		require.NoError(t, err)
		var got []string
		for _, name := range []string{"none", "A", "B", "C", "AB", "a", "pre", "sp"} {
			m := msgs[name]
			match := e.Match(m)
			if match {
				got = append(got, name)
			}
			// The pre-check never rejects a match.
			if match {
				require.True(t, e.MatchCode(message.TagsCode(m.Tags)), "%q on %q", tc.expr, m.Tags)
			}
		}
		require.Equal(t, tc.want, got, "expr %q", tc.expr)
	}
}

func TestTagMatchCode(t *testing.T) {
	e, err := filter.Tag("TagA || TagB")
	require.NoError(t, err)
	require.True(t, e.MatchCode(message.TagsCode("TagA")))
	require.True(t, e.MatchCode(message.TagsCode("TagB")))
	require.False(t, e.MatchCode(message.TagsCode("TagC")))
	require.False(t, e.MatchCode(0), "no tags never matches a tag list")

	require.True(t, filter.All().MatchCode(0))
	require.True(t, filter.All().MatchCode(message.TagsCode("x")))
	require.True(t, filter.All().Match(nil))
	require.Equal(t, "*", filter.All().String())
	require.Equal(t, filter.TypeTag, filter.All().Type())
	require.False(t, e.Match(nil))

	star, err := filter.Tag("*")
	require.NoError(t, err)
	require.Same(t, filter.All(), star)
}

func TestErrorsAreDistinct(t *testing.T) {
	require.True(t, errors.Is(filter.ErrInvalidExpression, errs.ErrInvalidArgument))
	require.False(t, errors.Is(errs.ErrInvalidArgument, filter.ErrInvalidExpression))
	se := &filter.SyntaxError{Expr: "x", Pos: 1, Msg: "m"}
	require.True(t, se.Is(filter.ErrInvalidExpression))
	require.True(t, se.Is(errs.ErrInvalidArgument))
	require.False(t, se.Is(errs.ErrCorrupt))
	require.Equal(t, `mqlite/filter: SQL92 syntax error at 1: m in "x"`, se.Error())
}
