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
	"time"
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
	kc := startKernelCost()
	b.ResetTimer()
	benchPutSplit(b, s, g, size)
	b.StopTimer()
	kc.report(b)
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
	for _, size := range []int{128, 4 << 10} {
		for _, g := range []int{1, 16} {
			b.Run(fmt.Sprintf("sync/%dB/g%d", size, g), func(b *testing.B) { benchPut(b, FlushSync, size, g) })
		}
	}
	b.Run("async/128B/batch100", func(b *testing.B) { benchPutBatch(b, 128, 100, 1, false) })
	for _, size := range []int{128, 4 << 10} {
		for _, g := range []int{1, 16} {
			name := fmt.Sprintf("async/%dB/batch1000", size)
			if g > 1 {
				name += fmt.Sprintf("/g%d", g)
			}
			b.Run(name, func(b *testing.B) { benchPutBatch(b, size, 1000, g, false) })
			b.Run(name+"/into", func(b *testing.B) { benchPutBatch(b, size, 1000, g, true) })
		}
	}
}

// benchPutBatch: g goroutines, PutBatch of n messages of size bytes
// (FlushAsync), each to its own queue; b.N counts messages. The time
// includes waiting until the dispatcher has made every message visible
// (msgs/s); sent-msgs/s is the rate until the last PutBatch returned,
// which is what the single-Put rows (and the harness) measure. into:
// PutBatchInto, each goroutine passing its last results back in.
func benchPutBatch(b *testing.B, size, n, g int, into bool) {
	s, err := Open(filepath.Join(b.TempDir(), "store"), &Options{SegmentSize: 256 << 20})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	body := make([]byte, size)
	ctx := context.Background()
	send := func(q, count int) {
		batch := make([]*Message, n)
		for i := range batch {
			batch[i] = &Message{Topic: "bench", Body: body}
		}
		var res []PutResult
		for i := 0; i < count; i += len(batch) {
			k := min(len(batch), count-i)
			var err error
			if into {
				res, err = s.PutBatchInto(ctx, batch[:k], q, res)
			} else {
				_, err = s.PutBatch(ctx, batch[:k], q)
			}
			if err != nil {
				b.Error(err)
				return
			}
		}
	}
	b.ReportAllocs()
	kc := startKernelCost()
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for i := range g {
		count := b.N / g
		if i < b.N%g {
			count++
		}
		wg.Go(func() { send(i%4, count) })
	}
	wg.Wait()
	sent := time.Since(start) // what BenchmarkPut's single-Put rows time
	if err := s.WaitVisible(ctx); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	kc.report(b) // the whole process: the dispatcher's and the warming's work too
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
	b.ReportMetric(float64(b.N)/sent.Seconds(), "sent-msgs/s")
}

// BenchmarkPutSyncRetention is BenchmarkPut's FlushSync rows in the steady
// state of a store with retention: 4 MiB segments, each sealed one removed
// (or recycled) as soon as the next is entered, and 8 segments written
// before the timer starts, so that the timed syncs go to recycled segments
// ("/norecycle": to new ones, with Options.NoRecycle).
func BenchmarkPutSyncRetention(b *testing.B) { runPutRetention(b, FlushSync, 4<<20) }

// BenchmarkPutAsyncRetention is the same with FlushAsync and 64 MiB
// segments.
func BenchmarkPutAsyncRetention(b *testing.B) { runPutRetention(b, FlushAsync, 64<<20) }

// BenchmarkPutAsyncRetention4K is BenchmarkPutAsyncRetention/g16 with 4 KiB
// bodies (issue 2's bandwidth row, in the steady state) and 256 MiB
// segments: 64 MiB ones fill in ~30 ms at this rate, often before a
// removed one is free to be recycled.
func BenchmarkPutAsyncRetention4K(b *testing.B) {
	benchPutRetention(b, FlushAsync, 256<<20, 16, 4<<10, false)
}

// runPutRetention runs benchPutRetention with 1 and 16 producers, with and
// without recycling.
func runPutRetention(b *testing.B, mode FlushMode, seg int64) {
	for _, noRecycle := range []bool{false, true} {
		for _, g := range []int{1, 16} {
			name := fmt.Sprintf("g%d", g)
			if noRecycle {
				name += "/norecycle"
			}
			b.Run(name, func(b *testing.B) { benchPutRetention(b, mode, seg, g, 128, noRecycle) })
		}
	}
}

func benchPutRetention(b *testing.B, mode FlushMode, seg int64, g, size int, noRecycle bool) {
	s, err := Open(filepath.Join(b.TempDir(), "store"), &Options{Flush: mode, SegmentSize: seg, NoRecycle: noRecycle,
		Retention: time.Nanosecond, DeleteHour: farHour(), CleanRatio: 1, ForceCleanRatio: 1})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	kick, cleaned := make(chan struct{}, 1), make(chan struct{})
	go func() {
		defer close(cleaned)
		for range kick {
			if _, err := s.CleanExpired(); err != nil {
				b.Error(err)
			}
		}
	}()
	rolled := func(r PutResult) {
		if r.Offset%seg < int64(r.Size) {
			select {
			case kick <- struct{}{}:
			default:
			}
		}
	}
	ctx := context.Background()
	batch := make([]*Message, max(256*128/size, 1))
	for i := range batch {
		batch[i] = &Message{Topic: "bench", Body: make([]byte, size)}
	}
	for s.log.WrotePosition() < 8*seg {
		rs, err := s.PutBatch(ctx, batch, 0)
		if err != nil {
			b.Fatal(err)
		}
		rolled(rs[0])
		rolled(rs[len(rs)-1])
	}
	if err := s.WaitVisible(ctx); err != nil { // the dispatcher has caught up
		b.Fatal(err)
	}
	before, recycled := flushes(b, s), s.log.Recycled()
	b.ReportAllocs()
	kc := startKernelCost()
	b.ResetTimer()
	var wg sync.WaitGroup
	for i := range g {
		n := b.N / g
		if i < b.N%g {
			n++
		}
		m := &Message{Topic: "bench", Body: make([]byte, size)}
		wg.Go(func() {
			for range n {
				r, err := s.Put(ctx, m, i%4)
				if err != nil {
					b.Error(err)
					return
				}
				rolled(r)
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	kc.report(b)
	b.ReportMetric(float64(s.log.WrotePosition()-s.disp.dispatched())/1e6, "lagMB")
	close(kick)
	<-cleaned
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
	b.ReportMetric(float64(b.N)*float64(size)/b.Elapsed().Seconds()/1e6, "MB/s")
	if n := flushes(b, s) - before; n > 0 && mode == FlushSync {
		b.ReportMetric(float64(b.N)/float64(n), "acks/sync")
	}
	b.ReportMetric(float64(s.log.Segments()[0].Start/seg), "removed")
	b.ReportMetric(float64(s.log.Recycled()-recycled), "recycled")
}
