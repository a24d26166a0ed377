//go:build !linux

package bench

import (
	"errors"
	"os"
)

// The harness measures on Linux; elsewhere it builds, and the machine
// probes that need Linux's calls report that they cannot run.
var errLinuxOnly = errors.New("bench: this probe runs on Linux only")

// mapFile is Linux-only (fallocate and a shared mapping).
func mapFile(string, int64) ([]byte, func() error, error) { return nil, nil, errLinuxOnly }

// fdatasync is f.Sync where the system has no separate data sync.
func fdatasync(f *os.File) error { return f.Sync() }

// maxRSS is not known here.
func maxRSS(*os.ProcessState) int64 { return 0 }
