package mqlite

import (
	"context"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
	"time"
)

// BenchmarkPutDedup: one goroutine, 128-byte FlushAsync Puts after 1 M
// of them, without a DedupID ("none") and with a new DedupID each while
// the window holds the 1 M IDs of the first ones ("window1M": the steady
// state, each send evicting the oldest). Two rows split the difference:
// "idoff" carries the IDs with the window off (the bytes of the ID), and
// "window1K" keeps only 1,024 IDs (a table that stays in the cache).
// "window1M" reports the heap the window holds per ID (B/id). The CPU time
// per op (user-ns/op plus sys-ns/op, every goroutine's) is steadier than
// ns/op on a shared machine.
func BenchmarkPutDedup(b *testing.B) {
	b.Run("none", func(b *testing.B) { benchPutDedup(b, false, 1<<20) })
	b.Run("idoff", func(b *testing.B) { benchPutDedup(b, true, -1) })
	b.Run("window1K", func(b *testing.B) { benchPutDedup(b, true, 1<<10) })
	b.Run("window1M", func(b *testing.B) { benchPutDedup(b, true, 1<<20) })
}

// benchPutDedup puts with DedupIDs when dedup, the window holding maxIDs
// of them (off when negative).
func benchPutDedup(b *testing.B, dedup bool, maxIDs int) {
	const window = 1 << 20 // puts before the timer
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	d := newDedupBench(b, dedup, maxIDs)
	defer d.s.Close()
	d.puts(b, window)
	runtime.GC()
	runtime.ReadMemStats(&after)
	perID := float64(after.HeapAlloc-before.HeapAlloc) / window
	b.ReportAllocs()
	b.ResetTimer()
	cost := startKernelCost()
	d.puts(b, b.N)
	b.StopTimer()
	cost.report(b)
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
	if dedup && maxIDs == window {
		b.ReportMetric(perID, "B/id")
	}
}

// BenchmarkPutDedupPaired measures window1M against none of
// BenchmarkPutDedup in one run: two stores filled with 1 M puts, then
// blocks of 500 puts, each followed by WaitVisible, alternating between
// them (and which goes first), so that both see the same load of a shared
// machine. It reports each side's wall time and CPU time (the process's
// user and system time, every goroutine's: the store that is not putting
// is idle) a put made visible, and their ratios, x and cpu-x.
func BenchmarkPutDedupPaired(b *testing.B) {
	plain, ids := newDedupBench(b, false, 1<<20), newDedupBench(b, true, 1<<20)
	defer plain.s.Close()
	defer ids.s.Close()
	plain.puts(b, 1<<20)
	ids.puts(b, 1<<20)
	var took [2]time.Duration
	var cpu [2]int64
	b.ResetTimer()
	for done, k := 0, 0; done < b.N; done, k = done+500, k+1 {
		n := min(500, b.N-done)
		for i, d := range [2]*dedupBench{plain, ids} {
			if k%2 == 1 {
				i, d = 1-i, [2]*dedupBench{plain, ids}[1-i]
			}
			start := time.Now()
			u0, s0 := cpuTimes()
			d.puts(b, n)
			u1, s1 := cpuTimes()
			took[i] += time.Since(start)
			cpu[i] += u1 - u0 + s1 - s0
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(took[0].Nanoseconds())/float64(b.N), "none-ns/op")
	b.ReportMetric(float64(took[1].Nanoseconds())/float64(b.N), "id-ns/op")
	b.ReportMetric(float64(took[1])/float64(took[0]), "x")
	b.ReportMetric(float64(cpu[0])/float64(b.N), "none-cpu-ns/op")
	b.ReportMetric(float64(cpu[1])/float64(b.N), "id-cpu-ns/op")
	b.ReportMetric(float64(cpu[1])/float64(cpu[0]), "cpu-x")
}

// dedupBench is a store BenchmarkPutDedup puts to, and its next ID.
type dedupBench struct {
	s    *Store
	m    *Message
	ids  bool
	next int
	buf  []byte
}

func newDedupBench(b *testing.B, ids bool, maxIDs int) *dedupBench {
	o := &Options{SegmentSize: 256 << 20, DedupMaxIDs: max(maxIDs, 1)}
	if maxIDs < 0 {
		o.DedupWindow = -1
	}
	s, err := Open(filepath.Join(b.TempDir(), "store"), o)
	if err != nil {
		b.Fatal(err)
	}
	return &dedupBench{s: s, m: &Message{Topic: "bench", Body: make([]byte, 128)}, ids: ids}
}

// puts puts n messages (a new DedupID each, if d.ids) and waits until
// they are visible.
func (d *dedupBench) puts(b *testing.B, n int) {
	ctx := context.Background()
	for range n {
		d.buf = strconv.AppendInt(append(d.buf[:0], "order-"...), int64(d.next), 10)
		key := string(d.buf)
		if d.ids {
			d.m.DedupID = key
		}
		if _, err := d.s.Put(ctx, d.m, d.next%4); err != nil {
			b.Fatal(err)
		}
		d.next++
	}
	if err := d.s.WaitVisible(ctx); err != nil {
		b.Fatal(err)
	}
}
