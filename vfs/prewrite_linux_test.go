//go:build linux

package vfs

import (
	"path/filepath"
	"testing"
)

// On a file system that reserves blocks as unwritten extents, the
// prewritten range is data afterwards (SEEK_DATA finds it), the rest of
// the preallocation still not: the blocks were converted by the prewrite,
// not left for the writer's sync.
func TestPrewriteConvertsExtents(t *testing.T) {
	const size = 1 << 20
	path := filepath.Join(t.TempDir(), "f")
	f := prewriteFile(t, OS, path, size) // "old" at 0: the first block is data
	if got := DataRanges(OS, path, PageSize, size); len(got) != 0 {
		t.Skipf("the file system reports preallocated blocks as data (%v)", got)
	}
	p := f.(Prewriter)
	if err := p.Prewrite(256<<10, 256<<10); err != nil {
		t.Fatal(err)
	}
	if err := p.SyncPrewrite(); err != nil {
		t.Fatal(err)
	}
	got := DataRanges(OS, path, PageSize, size)
	if len(got) != 1 || got[0] != [2]int64{256 << 10, 512 << 10} {
		t.Fatalf("data ranges after prewriting [256 KiB, 512 KiB): %v", got)
	}
}
