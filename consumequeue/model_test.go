package consumequeue

import (
	"errors"
	"flag"
	"math/rand/v2"
	"testing"

	"github.com/mqlite/mqlite/vfs"
)

// model is the reference: a slice of entries by logical offset (fillers as
// the zero Entry), the retention watermark, and the end of the last entry.
type model struct {
	ents    []Entry
	minPhys int64
	physEnd int64
}

// wantPhysEnd is the end of the last real entry still held in a data file.
func (m *model) wantPhysEnd(first int64) int64 {
	for i := m.max() - 1; i >= first; i-- {
		if m.ents[i] != (Entry{}) {
			return m.ents[i].End()
		}
	}
	return 0
}

func (m *model) max() int64 { return int64(len(m.ents)) }

// min is the first real entry pointing at or above the retention watermark.
func (m *model) min() int64 {
	for i, e := range m.ents {
		if e != (Entry{}) && e.Offset >= m.minPhys {
			return int64(i)
		}
	}
	return m.max()
}

func (m *model) next(rng *rand.Rand) Entry {
	return Entry{Offset: max(m.physEnd, m.minPhys) + rng.Int64N(50), Size: 1 + rng.Int32N(100), TagsCode: rng.Uint32()}
}

var modelSeeds = flag.Int("model.seeds", 8, "seeds for TestModel")

// TestModel runs random operations against a Queue and the model, checking
// the whole visible state after each one.
func TestModel(t *testing.T) {
	for seed := range uint64(*modelSeeds) {
		rng := rand.New(rand.NewPCG(seed, 5))
		const perFile = 4
		o := Options{FS: vfs.NewMem(), Dir: "/m/T/0", EntriesPerFile: perFile}
		q := mustOpen(t, o)
		var m model
		for op := 0; op < 1500; op++ {
			switch r := rng.IntN(100); {
			case r < 55: // append
				e := m.next(rng)
				if err := q.Append(m.max(), e); err != nil {
					t.Fatalf("seed %d op %d: append: %v", seed, op, err)
				}
				m.ents = append(m.ents, e)
				m.physEnd = e.End()
			case r < 65: // re-dispatch
				if m.min() == m.max() {
					continue
				}
				i := m.min() + rng.Int64N(m.max()-m.min())
				if err := q.Append(i, m.ents[i]); err != nil {
					t.Fatalf("seed %d op %d: duplicate: %v", seed, op, err)
				}
				other := m.ents[i]
				other.TagsCode++
				wantErr(t, q.Append(i, other), ErrConflict)
			case r < 72: // hole
				logical := m.max() + 1 + rng.Int64N(12)
				e := m.next(rng)
				err := q.Append(logical, e)
				if m.min() != m.max() {
					wantErr(t, err, ErrConflict)
					continue
				}
				if err != nil {
					t.Fatalf("seed %d op %d: hole: %v", seed, op, err)
				}
				// The queue restarts in logical's file: fillers before it.
				for int64(len(m.ents)) < logical {
					m.ents = append(m.ents, Entry{})
				}
				clear(m.ents[logical-logical%perFile : logical])
				m.ents = append(m.ents, e)
				m.physEnd = e.End()
			case r < 80: // truncate the CommitLog at or above the watermark
				end := m.minPhys + rng.Int64N(max(1, m.physEnd-m.minPhys+10))
				if err := q.TruncateAfterPhys(end); err != nil {
					t.Fatalf("seed %d op %d: truncate: %v", seed, op, err)
				}
				n := len(m.ents)
				for n > 0 && m.ents[n-1] != (Entry{}) && m.ents[n-1].End() > end {
					n--
				}
				m.ents = m.ents[:n]
				m.physEnd = 0
				if n > 0 && m.ents[n-1] != (Entry{}) {
					m.physEnd = m.ents[n-1].End()
				}
			case r < 88: // retention, at a record boundary
				if m.max() == 0 {
					continue
				}
				e := m.ents[rng.Int64N(m.max())]
				if e == (Entry{}) || e.Offset <= m.minPhys {
					continue
				}
				m.minPhys = e.Offset
				if _, err := q.DeleteBelowPhys(m.minPhys); err != nil {
					t.Fatalf("seed %d op %d: delete: %v", seed, op, err)
				}
			case r < 94:
				if err := q.Flush(); err != nil {
					t.Fatal(err)
				}
			default: // reopen, then re-apply retention
				closeQ(t, q)
				q = mustOpen(t, o)
				if _, err := q.DeleteBelowPhys(m.minPhys); err != nil {
					t.Fatal(err)
				}
			}
			checkModel(t, seed, op, q, &m, o)
		}
		closeQ(t, q)
	}
}

func checkModel(t *testing.T, seed uint64, op int, q *Queue, m *model, o Options) {
	t.Helper()
	first := m.max()
	if files := dataFiles(t, o.FS, o.Dir); len(files) > 0 {
		off, _ := parseFileName(files[0])
		first = off / EntrySize
	}
	if q.MinOffset() != m.min() || q.MaxOffset() != m.max() || q.MaxPhysEnd() != m.wantPhysEnd(first) {
		t.Fatalf("seed %d op %d: queue [%d, %d) end %d, model [%d, %d) end %d", seed, op,
			q.MinOffset(), q.MaxOffset(), q.MaxPhysEnd(), m.min(), m.max(), m.wantPhysEnd(first))
	}
	for i := m.min(); i < m.max(); i++ {
		if e, err := q.Get(i); err != nil || e != m.ents[i] {
			t.Fatalf("seed %d op %d: Get(%d) = %+v, %v; want %+v", seed, op, i, e, err, m.ents[i])
		}
	}
	if _, err := q.Get(m.min() - 1); !errors.Is(err, ErrNotFound) {
		t.Fatalf("seed %d op %d: Get(min-1): %v", seed, op, err)
	}
}

func TestZeroAllocs(t *testing.T) {
	q := mustOpen(t, Options{FS: vfs.NewMem(), Dir: "/z/T/0"})
	defer closeQ(t, q)
	appendRange(t, q, 0, 10)
	i := int64(10)
	if n := testing.AllocsPerRun(1000, func() {
		if err := q.Append(i, entryFor(i)); err != nil {
			t.Fatal(err)
		}
		i++
	}); n != 0 {
		t.Errorf("Append: %v allocs", n)
	}
	if n := testing.AllocsPerRun(1000, func() {
		if _, err := q.Get(5); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("Get: %v allocs", n)
	}
	buf := make([]Entry, 8)
	if n := testing.AllocsPerRun(1000, func() {
		if _, err := q.Read(2, buf); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("Read: %v allocs", n)
	}
}
