//go:build unix

package mqlite

import "syscall"

// cpuTimes is this process's user and system CPU time so far, in ns
// (getrusage).
func cpuTimes() (user, sys int64) {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return syscall.TimevalToNsec(ru.Utime), syscall.TimevalToNsec(ru.Stime)
}
