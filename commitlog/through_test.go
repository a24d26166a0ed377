package commitlog

import (
	"errors"
	"math/rand/v2"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mqlite/mqlite/vfs"
)

// TestWriteThroughChoice: a log writes through its files only with
// SmallSyncs on a file system whose writes reach its mappings.
func TestWriteThroughChoice(t *testing.T) {
	for _, c := range []struct {
		name  string
		fs    vfs.FS
		small bool
		want  bool
	}{
		{"mem/small", vfs.NewMem(), true, true},
		{"mem/large", vfs.NewMem(), false, false},
		{"faulty/small", vfs.NewFaulty(vfs.NewMem()), true, true},
		{"strict/small", vfs.NewStrictMapFS(vfs.NewMem()), true, false},
		{"os/small", vfs.OS, true, vfs.WritesReachMappings(vfs.OS)},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := "/cl"
			if c.fs == vfs.OS {
				dir = filepath.Join(t.TempDir(), "cl")
			}
			l, err := Open(Options{Dir: dir, FS: c.fs, SegmentSize: MinSegmentSize, RecoverFrom: -1, SmallSyncs: c.small})
			require.NoError(t, err)
			defer l.Close()
			require.Equal(t, c.want, l.writeThrough)
			require.Equal(t, c.want, l.mu.cur.f != nil, "the write segment's file is open")
		})
	}
}

// TestWriteThroughReadsBack appends across several segments, records and
// batches, through the file, on MemFS and the OS: every record reads back
// through the mapping, segments end with their markers, only the write
// segment keeps a descriptor, and a reopened log finds the same records.
func TestWriteThroughReadsBack(t *testing.T) {
	for _, fc := range fsCases[:2] {
		t.Run(fc.name, func(t *testing.T) {
			fs, dir := fc.fs(t)
			opts := Options{Dir: dir, FS: fs, SegmentSize: MinSegmentSize, RecoverFrom: -1, SmallSyncs: true}
			l, err := Open(opts)
			require.NoError(t, err)
			if !l.writeThrough {
				l.Close()
				t.Skip("this file system cannot write through files")
			}
			want := map[int64][]byte{}
			for i := 0; l.WrotePosition() < 3*MinSegmentSize+500; i++ {
				if i%5 == 4 {
					batch := []Appender{bytesAppender(payload(i, 40)), bytesAppender(payload(i+1000, 90))}
					first, _, err := l.AppendBatch(batch)
					require.NoError(t, err)
					want[first] = payload(i, 40)
					want[first+FrameSize+40] = payload(i+1000, 90)
					continue
				}
				p := payload(i, 100+i%300)
				off, err := l.Append(bytesAppender(p))
				require.NoError(t, err)
				want[off] = p
				if i%7 == 0 {
					_, err := l.Flush()
					require.NoError(t, err)
				}
			}
			open := 0
			for _, s := range l.snap.Load().segs {
				if s.f != nil {
					open++
				}
			}
			require.Equal(t, 1, open, "descriptors held")
			check := func(l *Log) {
				got := 0
				_, err := l.Scan(0, l.WrotePosition(), true, func(r Record) error {
					require.Equal(t, want[r.Offset], r.Payload, "offset %d", r.Offset)
					got++
					return nil
				})
				require.NoError(t, err)
				require.Equal(t, len(want), got)
			}
			check(l)
			end := l.WrotePosition()
			require.NoError(t, l.Close())
			l2, err := Open(opts)
			require.NoError(t, err)
			defer l2.Close()
			require.Equal(t, end, l2.WrotePosition())
			check(l2)
		})
	}
}

// TestWriteThroughPowerLoss: what a Flush covered survives every power
// loss image, whatever share of the unsynced pages the image keeps; what
// it did not is a valid prefix or gone.
func TestWriteThroughPowerLoss(t *testing.T) {
	for _, p := range []float64{0, 0.5, 1} {
		ffs := vfs.NewFaulty(vfs.NewMem())
		l, err := Open(Options{Dir: "/cl", FS: ffs, SegmentSize: MinSegmentSize, RecoverFrom: -1, SmallSyncs: true})
		require.NoError(t, err)
		require.True(t, l.writeThrough)
		for i := 0; l.WrotePosition() < 2*MinSegmentSize+300; i++ {
			_, err := l.Append(bytesAppender(payload(i, 150)))
			require.NoError(t, err)
		}
		flushed, err := l.Flush()
		require.NoError(t, err)
		for i := range 10 {
			_, err := l.Append(bytesAppender(payload(1000+i, 150)))
			require.NoError(t, err)
		}
		img := ffs.Crash(rand.New(rand.NewPCG(7, uint64(p*10))), p)
		require.NoError(t, l.Close())
		l2, err := Open(Options{Dir: "/cl", FS: img, SegmentSize: MinSegmentSize, RecoverFrom: -1, Trusted: flushed})
		require.NoError(t, err, "p=%v", p)
		require.GreaterOrEqual(t, l2.WrotePosition(), flushed, "p=%v: flushed records lost", p)
		require.Zero(t, l2.Report().LostFlushed)
		_, err = l2.Scan(0, l2.WrotePosition(), true, func(Record) error { return nil })
		require.NoError(t, err)
		require.NoError(t, l2.Close())
	}
}

// TestWriteThroughWriteFails: a failed pwrite is the append's error,
// classified (a full disk is ErrDiskFull), and fences the log: the caller
// took offsets for the records it could not write.
func TestWriteThroughWriteFails(t *testing.T) {
	ffs := vfs.NewFaulty(vfs.NewMem())
	l, err := Open(Options{Dir: "/cl", FS: ffs, SegmentSize: MinSegmentSize, RecoverFrom: -1, SmallSyncs: true})
	require.NoError(t, err)
	defer l.Close()
	_, err = l.Append(bytesAppender(payload(1, 100)))
	require.NoError(t, err)
	end := l.WrotePosition()
	ffs.SetInjector(func(op vfs.Op, path string) error {
		if op == vfs.OpWrite {
			return syscall.ENOSPC
		}
		return nil
	})
	_, err = l.Append(bytesAppender(payload(2, 100)))
	require.ErrorIs(t, err, ErrDiskFull)
	require.Equal(t, end, l.WrotePosition(), "nothing published")
	ffs.SetInjector(nil)
	_, err = l.Append(bytesAppender(payload(3, 100)))
	require.ErrorIs(t, err, ErrFenced)
	require.True(t, errors.Is(l.Fenced(), ErrDiskFull))
}
