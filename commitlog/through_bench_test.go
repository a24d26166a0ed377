package commitlog

import (
	"fmt"
	"path/filepath"
	"testing"
)

// BenchmarkSyncRound is a FlushSync group commit round on the log alone:
// append 1 or 16 records of 200 bytes, or one of 4 KiB, then Flush, in a
// log with SmallSyncs, written through the mapping ("mapped") or with
// pwrite into the file (through.go), with the zeros written ahead of the
// writer ("through") or without ("through-nofill", prewrite.go), into a
// new (fallocated) segment or a recycled one. One op is one round; p50-us
// is its median.
//
//	go test -run '^$' -bench BenchmarkSyncRound -count 3 ./commitlog/
func BenchmarkSyncRound(b *testing.B) {
	const seg = 16 << 20
	for _, recycled := range []bool{false, true} {
		for _, rec := range []struct{ n, size int }{{1, 200}, {16, 200}, {1, 4096}} {
			for _, path := range []string{"mapped", "through-nofill", "through"} {
				if recycled && path == "through-nofill" {
					continue // a recycled segment is not pre-written
				}
				kind := "new"
				if recycled {
					kind = "recycled"
				}
				name := fmt.Sprintf("%s/%dx%dB/%s", kind, rec.n, rec.size, path)
				b.Run(name, func(b *testing.B) { benchSyncRound(b, seg, rec.n, rec.size, recycled, path) })
			}
		}
	}
}

func benchSyncRound(b *testing.B, seg int64, n, size int, recycled bool, path string) {
	through := path != "mapped"
	l, err := Open(Options{Dir: filepath.Join(b.TempDir(), "cl"), SegmentSize: seg, RecoverFrom: -1,
		NoRecycle: !recycled, SmallSyncs: true, noWriteThrough: !through, noPrewrite: path == "through-nofill"})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	if l.writeThrough != through {
		b.Skipf("this file system cannot write through files")
	}
	a := &benchAppender{body: payload(200, 200)}
	fill := func(to int64) {
		for l.WrotePosition() < to {
			for range 8192 {
				if _, err := l.Append(a); err != nil {
					b.Fatal(err)
				}
			}
			if _, err := l.Flush(); err != nil {
				b.Fatal(err)
			}
		}
	}
	// As BenchmarkFlush: two segments dropped (kept as spares unless
	// NoRecycle), then into a recycled or a new one.
	fill(4 * seg)
	settle(l)
	if _, err := l.DeleteBefore(2 * seg); err != nil {
		b.Fatal(err)
	}
	fill(6*seg + 4096)
	if got := staleTail(l); got != recycled {
		b.Fatalf("write segment recycled: %v, want %v", got, recycled)
	}
	flushRounds(b, l, &benchAppender{body: payload(size, size)}, n)
}
