//go:build openbsd || netbsd || dragonfly

package vfs

import "errors"

// statVolume is not wired on these systems: the store then has no disk
// ratio to act on (retention by age and size still runs).
func statVolume(dir string) (size, free, avail uint64, err error) {
	return 0, 0, 0, errors.New("mqlite/vfs: volume usage not supported on this system: " + dir)
}
