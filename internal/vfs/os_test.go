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
