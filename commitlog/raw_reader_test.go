package commitlog

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mqlite/mqlite/internal/errs"
	"github.com/mqlite/mqlite/vfs"
)

// TestRawReaderReadsWhatViewRawHandsOver: from every frame start, with
// limits below, around and above the record sizes (records longer than
// the limit come whole, markers of every size end segments), the
// RawReader returns the bytes and the next offset ReadRaw does; from the
// write position, nothing.
func TestRawReaderReadsWhatViewRawHandsOver(t *testing.T) {
	for _, fc := range fsCases {
		t.Run(fc.name, func(t *testing.T) {
			fs, dir := fc.fs(t)
			l := openLog(t, fs, dir, 4096)
			defer l.Close()
			r := l.NewRawReader()
			if !vfs.WritesReachMappings(fs) {
				require.Nil(t, r)
				return
			}
			require.NotNil(t, r)
			defer func() { require.NoError(t, r.Close()) }()
			for i := range 60 {
				_, err := l.Append(bytesAppender(payload(i, 20+(i*97)%900)))
				require.NoError(t, err)
			}
			w := l.WrotePosition()
			starts := []int64{0}
			for from := int64(0); from < w; {
				_, next, err := l.ReadRaw(from, 1, nil)
				require.NoError(t, err)
				starts = append(starts, next)
				from = next
			}
			require.Greater(t, len(starts), 60, "records and markers")
			for _, max := range []int{1, 300, 512, 1000, 4096, 1 << 20} {
				for _, from := range starts {
					want, wantNext, err := l.ReadRaw(from, max, nil)
					require.NoError(t, err)
					got, next, err := r.Read(from, max)
					require.NoError(t, err)
					require.Equal(t, wantNext, next, "from %d, max %d", from, max)
					require.Equal(t, want, got, "from %d, max %d", from, max)
				}
			}
			_, _, err := r.Read(w+1, 512)
			require.ErrorIs(t, err, errs.ErrInvalidArgument)
		})
	}
}

// TestRawReaderReadFails: a segment file that cannot be read fails the
// Read with the file system's error, handing over nothing; the next Read
// after the fault works.
func TestRawReaderReadFails(t *testing.T) {
	ffs := vfs.NewFaulty(vfs.NewMem())
	l := openLog(t, ffs, "/cl", 1<<20)
	defer l.Close()
	r := l.NewRawReader()
	require.NotNil(t, r)
	defer r.Close()
	for i := range 20 {
		_, err := l.Append(bytesAppender(payload(i, 1000)))
		require.NoError(t, err)
	}
	boom := errors.New("boom")
	ffs.SetInjector(func(op vfs.Op, path string) error {
		if op == vfs.OpRead {
			return boom
		}
		return nil
	})
	b, next, err := r.Read(0, 8192)
	require.ErrorIs(t, err, boom)
	require.Nil(t, b)
	require.Zero(t, next)
	ffs.SetInjector(nil)
	want, wantNext, err := l.ReadRaw(0, 8192, nil)
	require.NoError(t, err)
	b, next, err = r.Read(0, 8192)
	require.NoError(t, err)
	require.Equal(t, wantNext, next)
	require.Equal(t, want, b)
}

// TestRawReaderSegmentRemovedWhileRead: retention removes the segment a
// Read is reading from in the middle of the read: the read still returns
// that segment's bytes (its pin keeps the file), the next Read there is
// ErrNotFound, and a Read of a segment retention kept works.
func TestRawReaderSegmentRemovedWhileRead(t *testing.T) {
	ffs := vfs.NewFaulty(vfs.NewMem())
	const seg = 8192
	l := openLog(t, ffs, "/cl", seg)
	defer l.Close()
	r := l.NewRawReader()
	require.NotNil(t, r)
	defer r.Close()
	for l.WrotePosition() < 4*seg {
		_, err := l.Append(bytesAppender(payload(int(l.WrotePosition()), 1000)))
		require.NoError(t, err)
	}
	want, wantNext, err := l.ReadRaw(0, 4096, nil)
	require.NoError(t, err)
	removed := 0
	ffs.SetInjector(func(op vfs.Op, path string) error {
		if op == vfs.OpRead && removed == 0 {
			removed++
			rep, err := l.DeleteBefore(2 * seg)
			require.NoError(t, err)
			require.Equal(t, 2, rep.Segments)
		}
		return nil
	})
	b, next, err := r.Read(0, 4096)
	require.NoError(t, err)
	require.Equal(t, 1, removed)
	require.Equal(t, wantNext, next)
	require.Equal(t, want, b)
	ffs.SetInjector(nil)
	_, _, err = r.Read(next, 4096)
	require.ErrorIs(t, err, errs.ErrNotFound)
	want, wantNext, err = l.ReadRaw(2*seg, 4096, nil)
	require.NoError(t, err)
	b, next, err = r.Read(2*seg, 4096)
	require.NoError(t, err)
	require.Equal(t, wantNext, next)
	require.Equal(t, want, b)
}

// TestRawReaderDamagedSegment: zeros or a bad magic where a record should
// be, and a segment file cut short under the log, are ErrCorrupt, not a
// panic, and hand over nothing.
func TestRawReaderDamagedSegment(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "commitlog")
	l := openLog(t, vfs.OS, dir, 1<<20)
	defer l.Close()
	r := l.NewRawReader()
	if r == nil {
		t.Skip("the OS file system's reads do not promise to see the mappings here")
	}
	defer r.Close()
	var offs []int64
	for i := range 40 {
		off, err := l.Append(bytesAppender(payload(i, 1000)))
		require.NoError(t, err)
		offs = append(offs, off)
	}
	path := l.Segments()[0].Path
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	require.NoError(t, err)
	defer f.Close()
	_, err = f.WriteAt(make([]byte, 8), offs[3]) // zeros: size and magic
	require.NoError(t, err)
	_, err = f.WriteAt([]byte{1, 2, 3, 4}, offs[6]+4) // a bad magic
	require.NoError(t, err)
	for _, from := range []int64{offs[3], offs[6]} {
		b, next, err := r.Read(from, 4096)
		require.ErrorIs(t, err, errs.ErrCorrupt, "at %d", from)
		require.Nil(t, b)
		require.Equal(t, from, next)
	}
	b, next, err := r.Read(offs[1], int(offs[3]-offs[1])) // ends before the damage
	require.NoError(t, err)
	require.Equal(t, offs[3], next)
	require.Len(t, b, int(offs[3]-offs[1]))
	require.NoError(t, f.Truncate(offs[10]))
	b, next, err = r.Read(offs[8], 1<<16)
	require.ErrorIs(t, err, errs.ErrCorrupt)
	require.Nil(t, b)
	require.Equal(t, offs[8], next)
	require.NoError(t, f.Truncate(1<<20)) // the log's own Close reads the mapping
}
