package indexfile

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/mqlite/mqlite/vfs"
)

// TestHugeAheadCarriesOver indexes three files' worth of keys in batches
// (as the dispatcher does) on real files: each new file starts with the
// paging its writer had when the last one filled (vfs.HugeAhead, whose
// rate checks are the writer's timing and not asserted here), and every
// key is found, whatever the page size.
func TestHugeAheadCarriesOver(t *testing.T) {
	const entries = 1 << 14 // 320 KiB of entries: room for the rate checks
	x, err := Open(Options{FS: vfs.OS, Dir: filepath.Join(t.TempDir(), "index"), Slots: 1 << 10, Entries: entries})
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	key := func(i int) string { return fmt.Sprintf("T#key-%d", i) }
	hs := make([]Hashed, 64)
	total := 3*entries - 100
	files := 1
	for i := 0; i < total; i += len(hs) {
		n := min(len(hs), total-i)
		for j := range n {
			hs[j] = Hashed{Hash: KeyHash([]byte(key(i + j))), Phys: int64(i+j) * 256, StoreMs: t0 + int64(i+j)}
		}
		if err := x.PutHashed(hs[:n]); err != nil {
			t.Fatal(err)
		}
		fs := x.snapshot()
		if len(fs) > files { // a roll: the new file holds less than a rate step
			files = len(fs)
			if got, want := fs[len(fs)-1].huge.On(), fs[len(fs)-2].huge.On(); got != want {
				t.Fatalf("file %d starts with huge pages %t, its writer ended file %d with %t", len(fs)-1, got, len(fs)-2, want)
			}
		}
	}
	if files != 3 {
		t.Fatalf("%d files, want 3", files)
	}
	for i := 0; i < total; i += 331 {
		got, err := x.Query(key(i), t0, t0+int64(total), 4)
		if err != nil || len(got) != 1 || got[0] != int64(i)*256 {
			t.Fatalf("Query(%s) = %v, %v; want [%d]", key(i), got, err, int64(i)*256)
		}
	}
}
