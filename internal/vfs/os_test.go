package vfs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Unmap releases a mapping completely: no piece of it stays in the
// address space.
func TestUnmap(t *testing.T) {
	path := filepath.Join(t.TempDir(), "seg")
	f, err := OS.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	const size = 24<<20 + 4096
	if err := f.Allocate(size); err != nil {
		t.Fatal(err)
	}
	m, err := f.Map(size)
	if err != nil {
		t.Fatal(err)
	}
	b := m.Bytes()
	b[0], b[size-1] = 1, 2
	if !mapped(t, path) {
		t.Fatal("the file is not in /proc/self/maps while mapped")
	}
	if err := m.Unmap(); err != nil {
		t.Fatal(err)
	}
	if mapped(t, path) {
		t.Fatal("part of the file is still mapped after Unmap")
	}
}

func mapped(t *testing.T, path string) bool {
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Skip("no /proc/self/maps:", err)
	}
	return strings.Contains(string(maps), path)
}

// DataRanges finds what was written into a preallocated file and skips
// the rest; on other file systems it returns the whole range.
func TestDataRanges(t *testing.T) {
	path := filepath.Join(t.TempDir(), "seg")
	f, err := OS.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	const size = 16 << 20
	if err := f.Allocate(size); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("record"), 1<<20+10); err != nil {
		t.Fatal(err)
	}
	got := DataRanges(OS, path, 4096, size)
	if len(got) == 0 || got[0][0] > 1<<20+10 || got[len(got)-1][1] < 1<<20+16 {
		t.Fatalf("data ranges %v miss the bytes written at %d", got, 1<<20+10)
	}
	var covered int64
	for _, r := range got {
		if r[0] < 4096 || r[1] > size || r[0] >= r[1] {
			t.Fatalf("range %v outside [4096, %d)", r, size)
		}
		covered += r[1] - r[0]
	}
	if covered == size-4096 {
		t.Logf("the file system reports the whole preallocated file as data (%v)", got)
	} else if covered > 1<<20 {
		t.Fatalf("data ranges %v cover %d bytes for 6 written", got, covered)
	}
	mem := NewMem()
	mf, _ := mem.OpenFile("/x", os.O_RDWR|os.O_CREATE, 0o644)
	mf.Allocate(size)
	mf.Close()
	if got := DataRanges(mem, "/x", 10, 20); len(got) != 1 || got[0] != [2]int64{10, 20} {
		t.Fatalf("in memory: %v, want the whole range", got)
	}
}
