//go:build linux

package vfs

import (
	"bytes"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/mqlite/mqlite/internal/procio"
)

// TestSmallPages checks that SmallPages turns read-ahead off and on for
// the mapping (the "rr" flag in smaps), changes no byte, and that with it
// a sync of a small write in the middle of a pre-faulted mapping writes
// back a page or so, not a large folio (on Linux 6.18 here, without it
// each such sync wrote back about 1 MiB).
func TestSmallPages(t *testing.T) {
	const size = 64 << 20
	path, m := mapNew(t, OS, size)
	defer m.Unmap()
	p, ok := m.(Pager)
	if !ok {
		t.Fatal("an OS mapping is not a Pager")
	}
	b := m.Bytes()
	copy(b, "head")
	flags := func() []string { return strings.Fields(smapsField(t, path, "VmFlags:")) }
	if slices.Contains(flags(), "rr") {
		t.Fatalf("a new mapping has read-ahead off: %v", flags())
	}
	p.SmallPages(true)
	if !slices.Contains(flags(), "rr") {
		t.Fatalf("SmallPages(true) left read-ahead on: %v", flags())
	}
	Populate(b)
	rec := bytes.Repeat([]byte{0xA5}, 200)
	w0, ok := procio.WrittenBytes()
	if !ok {
		t.Skip("no write_bytes in /proc/self/io")
	}
	const syncs = 20
	for i := range syncs {
		off := size/2 + i*len(rec)
		copy(b[off:], rec)
		if err := m.Sync(off, len(rec)); err != nil {
			t.Fatal(err)
		}
	}
	w1, _ := procio.WrittenBytes()
	if per := (w1 - w0) / syncs; per > 64<<10 {
		t.Fatalf("with small pages a sync of 200 bytes wrote %d bytes back, want at most 64 KiB", per)
	}
	p.SmallPages(false)
	if slices.Contains(flags(), "rr") {
		t.Fatalf("SmallPages(false) left read-ahead off: %v", flags())
	}
	if string(b[:4]) != "head" || !bytes.Equal(b[size/2:size/2+len(rec)], rec) {
		t.Fatal("the mapping reads back other bytes after SmallPages")
	}
	if err := m.Sync(0, size); err != nil {
		t.Fatal(err)
	}
	onDisk, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(onDisk, b) {
		t.Fatal("the file holds other bytes than the mapping")
	}
	if _, ok := mapInMem(t).(Pager); ok {
		t.Fatal("an in-memory mapping offers SmallPages")
	}
}

// TestHugePages checks that HugePages marks the mapping for huge pages
// (the "hg" flag in smaps) and changes no byte, where the kernel offers
// transparent huge pages at all.
func TestHugePages(t *testing.T) {
	if !procio.HugePagesOffered() {
		t.Skip("no transparent huge pages here")
	}
	const size = 4 << 20
	path, m := mapNew(t, OS, size)
	defer m.Unmap()
	b := m.Bytes()
	copy(b[size-4:], "tail")
	m.(Pager).HugePages()
	if flags := strings.Fields(smapsField(t, path, "VmFlags:")); !slices.Contains(flags, "hg") {
		t.Fatalf("HugePages left the mapping without huge pages: %v", flags)
	}
	if string(b[size-4:]) != "tail" {
		t.Fatal("the mapping reads back other bytes after HugePages")
	}
}
