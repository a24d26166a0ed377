package vfs

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// statVolume is statfs(2) in bytes: size, free (to root), available (to
// others; negative, read as 0, once the root reserve is in use).
func statVolume(dir string) (size, free, avail uint64, err error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, 0, 0, fmt.Errorf("statfs %s: %w", dir, err)
	}
	bs := st.Bsize
	return st.Blocks * bs, st.Bfree * bs, uint64(max(st.Bavail, 0)) * bs, nil
}
