//go:build !amd64 && !arm64

package mqlite

import "unsafe"

// prefetch does nothing where the store has no prefetch instruction at
// hand: the lookups then wait for their lines as they come.
func prefetch(unsafe.Pointer) {}
