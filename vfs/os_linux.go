package vfs

import (
	"errors"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

func (o *osFile) Allocate(size int64) error {
	err := unix.Fallocate(int(o.f.Fd()), 0, 0, size)
	if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.ENOSYS) {
		// The file system cannot reserve blocks; fall back to a length change.
		return o.f.Truncate(size)
	}
	if err != nil {
		return &os.PathError{Op: "fallocate", Path: o.f.Name(), Err: err}
	}
	return nil
}

func (o *osFile) Sync() error {
	if err := unix.Fdatasync(int(o.f.Fd())); err != nil {
		return &os.PathError{Op: "fdatasync", Path: o.f.Name(), Err: err}
	}
	return nil
}

// keepFD keeps nothing: msync alone makes a mapping durable on Linux.
func (m *osMapping) keepFD(*os.File) error { return nil }

func (m *osMapping) Sync(off, n int) error {
	if n <= 0 {
		return nil
	}
	return m.msync(off, n)
}

// HugePages is Pager's, on the whole mapping.
func (m *osMapping) HugePages() {
	if len(m.m) > 0 {
		unix.Madvise(m.m, unix.MADV_HUGEPAGE)
	}
}

// Populate asks the kernel to fault in the pages of b for writing ahead of
// use (MADV_POPULATE_WRITE), so that writes into them take no page fault.
// It is a hint: it never changes a byte, so it may run while another
// goroutine writes into b, and where the kernel cannot do it (before Linux
// 5.14, or memory that is not a mapping) it does nothing.
func Populate(b []byte) { advise(b, unix.MADV_POPULATE_WRITE) }

// PopulateRead is Populate for reading (MADV_POPULATE_READ): it maps the
// pages of b in one call instead of a page fault each (read-only where the
// mapping tracks writes, as a shared file mapping does). Like Populate, a
// hint that changes no byte.
func PopulateRead(b []byte) { advise(b, unix.MADV_POPULATE_READ) }

// advise is madvise on the whole pages of b from its first page boundary
// on (madvise wants a page-aligned start), ignoring failure.
func advise(b []byte, advice int) {
	p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	if skip := int(-p & (PageSize - 1)); skip < len(b) {
		unix.Madvise(b[skip:], advice)
	}
}

// DataRanges returns the parts of [from, to) of the file name that may
// hold data, in order: on the real file system, what lseek's SEEK_DATA
// and SEEK_HOLE report (holes and never-written preallocated extents read
// as zeros, so a scan for data can skip them without reading them, which
// would fault in a page for each); elsewhere, or if the file system cannot
// tell, all of it.
func DataRanges(fs FS, name string, from, to int64) [][2]int64 {
	all := [][2]int64{{from, to}}
	if from >= to {
		return nil
	}
	f, err := fs.OpenFile(name, os.O_RDONLY, 0)
	if err != nil {
		return all
	}
	defer f.Close()
	of, ok := f.(*osFile)
	if !ok {
		return all
	}
	fd := int(of.f.Fd())
	var out [][2]int64
	for off := from; off < to; {
		data, err := unix.Seek(fd, off, unix.SEEK_DATA)
		if errors.Is(err, unix.ENXIO) {
			break // no data after off
		}
		if err != nil {
			return all
		}
		if data >= to {
			break
		}
		hole, err := unix.Seek(fd, data, unix.SEEK_HOLE)
		if err != nil {
			return all
		}
		out = append(out, [2]int64{data, min(hole, to)})
		off = hole
	}
	return out
}

// Resident is the share of b's pages that are in memory (mincore), 1 when
// it cannot tell.
func Resident(b []byte) float64 {
	if len(b) == 0 {
		return 1
	}
	addr := uintptr(unsafe.Pointer(&b[0]))
	lo := addr &^ (PageSize - 1)
	n := int((addr + uintptr(len(b)) - lo + PageSize - 1) / PageSize)
	vec := make([]byte, n)
	if _, _, errno := unix.Syscall(unix.SYS_MINCORE, lo, uintptr(n*PageSize), uintptr(unsafe.Pointer(&vec[0]))); errno != 0 {
		return 1
	}
	in := 0
	for _, v := range vec {
		in += int(v & 1)
	}
	return float64(in) / float64(n)
}

// osWritesReachMappings: one page cache behind write() and shared
// mappings, and msync(MS_SYNC) is fdatasync of the range (WritesReachMappings).
const osWritesReachMappings = true
