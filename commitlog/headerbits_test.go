package commitlog

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mqlite/mqlite/internal/errs"
	"github.com/mqlite/mqlite/vfs"
)

// TestReadEveryHeaderBitFlipped flips, one at a time, each bit of the
// frame of a record in the middle of a sealed segment: Read and ReadMany
// of its offset (what an index hands out) fail with an ErrCorrupt naming
// the segment and the record's position there, never ErrNotFound, never
// a panic; the records around it still read. An offset inside a record is
// still ErrNotFound.
func TestReadEveryHeaderBitFlipped(t *testing.T) {
	fs := vfs.NewMem()
	l := openLog(t, fs, "/cl", MinSegmentSize)
	defer l.Close()
	var offs []int64
	for i := 0; l.WrotePosition() < MinSegmentSize+2000; i++ {
		off, err := l.Append(bytesAppender(payload(i, 200+i%5)))
		require.NoError(t, err)
		offs = append(offs, off)
	}
	k := len(offs) / 3 // in segment 0, sealed
	off := offs[k]
	require.Less(t, offs[k+1], int64(MinSegmentSize))
	seg := l.snap.Load().segs[0]
	noop := func(Record) error { return nil }
	for bit := 0; bit < FrameSize*8; bit++ {
		seg.buf[off+int64(bit/8)] ^= 1 << (bit % 8)
		err := l.Read(off, noop)
		require.ErrorIs(t, err, ErrCorrupt, "bit %d", bit)
		require.False(t, errors.Is(err, ErrNotFound), "bit %d", bit)
		var ce *errs.CorruptError
		require.ErrorAs(t, err, &ce, "bit %d", bit)
		require.Equal(t, seg.path, ce.Path, "bit %d", bit)
		require.Equal(t, off, ce.Offset, "bit %d", bit)
		n, err := l.ReadMany([]int64{offs[k-1], off, offs[k+1]}, func(int, Record) error { return nil })
		require.ErrorIs(t, err, ErrCorrupt, "bit %d", bit)
		require.Equal(t, 1, n, "bit %d", bit)
		require.NoError(t, l.Read(offs[k+1], noop), "bit %d: the next record", bit)
		seg.buf[off+int64(bit/8)] ^= 1 << (bit % 8)
	}
	require.NoError(t, l.Read(off, noop))
	for _, inside := range []int64{off + 1, off + 4, off + FrameSize, offs[k+1] - 8} {
		require.ErrorIs(t, l.Read(inside, noop), ErrNotFound, "offset %d inside a record", inside)
	}
}
