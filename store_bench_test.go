package mqlite

// Put benchmarks on real files:
//
//	go test -run '^$' -bench BenchmarkPut -benchtime 2s .
//
// FlushSync alone (anchored: "sync" also matches "async"):
//
//	go test -run '^$' -bench 'BenchmarkPut/^sync' -benchtime 5s -count 5 .

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
)

// benchPutSplit runs b.N Puts over g goroutines, each with its own
// message.
func benchPutSplit(b *testing.B, s *Store, g, size int) {
	ctx := context.Background()
	body := make([]byte, size)
	for i := range body {
		body[i] = byte(i)
	}
	put := func(m *Message, q, n int) {
		for range n {
			if _, err := s.Put(ctx, m, q); err != nil {
				b.Error(err)
				return
			}
		}
	}
	var wg sync.WaitGroup
	for i := range g {
		n := b.N / g
		if i < b.N%g {
			n++
		}
		m := &Message{Topic: "bench", Body: body}
		wg.Go(func() { put(m, i%4, n) })
	}
	wg.Wait()
}

func benchPut(b *testing.B, mode FlushMode, size, g int) {
	dir := filepath.Join(b.TempDir(), "store")
	s, err := Open(dir, &Options{Flush: mode, SegmentSize: 256 << 20})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	b.ReportAllocs()
	before := flushes(b, s)
	b.ResetTimer()
	benchPutSplit(b, s, g, size)
	b.StopTimer()
	msgs := float64(b.N) / b.Elapsed().Seconds()
	b.ReportMetric(msgs, "msgs/s")
	b.ReportMetric(msgs*float64(size)/1e6, "MB/s")
	if n := flushes(b, s) - before; mode == FlushSync && n > 0 {
		b.ReportMetric(float64(b.N)/float64(n), "acks/sync")
	}
}

// flushes is Stats' count of CommitLog flushes: under FlushSync one per
// group commit round that had anything to sync.
func flushes(b *testing.B, s *Store) int64 {
	st, err := s.Stats()
	if err != nil {
		b.Fatal(err)
	}
	return st.Throughput.Flushes
}

// BenchmarkPut: FlushAsync over the size ladder with 1 and 16 senders, and
// FlushSync (group commit) with 1 and 16 senders, where acks/sync is the
// number of acknowledged Puts per CommitLog sync (reliability.md S20).
func BenchmarkPut(b *testing.B) {
	for _, size := range []int{128, 1 << 10, 4 << 10} {
		for _, g := range []int{1, 16} {
			b.Run(fmt.Sprintf("async/%dB/g%d", size, g), func(b *testing.B) { benchPut(b, FlushAsync, size, g) })
		}
	}
	for _, g := range []int{1, 16} {
		b.Run(fmt.Sprintf("sync/128B/g%d", g), func(b *testing.B) { benchPut(b, FlushSync, 128, g) })
	}
	b.Run("async/128B/batch100", benchPutBatch)
}

// benchPutBatch: one goroutine, PutBatch of 100 128-byte messages
// (FlushAsync); b.N counts messages.
func benchPutBatch(b *testing.B) {
	s, err := Open(filepath.Join(b.TempDir(), "store"), &Options{SegmentSize: 256 << 20})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	batch := make([]*Message, 100)
	for i := range batch {
		batch[i] = &Message{Topic: "bench", Body: make([]byte, 128)}
	}
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i += len(batch) {
		n := min(len(batch), b.N-i)
		if _, err := s.PutBatch(ctx, batch[:n], i/len(batch)%4); err != nil {
			b.Fatal(err)
		}
	}
	if err := s.WaitVisible(ctx); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
}
