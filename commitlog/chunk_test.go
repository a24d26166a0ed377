package commitlog

import (
	"bytes"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mqlite/mqlite/internal/errs"
	"github.com/mqlite/mqlite/vfs"
)

// TestRecordsWalksAChunkAsScanDoes: Records over the chunks ReadRaw hands
// out (end-of-segment markers included, across segment rolls) visits the
// same records, offsets and payloads as Scan of the log, and returns each
// chunk's end, which is where the next chunk starts.
func TestRecordsWalksAChunkAsScanDoes(t *testing.T) {
	const seg = 64 << 10
	src := openLog(t, vfs.NewMem(), "/cl", seg)
	defer src.Close()
	for i := 0; src.WrotePosition() < 3*seg+100; i++ {
		_, err := src.Append(bytesAppender(payload(i, 50+(i*331)%4000)))
		require.NoError(t, err)
	}
	end := src.WrotePosition()
	type rec struct {
		off     int64
		size    int
		payload []byte
	}
	var want, got []rec
	_, err := src.Scan(0, end, true, func(r Record) error {
		want = append(want, rec{r.Offset, r.Size, bytes.Clone(r.Payload)})
		return nil
	})
	require.NoError(t, err)
	markers := 0
	var buf []byte
	for from := int64(0); from < end; {
		out, next, err := src.ReadRaw(from, 20<<10, buf)
		require.NoError(t, err)
		if bytes.Contains(out, le.AppendUint32(nil, BlankMagic)) {
			markers++
		}
		n, err := Records(from, out, func(r Record) error {
			got = append(got, rec{r.Offset, r.Size, bytes.Clone(r.Payload)})
			return nil
		})
		require.NoError(t, err)
		require.Equal(t, next, n, "chunk at %d", from)
		from, buf = next, out
	}
	require.Equal(t, want, got)
	require.Positive(t, markers, "some chunks ended a segment with its marker")

	// fn's error stops the walk at the record it failed on.
	out, _, err := src.ReadRaw(0, 20<<10, nil)
	require.NoError(t, err)
	stop := errors.New("stop")
	calls := 0
	n, err := Records(0, out, func(r Record) error {
		if calls++; calls == 3 {
			return stop
		}
		return nil
	})
	require.ErrorIs(t, err, stop)
	require.Equal(t, want[2].off, n)
}

// TestRecordsRefusesGarbage: a chunk whose frames do not fit (cut short,
// a size past its end, no magic) is an ErrCorrupt at the frame that does
// not, after the whole frames before it; never a panic.
func TestRecordsRefusesGarbage(t *testing.T) {
	src := openLog(t, vfs.NewMem(), "/cl", 1<<20)
	defer src.Close()
	for i := range 5 {
		_, err := src.Append(bytesAppender(payload(i, 100)))
		require.NoError(t, err)
	}
	out, _, err := src.ReadRaw(0, 1<<20, nil)
	require.NoError(t, err)
	size := FrameSize + 100
	require.Len(t, out, 5*size)
	count := func(b []byte) (int, int64, error) {
		n := 0
		next, err := Records(1000, b, func(Record) error { n++; return nil })
		return n, next, err
	}
	for cut := 1; cut < len(out); cut += 7 {
		n, next, err := count(out[:cut])
		if cut%size == 0 {
			require.NoError(t, err)
		} else {
			require.ErrorIs(t, err, errs.ErrCorrupt, "cut at %d", cut)
		}
		require.Equal(t, cut/size, n)
		require.Equal(t, int64(1000+n*size), next)
	}
	bad := bytes.Clone(out)
	le.PutUint32(bad[2*size+4:], 0x12345678) // the third frame's magic
	n, next, err := count(bad)
	require.ErrorIs(t, err, errs.ErrCorrupt)
	require.Equal(t, 2, n)
	require.Equal(t, int64(1000+2*size), next)
	bad = bytes.Clone(out)
	le.PutUint32(bad[size:], uint32(len(out))) // the second frame's size
	n, _, err = count(bad)
	require.ErrorIs(t, err, errs.ErrCorrupt)
	require.Equal(t, 1, n)
	bad = bytes.Clone(out[:2*size+BlankSize])
	le.PutUint32(bad[2*size:], BlankSize+1) // a marker longer than what is left
	le.PutUint32(bad[2*size+4:], BlankMagic)
	n, _, err = count(bad)
	require.ErrorIs(t, err, errs.ErrCorrupt)
	require.Equal(t, 2, n)
}
