package mqlite

import "syscall"

// cpuTimes is this process's user and system CPU time so far, in ns
// (GetProcessTimes).
func cpuTimes() (user, sys int64) {
	var c, e, k, u syscall.Filetime
	h, err := syscall.GetCurrentProcess()
	if err != nil || syscall.GetProcessTimes(h, &c, &e, &k, &u) != nil {
		return 0, 0
	}
	// Filetime counts 100 ns; Nanoseconds would count from 1601.
	ticks := func(f syscall.Filetime) int64 { return (int64(f.HighDateTime)<<32 | int64(f.LowDateTime)) * 100 }
	return ticks(u), ticks(k)
}
