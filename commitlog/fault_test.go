package commitlog

import (
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mqlite/mqlite/vfs"
)

// TestReadAtEveryOffset reads at every offset of a log whose segments end
// with end-of-segment markers of several sizes, including the smallest (12
// bytes): a record start reads back, anything else is ErrNotFound or
// ErrCorrupt, never a panic.
func TestReadAtEveryOffset(t *testing.T) {
	l := openLog(t, vfs.NewMem(), "/cl", MinSegmentSize)
	defer l.Close()
	starts := map[int64]bool{}
	add := func(n int) {
		off, err := l.Append(bytesAppender(payload(len(starts), n)))
		require.NoError(t, err)
		starts[off] = true
	}
	add(MinSegmentSize - BlankSize - FrameSize) // leaves exactly a blank's room
	add(100)                                    // rolls: a 12-byte marker
	for range 30 {
		add(200)
	}
	add(50)
	require.Greater(t, l.WrotePosition(), int64(2*MinSegmentSize))
	for off := int64(-2); off < l.WrotePosition()+2; off++ {
		err := l.Read(off, func(r Record) error {
			require.Equal(t, off, r.Offset)
			return nil
		})
		if starts[off] {
			require.NoError(t, err, "offset %d", off)
			continue
		}
		require.Error(t, err, "offset %d", off)
		if !errors.Is(err, ErrNotFound) {
			require.ErrorIs(t, err, ErrCorrupt, "offset %d", off)
		}
	}
	require.ErrorIs(t, l.Read(1<<62, func(Record) error { return nil }), ErrNotFound)
	require.Nil(t, l.Fenced(), "bad offsets do not fence the log")
}

// TestPowerLossBeforeFirstFlush crashes a log that rolled twice without
// ever flushing (FlushAsync before its first background flush): the
// segments the allocator created must come back whole, not as short files
// in the middle of the log (which Open rejects as damage).
func TestPowerLossBeforeFirstFlush(t *testing.T) {
	for _, p := range []float64{0, 0.5} {
		ffs := vfs.NewFaulty(vfs.NewMem())
		l := openLog(t, ffs, "/cl", MinSegmentSize)
		for i := 0; l.WrotePosition() < 2*MinSegmentSize+100; i++ {
			_, err := l.Append(bytesAppender(payload(i, 300)))
			require.NoError(t, err)
		}
		img := ffs.Crash(rand.New(rand.NewPCG(1, uint64(p*10))), p)
		require.NoError(t, l.Close())
		l2, err := Open(Options{Dir: "/cl", FS: img, SegmentSize: MinSegmentSize, RecoverFrom: -1})
		require.NoError(t, err, "p=%v", p)
		// Nothing was synced: whatever survived is a valid prefix.
		_, err = l2.Scan(0, l2.WrotePosition(), true, func(Record) error { return nil })
		require.NoError(t, err)
		require.NoError(t, l2.Close())
	}
}

// TestMappedSegmentTruncatedUnderneath truncates segment files under an
// open log (S15). Touching the lost pages raises SIGBUS; the log turns it
// into ErrIO, fences itself for writes, and the process lives on.
func TestMappedSegmentTruncatedUnderneath(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cl")
	const seg = 64 << 10
	l := openLog(t, vfs.OS, dir, seg)
	defer l.Close()
	var offs []int64
	for i := 0; l.WrotePosition() < 3*seg+100; i++ {
		off, err := l.Append(bytesAppender(payload(i, 1000)))
		require.NoError(t, err)
		offs = append(offs, off)
	}
	_, err := l.Flush()
	require.NoError(t, err)
	path := func(start int64) string { return filepath.Join(dir, segmentName(start)) }
	nop := func(Record) error { return nil }

	// Segment 1 cut to half: its first half still reads, its second half
	// faults.
	require.NoError(t, os.Truncate(path(seg), seg/2))
	var early, late int64 = -1, -1
	for _, off := range offs {
		if off >= seg && off+1028 <= seg+seg/2-vfs.PageSize && early < 0 {
			early = off
		}
		if off >= seg+seg/2+vfs.PageSize && off < 2*seg {
			late = off
		}
	}
	require.NoError(t, l.Read(early, nop), "a record below the cut reads")
	err = l.Read(late, nop)
	require.ErrorIs(t, err, ErrIO, "a record past the cut faults: %v", err)
	require.ErrorIs(t, l.Fenced(), ErrFenced)

	// Segment 0 cut to nothing: reads and scans fault, writes are fenced.
	require.NoError(t, os.Truncate(path(0), 0))
	require.ErrorIs(t, l.Read(offs[1], nop), ErrIO)
	_, err = l.Scan(0, l.WrotePosition(), true, nop)
	require.ErrorIs(t, err, ErrIO)
	_, err = l.Append(bytesAppender("x"))
	require.ErrorIs(t, err, ErrFenced)
	_, err = l.Flush()
	require.ErrorIs(t, err, ErrFenced)
	require.NoError(t, l.Read(offs[len(offs)-1], nop), "untouched segments still read")
	require.NoError(t, l.Close())

	// The damaged files are reported at the next Open, not mapped past
	// their end.
	_, err = Open(Options{Dir: dir, SegmentSize: seg, RecoverFrom: -1})
	corruptErr(t, err, path(0), 0)
}

// TestWriteIntoTruncatedSegment truncates the current segment under the
// appender: the store into the lost mapping faults, Append returns ErrIO
// and the log is fenced.
func TestWriteIntoTruncatedSegment(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cl")
	const seg = 64 << 10
	l := openLog(t, vfs.OS, dir, seg)
	defer l.Close()
	_, err := l.Append(bytesAppender(payload(0, 100)))
	require.NoError(t, err)
	require.NoError(t, os.Truncate(filepath.Join(dir, segmentName(0)), 0))
	_, err = l.Append(bytesAppender(payload(1, 100)))
	require.ErrorIs(t, err, ErrIO)
	require.ErrorIs(t, l.Fenced(), ErrFenced)
	_, err = l.Append(bytesAppender(payload(2, 100)))
	require.ErrorIs(t, err, ErrFenced)
}

// TestLostPageInOlderSegment loses the first page of the oldest of five
// never-synced segments, as a power loss may (write-back order is not log
// order). Recovery after a crash starts at the trusted offset, not at the
// third-to-last segment, so the hole ends the log instead of hiding in the
// middle of it. Below a trusted offset nothing is rescanned: there the page
// is damage, reported when read.
func TestLostPageInOlderSegment(t *testing.T) {
	for _, trusted := range []int64{0, 4 * MinSegmentSize} {
		fs := vfs.NewMem()
		l := openLog(t, fs, "/cl", MinSegmentSize)
		for i := 0; l.WrotePosition() < 4*MinSegmentSize+100; i++ {
			_, err := l.Append(bytesAppender(payload(i, 300)))
			require.NoError(t, err)
		}
		end := l.WrotePosition()
		require.NoError(t, l.Close())
		f, err := fs.OpenFile("/cl/"+segmentName(0), os.O_RDWR, 0)
		require.NoError(t, err)
		_, err = f.WriteAt(make([]byte, vfs.PageSize), 0)
		require.NoError(t, err)
		require.NoError(t, f.Close())

		l2, err := Open(Options{Dir: "/cl", FS: fs, SegmentSize: MinSegmentSize, RecoverFrom: -1, Trusted: trusted})
		require.NoError(t, err)
		rep := l2.Report()
		if trusted > 0 {
			require.Equal(t, end, rep.End)
			_, err := l2.Scan(0, end, true, func(Record) error { return nil })
			require.ErrorIs(t, err, ErrCorrupt)
			require.NoError(t, l2.Close())
			continue
		}
		require.Equal(t, int64(0), rep.End)
		require.Equal(t, 4, rep.RemovedSegments)
		require.Positive(t, rep.DroppedRecords)
		require.Equal(t, int64(0), l2.WrotePosition())
		require.NoError(t, l2.Close())
	}
}
