package mqlite

import "syscall"

// childProcAttr makes a child test process die with its parent
// (PR_SET_PDEATHSIG), so a failed test leaves no process behind.
func childProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
