package commitlog

// Retention benchmarks: the cost of deletions for readers and appenders.
//
//	go test -run '^$' -bench 'ReadWhileDeleting' ./commitlog
//	go test -run '^$' -bench 'AppendLatencyDuringDelete' -benchtime 1000000x ./commitlog

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkReadWhileDeleting measures Log.Read of a recent 1 KiB record
// while, in the background, nothing happens (idle), an appender writes
// 100 MB/s (appending), or the same appender also deletes all but the
// newest three 4 MiB segments, 25 a second (deleting). Reads of a record
// deleted meanwhile are counted as "gone/op".
func BenchmarkReadWhileDeleting(b *testing.B) {
	const seg, size, rate = 4 << 20, 1024, 100 << 20 // bytes per second
	for _, mode := range []string{"idle", "appending", "deleting"} {
		for _, g := range benchGoroutines {
			b.Run(fmt.Sprintf("%s/%dB/g%d", mode, size, g), func(b *testing.B) {
				dir := filepath.Join(b.TempDir(), "cl")
				l, err := Open(Options{Dir: dir, SegmentSize: seg, RecoverFrom: -1})
				if err != nil {
					b.Fatal(err)
				}
				defer os.RemoveAll(dir)
				a := &benchAppender{body: payload(size, size)}
				var ring [2048]atomic.Int64 // offsets of recent records
				for i := range ring {
					off, err := l.Append(a)
					if err != nil {
						b.Fatal(err)
					}
					ring[i].Store(off)
				}
				stop := make(chan struct{})
				var bg sync.WaitGroup
				var deleted atomic.Int64
				if mode != "idle" {
					bg.Go(func() {
						a := &benchAppender{body: payload(size, size)}
						start := time.Now()
						for i := 0; ; i++ {
							select {
							case <-stop:
								return
							default:
							}
							off, err := l.Append(a)
							if err != nil {
								b.Error(err)
								return
							}
							ring[i%len(ring)].Store(off)
							if i%1024 != 0 {
								continue
							}
							if mode == "deleting" {
								rep, err := l.DeleteBefore(max(0, off-3*seg))
								if err != nil {
									b.Error(err)
									return
								}
								deleted.Add(int64(rep.Segments))
							}
							// Pace the load, so that it costs the same CPU in both modes.
							time.Sleep(time.Until(start.Add(time.Duration(i) * size * time.Second / rate)))
						}
					})
				}
				var gone atomic.Int64
				var seed atomic.Uint64
				b.ReportAllocs()
				b.ResetTimer()
				runSplit(b, g, func() func() {
					r := rand.New(rand.NewPCG(seed.Add(1), 2))
					n := 0
					fn := func(r Record) error { n += len(r.Payload); return nil }
					return func() {
						off := ring[r.IntN(len(ring))].Load()
						err := l.Read(off, fn)
						if errors.Is(err, ErrNotFound) && off < l.MinOffset() {
							gone.Add(1) // deleted since we took its offset
						} else if err != nil {
							b.Error(err)
						}
					}
				})
				b.StopTimer()
				close(stop)
				bg.Wait()
				reportRate(b, size)
				b.ReportMetric(float64(gone.Load())/float64(b.N), "gone/op")
				b.ReportMetric(float64(deleted.Load()), "segs-deleted")
				if err := l.Close(); err != nil {
					b.Fatal(err)
				}
			})
		}
	}
}

// BenchmarkAppendLatencyDuringDelete appends 1 KiB records to real files
// with 64 MiB segments, without deletions (idle) and while another goroutine
// deletes all but the newest two segments each time the log rolls
// (deleting), and reports the slowest Append: max-µs of all,
// max-noroll-µs of those that did not move to a new segment (which may wait
// for the allocator), max-during-delete-µs of those that overlapped a
// DeleteBefore. Run it with a fixed count (-benchtime 1000000x): idle keeps
// every byte on disk. TMPDIR=/dev/shm takes the disk out of the numbers.
func BenchmarkAppendLatencyDuringDelete(b *testing.B) {
	const seg, size = 64 << 20, 1024
	for _, mode := range []string{"idle", "deleting"} {
		b.Run(fmt.Sprintf("%s/%dB", mode, size), func(b *testing.B) {
			dir := filepath.Join(b.TempDir(), "cl")
			l, err := Open(Options{Dir: dir, SegmentSize: seg, RecoverFrom: -1})
			if err != nil {
				b.Fatal(err)
			}
			defer os.RemoveAll(dir)
			a := &benchAppender{body: payload(size, size)}
			rolled := make(chan int64, 1)
			var bg sync.WaitGroup
			var deleted atomic.Int64
			var maxDelete atomic.Int64
			var busy atomic.Bool // a DeleteBefore is running
			if mode == "deleting" {
				bg.Go(func() {
					for end := range rolled {
						t0 := time.Now()
						busy.Store(true)
						rep, err := l.DeleteBefore(max(0, end-2*seg))
						busy.Store(false)
						if err != nil {
							b.Error(err)
							return
						}
						if d := int64(time.Since(t0)); d > maxDelete.Load() {
							maxDelete.Store(d)
						}
						deleted.Add(int64(rep.Segments))
					}
				})
			}
			var worst, worstInSeg, worstDuring time.Duration
			var over1ms int
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				during := busy.Load()
				t0 := time.Now()
				off, err := l.Append(a)
				d := time.Since(t0)
				if err != nil {
					b.Fatal(err)
				}
				worst = max(worst, d)
				if during || busy.Load() {
					worstDuring = max(worstDuring, d)
				}
				if d > time.Millisecond {
					over1ms++
				}
				if off%seg != 0 {
					worstInSeg = max(worstInSeg, d)
				} else if mode == "deleting" {
					select {
					case rolled <- off:
					default:
					}
				}
			}
			b.StopTimer()
			close(rolled)
			bg.Wait()
			reportRate(b, size)
			b.ReportMetric(float64(worst.Microseconds()), "max-µs")
			b.ReportMetric(float64(worstInSeg.Microseconds()), "max-noroll-µs")
			b.ReportMetric(float64(worstDuring.Microseconds()), "max-during-delete-µs")
			b.ReportMetric(float64(over1ms), "over-1ms")
			b.ReportMetric(float64(deleted.Load()), "segs-deleted")
			b.ReportMetric(float64(time.Duration(maxDelete.Load()).Microseconds()), "max-delete-µs")
			if err := l.Close(); err != nil {
				b.Fatal(err)
			}
		})
	}
}
