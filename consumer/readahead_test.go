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
	require.Equal(t, "abcdefgh", string(rr.Buf))
	require.Equal(t, []RawRecord{
		{QueueOffset: 5, CommitLogOffset: 100, Start: 0, End: 4, StoreSize: 40},
		{QueueOffset: 6, CommitLogOffset: 140, Start: 4, End: 8, StoreSize: 40},
	}, rr.Recs)
	require.True(t, rr.Add([]byte("ij"), 7, 180, 38))
	buf := &rr.Buf[0]
	rr.reset()
	require.Empty(t, rr.Recs)
	require.Equal(t, 10, cap(rr.Buf))
	require.True(t, rr.Add([]byte("0123456789"), 8, 220, 46))
	require.Same(t, buf, &rr.Buf[0], "reset keeps the buffer")
}
