//go:build linux

package bench

import (
	"os"
	"syscall"
)

// mapFile creates a file of n bytes (fallocated) and maps it.
func mapFile(path string, n int64) ([]byte, func() error, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	if err := syscall.Fallocate(int(f.Fd()), 0, 0, n); err != nil {
		return nil, nil, err
	}
	b, err := syscall.Mmap(int(f.Fd()), 0, int(n), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		return nil, nil, err
	}
	return b, func() error { return syscall.Munmap(b) }, nil
}

// fdatasync syncs f's data (and no metadata it does not need).
func fdatasync(f *os.File) error { return syscall.Fdatasync(int(f.Fd())) }

// maxRSS is a finished child's peak resident set in bytes.
func maxRSS(ps *os.ProcessState) int64 {
	if ru, ok := ps.SysUsage().(*syscall.Rusage); ok {
		return ru.Maxrss << 10
	}
	return 0
}
