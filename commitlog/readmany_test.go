package commitlog

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mqlite/mqlite/vfs"
)

// TestReadManyMatchesRead reads records across a segment roll with one
// ReadMany and checks each against Read; a bad offset, a damaged record
// and an error from fn each stop the batch at their index.
func TestReadManyMatchesRead(t *testing.T) {
	fs := vfs.NewMem()
	l := openLog(t, fs, "/cl", MinSegmentSize)
	var offs []int64
	for i := 0; l.WrotePosition() < MinSegmentSize+2000; i++ {
		off, err := l.Append(bytesAppender(payload(i, 300+i%7)))
		require.NoError(t, err)
		offs = append(offs, off)
	}
	require.Greater(t, len(offs), 4)

	var got []int64
	n, err := l.ReadMany(offs, func(i int, r Record) error {
		require.Equal(t, offs[i], r.Offset)
		require.Equal(t, payload(i, 300+i%7), r.Payload)
		require.Equal(t, FrameSize+len(r.Payload), r.Size)
		got = append(got, r.Offset)
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, len(offs), n)
	require.Equal(t, offs, got)

	bad := append([]int64{offs[0], offs[1]}, offs[2]+1, offs[3])
	n, err = l.ReadMany(bad, func(int, Record) error { return nil })
	require.ErrorIs(t, err, ErrNotFound)
	require.Equal(t, 2, n)

	n, err = l.ReadMany([]int64{offs[0], l.WrotePosition()}, func(int, Record) error { return nil })
	require.ErrorIs(t, err, ErrNotFound, "at the write position")
	require.Equal(t, 1, n)

	stop := errors.New("stop")
	n, err = l.ReadMany(offs, func(i int, _ Record) error {
		if i == 3 {
			return stop
		}
		return nil
	})
	require.ErrorIs(t, err, stop)
	require.Equal(t, 3, n)

	// Flip a payload byte of the third record: the CRC check stops there.
	seg := l.snap.Load().segs[0]
	seg.buf[offs[2]+FrameSize] ^= 0xFF
	n, err = l.ReadMany(offs[:4], func(int, Record) error { return nil })
	require.ErrorIs(t, err, ErrCorrupt)
	require.Equal(t, 2, n)
	seg.buf[offs[2]+FrameSize] ^= 0xFF

	n, err = l.ReadMany(nil, func(int, Record) error { t.Fatal("called"); return nil })
	require.NoError(t, err)
	require.Zero(t, n)

	require.NoError(t, l.Close())
	_, err = l.ReadMany(offs[:1], func(int, Record) error { return nil })
	require.ErrorIs(t, err, ErrClosed)
}
