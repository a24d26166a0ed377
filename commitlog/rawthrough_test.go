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
// chunks across segment rolls (MemFS and the OS), large ones with WriteAt
// and no warming ahead, small ones through the warmed mapping: the
// segments are byte-identical to the source's, every record reads back
// through the mapping, only the write segment keeps a descriptor, and
// Append after it (a promoted replica) still goes through the mapping.
func TestRawThroughCopyIsByteIdentical(t *testing.T) {
	const seg = 1 << 20
	for _, fc := range fsCases[:2] {
		t.Run(fc.name, func(t *testing.T) {
			fs, dir := fc.fs(t)
			src := openLog(t, fs, dir, seg)
			defer src.Close()
			dst, err := Open(Options{Dir: dir + "-replica", FS: fs, SegmentSize: seg, RecoverFrom: -1, RawThrough: true})
			require.NoError(t, err)
			defer dst.Close()
			if !dst.rawThrough {
				t.Skip("this file system cannot write through files")
			}
			require.False(t, dst.writeThrough, "Append keeps the mapping")
			require.NotNil(t, dst.mu.cur.f, "the write segment's file is open")
			i := 0
			fill := func(to int64) {
				for ; src.WrotePosition() < to; i++ {
					_, err := src.Append(bytesAppender(payload(i, 50+(i*331)%4000)))
					require.NoError(t, err)
				}
			}
			fill(3 * rawThroughMin)
			require.Equal(t, 1, copyRaw(t, src, dst, 4*rawThroughMin), "one large chunk")
			require.Zero(t, dst.warmTo.Load(), "no warming ahead of a large chunk")
			fill(src.WrotePosition() + 2000)
			copyRaw(t, src, dst, 8<<10)
			require.Positive(t, dst.warmTo.Load(), "a small chunk goes through the warmed mapping")
			for src.WrotePosition() < 3*seg+500 {
				fill(src.WrotePosition() + 100<<10)
				copyRaw(t, src, dst, []int{8 << 10, 256 << 10}[i%2])
			}
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

			_, err = dst.Append(bytesAppender(payload(9999, 300)))
			require.NoError(t, err)
			require.NoError(t, dst.Read(end, func(r Record) error {
				require.Equal(t, payload(9999, 300), r.Payload)
				return nil
			}))
		})
	}
}

// TestRawThroughWriteFails: a failed WriteAt of a large raw chunk is
// AppendRaw's error, classified, publishes nothing and fences the log.
func TestRawThroughWriteFails(t *testing.T) {
	mem := vfs.NewMem()
	src := openLog(t, mem, "/src", 1<<20)
	defer src.Close()
	ffs := vfs.NewFaulty(vfs.NewMem())
	dst, err := Open(Options{Dir: "/cl", FS: ffs, SegmentSize: 1 << 20, RecoverFrom: -1, RawThrough: true})
	require.NoError(t, err)
	defer dst.Close()
	require.True(t, dst.rawThrough)
	for i := range 4 {
		_, err := src.Append(bytesAppender(payload(i, 100)))
		require.NoError(t, err)
	}
	for src.WrotePosition() < rawThroughMin {
		_, err := src.Append(bytesAppender(payload(9, 1000)))
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

// TestAppendRawSumChecksTheUncoveredBytes: a chunk ending a segment with
// an end-of-segment marker whose tail no record CRC covers: AppendRawSum
// takes it with the sum UncoveredCRC gives, and refuses it, writing
// nothing, when a byte of the marker's tail or the sum changed; a flipped
// record byte is the record CRC's to catch.
func TestAppendRawSumChecksTheUncoveredBytes(t *testing.T) {
	const seg = 8192
	src := openLog(t, vfs.NewMem(), "/src", seg)
	defer src.Close()
	for i := 0; src.WrotePosition() < seg; i++ {
		_, err := src.Append(bytesAppender(payload(i, 700)))
		require.NoError(t, err)
	}
	out, next, err := src.ReadRaw(0, seg, nil)
	require.NoError(t, err)
	require.EqualValues(t, seg, next, "the chunk runs to the segment's end")
	const seed = 0x1234
	sum := UncoveredCRC(seed, out)
	tail := seg - 1 // the marker's last byte
	require.NotEqual(t, sum, UncoveredCRC(seed, append(bytes.Clone(out[:tail]), out[tail]^1)), "the marker's tail counts")
	for _, c := range []struct {
		name  string
		chunk func([]byte) []byte
		sum   uint32
	}{
		{"marker tail flipped", func(b []byte) []byte { b[tail] ^= 1; return b }, sum},
		{"record byte flipped", func(b []byte) []byte { b[100] ^= 1; return b }, sum},
		{"sum wrong", func(b []byte) []byte { return b }, sum + 1},
	} {
		dst := openLog(t, vfs.NewMem(), "/dst", seg)
		_, err := dst.AppendRawSum(0, c.chunk(bytes.Clone(out)), seed, c.sum)
		require.ErrorIs(t, err, ErrCorrupt, c.name)
		require.Zero(t, dst.WrotePosition(), c.name)
		end, err := dst.AppendRawSum(0, out, seed, sum)
		require.NoError(t, err, c.name)
		require.Equal(t, next, end)
		require.NoError(t, dst.Close())
	}
}
