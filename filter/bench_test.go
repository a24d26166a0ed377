package filter_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mqlite/mqlite/filter"
	"github.com/mqlite/mqlite/message"
)

var benchSink bool

func BenchmarkTagMatchCode(b *testing.B) {
	for _, bc := range []struct{ name, expr string }{
		{"all", "*"},
		{"3tags", "TagA || TagB || TagC"},
		{"16tags", "t1||t2||t3||t4||t5||t6||t7||t8||t9||t10||t11||t12||t13||t14||t15||TagC"},
	} {
		e, err := filter.Tag(bc.expr)
		require.NoError(b, err)
		code := message.TagsCode("TagC")
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				benchSink = e.MatchCode(code)
			}
		})
	}
}

func BenchmarkTagMatch(b *testing.B) {
	e, err := filter.Tag("TagA || TagB || TagC")
	require.NoError(b, err)
	m := &message.Message{Tags: "TagC"}
	b.ReportAllocs()
	for b.Loop() {
		benchSink = e.Match(m)
	}
}

// sqlBenchCases are typical subscriptions and the message they run on.
var sqlBenchCases = []struct{ name, expr string }{
	{"compare", "a > 5"},
	{"typical", "TAGS IN ('TagA', 'TagB') AND a BETWEEN 0 AND 100 AND s = 'hello world'"},
	{"strings", "s STARTSWITH 'hello' AND s NOT CONTAINS 'bye' AND region IN ('eu', 'us', 'ap')"},
	{"nulls", "missing IS NULL OR (f >= 2.5 AND NOT b = FALSE)"},
}

func benchMessage() *message.Message {
	return msg("TagA", "a", "10", "f", "2.5", "s", "hello world", "b", "true", "region", "us")
}

func BenchmarkSQLMatch(b *testing.B) {
	m := benchMessage()
	for _, bc := range sqlBenchCases {
		e, err := filter.SQL(bc.expr)
		require.NoError(b, err)
		require.True(b, e.Match(m), bc.expr)
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				benchSink = e.Match(m)
			}
		})
	}
}

func BenchmarkSQLCompile(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := filter.SQL(sqlBenchCases[1].expr); err != nil {
			b.Fatal(err)
		}
	}
}

// TestMatchDoesNotAllocate holds Match to the zero-allocation promise for
// typical expressions.
func TestMatchDoesNotAllocate(t *testing.T) {
	m := benchMessage()
	for _, bc := range sqlBenchCases {
		e, err := filter.SQL(bc.expr)
		require.NoError(t, err)
		allocs := testing.AllocsPerRun(100, func() { benchSink = e.Match(m) })
		require.Zero(t, allocs, bc.expr)
	}
	e, err := filter.Tag("TagA || TagB || TagC")
	require.NoError(t, err)
	require.Zero(t, testing.AllocsPerRun(100, func() { benchSink = e.Match(m) || e.MatchCode(1) }))
}
