//go:build !linux

package mqlite

import "io/fs"

// blocksOf is the allocated size where the platform does not tell it
// portably: the apparent size, an upper bound for preallocated files.
func blocksOf(fi fs.FileInfo) int64 { return fi.Size() }
