package commitlog

import (
	"bytes"
	"errors"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mqlite/mqlite/vfs"
)

// TestRawThroughCopyIsByteIdentical: a log with RawThrough takes raw
// chunks with WriteAt across segment rolls (MemFS and the OS): the
// segments are byte-identical to the source's, every record reads back
// through the mapping, only the write segment keeps a descriptor, the log
// is not warmed ahead of AppendRaw, and Append after it (a promoted
// replica) still goes through the mapping and warms.
func TestRawThroughCopyIsByteIdentical(t *testing.T) {
	for _, fc := range fsCases[:2] {
		t.Run(fc.name, func(t *testing.T) {
			fs, dir := fc.fs(t)
			src := openLog(t, fs, dir, MinSegmentSize)
			defer src.Close()
			dst, err := Open(Options{Dir: dir + "-replica", FS: fs, SegmentSize: MinSegmentSize, RecoverFrom: -1, RawThrough: true})
			require.NoError(t, err)
			defer dst.Close()
			if !dst.rawThrough {
				t.Skip("this file system cannot write through files")
			}
			require.False(t, dst.writeThrough, "Append keeps the mapping")
			require.NotNil(t, dst.mu.cur.f, "the write segment's file is open")
			for i := 0; src.WrotePosition() < 3*MinSegmentSize+500; i++ {
				_, err := src.Append(bytesAppender(payload(i, 50+(i*331)%4000)))
				require.NoError(t, err)
				if i%5 == 0 {
					copyRaw(t, src, dst, 8<<10)
				}
			}
			copyRaw(t, src, dst, 8<<10)
			end := src.WrotePosition()
			require.Equal(t, end, dst.WrotePosition())
			require.True(t, bytes.Equal(segmentBytes(t, fs, src, end), segmentBytes(t, fs, dst, end)))
			var want, got [][]byte
			_, err = src.Scan(0, end, true, func(r Record) error { want = append(want, bytes.Clone(r.Payload)); return nil })
			require.NoError(t, err)
			_, err = dst.Scan(0, end, true, func(r Record) error { got = append(got, bytes.Clone(r.Payload)); return nil })
			require.NoError(t, err)
			require.Equal(t, want, got)
			segs := dst.snap.Load().segs
			require.Greater(t, len(segs), 2)
			for _, s := range segs[:len(segs)-1] {
				require.Nil(t, s.f, "segment %d left behind keeps no descriptor", s.start)
			}
			require.Zero(t, dst.warmTo.Load(), "no warming asked for by AppendRaw")

			_, err = dst.Append(bytesAppender(payload(9999, 300)))
			require.NoError(t, err)
			require.Positive(t, dst.warmTo.Load(), "Append warms as before")
			require.NoError(t, dst.Read(end, func(r Record) error {
				require.Equal(t, payload(9999, 300), r.Payload)
				return nil
			}))
		})
	}
}

// TestRawThroughWriteFails: a failed WriteAt of a raw chunk is
// AppendRaw's error, classified, publishes nothing and fences the log.
func TestRawThroughWriteFails(t *testing.T) {
	mem := vfs.NewMem()
	src := openLog(t, mem, "/src", MinSegmentSize)
	defer src.Close()
	ffs := vfs.NewFaulty(vfs.NewMem())
	dst, err := Open(Options{Dir: "/cl", FS: ffs, SegmentSize: MinSegmentSize, RecoverFrom: -1, RawThrough: true})
	require.NoError(t, err)
	defer dst.Close()
	require.True(t, dst.rawThrough)
	for i := range 4 {
		_, err := src.Append(bytesAppender(payload(i, 100)))
		require.NoError(t, err)
	}
	out, _, err := src.ReadRaw(0, 1<<20, nil)
	require.NoError(t, err)
	ffs.SetInjector(func(op vfs.Op, path string) error {
		if op == vfs.OpWrite {
			return syscall.ENOSPC
		}
		return nil
	})
	_, err = dst.AppendRaw(0, out)
	require.ErrorIs(t, err, ErrDiskFull)
	require.Zero(t, dst.WrotePosition(), "nothing published")
	ffs.SetInjector(nil)
	_, err = dst.AppendRaw(0, out)
	require.ErrorIs(t, err, ErrFenced)
	require.True(t, errors.Is(dst.Fenced(), ErrDiskFull))
}
