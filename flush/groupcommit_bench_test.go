package flush

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// sleepLog is a Flusher whose sync takes d of wall time (none if d is 0)
// and covers what was written when it began. It spins: time.Sleep of
// less than a millisecond lasts a millisecond or more in an otherwise
// idle process (the runtime's poller waits in whole milliseconds), where
// a real fdatasync returns when the disk does.
type sleepLog struct {
	d              time.Duration
	wrote, flushed atomic.Int64
	calls          atomic.Int64
}

func (f *sleepLog) WrotePosition() int64   { return f.wrote.Load() }
func (f *sleepLog) FlushedPosition() int64 { return f.flushed.Load() }
func (f *sleepLog) Flush() (int64, error) {
	f.calls.Add(1)
	to := f.wrote.Load()
	for start := time.Now(); time.Since(start) < f.d; {
	}
	f.flushed.Store(to)
	return to, nil
}

// BenchmarkGroupCommitRound: g senders that each append and Wait, again as
// soon as they are released, over a sync of d (spinning, so it takes a
// core of the two here from the senders). ns/round beyond d is the
// group commit's own cost per round (waking the waiters, the gather, the
// senders' registrations); acks/round is the group size. b.N counts acks.
//
//	go test -run '^$' -bench GroupCommitRound -benchtime 2s ./flush/
func BenchmarkGroupCommitRound(b *testing.B) {
	for _, d := range []time.Duration{0, 150 * time.Microsecond} {
		for _, g := range []int{1, 16} {
			b.Run(fmt.Sprintf("sync%s/g%d", d, g), func(b *testing.B) { benchRound(b, d, g) })
		}
	}
}

func benchRound(b *testing.B, d time.Duration, g int) {
	f := &sleepLog{d: d}
	gc := NewGroupCommit(f, GroupCommitOptions{})
	defer gc.Close()
	b.ReportAllocs()
	b.ResetTimer()
	var wg sync.WaitGroup
	for i := range g {
		n := b.N / g
		if i < b.N%g {
			n++
		}
		wg.Go(func() {
			for range n {
				if err := gc.Wait(context.Background(), f.wrote.Add(1)); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	rounds := max(f.calls.Load(), 1)
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(rounds), "ns/round")
	b.ReportMetric(float64(b.N)/float64(rounds), "acks/round")
}
