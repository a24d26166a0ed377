package commitlog

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mqlite/mqlite/vfs"
)

// copyRaw streams src into dst through ReadRaw and AppendRaw in chunks of
// at most max bytes and returns how many chunks it took.
func copyRaw(t *testing.T, src, dst *Log, max int) int {
	t.Helper()
	chunks := 0
	var buf []byte
	for from := dst.WrotePosition(); from < src.WrotePosition(); {
		out, next, err := src.ReadRaw(from, max, buf)
		require.NoError(t, err)
		require.Equal(t, from+int64(len(out)), next)
		end, err := dst.AppendRaw(from, out)
		require.NoError(t, err)
		require.Equal(t, next, end)
		from, buf = next, out
		chunks++
	}
	return chunks
}

// segmentBytes reads every segment file of l up to end.
func segmentBytes(t *testing.T, fs vfs.FS, l *Log, end int64) []byte {
	t.Helper()
	var all []byte
	for _, s := range l.Segments() {
		b, err := vfs.ReadFile(fs, s.Path)
		require.NoError(t, err)
		all = append(all, b...)
	}
	return all[:end-l.MinOffset()]
}

func TestRawCopyIsByteIdentical(t *testing.T) {
	for _, fc := range fsCases {
		t.Run(fc.name, func(t *testing.T) {
			fs, dir := fc.fs(t)
			src := openLog(t, fs, dir, 4096)
			dst := openLog(t, fs, dir+"-replica", 4096)
			for i := range 60 {
				// sizes that fill segments exactly now and then, and
				// leave markers of all sizes
				_, err := src.Append(bytesAppender(payload(i, 20+(i*97)%900)))
				require.NoError(t, err)
				if i%7 == 0 {
					copyRaw(t, src, dst, 512)
				}
			}
			chunks := copyRaw(t, src, dst, 512)
			require.Positive(t, chunks)
			require.Equal(t, src.WrotePosition(), dst.WrotePosition())
			end := src.WrotePosition()
			require.True(t, bytes.Equal(segmentBytes(t, fs, src, end), segmentBytes(t, fs, dst, end)))
			// The replica's log recovers to the same end.
			require.NoError(t, dst.Close())
			dst = openLog(t, fs, dir+"-replica", 4096)
			require.Equal(t, end, dst.WrotePosition())
			require.NoError(t, errorsJoin(src.Close(), dst.Close()))
		})
	}
}

func errorsJoin(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

func TestAppendRawRefusesBadChunks(t *testing.T) {
	fs := vfs.NewMem()
	src := openLog(t, fs, "/a", 4096)
	dst := openLog(t, fs, "/b", 4096)
	defer src.Close()
	defer dst.Close()
	for i := range 3 {
		_, err := src.Append(bytesAppender(payload(i, 100)))
		require.NoError(t, err)
	}
	out, _, err := src.ReadRaw(0, 1<<20, nil)
	require.NoError(t, err)
	flipped := bytes.Clone(out)
	flipped[len(flipped)-1] ^= 1
	_, err = dst.AppendRaw(0, flipped)
	require.ErrorIs(t, err, ErrCorrupt)
	_, err = dst.AppendRaw(0, out[:len(out)-5]) // a torn last frame
	require.ErrorIs(t, err, ErrCorrupt)
	_, err = dst.AppendRaw(128, out) // not at the end
	require.ErrorIs(t, err, ErrInvalidArgument)
	require.Equal(t, int64(0), dst.WrotePosition(), "nothing written")
	_, err = dst.AppendRaw(0, out)
	require.NoError(t, err)
}

func TestTruncateToCutsTailAndSegments(t *testing.T) {
	for _, fc := range fsCases[:2] {
		t.Run(fc.name, func(t *testing.T) {
			fs, dir := fc.fs(t)
			l := openLog(t, fs, dir, 4096)
			var offs []int64
			for i := range 40 {
				off, err := l.Append(bytesAppender(payload(i, 300)))
				require.NoError(t, err)
				offs = append(offs, off)
			}
			require.Greater(t, len(l.Segments()), 2)
			cut := offs[5]
			require.ErrorIs(t, l.TruncateTo(cut+1), ErrInvalidArgument)
			require.NoError(t, l.TruncateTo(cut))
			require.Equal(t, cut, l.WrotePosition())
			require.Len(t, l.Segments(), 1)
			require.ErrorIs(t, l.Read(offs[6], func(Record) error { return nil }), ErrNotFound)
			// Appends go on from the cut, across segments again.
			for i := range 40 {
				off, err := l.Append(bytesAppender(payload(100+i, 300)))
				require.NoError(t, err)
				if i == 0 {
					require.Equal(t, cut, off)
				}
			}
			end := l.WrotePosition()
			require.NoError(t, l.Close())
			l = openLog(t, fs, dir, 4096)
			require.Equal(t, end, l.WrotePosition())
			require.NoError(t, l.Close())
		})
	}
}

func TestRestartAtMovesAnEmptyLog(t *testing.T) {
	fs := vfs.NewMem()
	src := openLog(t, fs, "/a", 4096)
	defer src.Close()
	for i := range 40 {
		_, err := src.Append(bytesAppender(payload(i, 300)))
		require.NoError(t, err)
	}
	_, err := src.DeleteBefore(3 * 4096)
	require.NoError(t, err)
	require.EqualValues(t, 3*4096, src.MinOffset())
	dst := openLog(t, fs, "/b", 4096)
	require.ErrorIs(t, dst.RestartAt(100), ErrInvalidArgument)
	require.NoError(t, dst.RestartAt(src.MinOffset()))
	require.Equal(t, src.MinOffset(), dst.WrotePosition())
	require.Equal(t, src.MinOffset(), dst.MinOffset())
	copyRaw(t, src, dst, 1000)
	end := src.WrotePosition()
	require.True(t, bytes.Equal(segmentBytes(t, fs, src, end), segmentBytes(t, fs, dst, end)))
	require.ErrorIs(t, dst.RestartAt(0), ErrInvalidArgument, "not empty any more")
	require.NoError(t, dst.Close())
	dst = openLog(t, fs, "/b", 4096)
	require.Equal(t, end, dst.WrotePosition())
	require.Equal(t, src.MinOffset(), dst.MinOffset())
	require.NoError(t, dst.Close())
}
