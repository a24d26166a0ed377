package commitlog

// Append benchmarks. BenchmarkBaseline is the bare minimum any mapped log
// must do per record, written inline, so that BenchmarkAppend can be read
// against it:
//
//	go test -run '^$' -bench . -benchtime 2s ./commitlog

import (
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/mqlite/mqlite/internal/procio"
	"github.com/mqlite/mqlite/vfs"
)

const benchSegment = 256 << 20

var benchSizes = []int{128, 1 << 10, 4 << 10}
var benchGoroutines = []int{1, 16}

// rocketHeader is the size of RocketMQ's record header for a message with
// a short topic and no properties (TOTALSIZE ... PROPERTIES length fields).
const rocketHeader = 91

// runSplit runs fn b.N times in total over g goroutines, each with its own
// state from setup.
func runSplit(b *testing.B, g int, setup func() func()) {
	if g == 1 {
		fn := setup()
		for range b.N {
			fn()
		}
		return
	}
	var wg sync.WaitGroup
	for i := range g {
		n := b.N / g
		if i < b.N%g {
			n++
		}
		fn := setup()
		wg.Go(func() {
			for range n {
				fn()
			}
		})
	}
	wg.Wait()
}

func reportRate(b *testing.B, size int) {
	msgs := float64(b.N) / b.Elapsed().Seconds()
	b.ReportMetric(msgs, "msgs/s")
	b.ReportMetric(msgs*float64(size)/1e6, "MB/s")
}

// baselineLog is the minimum: a mutex, a position, one mapped file (used
// as a ring), a 91-byte header, the body, a CRC32-C.
type baselineLog struct {
	mu  sync.Mutex
	pos int
	buf []byte
}

func (l *baselineLog) append(body []byte) int {
	n := rocketHeader + len(body)
	l.mu.Lock()
	if l.pos+n > len(l.buf) {
		l.pos = 0
	}
	p := l.pos
	l.pos += n
	rec := l.buf[p : p+n : p+n]
	le.PutUint32(rec[0:], uint32(n))
	le.PutUint32(rec[4:], MagicV1)
	le.PutUint32(rec[12:], 3)         // queue id
	le.PutUint32(rec[16:], 0)         // flag
	le.PutUint64(rec[20:], uint64(p)) // queue offset
	le.PutUint64(rec[28:], uint64(p)) // physical offset
	clear(rec[36 : rocketHeader-4])   // sysflag, timestamps, hosts, reconsume, tx offset
	le.PutUint32(rec[rocketHeader-4:], uint32(len(body)))
	copy(rec[rocketHeader:], body)
	le.PutUint32(rec[8:], crc32.Update(crc32.Update(0, castagnoli, rec[:8]), castagnoli, rec[12:]))
	l.mu.Unlock()
	return p
}

func BenchmarkBaseline(b *testing.B) {
	bl := &baselineLog{buf: benchRing(b).Bytes()}
	for _, size := range benchSizes {
		for _, g := range benchGoroutines {
			b.Run(fmt.Sprintf("%dB/g%d", size, g), func(b *testing.B) {
				body := payload(size, size)
				b.ReportAllocs()
				b.ResetTimer()
				runSplit(b, g, func() func() { return func() { bl.append(body) } })
				reportRate(b, size)
			})
		}
	}
}

// benchAppender is a pointer, so that passing it as an Appender does not
// allocate.
type benchAppender struct{ body []byte }

func (a *benchAppender) PayloadSize() int                     { return len(a.body) }
func (a *benchAppender) EncodePayload(dst []byte, phys int64) { copy(dst, a.body) }

// BenchmarkMemcpyMapped is the physical limit for large bodies: copying
// the body into a mapped file whose pages are resident (a ring in one
// pre-faulted mapping), with nothing else.
func BenchmarkMemcpyMapped(b *testing.B) {
	m := benchRing(b)
	for _, size := range benchSizes {
		b.Run(fmt.Sprintf("%dB", size), func(b *testing.B) {
			body := payload(size, size)
			buf, pos := m.Bytes(), 0
			b.ResetTimer()
			for range b.N {
				if pos+size > len(buf) {
					pos = 0
				}
				copy(buf[pos:pos+size], body)
				pos += size
			}
			reportRate(b, size)
		})
	}
}

// benchRing maps a pre-faulted benchSegment-byte file for the reference
// benchmarks.
func benchRing(b *testing.B) vfs.Mapping {
	path := filepath.Join(b.TempDir(), "ring")
	f, err := vfs.OS.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { f.Close() })
	if err := f.Allocate(benchSegment); err != nil {
		b.Fatal(err)
	}
	m, err := f.Map(benchSegment)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { m.Unmap() })
	vfs.Populate(m.Bytes())
	return m
}

// BenchmarkAppend measures Log.Append on real files with 256 MiB segments,
// kept warm by the allocator (NoWarm false), in the steady state of a store
// with retention: a side goroutine deletes all but the newest segments, so
// the page cache stays bounded and new segments get recycled memory (the
// spare files, or with NoRecycle the pages the deleted files freed). The
// timed part starts after steadySegments segments: the first touch of
// memory the VM never used costs 10-20 µs a page here (the first segments
// of a run take seconds each), and no warmer can keep up with that; see
// docs/performance.md. It reports how many segments were recycled meanwhile.
// Target: 0 allocs/op, at least half of BenchmarkBaseline for 128 B.
func BenchmarkAppend(b *testing.B) {
	for _, size := range benchSizes {
		for _, g := range benchGoroutines {
			b.Run(fmt.Sprintf("%dB/g%d", size, g), func(b *testing.B) {
				dir := filepath.Join(b.TempDir(), "cl")
				l, err := Open(Options{Dir: dir, SegmentSize: benchSegment, RecoverFrom: -1})
				if err != nil {
					b.Fatal(err)
				}
				roll, stop := benchRetention(b, l)
				body := payload(size, size)
				appendOne := func(a Appender) {
					off, err := l.Append(a)
					if err != nil {
						b.Error(err)
					}
					if off&(benchSegment-1) < int64(size+FrameSize) {
						roll()
					}
				}
				if b.N >= steadyMinN {
					// Reach the steady state first: segments deleted (or
					// kept as spares) behind the writer.
					a := &benchAppender{body: body}
					for l.WrotePosition() < steadySegments*benchSegment {
						appendOne(a)
					}
				}
				recycled := l.recycled.Load()
				b.ReportAllocs()
				b.ResetTimer()
				runSplit(b, g, func() func() {
					a := &benchAppender{body: body}
					return func() { appendOne(a) }
				})
				b.StopTimer()
				stop()
				reportRate(b, size)
				b.ReportMetric(float64(l.rollWait.Load())/float64(b.N), "rollwait-ns/op")
				b.ReportMetric(float64(l.recycled.Load()-recycled), "recycled")
				if err := l.Close(); err != nil {
					b.Fatal(err)
				}
				os.RemoveAll(dir)
			})
		}
	}
}

// BenchmarkAppend first appends steadySegments segments' worth, untimed,
// unless b.N is below steadyMinN (the calibration rounds): enough for the
// spares to be in use, so that no new file (new memory, ~1.4 s for a
// segment here) falls in the timed part.
const (
	steadySegments = 8
	steadyMinN     = 1000
)

// benchRetention starts a goroutine that, whenever roll is called, deletes
// the segments before the newest two. stop ends it.
func benchRetention(b *testing.B, l *Log) (roll, stop func()) {
	kick, done := make(chan struct{}, 1), make(chan struct{})
	go func() {
		defer close(done)
		for range kick {
			if _, err := l.DeleteBefore(max(0, l.WrotePosition()-2*benchSegment)); err != nil {
				b.Error(err)
			}
		}
	}()
	roll = func() {
		select {
		case kick <- struct{}{}:
		default:
		}
	}
	stop = func() { close(kick); <-done }
	return roll, stop
}

// readBenchLog fills a log on real files with records of size bytes across
// several 4 MiB segments and returns it with the records' offsets.
func readBenchLog(b *testing.B, size int) (*Log, []int64) {
	b.Helper()
	dir := filepath.Join(b.TempDir(), "cl")
	l, err := Open(Options{Dir: dir, SegmentSize: 4 << 20, RecoverFrom: -1})
	if err != nil {
		b.Fatal(err)
	}
	a := &benchAppender{body: payload(size, size)}
	var offs []int64
	for l.WrotePosition() < 14<<20 {
		off, err := l.Append(a)
		if err != nil {
			b.Fatal(err)
		}
		offs = append(offs, off)
	}
	return l, offs
}

// BenchmarkRead measures Log.Read of a random record (frame and CRC32-C
// checked) with an empty callback. Target: 0 allocs/op.
func BenchmarkRead(b *testing.B) {
	for _, size := range benchSizes[:2] {
		for _, g := range benchGoroutines {
			b.Run(fmt.Sprintf("%dB/g%d", size, g), func(b *testing.B) {
				l, offs := readBenchLog(b, size)
				defer l.Close()
				b.ReportAllocs()
				b.ResetTimer()
				var seed uint64
				var mu sync.Mutex
				runSplit(b, g, func() func() {
					mu.Lock()
					seed++
					r := rand.New(rand.NewPCG(seed, 1))
					mu.Unlock()
					n := 0
					fn := func(r Record) error { n += len(r.Payload); return nil }
					return func() {
						if err := l.Read(offs[r.IntN(len(offs))], fn); err != nil {
							b.Error(err)
						}
					}
				})
				b.StopTimer()
				reportRate(b, size)
			})
		}
	}
}

// BenchmarkFlush measures what a group commit round costs the disk: append
// 1 or 16 records of 200 bytes, then Flush (msync), into a new segment
// (preallocated: unwritten extents) and into a recycled one (written
// extents; recycle.go). One op is one round; p50-us is its median.
func BenchmarkFlush(b *testing.B) {
	const seg = 64 << 20
	for _, recycled := range []bool{false, true} {
		for _, n := range []int{1, 16} {
			name := fmt.Sprintf("new/%drecords", n)
			if recycled {
				name = fmt.Sprintf("recycled/%drecords", n)
			}
			b.Run(name, func(b *testing.B) {
				l, err := Open(Options{Dir: filepath.Join(b.TempDir(), "cl"), SegmentSize: seg, RecoverFrom: -1, NoRecycle: !recycled})
				if err != nil {
					b.Fatal(err)
				}
				defer l.Close()
				a := &benchAppender{body: payload(200, 200)}
				fill := func(to int64) {
					for l.WrotePosition() < to {
						if _, err := l.Append(a); err != nil {
							b.Fatal(err)
						}
					}
					if _, err := l.Flush(); err != nil {
						b.Fatal(err)
					}
				}
				// Four segments, the first two dropped (kept as spares
				// unless NoRecycle), then into the segment after next: a
				// recycled one, or a new one.
				fill(4 * seg)
				settle(l)
				if _, err := l.DeleteBefore(2 * seg); err != nil {
					b.Fatal(err)
				}
				fill(6*seg + 4096)
				if got := staleTail(l); got != recycled {
					b.Fatalf("write segment recycled: %v, want %v", got, recycled)
				}
				flushRounds(b, l, a, n)
			})
		}
	}
}

// BenchmarkFlushAfterBurst is a group commit round of one 200-byte record
// (append, then Flush) in the middle of a 64 MiB segment that a burst of
// appends reached, the pre-faulting ahead of it included: with SmallSyncs
// ("/small", what a FlushSync store sets) and without ("/large"). Without
// it the read-ahead of the pre-faulting brings the segment's pages in
// large folios and each Flush writes its whole folio back (wKiB/op, from
// /proc/self/io).
func BenchmarkFlushAfterBurst(b *testing.B) {
	for _, small := range []bool{true, false} {
		name := "large"
		if small {
			name = "small"
		}
		b.Run(name, func(b *testing.B) {
			const seg = 64 << 20
			l, err := Open(Options{Dir: filepath.Join(b.TempDir(), "cl"), SegmentSize: seg, RecoverFrom: -1, SmallSyncs: small})
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			a := &benchAppender{body: payload(200, 200)}
			for l.WrotePosition() < seg/2 {
				for range 1000 {
					if _, err := l.Append(a); err != nil {
						b.Fatal(err)
					}
				}
				if _, err := l.Flush(); err != nil {
					b.Fatal(err)
				}
			}
			settle(l)
			w0, ok := procio.WrittenBytes()
			flushRounds(b, l, a, 1)
			if w1, _ := procio.WrittenBytes(); ok {
				b.ReportMetric(float64(w1-w0)/1024/float64(b.N), "wKiB/op")
			}
		})
	}
}

// flushRounds times b.N rounds of n appends of a and a Flush, and reports
// the median Flush as p50-us.
func flushRounds(b *testing.B, l *Log, a Appender, n int) {
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		for range n {
			if _, err := l.Append(a); err != nil {
				b.Fatal(err)
			}
		}
		t0 := time.Now()
		if _, err := l.Flush(); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2])/1e3, "p50-us")
}
