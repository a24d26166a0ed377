//go:build darwin || freebsd || openbsd || netbsd || dragonfly

package vfs

import "golang.org/x/sys/unix"

// Page advice on macOS and the BSDs: madvise where the advice exists,
// nothing where it does not (no huge-page advice, no populate). Each is a
// hint that never changes a byte.

// Drop is Dropper's, on the whole pages inside [off, off+n): MADV_DONTNEED,
// which these kernels may take as a mere hint.
func (m *osMapping) Drop(off, n int) {
	start := (off + PageSize - 1) &^ (PageSize - 1)
	end := min(off+n, len(m.m)) &^ (PageSize - 1)
	if start < end {
		unix.Madvise(m.m[start:end], unix.MADV_DONTNEED)
	}
}

// SmallPages is Pager's, on the whole mapping.
func (m *osMapping) SmallPages(on bool) {
	advice := unix.MADV_NORMAL
	if on {
		advice = unix.MADV_RANDOM
	}
	if len(m.m) > 0 {
		unix.Madvise(m.m, advice)
	}
}

// HugePages is Pager's: nothing here (no MADV_HUGEPAGE).
func (m *osMapping) HugePages() {}

// Populate would fault in the pages of b for writing ahead of use; these
// kernels have no MADV_POPULATE_WRITE, and touching the pages would race
// with the writers of b, so it does nothing: the pages fault in on first
// write.
func Populate([]byte) {}

// PopulateRead is Populate for reading: nothing here either.
func PopulateRead([]byte) {}

// DataRanges returns the parts of [from, to) of the file name that may
// hold data: all of it here (the scan for data reads the holes too).
func DataRanges(_ FS, _ string, from, to int64) [][2]int64 {
	if from >= to {
		return nil
	}
	return [][2]int64{{from, to}}
}

// Resident is the share of b's pages that are in memory: 1 here (it
// cannot tell).
func Resident([]byte) float64 { return 1 }
