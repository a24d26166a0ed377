//go:build !unix

package vfs

import "os"

// umask is 0 where there is none.
func umask() os.FileMode { return 0 }
