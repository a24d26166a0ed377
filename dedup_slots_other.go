//go:build !linux

package mqlite

// allocSlots returns n zeroed slots from the Go heap (see the Linux
// version for why the slots of a large table get their own mapping there).
func allocSlots(n int) ([]idSlot, []byte) { return make([]idSlot, n), nil }

// freeSlots has nothing to release.
func freeSlots([]byte) {}
