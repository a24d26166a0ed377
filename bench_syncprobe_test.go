package mqlite

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/mqlite/mqlite/vfs"
)

// BenchmarkPutSyncVsProbe compares one FlushSync Put with the machine's
// floor for it, interleaved so that both see the same load: each op is
// one probe (a 4 KiB or 128 B pwrite into a pre-written file, then
// fdatasync, with no store around it) followed by one Put of a body of
// the same size into a store on the same file system. It reports both
// medians and their ratio (put/probe): what the store adds to the sync.
// On a shared machine the two absolute figures move together; the ratio
// is the steadier one.
//
//	go test -run '^$' -bench BenchmarkPutSyncVsProbe -benchtime 3000x -count 3 .
func BenchmarkPutSyncVsProbe(b *testing.B) {
	for _, size := range []int{128, 4 << 10} {
		b.Run(fmt.Sprintf("%dB", size), func(b *testing.B) { benchPutSyncVsProbe(b, size) })
	}
}

func benchPutSyncVsProbe(b *testing.B, size int) {
	dir := b.TempDir()
	const probeBytes = 16 << 20
	f, err := vfs.OS.OpenFile(filepath.Join(dir, "probe"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	// Pre-written: real zeros, synced, so that the probe's syncs write
	// data only.
	zeros := make([]byte, 1<<20)
	for off := int64(0); off < probeBytes; off += int64(len(zeros)) {
		if _, err := f.WriteAt(zeros, off); err != nil {
			b.Fatal(err)
		}
	}
	if err := f.Sync(); err != nil {
		b.Fatal(err)
	}
	s, err := Open(filepath.Join(dir, "store"), &Options{Flush: FlushSync, SegmentSize: 256 << 20})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	body := make([]byte, size)
	for i := range body {
		body[i] = byte(i)
	}
	m := &Message{Topic: "bench", Body: body}
	probe := make([]byte, size)
	probes := make([]time.Duration, 0, b.N)
	puts := make([]time.Duration, 0, b.N)
	var off int64
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		if _, err := f.WriteAt(probe, off); err != nil {
			b.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if _, err := s.Put(ctx, m, 0); err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		probes, puts = append(probes, t1.Sub(t0)), append(puts, t2.Sub(t1))
		if off += int64(size); off+int64(size) > probeBytes {
			off = 0
		}
	}
	b.StopTimer()
	p, q := syncMedian(probes), syncMedian(puts)
	b.ReportMetric(float64(p.Microseconds()), "probe-p50-us")
	b.ReportMetric(float64(q.Microseconds()), "put-p50-us")
	b.ReportMetric(float64(q)/float64(p), "put/probe")
}

// syncMedian is the middle of ds (sorted in place).
func syncMedian(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	return ds[len(ds)/2]
}
