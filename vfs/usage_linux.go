package vfs

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// statVolume is statfs(2) in bytes: size, free (to root), available (to
// others). Block counts are in fragment units (f_frsize), as df counts.
func statVolume(dir string) (size, free, avail uint64, err error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, 0, 0, fmt.Errorf("statfs %s: %w", dir, err)
	}
	bs := uint64(st.Frsize)
	if bs == 0 {
		bs = uint64(st.Bsize)
	}
	return st.Blocks * bs, st.Bfree * bs, st.Bavail * bs, nil
}
