//go:build linux || darwin || freebsd

package vfs

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// statVolume is statfs(2) in bytes: size, free (to root), available (to
// others; a negative count, once the root reserve is in use, reads as 0).
func statVolume(dir string) (size, free, avail uint64, err error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, 0, 0, fmt.Errorf("statfs %s: %w", dir, err)
	}
	bs := blockSize(&st)
	return uint64(st.Blocks) * bs, uint64(st.Bfree) * bs, uint64(max(int64(st.Bavail), 0)) * bs, nil
}
