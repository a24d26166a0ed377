package vfs

import "golang.org/x/sys/unix"

// blockSize is the unit of statfs's block counts: the fragment size
// (f_frsize), as df counts, or the block size where that is 0.
func blockSize(st *unix.Statfs_t) uint64 {
	if st.Frsize > 0 {
		return uint64(st.Frsize)
	}
	return uint64(st.Bsize)
}
