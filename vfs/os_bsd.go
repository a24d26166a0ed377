//go:build freebsd || openbsd || netbsd || dragonfly

package vfs

import "os"

// On the BSDs fsync(2) and msync(MS_SYNC) make data durable.

// Allocate sets the length with ftruncate: the blocks are not reserved, so
// a full disk shows when the pages are written back, not here.
func (o *osFile) Allocate(size int64) error {
	return o.grow(size)
}

// Sync is fsync(2).
func (o *osFile) Sync() error { return o.f.Sync() }

// keepFD keeps nothing: msync alone makes a mapping durable here.
func (m *osMapping) keepFD(*os.File) error { return nil }

// Sync is msync(MS_SYNC) of the pages holding [off, off+n).
func (m *osMapping) Sync(off, n int) error {
	if n <= 0 {
		return nil
	}
	return m.msync(off, n)
}
