package indexfile

import (
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mqlite/mqlite/vfs"
)

const t0 = int64(1_700_000_000_000) // a second-aligned store time

// eachFS runs fn on the in-memory FS and on the real OS in a temp dir.
func eachFS(t *testing.T, fn func(t *testing.T, fsys vfs.FS, dir string)) {
	t.Helper()
	t.Run("mem", func(t *testing.T) { fn(t, vfs.NewMem(), "/store/index") })
	t.Run("os", func(t *testing.T) { fn(t, vfs.OS, filepath.Join(t.TempDir(), "index")) })
	t.Run("strict", func(t *testing.T) { // the OS under Windows' rule (vfs.StrictMapFS)
		fn(t, vfs.NewStrictMapFS(vfs.OS), filepath.Join(t.TempDir(), "index"))
	})
}

func tinyOpts(fsys vfs.FS, dir string) Options {
	return Options{FS: fsys, Dir: dir, Slots: 8, Entries: 32}
}

func mustOpen(t testing.TB, o Options) *Index {
	t.Helper()
	x, err := Open(o)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { x.Close() })
	return x
}

func mustPut(t testing.TB, x *Index, key string, phys, ts int64) {
	t.Helper()
	if err := x.Put(key, phys, ts); err != nil {
		t.Fatalf("Put(%q, %d, %d): %v", key, phys, ts, err)
	}
}

func query(t testing.TB, x *Index, key string, from, to int64, max int) []int64 {
	t.Helper()
	got, err := x.Query(key, from, to, max)
	if err != nil {
		t.Fatalf("Query(%q): %v", key, err)
	}
	return got
}

func queryAll(t testing.TB, x *Index, key string) []int64 {
	return query(t, x, key, 0, math.MaxInt64, 1<<20)
}

func eq(t testing.TB, what string, got, want []int64) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Fatalf("%s: got %v, want %v", what, got, want)
	}
}

func indexFiles(t testing.TB, fsys vfs.FS, dir string) []string {
	t.Helper()
	names, err := fsys.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	return names
}

// model is the reference: every put, in order.
type model struct {
	puts []put
}

type put struct {
	key  string
	phys int64
	ts   int64
}

// want is what Query must return for second-aligned times and bounds.
func (m *model) want(key string, from, to int64, max int) []int64 {
	var out []int64
	for i := len(m.puts) - 1; i >= 0 && len(out) < max; i-- {
		p := m.puts[i]
		if p.key == key && p.ts >= from && p.ts <= to && !slices.Contains(out, p.phys) {
			out = append(out, p.phys)
		}
	}
	return out
}

func TestManyKeysRollAndReopen(t *testing.T) {
	eachFS(t, func(t *testing.T, fsys vfs.FS, dir string) {
		o := tinyOpts(fsys, dir)
		x := mustOpen(t, o)
		var m model
		for i := range 500 {
			p := put{fmt.Sprintf("topic#key-%d", i%37), int64(i) * 100, t0 + int64(i)*1000}
			mustPut(t, x, p.key, p.phys, p.ts)
			m.puts = append(m.puts, p)
		}
		if n := len(indexFiles(t, fsys, dir)); n < 500/32 {
			t.Fatalf("%d files, want at least %d", n, 500/32)
		}
		check := func(x *Index) {
			t.Helper()
			for k := range 37 {
				key := fmt.Sprintf("topic#key-%d", k)
				eq(t, key, queryAll(t, x, key), m.want(key, 0, math.MaxInt64, 1<<20))
			}
			if got := x.EndPhyOffset(); got != 499*100 {
				t.Fatalf("EndPhyOffset = %d, want %d", got, 499*100)
			}
			if got := queryAll(t, x, "absent"); len(got) != 0 {
				t.Fatalf("absent key: %v", got)
			}
		}
		check(x)
		if err := x.Close(); err != nil {
			t.Fatal(err)
		}
		check(mustOpen(t, o))
	})
}

func TestSharedKeyCollisionsMaxAndOrder(t *testing.T) {
	eachFS(t, func(t *testing.T, fsys vfs.FS, dir string) {
		o := tinyOpts(fsys, dir)
		o.Slots = 1 // every key in one bucket: a single chain per file
		o.Entries = 64
		x := mustOpen(t, o)
		var m model
		for i := range 300 {
			key := "hot"
			if i%3 != 0 {
				key = fmt.Sprintf("cold-%d", i%5)
			}
			p := put{key, int64(i) * 10, t0 + int64(i/4)*1000}
			mustPut(t, x, p.key, p.phys, p.ts)
			m.puts = append(m.puts, p)
		}
		for _, key := range []string{"hot", "cold-1", "cold-4"} {
			all := queryAll(t, x, key)
			eq(t, key, all, m.want(key, 0, math.MaxInt64, 1<<20))
			if !slices.IsSortedFunc(all, func(a, b int64) int { return int(b - a) }) {
				t.Fatalf("%s: not newest first: %v", key, all)
			}
			for _, max := range []int{1, 2, 7, 33, 100} {
				eq(t, fmt.Sprintf("%s max %d", key, max), query(t, x, key, 0, math.MaxInt64, max), m.want(key, 0, math.MaxInt64, max))
			}
		}
	})
}

func TestTimeRange(t *testing.T) {
	eachFS(t, func(t *testing.T, fsys vfs.FS, dir string) {
		x := mustOpen(t, tinyOpts(fsys, dir))
		var m model
		for i := range 200 {
			p := put{fmt.Sprintf("k%d", i%3), int64(i) * 100, t0 + int64(i)*1000}
			mustPut(t, x, p.key, p.phys, p.ts)
			m.puts = append(m.puts, p)
		}
		ranges := [][2]int64{
			{t0, t0}, {t0 + 10_000, t0 + 20_000}, {t0 + 150_000, t0 + 199_000},
			{t0 + 199_000, t0 + 500_000}, {0, t0 - 1000}, {t0 + 200_000, t0 + 900_000}, {t0 + 33_000, t0 + 33_000},
		}
		for _, r := range ranges {
			for k := range 3 {
				key := fmt.Sprintf("k%d", k)
				eq(t, fmt.Sprintf("%s in %v", key, r), query(t, x, key, r[0], r[1], 1000), m.want(key, r[0], r[1], 1000))
			}
		}
	})
}

// TestSecondResolution: the stored time has one-second resolution, so an
// entry matches when its second overlaps the range; nothing in range is
// missed.
func TestSecondResolution(t *testing.T) {
	x := mustOpen(t, tinyOpts(vfs.NewMem(), "/i"))
	mustPut(t, x, "k", 0, t0)        // second [t0, t0+999]
	mustPut(t, x, "k", 100, t0+1500) // recorded as second [t0+1000, t0+1999]
	eq(t, "exact", query(t, x, "k", t0+1500, t0+1500, 10), []int64{100})
	eq(t, "overlap", query(t, x, "k", t0+1999, t0+5000, 10), []int64{100})
	eq(t, "after", query(t, x, "k", t0+2000, t0+5000, 10), nil)
	eq(t, "before", query(t, x, "k", t0+900, t0+999, 10), []int64{0})
}

func TestDedupReDispatch(t *testing.T) {
	x := mustOpen(t, tinyOpts(vfs.NewMem(), "/i"))
	mustPut(t, x, "a", 100, t0)
	mustPut(t, x, "b", 100, t0)
	mustPut(t, x, "a", 200, t0)
	// Re-dispatch from EndPhyOffset: below it is skipped, at it is repeated.
	mustPut(t, x, "a", 100, t0)
	mustPut(t, x, "a", 200, t0)
	mustPut(t, x, "a", 200, t0)
	eq(t, "a", queryAll(t, x, "a"), []int64{200, 100})
	eq(t, "b", queryAll(t, x, "b"), []int64{100})
}

// TestReopenAddsNoEntry: the store re-dispatches the newest indexed record
// at every Open (from EndPhyOffset, inclusive); before, each clean reopen
// added its keys to the index again. A key of that record that is not
// indexed yet (a crash in the middle of its keys) still is.
func TestReopenAddsNoEntry(t *testing.T) {
	fs := vfs.NewMem()
	x := mustOpen(t, tinyOpts(fs, "/i"))
	mustPut(t, x, "u1", 100, t0)
	mustPut(t, x, "k1", 100, t0)
	count := func() uint32 { return x.snapshot()[0].count.Load() - 1 }
	reopen := func() {
		t.Helper()
		if err := x.Close(); err != nil {
			t.Fatal(err)
		}
		x = mustOpen(t, tinyOpts(fs, "/i"))
		if end := x.EndPhyOffset(); end != 100 {
			t.Fatalf("EndPhyOffset %d, want 100", end)
		}
	}
	for i := range 3 {
		reopen()
		mustPut(t, x, "u1", 100, t0)
		mustPut(t, x, "k1", 100, t0)
		if got := count(); got != 2 {
			t.Fatalf("reopen %d: %d entries, want 2", i+1, got)
		}
	}
	reopen()
	mustPut(t, x, "u1", 100, t0)
	mustPut(t, x, "k2", 100, t0)
	mustPut(t, x, "u2", 200, t0)
	mustPut(t, x, "u2", 200, t0) // a later record repeats a key: indexed as before
	if got := count(); got != 5 {
		t.Fatalf("%d entries, want 5 (k2, and u2 twice)", got)
	}
	eq(t, "k2", queryAll(t, x, "k2"), []int64{100})
	eq(t, "u2", queryAll(t, x, "u2"), []int64{200})
}

func TestResultsDedupLarge(t *testing.T) {
	x := mustOpen(t, Options{FS: vfs.NewMem(), Dir: "/i", Slots: 64, Entries: 4096})
	var want []int64
	for i := range 200 {
		mustPut(t, x, "k", int64(i), t0)
		mustPut(t, x, "k", int64(i), t0) // a record with the key twice
		want = append([]int64{int64(i)}, want...)
	}
	eq(t, "k", queryAll(t, x, "k"), want)
	eq(t, "k max 50", query(t, x, "k", 0, math.MaxInt64, 50), want[:50])
}

func TestTruncateAfterPhys(t *testing.T) {
	eachFS(t, func(t *testing.T, fsys vfs.FS, dir string) {
		o := tinyOpts(fsys, dir)
		x := mustOpen(t, o)
		var m model
		for i := range 100 { // files of 32 entries: begin 0, 3200, 6400, 9600
			p := put{fmt.Sprintf("k%d", i%4), int64(i) * 100, t0 + int64(i)*1000}
			mustPut(t, x, p.key, p.phys, p.ts)
			m.puts = append(m.puts, p)
		}
		if err := x.TruncateAfterPhys(99 * 100); err != nil { // newest file holds [9600, 9900]
			t.Fatal(err)
		}
		if got := x.EndPhyOffset(); got != 95*100 {
			t.Fatalf("EndPhyOffset after truncate = %d, want %d", got, 95*100)
		}
		if err := x.TruncateAfterPhys(5000); err != nil { // inside the second file
			t.Fatal(err)
		}
		if got := x.EndPhyOffset(); got != 31*100 {
			t.Fatalf("EndPhyOffset after truncate = %d, want %d", got, 31*100)
		}
		if n := len(indexFiles(t, fsys, dir)); n != 1 {
			t.Fatalf("%d files left, want 1", n)
		}
		// Re-dispatch from EndPhyOffset rebuilds the same index.
		for _, p := range m.puts {
			if p.phys >= x.EndPhyOffset() {
				mustPut(t, x, p.key, p.phys, p.ts)
			}
		}
		for k := range 4 {
			key := fmt.Sprintf("k%d", k)
			eq(t, key, queryAll(t, x, key), m.want(key, 0, math.MaxInt64, 1<<20))
		}
		if err := x.TruncateAfterPhys(0); err != nil {
			t.Fatal(err)
		}
		if got, n := x.EndPhyOffset(), len(indexFiles(t, fsys, dir)); got != 0 || n != 0 {
			t.Fatalf("after truncate to 0: end %d, %d files", got, n)
		}
		mustPut(t, x, "k0", 0, t0)
		eq(t, "k0", queryAll(t, x, "k0"), []int64{0})
	})
}

func TestDeleteBelowPhys(t *testing.T) {
	eachFS(t, func(t *testing.T, fsys vfs.FS, dir string) {
		x := mustOpen(t, tinyOpts(fsys, dir))
		for i := range 128 { // 4 full files: ends 3100, 6300, 9500, 12700
			mustPut(t, x, "k", int64(i)*100, t0+int64(i)*1000)
		}
		n, err := x.DeleteBelowPhys(6300)
		if err != nil || n != 1 {
			t.Fatalf("DeleteBelowPhys(6300) = %d, %v; want 1", n, err)
		}
		if got := queryAll(t, x, "k"); len(got) != 96 || got[95] != 3200 {
			t.Fatalf("after retention: %d results, oldest %d", len(got), got[len(got)-1])
		}
		if n, err = x.DeleteBelowPhys(math.MaxInt64); err != nil || n != 2 {
			t.Fatalf("DeleteBelowPhys(max) = %d, %v; want 2 (never the newest)", n, err)
		}
		if got := len(indexFiles(t, fsys, dir)); got != 1 {
			t.Fatalf("%d files left", got)
		}
		if got := x.EndPhyOffset(); got != 12700 {
			t.Fatalf("EndPhyOffset = %d", got)
		}
	})
}

func TestBadInput(t *testing.T) {
	x := mustOpen(t, tinyOpts(vfs.NewMem(), "/i"))
	for name, err := range map[string]error{
		"empty key put":  x.Put("", 0, 0),
		"negative phys":  x.Put("k", -1, 0),
		"negative time":  x.Put("k", 0, -1),
		"huge time":      x.Put("k", 0, math.MaxInt64),
		"truncate < 0":   x.TruncateAfterPhys(-1),
		"empty key get":  func() error { _, err := x.Query("", 0, 1, 1); return err }(),
		"max 0":          func() error { _, err := x.Query("k", 0, 1, 0); return err }(),
		"from after to":  func() error { _, err := x.Query("k", 2, 1, 1); return err }(),
		"delete below<0": func() error { _, err := x.DeleteBelowPhys(-5); return err }(),
	} {
		if !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("%s: got %v, want ErrInvalidArgument", name, err)
		}
	}
	if got := x.EndPhyOffset(); got != 0 {
		t.Fatalf("bad input changed the index: end %d", got)
	}
}

func TestOptions(t *testing.T) {
	_, err := Open(Options{Slots: -1, Entries: MaxEntries + 1})
	if !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("got %v", err)
	}
	for _, want := range []string{"Dir", "Slots", "Entries"} { // every problem at once
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %s", err, want)
		}
	}
	o, err := Options{Dir: "x"}.withDefaults()
	if err != nil || o.Slots != DefaultSlots || o.Entries != DefaultEntries || o.FS != vfs.OS || o.Logger == nil {
		t.Fatalf("defaults: %+v, %v", o, err)
	}
	if got := FileSize(DefaultSlots, DefaultEntries); got != 100_194_368 {
		t.Fatalf("default file size %d", got)
	}
	if s := o.String(); !strings.Contains(s, "100194368") {
		t.Fatalf("String() = %s", s)
	}
}

func TestDefaultSizes(t *testing.T) {
	fsys := vfs.NewMem()
	x := mustOpen(t, Options{FS: fsys, Dir: "/i"})
	mustPut(t, x, "k", 42, t0)
	size, _, err := fsys.Stat("/i/00000000000000000042")
	if err != nil || size != FileSize(DefaultSlots, DefaultEntries) {
		t.Fatalf("size %d, %v", size, err)
	}
	eq(t, "k", queryAll(t, x, "k"), []int64{42})
}

func TestClosed(t *testing.T) {
	x := mustOpen(t, tinyOpts(vfs.NewMem(), "/i"))
	mustPut(t, x, "k", 1, t0)
	if err := x.Close(); err != nil {
		t.Fatal(err)
	}
	if err := x.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	_, qerr := x.Query("k", 0, 1, 1)
	_, derr := x.DeleteBelowPhys(0)
	for _, err := range []error{x.Put("k", 2, t0), qerr, derr, x.TruncateAfterPhys(0), x.Flush()} {
		if !errors.Is(err, ErrClosed) {
			t.Errorf("got %v, want ErrClosed", err)
		}
	}
}

func TestOneOffsetFillsAFile(t *testing.T) {
	x := mustOpen(t, tinyOpts(vfs.NewMem(), "/i"))
	for i := range 40 { // 40 keys of one record; the file holds 32
		mustPut(t, x, fmt.Sprintf("k%d", i), 7, t0)
	}
	eq(t, "k31", queryAll(t, x, "k31"), []int64{7})
	eq(t, "k32", queryAll(t, x, "k32"), nil)
	mustPut(t, x, "k32", 8, t0)
	eq(t, "k32", queryAll(t, x, "k32"), []int64{8})
}

// PutHashed of batches must index exactly what one Put per key does,
// across file rolls, with re-dispatched (older) offsets skipped.
func TestPutHashedMatchesPut(t *testing.T) {
	one := mustOpen(t, tinyOpts(vfs.NewMem(), "/one"))
	many := mustOpen(t, tinyOpts(vfs.NewMem(), "/many"))
	key := func(i int) string { return fmt.Sprintf("k%d", i%13) }
	var batch []Hashed
	for i := range 200 { // 32 entries a file: several rolls
		phys, ts := int64(i*100), t0+int64(i)*10
		mustPut(t, one, key(i), phys, ts)
		batch = append(batch, Hashed{Hash: KeyHash([]byte(key(i))), Phys: phys, StoreMs: ts})
		if len(batch) == 7 || i == 199 {
			if err := many.PutHashed(batch); err != nil {
				t.Fatal(err)
			}
			// A re-dispatch of the same batch is skipped, except the keys
			// of the newest offset (Query de-duplicates those).
			if err := many.PutHashed(batch[:len(batch)-1]); err != nil {
				t.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	for k := range 13 {
		eq(t, key(k), queryAll(t, many, key(k)), queryAll(t, one, key(k)))
	}
	if a, b := len(indexFiles(t, one.opts.FS, "/one")), len(indexFiles(t, many.opts.FS, "/many")); a != b || a < 6 {
		t.Fatalf("%d files with Put, %d with PutHashed; want equal and >= 6", a, b)
	}
	for _, bad := range []Hashed{{Hash: 0, Phys: 1, StoreMs: t0}, {Hash: 1, Phys: -1, StoreMs: t0}, {Hash: 1, Phys: 1, StoreMs: -1}} {
		before := queryAll(t, many, key(0))
		if err := many.PutHashed([]Hashed{{Hash: KeyHash([]byte(key(0))), Phys: 1 << 40, StoreMs: t0}, bad}); !errors.Is(err, ErrInvalidArgument) {
			t.Fatalf("PutHashed(%+v): %v, want ErrInvalidArgument", bad, err)
		}
		eq(t, "nothing indexed from a bad batch", queryAll(t, many, key(0)), before)
	}
}
