package commitlog

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mqlite/mqlite/vfs"
)

// rollTimes appends indexed records, numbered from *next, until the write
// position has entered n more segments. After two rolls the write segment
// is the one the allocator prepared after DeleteBefore.
func rollTimes(t *testing.T, l *Log, next *int, n int) []int64 {
	t.Helper()
	var offs []int64
	seg := l.opts.SegmentSize
	for target := l.WrotePosition()/seg + int64(n); l.WrotePosition()/seg < target; *next++ {
		off, err := l.Append(indexed(*next))
		require.NoError(t, err)
		offs = append(offs, off)
	}
	return offs
}

// settle waits until the allocator has prepared the next segment, so that
// a spare made now is used for the one after.
func settle(l *Log) {
	p := <-l.allocReady
	l.allocReady <- p
}

// waitReleased waits until every segment DeleteBefore retired is unmapped
// and its file removed or made a spare (or, after DropSpare, removed).
func waitReleased(l *Log) {
	l.ret.Lock()
	defer l.ret.Unlock()
	for len(l.ret.retired) > 0 || l.ret.releasing > 0 {
		l.ret.done.Wait()
	}
}

// staleTail reports whether the write segment holds non-zero bytes past
// the write position: the old records of a recycled segment.
func staleTail(l *Log) bool {
	segs := l.snap.Load().segs
	cur := segs[len(segs)-1]
	return !isZero(cur.buf[l.WrotePosition()-cur.start:])
}

func exists(t *testing.T, fs vfs.FS, path string) bool {
	t.Helper()
	_, _, err := fs.Stat(path)
	return err == nil
}

// readAllIndexed reads every record from MinOffset to the write position in
// order and returns their indexes.
func readAllIndexed(t *testing.T, l *Log) []int {
	t.Helper()
	var got []int
	_, err := l.Scan(l.MinOffset(), l.WrotePosition(), true, func(r Record) error {
		i, err := checkIndexed(r)
		got = append(got, i)
		return err
	})
	require.NoError(t, err)
	return got
}

func seq(from, to int) []int {
	var s []int
	for i := from; i < to; i++ {
		s = append(s, i)
	}
	return s
}

// A segment DeleteBefore drops becomes a spare, and the allocator makes the
// spare the next segment; its old records are never read as records, and
// a clean reopen neither truncates nor drops anything.
func TestDeleteBeforeRecyclesTheSegment(t *testing.T) {
	for _, tc := range fsCases {
		t.Run(tc.name, func(t *testing.T) {
			fs, dir := tc.fs(t)
			l := openLog(t, fs, dir, MinSegmentSize)
			offs := fillSegments(t, l, 4)
			next := len(offs)
			segs := l.Segments()
			settle(l)
			rep, err := l.DeleteBefore(segs[1].Start)
			require.NoError(t, err)
			require.Equal(t, 1, rep.Segments)
			spare := segs[0].Path + spareSuffix
			require.False(t, exists(t, fs, segs[0].Path))
			require.True(t, exists(t, fs, spare), "kept as the spare")

			rollTimes(t, l, &next, 2)
			require.False(t, exists(t, fs, spare), "recycled")
			require.True(t, staleTail(l), "the write segment is the old file, old records and all")
			first := -1
			_, err = l.Scan(l.MinOffset(), l.MinOffset()+1, true, func(r Record) error {
				first, err = checkIndexed(r)
				return err
			})
			require.NoError(t, err)
			require.Equal(t, seq(first, next), readAllIndexed(t, l))
			end := l.WrotePosition()
			require.NoError(t, l.Close())

			l, err = Open(Options{Dir: dir, FS: fs, SegmentSize: MinSegmentSize, RecoverFrom: -1, CleanShutdown: true})
			require.NoError(t, err)
			defer l.Close()
			require.Equal(t, Report{Start: l.Report().Start, End: end}, l.Report(), "nothing truncated or dropped")
			require.Equal(t, seq(first, next), readAllIndexed(t, l))
		})
	}
}

// After a power loss the old records of a recycled write segment are
// neither taken for this log's records nor proof of damage, and a log
// that goes on writing over them and crashes again reads back exactly
// what it wrote.
func TestRecoveryIgnoresARecycledSegmentsOldRecords(t *testing.T) {
	ffs := vfs.NewFaulty(vfs.NewMem())
	const dir = "/cl"
	l := openLog(t, ffs, dir, MinSegmentSize)
	offs := fillSegments(t, l, 4)
	next := len(offs)
	settle(l)
	_, err := l.DeleteBefore(l.Segments()[1].Start)
	require.NoError(t, err)
	rollTimes(t, l, &next, 2)
	require.True(t, staleTail(l))
	for range 3 { // part of the write segment
		_, err := l.Append(indexed(next))
		require.NoError(t, err)
		next++
	}
	_, err = l.Flush()
	require.NoError(t, err)
	want := readAllIndexed(t, l)
	end := l.WrotePosition()
	defer l.Close()

	for round, p := range []float64{0, 0.5, 1} {
		img := ffs.Crash(rand.New(rand.NewPCG(7, uint64(round))), p)
		l2, err := Open(Options{Dir: dir, FS: img, SegmentSize: MinSegmentSize, RecoverFrom: -1, Trusted: end})
		require.NoError(t, err, "p=%v", p)
		require.Equal(t, end, l2.WrotePosition(), "p=%v", p)
		require.Zero(t, l2.Report().DroppedRecords, "p=%v: old records are not this log's", p)
		require.Less(t, l2.Report().TruncatedBytes, int64(vfs.PageSize), "p=%v: old records are left alone", p)
		require.Equal(t, want, readAllIndexed(t, l2), "p=%v", p)

		// Write over the old records, crash again with only the synced
		// bytes: nothing old comes back.
		ffs2 := vfs.NewFaulty(img)
		require.NoError(t, l2.Close())
		l3, err := Open(Options{Dir: dir, FS: ffs2, SegmentSize: MinSegmentSize, RecoverFrom: -1, CleanShutdown: true})
		require.NoError(t, err)
		n := next
		for range 5 {
			_, err := l3.Append(indexed(n))
			require.NoError(t, err)
			n++
		}
		_, err = l3.Flush()
		require.NoError(t, err)
		end3 := l3.WrotePosition()
		l4, err := Open(Options{Dir: dir, FS: ffs2.Crash(rand.New(rand.NewPCG(8, uint64(round))), 0), SegmentSize: MinSegmentSize, RecoverFrom: -1, Trusted: end3})
		require.NoError(t, err)
		require.Equal(t, end3, l4.WrotePosition())
		require.Equal(t, append(append([]int(nil), want...), seq(next, n)...), readAllIndexed(t, l4))
		require.NoError(t, l4.Close())
		require.NoError(t, l3.Close())
	}
}

// A spare a reader still maps is not recycled until the reader returns,
// and what the reader sees meanwhile stays intact.
func TestRecycleWaitsForTheReader(t *testing.T) {
	fs := vfs.NewMem()
	l := openLog(t, fs, "/cl", MinSegmentSize)
	defer l.Close()
	offs := fillSegments(t, l, 4)
	next := len(offs)
	segs := l.Segments()
	inside, proceed, done := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		done <- l.Read(offs[0], func(r Record) error {
			close(inside)
			<-proceed
			if i, err := checkIndexed(r); err != nil || i != 0 {
				return fmt.Errorf("record %d, %v: the reader's view changed", i, err)
			}
			return nil
		})
	}()
	<-inside
	_, err := l.DeleteBefore(segs[1].Start)
	require.NoError(t, err)
	spare := segs[0].Path + spareSuffix
	require.True(t, exists(t, fs, spare))
	rollTimes(t, l, &next, 3)
	require.False(t, staleTail(l), "a new file: the spare is still mapped")
	require.True(t, exists(t, fs, spare))
	settle(l)
	close(proceed)
	require.NoError(t, <-done)

	rollTimes(t, l, &next, 2)
	require.False(t, exists(t, fs, spare))
	require.True(t, staleTail(l), "recycled once the reader left")
}

// A read-only opener locks the segments it maps: while it is there, the
// owner removes those instead of recycling them (the opener's mapping keeps
// their records), and recycles the segments created after it opened.
func TestReadOnlyOpenerPreventsRecycling(t *testing.T) {
	fs := vfs.NewMem()
	const dir = "/cl"
	l := openLog(t, fs, dir, MinSegmentSize)
	defer l.Close()
	offs := fillSegments(t, l, 4)
	next := len(offs)
	settle(l) // the next segment's file exists too: the opener maps it
	r, err := Open(Options{Dir: dir, FS: vfs.ReadOnly(fs), SegmentSize: MinSegmentSize, ReadOnly: true})
	require.NoError(t, err)
	segs := l.Segments()
	_, err = l.DeleteBefore(segs[1].Start)
	require.NoError(t, err)
	require.False(t, exists(t, fs, segs[0].Path+spareSuffix), "removed, not kept")
	rollTimes(t, l, &next, 2)
	require.False(t, staleTail(l), "a new file")
	for i, off := range offs {
		if off >= segs[1].Start {
			break
		}
		require.NoError(t, r.Read(off, func(rec Record) error {
			got, err := checkIndexed(rec)
			if err == nil && got != i {
				err = fmt.Errorf("record %d, want %d", got, i)
			}
			return err
		}))
	}

	// Segments created after the opener opened are recycled while it is
	// still there; those it maps are removed on the way.
	mapped := segs[len(segs)-1].Start + MinSegmentSize // the last file it saw
	rollTimes(t, l, &next, 3)
	cur := l.Segments()
	require.Greater(t, cur[len(cur)-3].Start, mapped)
	settle(l)
	_, err = l.DeleteBefore(cur[len(cur)-1].Start)
	require.NoError(t, err)
	for _, s := range segs {
		require.False(t, exists(t, fs, s.Path+spareSuffix), "a segment the opener maps is no spare")
	}
	rollTimes(t, l, &next, 2)
	require.True(t, staleTail(l), "a segment made after the opener opened is recycled while it is open")
	require.NoError(t, r.Close())
}

// dropFirst opens a log in memory with o (Dir, FS and sizes filled in),
// fills four segments, lets the allocator prepare the next and drops the
// first segment. It returns the log (closed at the end of the test), its
// FS, the segments before the drop and the next record index.
func dropFirst(t *testing.T, o Options) (*Log, vfs.FS, []SegmentInfo, int) {
	t.Helper()
	fs := vfs.NewMem()
	o.Dir, o.FS, o.SegmentSize, o.RecoverFrom = "/cl", fs, MinSegmentSize, -1
	l, err := Open(o)
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	offs := fillSegments(t, l, 4)
	segs := l.Segments()
	settle(l)
	_, err = l.DeleteBefore(segs[1].Start)
	require.NoError(t, err)
	return l, fs, segs, len(offs)
}

// A spare whose pages were evicted is removed, not recycled: pre-faulting
// it would read it from disk.
func TestEvictedSpareIsNotRecycled(t *testing.T) {
	var evicted atomic.Bool
	l, fs, segs, next := dropFirst(t, Options{resident: func([]byte) float64 {
		if evicted.Load() {
			return minResident - 0.01
		}
		return 1
	}})
	evicted.Store(true)
	rollTimes(t, l, &next, 2)
	require.False(t, exists(t, fs, segs[0].Path+spareSuffix))
	require.False(t, staleTail(l), "a new file")
	require.Zero(t, l.recycled.Load())
	want := readAllIndexed(t, l)
	require.Equal(t, seq(want[0], next), want)
}

// NoRecycle removes what DeleteBefore drops; DropSpare and Close remove the
// spare; Open removes one a crash left behind.
func TestSpareRemoval(t *testing.T) {
	// noSpareLeft drops the first segment and checks that no spare is
	// left and the segments after are new files.
	noSpareLeft := func(t *testing.T, noRecycle, drop bool) {
		l, fs, segs, next := dropFirst(t, Options{NoRecycle: noRecycle})
		if drop {
			l.DropSpare()
		}
		// A background reader (the flusher) may still pin the dropped
		// segment: its file goes when the reader leaves.
		waitReleased(l)
		require.False(t, exists(t, fs, segs[0].Path+spareSuffix))
		rollTimes(t, l, &next, 2)
		require.False(t, staleTail(l))
	}
	t.Run("NoRecycle", func(t *testing.T) { noSpareLeft(t, true, false) })
	t.Run("DropSpare", func(t *testing.T) { noSpareLeft(t, false, true) })
	t.Run("DropSpare of a mapped one", func(t *testing.T) {
		fs := vfs.NewMem()
		l := openLog(t, fs, "/cl", MinSegmentSize)
		defer l.Close()
		offs := fillSegments(t, l, 4)
		segs := l.Segments()
		inside, proceed, done := make(chan struct{}), make(chan struct{}), make(chan error, 1)
		go func() {
			done <- l.Read(offs[0], func(Record) error { close(inside); <-proceed; return nil })
		}()
		<-inside
		_, err := l.DeleteBefore(segs[1].Start)
		require.NoError(t, err)
		l.DropSpare()
		require.True(t, exists(t, fs, segs[0].Path+spareSuffix), "mapped: removed when the reader leaves")
		close(proceed)
		require.NoError(t, <-done)
		// The last pin to leave removes it: ours, or a background reader's
		// (the allocator's), which may leave just after (seen under load).
		waitReleased(l)
		require.False(t, exists(t, fs, segs[0].Path+spareSuffix))
	})
	t.Run("Close and Open", func(t *testing.T) {
		fs := vfs.NewMem()
		l := openLog(t, fs, "/cl", MinSegmentSize)
		fillSegments(t, l, 4)
		segs := l.Segments()
		_, err := l.DeleteBefore(segs[1].Start)
		require.NoError(t, err)
		require.NoError(t, l.Close())
		require.False(t, exists(t, fs, segs[0].Path+spareSuffix), "Close removes it")

		left := filepath.Join("/cl", segmentName(0)+spareSuffix) // as a crash leaves it
		f, err := fs.OpenFile(left, os.O_RDWR|os.O_CREATE, 0o644)
		require.NoError(t, err)
		require.NoError(t, f.Close())
		l, err = Open(Options{Dir: "/cl", FS: fs, SegmentSize: MinSegmentSize, RecoverFrom: -1})
		require.NoError(t, err)
		require.False(t, exists(t, fs, left))
		require.NoError(t, l.Close())
	})
}
