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
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mqlite/mqlite/consumequeue"
)

var (
	benchCheckpoint = flag.Duration("bench.checkpoint", 0, "CheckpointInterval for the dispatch benchmarks")
	benchFlush      = flag.Duration("bench.flush", 0, "FlushInterval for the dispatch benchmarks")
)

// benchStore opens a store on disk (256 MiB segments, the -bench.*
// intervals) with the four-queue topic "bench".
func benchStore(b *testing.B) *Store { return benchStoreTopic(b, "bench", 4) }

// benchStoreTopic is benchStore with topic name of queues queues.
func benchStoreTopic(b *testing.B, name string, queues int) *Store {
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
	if err := s.CreateTopic(name, TopicConfig{Queues: queues}); err != nil {
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
	putEach(b, s)
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
// returning to its ConsumeQueue entry being readable, twice:
//
//   - visible-*: until the dispatcher publishes the entry (0 if it did so
//     before Put returned), seen through a test hook on its progress;
//   - reader-*: until a reader blocked on the queue (as ReadQueue blocks,
//     without decoding the messages) has taken it, which adds the wake-up
//     of that goroutine.
func BenchmarkSendToVisible(b *testing.B) {
	s := benchStore(b)
	ctx := context.Background()
	q, err := s.cqueue("bench", 0)
	if err != nil {
		b.Fatal(err)
	}
	type mark struct{ pos, ns int64 }
	var (
		pubMu sync.Mutex
		pubs  []mark // dispatched position and when, in order
	)
	s.disp.mu.Lock()
	s.disp.onPublish = func(pos int64) {
		now := time.Now().UnixNano()
		pubMu.Lock()
		pubs = append(pubs, mark{pos, now})
		pubMu.Unlock()
	}
	s.disp.mu.Unlock()
	returned := make([]atomic.Int64, b.N)
	ends := make([]int64, b.N)
	readLat := make([]time.Duration, 0, b.N)
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
					readLat = append(readLat, time.Duration(max(now-r, 0)))
				} else {
					readLat = append(readLat, 0) // read before Put returned
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
		res, err := s.Put(ctx, m, 0)
		if err != nil {
			b.Fatal(err)
		}
		returned[i].Store(time.Now().UnixNano())
		ends[i] = res.End()
	}
	<-done
	b.StopTimer()
	s.disp.mu.Lock()
	s.disp.onPublish = nil
	s.disp.mu.Unlock()
	visLat := make([]time.Duration, b.N)
	p := 0
	for i, end := range ends {
		for pubs[p].pos < end {
			p++
		}
		visLat[i] = time.Duration(max(pubs[p].ns-returned[i].Load(), 0))
	}
	reportPercentiles(b, "visible", visLat)
	reportPercentiles(b, "reader", readLat)
}

// reportPercentiles reports p50, p99 and p99.9 of lat in microseconds.
func reportPercentiles(b *testing.B, name string, lat []time.Duration) {
	slices.Sort(lat)
	for _, p := range []struct {
		unit string
		per  int
	}{{"p50", 500}, {"p99", 990}, {"p99.9", 999}} {
		b.ReportMetric(float64(lat[len(lat)*p.per/1000].Nanoseconds())/1e3, name+"-"+p.unit+"-us")
	}
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
// benchmark holds the lock whoever dispatches takes, so neither the loop
// nor a sender dispatches anything). Compare the two msgs/s figures.
func BenchmarkPutWithDispatch(b *testing.B) {
	for _, mode := range []string{"append-only", "with-dispatch"} {
		b.Run(mode, func(b *testing.B) {
			s := benchStore(b)
			if mode == "append-only" {
				s.disp.run.Lock()
			}
			kc := startKernelCost()
			putEach(b, s)
			b.StopTimer()
			kc.report(b)
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
			if mode == "append-only" {
				s.disp.run.Unlock()
			}
		})
	}
}

// putEach resets the timer and Puts b.N 128-byte messages to "bench",
// round robin over its four queues.
func putEach(b *testing.B, s *Store) {
	ctx := context.Background()
	m := &Message{Topic: "bench", Body: make([]byte, 128)}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		if _, err := s.Put(ctx, m, i%4); err != nil {
			b.Fatal(err)
		}
	}
}
