//go:build !linux

package vfs

// Off Linux there are no huge-page advice, no populate, no hole scan and
// no residency probe: each of these hints does nothing (they never change
// a byte). Drop and SmallPages are madvise on the other Unixes
// (os_unix.go) and nothing on Windows.

// HugePages is Pager's: nothing here (no MADV_HUGEPAGE; Windows' large
// pages need a privilege and cannot back a file view).
func (m *osMapping) HugePages() {}

// Populate would fault in the pages of b for writing ahead of use; these
// systems have no MADV_POPULATE_WRITE, and touching the pages would race
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

// osWritesReachMappings: not relied on off Linux (WritesReachMappings).
const osWritesReachMappings = false
