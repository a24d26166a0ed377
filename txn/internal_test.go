package txn

import (
	"slices"
	"testing"

	"github.com/mqlite/mqlite/message"
)

func TestOffsetSet(t *testing.T) {
	var s offsetSet
	s.base = 10
	for _, off := range []int64{5, 10, 11, 73, 74, 200} {
		s.add(off)
	}
	for off, want := range map[int64]bool{5: false, 10: true, 11: true, 12: false, 73: true, 74: true, 200: true, 201: false} {
		if s.has(off) != want {
			t.Errorf("has(%d) = %v", off, !want)
		}
	}
	s.advance(74)
	if !s.has(74) || !s.has(200) || s.base > 74 {
		t.Errorf("after advance(74): base %d, has(74) %v has(200) %v", s.base, s.has(74), s.has(200))
	}
	s.advance(1000)
	if s.has(200) || len(s.words) != 0 || s.base != 1000 {
		t.Errorf("after advance(1000): base %d words %d", s.base, len(s.words))
	}
	s.add(1001)
	if !s.has(1001) {
		t.Error("lost 1001")
	}
}

func TestParseOp(t *testing.T) {
	for body, want := range map[string][]int64{
		"12":        {12},
		"12,13,":    {12, 13},
		"":          nil,
		"x,7,-1,,8": {7, 8},
	} {
		_, got := parseOp(&message.MessageExt{Message: message.Message{Body: []byte(body)}})
		if !slices.Equal(got, want) {
			t.Errorf("%q: %v, want %v", body, got, want)
		}
	}
}

// TestIDSourceSeeded: seeded sources give the same transaction IDs in
// the same order, unseeded ones (nil) random ones; every ID has the
// generated-key shape.
func TestIDSourceSeeded(t *testing.T) {
	a := &idSource{rng: newSeededRand(mix(9, 3), 1)}
	b := &idSource{rng: newSeededRand(mix(9, 3), 1)}
	c := &idSource{rng: newSeededRand(mix(10, 3), 1)}
	var nilSrc *idSource
	seen := map[string]bool{}
	for range 100 {
		x, y, z, r := a.newUniq(), b.newUniq(), c.newUniq(), nilSrc.newUniq()
		if x != y {
			t.Fatalf("same seed, different IDs %s and %s", x, y)
		}
		if x == z || x == r {
			t.Fatalf("another seed or none gave the same ID %s", x)
		}
		if len(x) != message.UniqLen || len(r) != message.UniqLen {
			t.Fatalf("IDs %q, %q: want %d hex digits", x, r, message.UniqLen)
		}
		if seen[x] {
			t.Fatalf("ID %s repeated", x)
		}
		seen[x] = true
	}
	if mix(0, 0) == 0 {
		t.Fatal("mix returned 0")
	}
}
