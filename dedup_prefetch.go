//go:build amd64 || arm64

package mqlite

import "unsafe"

// prefetch asks the CPU to bring the cache line at p into its cache
// without waiting for it (PREFETCHT0, PRFM PLDL1KEEP). It reads nothing
// the program sees, so it needs no lock, and it never faults.
//
//go:noescape
func prefetch(p unsafe.Pointer)
