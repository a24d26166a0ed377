package vfs

import (
	"fmt"

	"golang.org/x/sys/windows"
)

// statVolume is GetDiskFreeSpaceEx in bytes: size, free, and available to
// this user (less than free under a quota).
func statVolume(dir string) (size, free, avail uint64, err error) {
	p, err := windows.UTF16PtrFromString(dir)
	if err != nil {
		return 0, 0, 0, fmt.Errorf("GetDiskFreeSpaceEx %s: %w", dir, err)
	}
	if err := windows.GetDiskFreeSpaceEx(p, &avail, &size, &free); err != nil {
		return 0, 0, 0, fmt.Errorf("GetDiskFreeSpaceEx %s: %w", dir, err)
	}
	return size, free, avail, nil
}
