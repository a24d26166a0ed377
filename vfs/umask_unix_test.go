//go:build unix

package vfs

import (
	"os"
	"syscall"
)

// umask returns the process umask (setting it back at once).
func umask() os.FileMode {
	old := syscall.Umask(0)
	syscall.Umask(old)
	return os.FileMode(old)
}
