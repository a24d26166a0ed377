package mqlite

import (
	"os"
	rtm "runtime/metrics"
	"strconv"
	"strings"
	"testing"
)

// kernelCost measures the CPU a benchmark costs, all goroutines together
// (user-ns/op: on a shared machine steadier than the wall time), the
// collector's share of it, and what it costs the kernel: the process's
// system CPU time per op (page faults, msync, madvise, unlink) and the TLB
// shootdowns the machine took per 1,000 ops (Linux's /proc/interrupts,
// every process's, so only a quiet machine gives a clean count). Writing
// back a page that is mapped writable costs one shootdown.
type kernelCost struct {
	user, sys  int64 // ns
	shootdowns int64
	gc         float64
	cycles     uint64
}

func startKernelCost() kernelCost {
	user, sys := cpuTimes()
	g, c := gcCost()
	return kernelCost{user, sys, shootdowns(), g, c}
}

// report adds user-ns/op, sys-ns/op, gc-ns/op (the collector's CPU),
// gc-cycles and shootdowns/kop to b's results.
func (k kernelCost) report(b *testing.B) {
	end := startKernelCost()
	n := float64(b.N)
	b.ReportMetric(float64(end.user-k.user)/n, "user-ns/op")
	b.ReportMetric(float64(end.sys-k.sys)/n, "sys-ns/op")
	b.ReportMetric((end.gc-k.gc)*1e9/n, "gc-ns/op")
	b.ReportMetric(float64(end.cycles-k.cycles), "gc-cycles")
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

// gcCost is the collector's CPU time so far (seconds, all goroutines) and
// its count of cycles.
func gcCost() (float64, uint64) {
	s := []rtm.Sample{{Name: "/cpu/classes/gc/total:cpu-seconds"}, {Name: "/gc/cycles/total:gc-cycles"}}
	rtm.Read(s)
	return s[0].Value.Float64(), s[1].Value.Uint64()
}
