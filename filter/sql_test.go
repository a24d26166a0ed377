package filter_test

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqlite/mqlite/filter"
	"github.com/mqlite/mqlite/message"
)

// msg builds a message with tags and name, value property pairs.
func msg(tags string, kv ...string) *message.Message {
	m := &message.Message{Topic: "T", Tags: tags, Body: []byte("x"), Properties: map[string]string{}}
	for i := 0; i+1 < len(kv); i += 2 {
		m.Properties[kv[i]] = kv[i+1]
	}
	return m
}

type matchCase struct {
	expr string
	want bool
}

func runMatch(t *testing.T, m *message.Message, cases []matchCase) {
	t.Helper()
	for _, tc := range cases {
		e, err := filter.SQL(tc.expr)
		require.NoError(t, err, "expr %q", tc.expr)
		require.Equal(t, tc.want, e.Match(m), "expr %q (normalised %q)", tc.expr, e.String())
		if tc.want {
			require.True(t, e.MatchCode(message.TagsCode(m.Tags)), "MatchCode rejects a match: %q", tc.expr)
		}
	}
}

// base is the message most tables run against.
var base = msg("TagA",
	"a", "10", "f", "2.5", "s", "hello world", "b", "TRUE", "x", "abc",
	"q", "it's", "e", "", "neg", "-3", "big", "99999999999999999999")

func TestSQLOperators(t *testing.T) {
	runMatch(t, base, []matchCase{
		// Numeric comparisons, int against int.
		{"a = 10", true}, {"a = 11", false},
		{"a <> 10", false}, {"a <> 11", true}, {"a != 11", true}, {"a != 10", false},
		{"a > 9", true}, {"a > 10", false},
		{"a >= 10", true}, {"a >= 11", false},
		{"a < 11", true}, {"a < 10", false},
		{"a <= 10", true}, {"a <= 9", false},
		{"10 = a", true}, {"11 > a", true}, {"9 > a", false},
		{"neg < 0", true}, {"neg = -3", true}, {"neg > -3.5", true}, {"a = +10", true},
		{"a = 10L", true},
		// Int and float mix.
		{"a = 10.0", true}, {"a > 9.5", true}, {"a < 10.5", true}, {"a < 9.99", false},
		{"f > 2", true}, {"f < 3", true}, {"f = 2.5", true}, {"f = 25e-1", true}, {"f >= 2.5", true}, {"f > 2.5", false},
		{"big > 9223372036854775807", true}, // overflows int64: compared as a float
		// Literals on both sides.
		{"1 = 1", true}, {"1 < 2.5", true}, {"'x' = 'x'", true}, {"'x' <> 'x'", false}, {"TRUE = TRUE", true},
		// Strings: exact and case-sensitive.
		{"s = 'hello world'", true}, {"s = 'Hello world'", false}, {"s <> 'hello'", true},
		{"q = 'it''s'", true}, {"'it''s' = q", true},
		{"a = '10'", true}, {"a = '10.0'", false}, // a string literal compares as a string
		{"a = s", false}, {"a <> s", true}, {"a = a", true}, // two properties compare as strings
		// Booleans.
		{"b = TRUE", true}, {"b = FALSE", false}, {"b <> FALSE", true}, {"TRUE = b", true},
		{"TRUE", true}, {"FALSE", false}, {"NOT FALSE", true},
		// BETWEEN is inclusive.
		{"a BETWEEN 10 AND 20", true}, {"a BETWEEN 1 AND 10", true}, {"a BETWEEN 10 AND 10", true},
		{"a BETWEEN 11 AND 20", false}, {"a BETWEEN 1 AND 9", false},
		{"a NOT BETWEEN 11 AND 20", true}, {"a NOT BETWEEN 10 AND 20", false}, {"a NOT BETWEEN 1 AND 10", false},
		{"f BETWEEN 2.5 AND 2.5", true}, {"f BETWEEN 2 AND 3", true}, {"a BETWEEN 9.5 AND 10.5", true},
		{"a BETWEEN neg AND 10", true}, {"a BETWEEN -5 AND neg", false},
		// IN over strings.
		{"TAGS IN ('TagA', 'TagB')", true}, {"TAGS IN ('TagB')", false},
		{"TAGS NOT IN ('TagB')", true}, {"TAGS NOT IN ('TagA', 'TagB')", false},
		{"a IN ('10')", true}, {"q IN ('x', 'it''s')", true},
		{"s IN ('a','b','c','d','e','f','g','h','i','hello world')", true}, // set path
		{"s NOT IN ('a','b','c','d','e','f','g','h','i','hello world')", false},
		// String predicates.
		{"s CONTAINS 'lo w'", true}, {"s CONTAINS 'xyz'", false}, {"s CONTAINS ''", true},
		{"s NOT CONTAINS 'xyz'", true}, {"s NOT CONTAINS 'lo'", false},
		{"s STARTSWITH 'hell'", true}, {"s STARTSWITH 'world'", false},
		{"s NOT STARTSWITH 'world'", true}, {"s NOT STARTSWITH 'hell'", false},
		{"s ENDSWITH 'world'", true}, {"s ENDSWITH 'hello'", false},
		{"s NOT ENDSWITH 'hello'", true}, {"s NOT ENDSWITH 'world'", false},
		{"q CONTAINS ''''", true},
		// An empty user property is present (not NULL).
		{"e = ''", true}, {"e IS NULL", false}, {"e IS NOT NULL", true},
		// Keywords are case-insensitive.
		{"a > 5 and s contains 'hello' Or FaLsE", true},
		{"not a < 5", true}, {"a between 1 and 20", true}, {"s Not StartsWith 'x'", true},
		{"TAGS in ('TagA')", true}, {"x is not null", true}, {"b = true", true},
		// Precedence: NOT > AND > OR, parentheses.
		{"a = 1 OR a = 10 AND s = 'nope'", false},
		{"(a = 1 OR a = 10) AND s = 'hello world'", true},
		{"a = 10 OR a = 1 AND FALSE", true},
		{"NOT a = 1 AND a = 10", true},
		{"NOT (a = 10 AND s = 'nope')", true},
		{"NOT NOT a = 10", true},
		{"((((a = 10))))", true},
		// Names with dots and dollars; properties are case-sensitive.
		{"A = 10", false}, {"A IS NULL", true},
	})
	withOdd := msg("", "a.b", "1", "$x_1", "y", "ünï", "z")
	runMatch(t, withOdd, []matchCase{
		{"a.b = 1", true}, {"$x_1 = 'y'", true}, {"ünï = 'z'", true}, {"TAGS IS NULL", true},
	})
}

func TestSQLNullSemantics(t *testing.T) {
	// z is absent from base; a is 10.
	runMatch(t, base, []matchCase{
		{"z = 1", false}, {"z <> 1", false}, {"z = 'x'", false}, {"z <> 'x'", false}, {"z = TRUE", false},
		{"z > 1", false}, {"z <= 1", false},
		{"NOT z = 1", false}, {"NOT (z <> 1)", false}, {"NOT NOT z = 1", false},
		{"z IS NULL", true}, {"z IS NOT NULL", false}, {"NOT z IS NULL", false}, {"NOT z IS NOT NULL", true},
		{"a IS NULL", false}, {"a IS NOT NULL", true},
		// OR: TRUE wins over UNKNOWN; UNKNOWN OR FALSE is UNKNOWN.
		{"z = 1 OR a = 10", true}, {"a = 10 OR z = 1", true},
		{"z = 1 OR a = 11", false}, {"NOT (z = 1 OR a = 11)", false},
		// AND: FALSE wins over UNKNOWN; UNKNOWN AND TRUE is UNKNOWN.
		{"z = 1 AND a = 11", false}, {"NOT (z = 1 AND a = 11)", true},
		{"z = 1 AND a = 10", false}, {"NOT (z = 1 AND a = 10)", false},
		// Every predicate on NULL is UNKNOWN, negated or not.
		{"z BETWEEN 1 AND 2", false}, {"z NOT BETWEEN 1 AND 2", false},
		{"z IN ('a')", false}, {"z NOT IN ('a')", false},
		{"z CONTAINS 'a'", false}, {"z NOT CONTAINS 'a'", false},
		{"z STARTSWITH 'a'", false}, {"z NOT STARTSWITH 'a'", false},
		{"z ENDSWITH 'a'", false}, {"z NOT ENDSWITH 'a'", false},
		// The NULL literal.
		{"a = NULL", false}, {"a <> NULL", false}, {"NOT (a = NULL)", false}, {"NULL = NULL", false},
		{"a > NULL", false}, {"NULL IS NULL", true}, {"NULL IS NOT NULL", false},
		{"NULL IN ('a')", false}, {"NULL NOT CONTAINS 'a'", false},
	})
}

func TestSQLTypeMismatch(t *testing.T) {
	// A value that does not convert makes the comparison UNKNOWN: neither
	// it nor its negation matches.
	runMatch(t, base, []matchCase{
		{"x > 5", false}, {"NOT (x > 5)", false}, {"x <= 5", false}, {"NOT x <= 5", false},
		{"x = 5", false}, {"x <> 5", false}, {"NOT x = 5", false},
		{"x BETWEEN 1 AND 10", false}, {"x NOT BETWEEN 1 AND 10", false},
		{"x = TRUE", false}, {"x = FALSE", false}, {"NOT x = TRUE", false},
		{"a = TRUE", false}, {"b = 1", false},
		{"x > 5 OR a = 10", true}, {"x > 5 AND a = 10", false},
		{"s > 1", false}, {"e = 0", false}, {"e <> 0", false},
	})
	nums := msg("", "exp", "1e3", "sp", " 5", "hex", "0x10", "und", "1_000", "plus", "+5",
		"lead", ".5", "trail", "5.", "nan", "NaN", "inf", "Inf", "huge", "1e999", "dot", ".", "sign", "-", "l", "10L")
	runMatch(t, nums, []matchCase{
		{"exp = 1000", true}, {"exp > 999.9", true},
		{"plus = 5", true}, {"lead = 0.5", true}, {"trail = 5", true},
		{"sp = 5", false}, {"NOT sp = 5", false},
		{"hex = 16", false}, {"hex <> 16", false},
		{"und = 1000", false}, {"nan = 0", false}, {"nan <> 0", false}, {"inf > 0", false},
		{"huge > 0", false}, {"NOT huge > 0", false},
		{"dot = 0", false}, {"sign = 0", false}, {"l = 10", false},
	})
}

func TestSQLReservedProperties(t *testing.T) {
	m := &message.Message{
		Topic: "T", Tags: "TagA", Keys: []string{"k1", "k2"}, UniqKey: "U1", ShardingKey: "shard-7",
		DelayLevel: 3, DeliverAt: time.UnixMilli(1_700_000_000_123),
		Properties: map[string]string{"tags": "lower", "REAL_TOPIC": "orig"},
	}
	runMatch(t, m, []matchCase{
		{"TAGS = 'TagA'", true}, {"tags = 'lower'", true},
		{"KEYS = 'k1 k2'", true}, {"KEYS CONTAINS 'k2'", true},
		{"UNIQ_KEY = 'U1'", true}, {"SHARDING_KEY STARTSWITH 'shard'", true},
		{"DELAY = 3", true}, {"DELAY >= 2.5", true}, {"DELAY = '3'", true}, {"DELAY IN ('3')", true},
		{"TIMER_DELIVER_MS = 1700000000123", true}, {"TIMER_DELIVER_MS ENDSWITH '123'", true},
		{"REAL_TOPIC = 'orig'", true},
	})
	one := &message.Message{Topic: "T", Keys: []string{"only"}}
	runMatch(t, one, []matchCase{
		{"KEYS = 'only'", true}, {"TAGS IS NULL", true}, {"UNIQ_KEY IS NULL", true},
		{"SHARDING_KEY IS NULL", true}, {"DELAY IS NULL", true}, {"TIMER_DELIVER_MS IS NULL", true},
		{"user IS NULL", true}, // nil Properties map
	})
	runMatch(t, &message.Message{}, []matchCase{{"KEYS IS NULL", true}})
}

func TestSQLNilMessage(t *testing.T) {
	e, err := filter.SQL("a IS NULL AND TAGS IS NULL")
	require.NoError(t, err)
	require.True(t, e.Match(nil))
	e, err = filter.SQL("a = 1")
	require.NoError(t, err)
	require.False(t, e.Match(nil))
}

func TestSQLString(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"a>5 and b='x''y'", "a > 5 AND b = 'x''y'"},
		{"not (a=1 or b=2)", "NOT (a = 1 OR b = 2)"},
		{"(a=1 or b=2) and c=3", "(a = 1 OR b = 2) AND c = 3"},
		{"a=1 or (b=2 and c=3)", "a = 1 OR b = 2 AND c = 3"},
		{"a = 1 and (b = 2 and c = 3)", "a = 1 AND b = 2 AND c = 3"},
		{"(a = 1 or b = 2) or c = 3", "a = 1 OR b = 2 OR c = 3"},
		{"((a=1))", "a = 1"},
		{"a != 1", "a <> 1"},
		{"x = 10L", "x = 10"}, {"x = 1.50", "x = 1.5"}, {"x = 1e3", "x = 1000.0"}, {"x = .5", "x = 0.5"},
		{"x = -0.0", "x = -0.0"}, {"x = 1e21", "x = 1e+21"}, {"x = - 7", "x = -7"},
		{"a not in ('x','y')", "a NOT IN ('x', 'y')"},
		{"a is not null", "a IS NOT NULL"},
		{"not not a = 1", "NOT NOT a = 1"},
		{"a not between -1 and 2.5", "a NOT BETWEEN -1 AND 2.5"},
		{"s not contains 'o''k' and s startswith 'a' and s endswith 'z'", "s NOT CONTAINS 'o''k' AND s STARTSWITH 'a' AND s ENDSWITH 'z'"},
		{"true or false", "TRUE OR FALSE"},
		{"a = null", "a = NULL"},
		{"NOT (a = 1) AND NOT (b = 1 AND c = 1)", "NOT a = 1 AND NOT (b = 1 AND c = 1)"},
	} {
		e, err := filter.SQL(tc.in)
		require.NoError(t, err, tc.in)
		require.Equal(t, tc.want, e.String(), tc.in)
		require.Equal(t, filter.TypeSQL92, e.Type())
		again, err := filter.SQL(e.String())
		require.NoError(t, err, e.String())
		require.Equal(t, e.String(), again.String())
	}
}

func TestSQLMatchCode(t *testing.T) {
	a, b, c := message.TagsCode("A"), message.TagsCode("B"), message.TagsCode("C")
	for _, tc := range []struct {
		expr    string
		a, b, c bool // MatchCode for tags A, B, C
		none    bool // MatchCode(0)
	}{
		{"TAGS = 'A'", true, false, false, false},
		{"'A' = TAGS", true, false, false, false},
		{"TAGS IN ('A', 'B') AND x > 1", true, true, false, false},
		{"x > 1 AND TAGS = 'B' AND TAGS IN ('A', 'B', 'C')", false, true, false, false},
		{"TAGS = 'A' OR TAGS IN ('B')", true, true, false, false},
		{"TAGS = 'A' OR x > 1", true, true, true, true},
		{"TAGS <> 'A'", true, true, true, true},
		{"TAGS NOT IN ('A')", true, true, true, true},
		{"NOT TAGS = 'A'", true, true, true, true},
		{"TAGS = 1", true, true, true, true}, // numeric: '1.0' or '01' would match too
		{"x > 1", true, true, true, true},
		{"TAGS IN ('t1','t2','t3','t4','t5','t6','t7','t8','C')", false, false, true, false},
	} {
		e, err := filter.SQL(tc.expr)
		require.NoError(t, err)
		require.Equal(t, tc.a, e.MatchCode(a), "%q A", tc.expr)
		require.Equal(t, tc.b, e.MatchCode(b), "%q B", tc.expr)
		require.Equal(t, tc.c, e.MatchCode(c), "%q C", tc.expr)
		require.Equal(t, tc.none, e.MatchCode(0), "%q none", tc.expr)
	}
}

func TestSQLConcurrentMatch(t *testing.T) {
	e, err := filter.SQL("TAGS IN ('TagA') AND a BETWEEN 1 AND 100 AND s CONTAINS 'world'")
	require.NoError(t, err)
	var wg sync.WaitGroup
	errc := make(chan string, 8)
	for g := range 8 {
		wg.Go(func() {
			for i := range 1000 {
				m := msg("TagA", "a", "10", "s", "hello world")
				if i%2 == 1 {
					m.Properties["a"] = "1000"
				}
				if e.Match(m) != (i%2 == 0) {
					errc <- strings.Repeat("x", g)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errc)
	require.Empty(t, errc)
}
