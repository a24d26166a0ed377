//go:build !amd64 && !arm64

package mqlite

// prefetchSlot does nothing where the store has no prefetch instruction
// at hand: the lookup then waits for the slot as it comes.
func prefetchSlot(*idSlot) {}
