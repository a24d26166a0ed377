//go:build amd64 || arm64

package mqlite

// prefetchSlot asks the CPU to bring the cache line of *p into its cache
// without waiting for it (PREFETCHT0, PRFM PLDL1KEEP). It reads nothing
// the program sees, so it needs no lock, and it never faults.
//
//go:noescape
func prefetchSlot(p *idSlot)
