package filter_test

import (
	"errors"
	"testing"
	"time"

	"github.com/mqlite/mqlite/filter"
	"github.com/mqlite/mqlite/message"
)

// fuzzMessages cover absent, empty, numeric, non-numeric, boolean and
// reserved properties.
var fuzzMessages = []*message.Message{
	nil,
	{},
	msg("TagA", "a", "10", "b", "true", "s", "hello", "x", "abc", "f", "-2.5e1"),
	msg("TagB", "a", "", "b", "FALSE", "s", "it's", "x", "1e999", "f", "9223372036854775808"),
	{Tags: "A", Keys: []string{"k1", "k2"}, UniqKey: "U", DelayLevel: 2, DeliverAt: time.UnixMilli(5),
		Properties: map[string]string{"a": "0", "TAGS2": "x"}},
}

var fuzzSeeds = []string{
	"a > 5", "a = 'x''y' AND b = TRUE OR NOT c IS NULL", "a BETWEEN -1 AND 2.5e3",
	"TAGS IN ('A', 'TagA') AND s NOT CONTAINS 'q'", "NOT (x STARTSWITH 'a' OR x ENDSWITH 'c')",
	"((a <> 1))", "a != 1.0", "f < -1e1", "a = NULL", "NULL IS NULL", "TRUE", "KEYS = 'k1 k2'",
	"DELAY >= 2 AND TIMER_DELIVER_MS > 1", "a = AND b", "(((", "a IN ('", "'", "1e", "a.b$ = 1",
	"NOT NOT NOT a = 1", "TAGS = 'A' OR TAGS = 'B'",
}

// FuzzSQL compiles arbitrary input. Errors must be well-formed; compiled
// expressions must evaluate without panicking, keep MatchCode free of
// false negatives, and round-trip through String.
func FuzzSQL(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		e, err := filter.SQL(src)
		if err != nil {
			var se *filter.SyntaxError
			if !errors.As(err, &se) || !errors.Is(err, filter.ErrInvalidExpression) {
				t.Fatalf("%q: error %v is not a SyntaxError", src, err)
			}
			if se.Pos < 0 || se.Pos > len(src) {
				t.Fatalf("%q: position %d outside the source", src, se.Pos)
			}
			_ = err.Error()
			return
		}
		again, err := filter.SQL(e.String())
		if err != nil {
			if len(e.String()) > filter.MaxExpressionLen {
				return // normalising added spaces beyond the limit
			}
			t.Fatalf("%q: normalised %q does not compile: %v", src, e.String(), err)
		}
		if again.String() != e.String() {
			t.Fatalf("%q: String not stable: %q then %q", src, e.String(), again.String())
		}
		for _, m := range fuzzMessages {
			got := e.Match(m)
			if again.Match(m) != got {
				t.Fatalf("%q and its normalised %q disagree on %+v", src, e.String(), m)
			}
			var tags string
			if m != nil {
				tags = m.Tags
			}
			if got && !e.MatchCode(message.TagsCode(tags)) {
				t.Fatalf("%q: MatchCode rejects a matching message with tags %q", src, tags)
			}
		}
	})
}

// FuzzTag compiles arbitrary tag expressions: every listed tag matches,
// and String round-trips.
func FuzzTag(f *testing.F) {
	for _, s := range []string{"*", "", "A || B", "A ||", " x ", "a|b", "A || * ", "\x01"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		e, err := filter.Tag(src)
		if err != nil {
			var se *filter.SyntaxError
			if !errors.As(err, &se) || se.Pos < 0 || se.Pos > len(src) {
				t.Fatalf("%q: bad error %v", src, err)
			}
			return
		}
		again, err := filter.Tag(e.String())
		if err != nil || again.String() != e.String() {
			t.Fatalf("%q: String %q does not round-trip: %v", src, e.String(), err)
		}
		if e.String() == "*" {
			return
		}
		for _, m := range fuzzMessages[1:] {
			if e.Match(m) && !e.MatchCode(message.TagsCode(m.Tags)) {
				t.Fatalf("%q: MatchCode false negative", src)
			}
		}
	})
}
