package commitlog

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mqlite/mqlite/vfs"
)

// opLog counts the operations of a Faulty FS by kind, on one file if
// path is set, and can fail one kind.
type opLog struct {
	mu   sync.Mutex
	ops  map[vfs.Op]int
	path string
	fail vfs.Op
}

func (o *opLog) inject(op vfs.Op, path string) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.path != "" && path != o.path {
		return nil
	}
	o.ops[op]++
	if op == o.fail {
		return os.ErrInvalid
	}
	return nil
}

func (o *opLog) take() map[vfs.Op]int {
	o.mu.Lock()
	defer o.mu.Unlock()
	m := o.ops
	o.ops = map[vfs.Op]int{}
	return m
}

// prewriteLog opens a FlushSync log that writes through its files on a
// Faulty MemFS, without warming (the test pre-writes by hand), with one
// record appended.
func prewriteLog(t *testing.T) (*Log, *vfs.Faulty, *opLog) {
	t.Helper()
	ffs := vfs.NewFaulty(vfs.NewMem())
	ops := &opLog{ops: map[vfs.Op]int{}}
	ffs.SetInjector(ops.inject)
	l, err := Open(Options{Dir: "/cl", FS: ffs, SegmentSize: 64 << 10, RecoverFrom: -1, SmallSyncs: true, NoWarm: true})
	require.NoError(t, err)
	require.True(t, l.writeThrough)
	_, err = l.Append(bytesAppender(payload(1, 300)))
	require.NoError(t, err)
	return l, ffs, ops
}

// The allocator's pre-write starts at the writer's reservation, writes
// zeros over stale bytes, asks the FS for OpPrewrite and OpPrewriteSync
// only (not the writer's OpWrite and OpSync), and its zeros are durable in
// a power-loss image while the unflushed record is not.
func TestPrewriteWritesZerosAheadOfTheWriter(t *testing.T) {
	l, ffs, ops := prewriteLog(t)
	defer l.Close()
	s, w := l.mu.cur, l.WrotePosition()
	ops.mu.Lock()
	ops.path = s.path // not the next segment the allocator prepares
	ops.mu.Unlock()
	require.True(t, l.prewrites(s))
	// Stale bytes past the end (a segment once written further).
	stale := bytes.Repeat([]byte{0xee}, 8<<10)
	copy(s.buf[w:], stale)
	ops.take()
	require.True(t, l.prewrite(s, 0, 8<<10))
	require.Equal(t, map[vfs.Op]int{vfs.OpPrewrite: 1, vfs.OpPrewriteSync: 1}, ops.take())
	require.Equal(t, make([]byte, 8<<10-w), s.buf[w:8<<10], "zeros from the write position on")
	require.Equal(t, stale[:w], s.buf[8<<10:8<<10+w], "nothing past the range")
	require.NoError(t, l.Read(0, func(r Record) error {
		require.Equal(t, payload(1, 300), r.Payload)
		return nil
	}), "the record below the reservation is intact")

	img := ffs.Crash(rand.New(rand.NewPCG(1, 1)), 0)
	f, err := img.OpenFile(s.path, os.O_RDONLY, 0)
	require.NoError(t, err)
	defer f.Close()
	got := make([]byte, 8<<10)
	_, err = f.ReadAt(got, 0)
	require.NoError(t, err)
	require.Equal(t, make([]byte, 8<<10), got, "the image: the record was never flushed, the zeros were synced")

	// Nothing to do below the reservation; a recycled segment, or a log
	// told not to, is not pre-written.
	require.True(t, l.prewrite(s, 0, w))
	require.Empty(t, ops.take())
	s.recycled = true
	require.False(t, l.prewrites(s))
	s.recycled = false
	l.opts.noPrewrite = true
	require.False(t, l.prewrites(s))
}

// A failed pre-write is logged, changes nothing, and the segment is not
// pre-written again; the log goes on. A failed sync of the zeros fences
// the log, as any failed sync does.
func TestPrewriteFailures(t *testing.T) {
	t.Run("write", func(t *testing.T) {
		l, _, ops := prewriteLog(t)
		defer l.Close()
		s, w := l.mu.cur, l.WrotePosition()
		copy(s.buf[w:], []byte("stale"))
		ops.mu.Lock()
		ops.path, ops.fail = s.path, vfs.OpPrewrite
		ops.mu.Unlock()
		require.False(t, l.prewrite(s, w, 8<<10))
		require.Equal(t, []byte("stale"), s.buf[w:w+5])
		ops.take()
		require.False(t, l.prewrite(s, w, 8<<10), "tried again after a failure")
		require.Empty(t, ops.take())
		require.NoError(t, l.Fenced())
		_, err := l.Append(bytesAppender(payload(2, 300)))
		require.NoError(t, err)
		_, err = l.Flush()
		require.NoError(t, err)
	})
	t.Run("sync", func(t *testing.T) {
		l, _, ops := prewriteLog(t)
		defer l.Close()
		s, w := l.mu.cur, l.WrotePosition()
		ops.mu.Lock()
		ops.fail = vfs.OpPrewriteSync
		ops.mu.Unlock()
		l.prewrite(s, w, 8<<10)
		require.ErrorIs(t, l.Fenced(), ErrIO)
		_, err := l.Append(bytesAppender(payload(2, 300)))
		require.ErrorIs(t, err, ErrFenced)
	})
}

// The writer and the fill never write the same bytes: with a lead of a
// few KiB the allocator pre-writes right at the heels of a writer
// appending and flushing across segments, and every record reads back,
// before and after a reopen and from a power-loss image.
func TestPrewriteBesideTheWriter(t *testing.T) {
	ffs := vfs.NewFaulty(vfs.NewMem())
	ops := &opLog{ops: map[vfs.Op]int{}}
	ffs.SetInjector(ops.inject)
	opts := Options{Dir: "/cl", FS: ffs, SegmentSize: 64 << 10, WarmBytes: 8 << 10, RecoverFrom: -1, SmallSyncs: true}
	l, err := Open(opts)
	require.NoError(t, err)
	want := map[int64][]byte{}
	for i := 0; l.WrotePosition() < 12*opts.SegmentSize; i++ {
		p := payload(i, 50+i%700)
		off, err := l.Append(bytesAppender(p))
		require.NoError(t, err)
		want[off] = p
		if i%3 == 0 {
			_, err := l.Flush()
			require.NoError(t, err)
		}
	}
	flushed, err := l.Flush()
	require.NoError(t, err)
	check := func(l *Log) {
		t.Helper()
		n := 0
		_, err := l.Scan(0, l.WrotePosition(), true, func(r Record) error {
			require.Equal(t, want[r.Offset], r.Payload, "offset %d", r.Offset)
			n++
			return nil
		})
		require.NoError(t, err)
		require.Equal(t, len(want), n)
	}
	check(l)
	img := ffs.Crash(rand.New(rand.NewPCG(3, 3)), 0)
	require.NoError(t, l.Close())
	seen := ops.take()
	require.Positive(t, seen[vfs.OpPrewrite], "the allocator pre-wrote")
	require.Equal(t, seen[vfs.OpPrewrite], seen[vfs.OpPrewriteSync])

	ffs.SetInjector(nil)
	l2, err := Open(opts)
	require.NoError(t, err)
	check(l2)
	require.NoError(t, l2.Close())

	opts.FS, opts.Trusted = img, flushed
	l3, err := Open(opts)
	require.NoError(t, err)
	defer l3.Close()
	require.Equal(t, flushed, l3.WrotePosition())
	require.Zero(t, l3.Report().LostFlushed)
	check(l3)
}

// A writer that catches up with zeros being written waits for their
// write to end, then writes; never the other way round.
func TestPrewriteReserveWaits(t *testing.T) {
	l, _, _ := prewriteLog(t)
	defer l.Close()
	w := l.WrotePosition()
	l.pre.zeroing.Store(&[2]int64{w + 100, w + 4096})
	l.reserve(w, w+100) // below the range: no wait
	require.Equal(t, w+100, l.pre.reserved.Load())
	done := make(chan struct{})
	go func() {
		defer close(done)
		l.reserve(w, w+200)
	}()
	select {
	case <-done:
		t.Fatal("reserve over zeros being written returned")
	default:
	}
	l.pre.zeroing.Store(nil)
	<-done
	require.Equal(t, w+200, l.pre.reserved.Load())
	if errors.Is(l.Fenced(), ErrFenced) {
		t.Fatal("fenced")
	}
}
