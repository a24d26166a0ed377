package mqlite

import (
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// kernelCost measures the CPU a benchmark costs, all goroutines together
// (user-ns/op: on a shared machine steadier than the wall time), and what it
// costs the kernel: the process's system CPU time per op (page faults,
// msync, madvise, unlink) and the TLB shootdowns the machine took per 1,000
// ops (Linux's /proc/interrupts, every process's, so only a quiet machine
// gives a clean count). Writing back a page that is mapped writable costs
// one shootdown.
type kernelCost struct {
	user, sys  int64 // ns
	shootdowns int64
}

func startKernelCost() kernelCost {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return kernelCost{syscall.TimevalToNsec(ru.Utime), syscall.TimevalToNsec(ru.Stime), shootdowns()}
}

// report adds user-ns/op, sys-ns/op and shootdowns/kop to b's results.
func (k kernelCost) report(b *testing.B) {
	end := startKernelCost()
	n := float64(b.N)
	b.ReportMetric(float64(end.user-k.user)/n, "user-ns/op")
	b.ReportMetric(float64(end.sys-k.sys)/n, "sys-ns/op")
	if end.shootdowns > 0 {
		b.ReportMetric(float64(end.shootdowns-k.shootdowns)/n*1000, "shootdowns/kop")
	}
}

// shootdowns sums the "TLB shootdowns" row of /proc/interrupts (0 where
// there is none).
func shootdowns() int64 {
	b, err := os.ReadFile("/proc/interrupts")
	if err != nil {
		return 0
	}
	var n int64
	for line := range strings.SplitSeq(string(b), "\n") {
		if !strings.Contains(line, "TLB shootdowns") {
			continue
		}
		for _, f := range strings.Fields(line)[1:] {
			v, err := strconv.ParseInt(f, 10, 64)
			if err != nil {
				break
			}
			n += v
		}
	}
	return n
}
