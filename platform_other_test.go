//go:build !linux

package mqlite

import "syscall"

// childProcAttr sets nothing where there is no parent-death signal: the
// test kills its children itself.
func childProcAttr() *syscall.SysProcAttr { return nil }
