package consumer

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestRawRecordsAdd: records are copied one after another while they fit
// in cap(Buf); the first that does not fit changes nothing; reset keeps
// the memory.
func TestRawRecordsAdd(t *testing.T) {
	rr := RawRecords{Buf: make([]byte, 0, 10)}
	src := []byte("abcd")
	require.True(t, rr.Add(src, 5, 100, 40))
	src[0] = 'x' // the copy is rr's own
	require.True(t, rr.Add([]byte("efgh"), 6, 140, 40))
	require.False(t, rr.Add([]byte("ijk"), 7, 180, 39))
	require.True(t, rr.Full)
	require.Equal(t, "abcdefgh", string(rr.Buf))
	require.Equal(t, []RawRecord{
		{QueueOffset: 5, CommitLogOffset: 100, Start: 0, End: 4, StoreSize: 40},
		{QueueOffset: 6, CommitLogOffset: 140, Start: 4, End: 8, StoreSize: 40},
	}, rr.Recs)
	require.True(t, rr.Add([]byte("ij"), 7, 180, 38))
	buf := &rr.Buf[0]
	rr.reset()
	require.Empty(t, rr.Recs)
	require.False(t, rr.Full)
	require.Equal(t, 10, cap(rr.Buf))
	require.True(t, rr.Add([]byte("0123456789"), 8, 220, 46))
	require.Same(t, buf, &rr.Buf[0], "reset keeps the buffer")
}

// TestReadAheadGrow: buffers that ran out of room grow to half the
// consumer's ReadAheadBytes while it lasts, then stay as they are; a
// released grant serves the next queue.
func TestReadAheadGrow(t *testing.T) {
	m := &member{o: Options{ReadAheadBytes: 1 << 20}}
	var ras [3]readAhead
	for i := range ras {
		ras[i].grow(m)
	}
	require.Equal(t, 512<<10, cap(ras[0].recs.Buf))
	require.Equal(t, 512<<10, cap(ras[1].recs.Buf))
	require.Nil(t, ras[2].recs.Buf, "nothing left")
	require.EqualValues(t, 1<<20, m.readAheadUsed.Load())
	ras[0].grow(m) // grown already: no second grant
	require.EqualValues(t, 1<<20, m.readAheadUsed.Load())
	ras[1].release(m)
	require.EqualValues(t, 512<<10, m.readAheadUsed.Load())
	ras[2].grow(m)
	require.Equal(t, 512<<10, cap(ras[2].recs.Buf))
	for i := range ras {
		ras[i].release(m)
	}
	require.Zero(t, m.readAheadUsed.Load())

	small := &member{o: Options{ReadAheadBytes: 2 * readAheadStart}}
	var ra readAhead
	ra.grow(small) // half the budget is no larger than the start size
	require.Nil(t, ra.recs.Buf)
	require.Zero(t, small.readAheadUsed.Load())
}
