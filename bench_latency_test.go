package mqlite

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/mqlite/mqlite/vfs"
)

// BenchmarkSyncLatency is the harness's "latency 128B sync @1000/s" row
// taken apart, in one process: one sender Puts a 128-byte body every
// millisecond into a FlushSync store while a reader waits in ReadQueue;
// e2e is from the start of the Put to the reader's return. Before it, the
// same number of bare probes at the same pace (a 128-byte pwrite into a
// pre-written file, then fdatasync) give the floor: a reader that sees a
// message only once it is durable cannot beat the sync. "durable" is the
// default (readers see flushed records only); "uncommitted" is
// Options.ReadUncommitted (readers see a record once written, the Put still
// returns after its sync), which is what a Pebble reader sees: Pebble
// publishes a batch before its WAL sync ends.
//
//	go test -run '^$' -bench BenchmarkSyncLatency -benchtime 3000x .
func BenchmarkSyncLatency(b *testing.B) {
	for _, uncommitted := range []bool{false, true} {
		name := map[bool]string{false: "durable", true: "uncommitted"}[uncommitted]
		b.Run(name, func(b *testing.B) { benchSyncLatency(b, uncommitted) })
	}
}

const latencyInterval = time.Millisecond

// latencyPace sleeps until the i-th tick after start.
func latencyPace(start time.Time, i int) {
	if d := time.Until(start.Add(time.Duration(i) * latencyInterval)); d > 0 {
		time.Sleep(d)
	}
}

func benchSyncLatency(b *testing.B, uncommitted bool) {
	dir := b.TempDir()
	probe := latencyProbe(b, dir, b.N)
	s, err := Open(filepath.Join(dir, "store"), &Options{Flush: FlushSync, SegmentSize: 256 << 20, ReadUncommitted: uncommitted})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	if err := s.CreateTopic("lat", TopicConfig{Queues: 1}); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	sent := make([]time.Time, b.N)
	started := make(chan int, b.N) // the sender hands each start time over
	e2e := make([]time.Duration, 0, b.N)
	read := make(chan error, 1)
	go func() {
		var next int64
		for next < int64(b.N) {
			ms, err := s.ReadQueue(ctx, "lat", 0, next, 1024)
			if err != nil {
				read <- err
				return
			}
			now := time.Now()
			for range ms {
				<-started // the start of message next is in sent
				e2e = append(e2e, now.Sub(sent[next]))
				next++
			}
		}
		read <- nil
	}()
	m := &Message{Topic: "lat", Body: make([]byte, 128)}
	puts := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	start := time.Now()
	for i := range b.N {
		latencyPace(start, i)
		t := time.Now()
		sent[i] = t
		started <- i
		if _, err := s.Put(ctx, m, 0); err != nil {
			b.Fatal(err)
		}
		puts = append(puts, time.Since(t))
	}
	if err := <-read; err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	b.ReportMetric(latencyUS(syncMedian(probe)), "probe-p50-us")
	b.ReportMetric(latencyUS(syncMedian(puts)), "put-p50-us")
	b.ReportMetric(latencyUS(syncMedian(e2e)), "e2e-p50-us")
	b.ReportMetric(latencyUS(e2e[len(e2e)*99/100]), "e2e-p99-us") // median sorted e2e
}

func latencyUS(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// latencyProbe times n pwrite+fdatasync pairs of 128 bytes, one a tick,
// into a pre-written file in dir.
func latencyProbe(b *testing.B, dir string, n int) []time.Duration {
	const size, span = 128, 4 << 20
	f, err := vfs.OS.OpenFile(filepath.Join(dir, "probe"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(make([]byte, span), 0); err != nil {
		b.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, size)
	out := make([]time.Duration, 0, n)
	start := time.Now()
	for i := range n {
		latencyPace(start, i)
		t := time.Now()
		if _, err := f.WriteAt(buf, int64(i*size)%span); err != nil {
			b.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			b.Fatal(err)
		}
		out = append(out, time.Since(t))
	}
	return out
}
