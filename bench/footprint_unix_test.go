//go:build unix

package bench

import (
	"io/fs"
	"syscall"
)

// allocatedBytes is the disk space allocated to a file (st_blocks).
func allocatedBytes(fi fs.FileInfo) int64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return int64(st.Blocks) * 512
	}
	return 0
}
