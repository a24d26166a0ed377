package mqlite

// Delayed-send benchmarks on real files:
//
//	go test -run '^$' -bench Delayed -benchtime 1000000x .

import (
	"context"
	"path/filepath"
	"runtime"
	"testing"
	"time"
)

// BenchmarkDelayedSend compares plain sends with sends at delay level 18
// (2 h, so they stay pending) and with deliver-at times a day away, and
// reports the Go heap growth per pending message once the timer service
// has bucketed them all.
func BenchmarkDelayedSend(b *testing.B) {
	for _, kind := range []string{"plain", "level", "deliver-at"} {
		b.Run(kind, func(b *testing.B) {
			s, err := Open(filepath.Join(b.TempDir(), "store"), &Options{SegmentSize: 256 << 20})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			s.CreateTopic("d", TopicConfig{Queues: 4})
			ctx := context.Background()
			m := &Message{Topic: "d", Body: make([]byte, 128)}
			switch kind {
			case "level":
				m.DelayLevel = 18
			case "deliver-at":
				m.DeliverAt = time.Now().Add(24 * time.Hour)
			}
			runtime.GC()
			var before runtime.MemStats
			runtime.ReadMemStats(&before)
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				if kind == "deliver-at" {
					m.DeliverAt = m.DeliverAt.Add(time.Millisecond)
				}
				if _, err := s.Put(ctx, m, i%4); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
			if err := s.WaitVisible(ctx); err != nil {
				b.Fatal(err)
			}
			if kind == "deliver-at" { // wait until the timer service bucketed everything
				for s.timerBacklog() > 0 {
					time.Sleep(10 * time.Millisecond) // a benchmark's wait for a background service, not a test's sync
				}
			}
			runtime.GC()
			var after runtime.MemStats
			runtime.ReadMemStats(&after)
			b.ReportMetric(float64(int64(after.HeapInuse)-int64(before.HeapInuse))/float64(b.N), "heapB/pending")
		})
	}
}
