//go:build linux

package mqlite

import (
	"io/fs"
	"syscall"
)

// blocksOf is the bytes allocated to a file (st_blocks counts 512-byte
// units).
func blocksOf(fi fs.FileInfo) int64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Blocks * 512
	}
	return 0
}
