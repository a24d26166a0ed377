//go:build linux

package vfs

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"unsafe"

	"github.com/mqlite/mqlite/internal/procio"
)

// Unmap releases a mapping completely: no piece of it stays in the
// address space.
func TestUnmap(t *testing.T) {
	const size = 24<<20 + 4096
	path, m := mapNew(t, OS, size)
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

// Drop takes the whole pages inside its range out of the page tables and
// nothing else, loses no byte (written-but-unsynced data is still synced
// and reads back), and only real shared mappings offer it: dropping the
// pages of memory that is not a file mapping would zero them.
func TestDrop(t *testing.T) {
	const pages = 16
	path, m := mapNew(t, OS, pages*PageSize)
	defer m.Unmap()
	b := m.Bytes()
	for i := range b {
		b[i] = byte(i*7 + i/PageSize)
	}
	want := append([]byte(nil), b...)
	if got := rssKB(t, path); got != pages*PageSize/1024 {
		t.Fatalf("Rss %d KiB after writing every page, want %d", got, pages*PageSize/1024)
	}
	d, ok := m.(Dropper)
	if !ok {
		t.Fatal("an OS mapping is not a Dropper")
	}
	// [PageSize/2, PageSize/2 + 10 pages) holds pages 1..9 whole.
	d.Drop(PageSize/2, 10*PageSize)
	if got, wantKB := rssKB(t, path), (pages-9)*PageSize/1024; got != wantKB {
		t.Fatalf("Rss %d KiB after dropping 9 pages, want %d", got, wantKB)
	}
	d.Drop(3*PageSize+1, PageSize) // no whole page inside: nothing happens
	d.Drop(pages*PageSize-10, 100) // past the end: clipped, nothing happens
	if got, wantKB := rssKB(t, path), (pages-9)*PageSize/1024; got != wantKB {
		t.Fatalf("Rss %d KiB after drops of no whole page, want %d", got, wantKB)
	}
	if !bytes.Equal(b, want) {
		t.Fatal("the mapping reads back other bytes after Drop")
	}
	if err := m.Sync(0, len(b)); err != nil {
		t.Fatal(err)
	}
	onDisk, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(onDisk, want) {
		t.Fatal("the file holds other bytes than were written before Drop")
	}
	if direct, ok := readDirect(t, path, len(want)); ok && !bytes.Equal(direct, want) {
		t.Fatal("the disk holds other bytes than were written before Drop and synced")
	}
	d.Drop(0, len(b))
	if got := rssKB(t, path); got != 0 {
		t.Fatalf("Rss %d KiB after dropping every page, want 0", got)
	}
	PopulateRead(b)
	if got := rssKB(t, path); got != pages*PageSize/1024 {
		t.Fatalf("Rss %d KiB after PopulateRead, want all %d back", got, pages*PageSize/1024)
	}
	if _, ok := mapInMem(t).(Dropper); ok {
		t.Fatal("an in-memory mapping offers Drop")
	}
}

// mapInMem is a page of a file of the in-memory file system, mapped.
func mapInMem(t *testing.T) Mapping {
	t.Helper()
	f, err := NewMem().OpenFile("seg", os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Allocate(PageSize); err != nil {
		t.Fatal(err)
	}
	m, err := f.Map(PageSize)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// rssKB is the resident size of the mapping of path in /proc/self/smaps.
func rssKB(t *testing.T, path string) int {
	v := smapsField(t, path, "Rss:")
	kb, err := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(v, "kB")))
	if err != nil {
		t.Fatalf("smaps Rss %q: %v", v, err)
	}
	return kb
}

// smapsField is procio.SmapsField, skipping the test where there is no smaps and
// failing it where path is not mapped.
func smapsField(t *testing.T, path, field string) string {
	t.Helper()
	if _, err := os.Stat("/proc/self/smaps"); err != nil {
		t.Skip("no /proc/self/smaps:", err)
	}
	v, ok := procio.SmapsField(path, field)
	if !ok {
		t.Fatalf("%s is not in /proc/self/smaps", path)
	}
	return v
}

// readDirect reads n bytes of path with O_DIRECT, from the disk rather than
// the page cache (the kernel first writes back the dirty pages of the
// range, so a page whose dirty state was lost reads as the preallocated
// zeros); false where the file system cannot.
func readDirect(t *testing.T, path string, n int) ([]byte, bool) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_DIRECT, 0)
	if err != nil {
		t.Logf("no O_DIRECT here: %v", err)
		return nil, false
	}
	defer f.Close()
	raw := make([]byte, n+PageSize)
	skip := int(-uintptr(unsafe.Pointer(&raw[0])) & (PageSize - 1))
	buf := raw[skip : skip+n]
	if _, err := f.ReadAt(buf, 0); err != nil {
		t.Logf("no O_DIRECT read here: %v", err)
		return nil, false
	}
	return buf, true
}

// mapNew creates a preallocated file of size bytes in a test directory of
// fsys and maps it; the file is closed (the mapping stays valid).
func mapNew(t testing.TB, fsys FS, size int) (string, Mapping) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "seg")
	f, err := fsys.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Allocate(int64(size)); err != nil {
		t.Fatal(err)
	}
	m, err := f.Map(size)
	if err != nil {
		t.Fatal(err)
	}
	return path, m
}

// BenchmarkFirstWrite measures the first write to each page of a new
// mapping of a preallocated file after nothing, after Populate, and after
// Populate and a read of one byte a page (the ns/op of the writes alone, a
// page each). On this VM Populate alone leaves most of the cost: the
// first access through a mapping costs ~2.4 µs a page even once the page
// is mapped, a read as much as a write (see docs/performance.md).
func BenchmarkFirstWrite(b *testing.B) {
	for _, c := range []struct {
		name string
		warm func(Mapping)
	}{
		{"cold", func(Mapping) {}},
		{"populate", func(m Mapping) { Populate(m.Bytes()) }},
		{"populate+read", func(m Mapping) { Populate(m.Bytes()); readPages(m.Bytes()) }},
	} {
		b.Run(c.name, func(b *testing.B) {
			_, m := mapNew(b, OS, b.N*PageSize)
			defer m.Unmap()
			c.warm(m)
			buf := m.Bytes()
			b.ResetTimer()
			for i := range b.N {
				buf[i*PageSize] = 1
			}
		})
	}
}

// readPages reads a byte of each page of b (page-aligned), returning their
// sum so that no read is dropped.
//
//go:noinline
func readPages(b []byte) (sum byte) {
	for i := 0; i < len(b); i += PageSize {
		sum += b[i]
	}
	return sum
}
