package mqlite

import (
	"context"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
)

// BenchmarkPutDedup: one goroutine, 128-byte FlushAsync Puts after 1 M
// of them, without a DedupID ("none") and with a new DedupID each while
// the window holds the 1 M IDs of the first ones ("window1M": the steady
// state, each send evicting the oldest). "window1M" reports the heap the
// window holds per ID (B/id). The CPU time per op (user-ns/op plus
// sys-ns/op, every goroutine's) is steadier than ns/op on a shared machine.
func BenchmarkPutDedup(b *testing.B) {
	b.Run("none", func(b *testing.B) { benchPutDedup(b, false) })
	b.Run("window1M", func(b *testing.B) { benchPutDedup(b, true) })
}

func benchPutDedup(b *testing.B, dedup bool) {
	const window = 1 << 20
	s, err := Open(filepath.Join(b.TempDir(), "store"), &Options{SegmentSize: 256 << 20, DedupMaxIDs: window})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	m := &Message{Topic: "bench", Body: make([]byte, 128)}
	var buf []byte
	id := func(i int) string {
		buf = strconv.AppendInt(append(buf[:0], "order-"...), int64(i), 10)
		return string(buf)
	}
	next, perID := 0, 0.0
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for ; next < window; next++ {
		if dedup {
			m.DedupID = id(next)
		}
		if _, err := s.Put(ctx, m, next%4); err != nil {
			b.Fatal(err)
		}
	}
	if err := s.WaitVisible(ctx); err != nil {
		b.Fatal(err)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	perID = float64(after.HeapAlloc-before.HeapAlloc) / window
	b.ReportAllocs()
	b.ResetTimer()
	cost := startKernelCost()
	for i := range b.N {
		key := id(next + i)
		if dedup {
			m.DedupID = key
		}
		if _, err := s.Put(ctx, m, i%4); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	cost.report(b)
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
	if dedup {
		b.ReportMetric(perID, "B/id")
	}
}
