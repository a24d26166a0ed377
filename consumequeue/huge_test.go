package consumequeue

import (
	"path/filepath"
	"testing"

	"github.com/mqlite/mqlite/vfs"
)

// TestHugeAheadCarriesOver writes three files' worth of entries in runs
// (as the dispatcher does) into a queue on real files: each new file
// starts with the paging its writer had at the end of the last
// (vfs.HugeAhead, whose rate checks are the writer's timing and not
// asserted here), and every entry reads back, whatever the page size.
func TestHugeAheadCarriesOver(t *testing.T) {
	const perFile = 1 << 16 // 1.25 MiB files: room for the rate checks
	o := Options{FS: vfs.OS, Dir: filepath.Join(t.TempDir(), "T", "0"), EntriesPerFile: perFile}
	q := mustOpen(t, o)
	defer q.Close()
	run := make([]Entry, 1000)
	var next int64
	for next < 3*perFile {
		k := min(int64(len(run)), 3*perFile-next)
		for i := range k {
			run[i] = entryFor(next + i)
		}
		if n, err := q.AppendBatch(next, run[:k]); err != nil || n != int(k) {
			t.Fatalf("AppendBatch at %d: %d, %v", next, n, err)
		}
		segs := q.snap.Load().segs
		// A run that began a new file: its one write so far is below the
		// first rate check, so it still has the paging it was created with.
		if file := (next + k - 1) / perFile; file > 0 && (next+k-1)%perFile < int64(len(run)) {
			if got, want := segs[file].huge.On(), segs[file-1].huge.On(); got != want {
				t.Fatalf("file %d starts with huge pages %t, the writer of file %d ended with %t", file, got, file-1, want)
			}
		}
		next += k
	}
	for i := int64(0); i < next; i += 997 {
		e, err := q.Get(i)
		if err != nil || e != entryFor(i) {
			t.Fatalf("Get(%d) = %+v, %v; want %+v", i, e, err, entryFor(i))
		}
	}
}
