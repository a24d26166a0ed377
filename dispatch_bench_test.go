package mqlite

// Dispatch benchmarks on real files:
//
//	go test -run '^$' -bench 'Dispatch|SendToVisible|KeyLookup' -benchtime 1000000x .

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mqlite/mqlite/consumequeue"
)

var (
	benchCheckpoint = flag.Duration("bench.checkpoint", 0, "CheckpointInterval for the dispatch benchmarks")
	benchFlush      = flag.Duration("bench.flush", 0, "FlushInterval for the dispatch benchmarks")
)

func benchStore(b *testing.B) *Store {
	b.Helper()
	o := &Options{SegmentSize: 256 << 20}
	if *benchCheckpoint > 0 {
		o.CheckpointInterval = *benchCheckpoint
	}
	if *benchFlush > 0 {
		o.FlushInterval, o.FlushThoroughInterval = *benchFlush, *benchFlush
	}
	s, err := Open(filepath.Join(b.TempDir(), "store"), o)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	if err := s.CreateTopic("bench", TopicConfig{Queues: 4}); err != nil {
		b.Fatal(err)
	}
	return s
}

// BenchmarkDispatchKeepsUp sends b.N 128-byte messages (FlushAsync) and
// reports the throughput including dispatch and how long the dispatcher
// needs, after the last send returns, to make everything readable.
func BenchmarkDispatchKeepsUp(b *testing.B) {
	s := benchStore(b)
	ctx := context.Background()
	m := &Message{Topic: "bench", Body: make([]byte, 128)}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		if _, err := s.Put(ctx, m, i%4); err != nil {
			b.Fatal(err)
		}
	}
	last := time.Now()
	if err := s.WaitVisible(ctx); err != nil {
		b.Fatal(err)
	}
	drain := time.Since(last)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
	b.ReportMetric(float64(drain.Microseconds())/1e3, "drain-ms")
}

// BenchmarkSendToVisible paces one sender at 100,000 msgs/s (bursts of
// 100 every millisecond) and measures, per message, the time from Put
// returning to its ConsumeQueue entry being readable: a reader blocked on
// the queue (as ReadQueue blocks, without decoding the messages) takes
// the entries as they become visible (0 when it got one before its Put
// returned).
func BenchmarkSendToVisible(b *testing.B) {
	s := benchStore(b)
	ctx := context.Background()
	q, err := s.cqueue("bench", 0)
	if err != nil {
		b.Fatal(err)
	}
	returned := make([]atomic.Int64, b.N)
	lat := make([]time.Duration, 0, b.N)
	done := make(chan struct{})
	go func() {
		defer close(done)
		entries := make([]consumequeue.Entry, 256)
		for off := int64(0); off < int64(b.N); {
			n, err := s.readVisible(ctx, q, off, entries)
			if err != nil {
				b.Error(err)
				return
			}
			now := time.Now().UnixNano()
			for range n {
				if r := returned[off].Load(); r != 0 {
					lat = append(lat, time.Duration(max(now-r, 0)))
				} else {
					lat = append(lat, 0) // read before Put returned
				}
				off++
			}
		}
	}()
	m := &Message{Topic: "bench", Body: make([]byte, 128)}
	start := time.Now()
	b.ResetTimer()
	for i := range b.N {
		if i%100 == 0 { // 100 per millisecond
			time.Sleep(time.Until(start.Add(time.Duration(i/100) * time.Millisecond)))
		}
		if _, err := s.Put(ctx, m, 0); err != nil {
			b.Fatal(err)
		}
		returned[i].Store(time.Now().UnixNano())
	}
	<-done
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds())/1e3, "p50-us")
	b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds())/1e3, "p99-us")
	b.ReportMetric(float64(lat[len(lat)*999/1000].Nanoseconds())/1e3, "p99.9-us")
}

// BenchmarkKeyLookup indexes 1,000,000 messages with one key each, then
// looks up random keys (b.N lookups).
func BenchmarkKeyLookup(b *testing.B) {
	s := benchStore(b)
	ctx := context.Background()
	const n = 1_000_000
	batch := make([]*Message, 100)
	for i := 0; i < n; i += len(batch) {
		for j := range batch {
			batch[j] = &Message{Topic: "bench", Keys: []string{fmt.Sprintf("k%d", i+j)}, Body: make([]byte, 128)}
		}
		if _, err := s.PutBatch(ctx, batch, (i/len(batch))%4); err != nil {
			b.Fatal(err)
		}
	}
	if err := s.WaitVisible(ctx); err != nil {
		b.Fatal(err)
	}
	from, to := time.Now().Add(-time.Hour), time.Now().Add(time.Hour)
	rng := rand.New(rand.NewPCG(1, 2))
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		hits, err := s.MessagesByKey("bench", fmt.Sprintf("k%d", rng.IntN(n)), from, to, 4)
		if err != nil || len(hits) != 1 {
			b.Fatalf("%d hits, %v", len(hits), err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N), "us/lookup")
}

// BenchmarkRedispatch measures the dispatcher alone: it builds a store of
// 1,000,000 128-byte messages (each with a unique key, as every send has),
// then per iteration deletes consumequeue/ and index/ and reopens, which
// re-dispatches the whole CommitLog on the opening goroutine (the same
// code the dispatcher runs live). Reported per message.
func BenchmarkRedispatch(b *testing.B) {
	const n = 1_000_000
	dir := filepath.Join(b.TempDir(), "store")
	o := &Options{SegmentSize: 256 << 20, NoWarm: true}
	s, err := Open(dir, o)
	if err != nil {
		b.Fatal(err)
	}
	if err := s.CreateTopic("bench", TopicConfig{Queues: 4}); err != nil {
		b.Fatal(err)
	}
	batch := make([]*Message, 100)
	for i := range batch {
		batch[i] = &Message{Topic: "bench", Body: make([]byte, 128)}
	}
	for i := 0; i < n; i += len(batch) {
		if _, err := s.PutBatch(context.Background(), batch, (i/len(batch))%4); err != nil {
			b.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		if err := errors.Join(os.RemoveAll(filepath.Join(dir, "consumequeue")), os.RemoveAll(filepath.Join(dir, "index"))); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		s, err := Open(dir, o)
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if got := s.Recovery().Redispatched; got != s.log.WrotePosition() {
			b.Fatalf("re-dispatched %d bytes, want %d", got, s.log.WrotePosition())
		}
		if err := s.Close(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/msg")
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
}

// BenchmarkPutWithDispatch is issue 3's "throughput with dispatch against
// append-only, in the same run": one producer Puts 128-byte messages
// (FlushAsync) with the dispatcher running, and with it held (the
// benchmark holds the lock the dispatcher takes to publish its progress,
// so it stops after its first catch-up). Compare the two msgs/s figures.
func BenchmarkPutWithDispatch(b *testing.B) {
	for _, mode := range []string{"append-only", "with-dispatch"} {
		b.Run(mode, func(b *testing.B) {
			s := benchStore(b)
			if mode == "append-only" {
				s.disp.mu.Lock()
			}
			ctx := context.Background()
			m := &Message{Topic: "bench", Body: make([]byte, 128)}
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				if _, err := s.Put(ctx, m, i%4); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
			if mode == "append-only" {
				s.disp.mu.Unlock()
			}
		})
	}
}
