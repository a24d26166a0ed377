//go:build darwin || freebsd

package vfs

import "golang.org/x/sys/unix"

// blockSize is the unit of statfs's block counts.
func blockSize(st *unix.Statfs_t) uint64 { return uint64(st.Bsize) }
