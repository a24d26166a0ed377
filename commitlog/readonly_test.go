package commitlog

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mqlite/mqlite/vfs"
)

// snapshotFiles returns the name and bytes of every file under dir.
func snapshotFiles(t *testing.T, fs vfs.FS, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	names, err := fs.ReadDir(dir)
	require.NoError(t, err)
	for _, n := range names {
		b, err := readWhole(fs, filepath.Join(dir, n))
		require.NoError(t, err)
		out[n] = b
	}
	return out
}

func readWhole(fs vfs.FS, path string) ([]byte, error) {
	f, err := fs.OpenFile(path, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return nil, err
	}
	b := make([]byte, size)
	if size == 0 {
		return b, nil // the readers lock file
	}
	_, err = f.ReadAt(b, 0)
	return b, err
}

// A read-only log beside a writer sees every record appended before it
// opened, nothing after, refuses every write, and changes no file.
func TestReadOnlyBesideWriter(t *testing.T) {
	for _, fc := range fsCases {
		t.Run(fc.name, func(t *testing.T) {
			fs, dir := fc.fs(t)
			w, err := Open(Options{Dir: dir, FS: fs, SegmentSize: 4096, RecoverFrom: -1, NoWarm: true})
			require.NoError(t, err)
			defer w.Close()
			var offs []int64
			for i := range 300 {
				off, err := w.Append(indexed(i))
				require.NoError(t, err)
				offs = append(offs, off)
			}
			end := w.WrotePosition()

			r, err := Open(Options{Dir: dir, FS: vfs.ReadOnly(fs), SegmentSize: 4096, ReadOnly: true})
			require.NoError(t, err)
			defer func() { require.NoError(t, r.Close()) }()
			require.Equal(t, end, r.WrotePosition())
			require.Equal(t, end, r.Report().End)
			require.Zero(t, r.MinOffset())

			later, err := w.Append(indexed(300)) // after the read-only open
			require.NoError(t, err)

			n := 0
			next, err := r.Scan(0, end, true, func(rec Record) error {
				i, err := checkIndexed(rec)
				require.Equal(t, n, i)
				require.Equal(t, offs[i], rec.Offset)
				n++
				return err
			})
			require.NoError(t, err)
			require.Equal(t, end, next)
			require.Equal(t, 300, n)
			require.NoError(t, r.Read(offs[299], func(rec Record) error { _, err := checkIndexed(rec); return err }))
			require.ErrorIs(t, r.Read(later, func(Record) error { return nil }), ErrNotFound, "a view as of Open")

			_, err = r.Append(indexed(1))
			require.ErrorIs(t, err, ErrReadOnly)
			_, _, err = r.AppendBatch([]Appender{indexed(1)})
			require.ErrorIs(t, err, ErrReadOnly)
			_, err = r.Flush()
			require.ErrorIs(t, err, ErrReadOnly)
			_, err = r.DeleteBefore(end)
			require.ErrorIs(t, err, ErrReadOnly)
			require.Zero(t, r.MinOffset())
		})
	}
}

// A torn tail is where a read-only log ends; it is not repaired (the next
// writable Open truncates it).
func TestReadOnlyLeavesTornTail(t *testing.T) {
	fs := vfs.NewMem()
	const dir = "/ro/commitlog"
	w := openLog(t, fs, dir, 4096)
	for i := range 20 {
		_, err := w.Append(indexed(i))
		require.NoError(t, err)
	}
	end := w.WrotePosition()
	require.NoError(t, w.Close())
	// A torn record after the end: a frame header and half a payload.
	f, err := fs.OpenFile(filepath.Join(dir, segmentName(end/4096*4096)), os.O_RDWR, 0)
	require.NoError(t, err)
	var torn [40]byte
	le.PutUint32(torn[0:], 200)
	le.PutUint32(torn[4:], MagicV1)
	copy(torn[12:], bytes.Repeat([]byte{0xab}, 28))
	_, err = f.WriteAt(torn[:], end%4096)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	before := snapshotFiles(t, fs, dir)

	r, err := Open(Options{Dir: dir, FS: vfs.ReadOnly(fs), SegmentSize: 4096, ReadOnly: true})
	require.NoError(t, err)
	require.Equal(t, end, r.WrotePosition())
	require.Zero(t, r.Report().TruncatedBytes)
	require.NoError(t, r.Close())
	require.Equal(t, before, snapshotFiles(t, fs, dir), "nothing changed")

	w, err = Open(Options{Dir: dir, FS: fs, SegmentSize: 4096, RecoverFrom: -1})
	require.NoError(t, err)
	require.Positive(t, w.Report().TruncatedBytes, "the writer repairs it")
	require.NoError(t, w.Close())
}

// segmentNames lists the segment files of dir.
func segmentNames(t *testing.T, fs vfs.FS, dir string) []string {
	t.Helper()
	names, err := fs.ReadDir(dir)
	require.NoError(t, err)
	var segs []string
	for _, n := range names {
		if _, ok := segmentStart(n); ok {
			segs = append(segs, n)
		}
	}
	return segs
}

// A short last segment (being allocated) is left out; a short sealed one
// is damage; an empty directory is an empty log.
func TestReadOnlySegmentShapes(t *testing.T) {
	fs := vfs.NewMem()
	const dir = "/shapes/commitlog"
	w := openLog(t, fs, dir, 4096)
	offs := fillSegments(t, w, 3)
	end := w.WrotePosition()
	require.NoError(t, w.Close())
	names := segmentNames(t, fs, dir)
	// The owner's allocator has created the next segment and not yet
	// allocated it.
	f, err := fs.OpenFile(filepath.Join(dir, segmentName(int64(len(names))*4096)), os.O_RDWR|os.O_CREATE, 0o644)
	require.NoError(t, err)
	require.NoError(t, f.Truncate(100))
	require.NoError(t, f.Close())

	r, err := Open(Options{Dir: dir, FS: vfs.ReadOnly(fs), SegmentSize: 4096, ReadOnly: true})
	require.NoError(t, err)
	require.Equal(t, end, r.WrotePosition())
	require.NoError(t, r.Read(offs[len(offs)-1], func(Record) error { return nil }))
	require.NoError(t, r.Close())

	f, err = fs.OpenFile(filepath.Join(dir, names[0]), os.O_RDWR, 0)
	require.NoError(t, err)
	require.NoError(t, f.Truncate(100))
	require.NoError(t, f.Close())
	_, err = Open(Options{Dir: dir, FS: vfs.ReadOnly(fs), SegmentSize: 4096, ReadOnly: true})
	require.ErrorIs(t, err, ErrCorrupt)

	require.NoError(t, fs.MkdirAll("/empty/commitlog", 0o755))
	r, err = Open(Options{Dir: "/empty/commitlog", FS: vfs.ReadOnly(fs), SegmentSize: 4096, ReadOnly: true})
	require.NoError(t, err)
	require.Zero(t, r.WrotePosition())
	require.ErrorIs(t, r.Read(0, func(Record) error { return nil }), ErrNotFound)
	require.NoError(t, r.Close())
}

// A read-only open reads past damage in the middle of the last segment
// (valid records after it) to the true end, listing the damaged range in
// its Report; a damaged last record is where the log ends, as a torn one.
func TestReadOnlyPastDamage(t *testing.T) {
	fs := vfs.NewMem()
	const dir = "/cl"
	w := openLog(t, fs, dir, MinSegmentSize)
	var offs []int64
	for i := 0; w.WrotePosition() < MinSegmentSize+3000; i++ {
		off, err := w.Append(bytesAppender(payload(i, 200)))
		require.NoError(t, err)
		offs = append(offs, off)
	}
	end := w.WrotePosition()
	last := len(offs) - 1
	k := last - 3 // in the last segment, valid records after it
	require.GreaterOrEqual(t, offs[k], int64(MinSegmentSize))
	seg := w.snap.Load().segs[1]
	pos := offs[k] - seg.start
	seg.buf[pos+5] ^= 2 // the magic
	seg.buf[offs[last]-seg.start+FrameSize] ^= 1

	r, err := Open(Options{Dir: dir, FS: fs, SegmentSize: MinSegmentSize, ReadOnly: true})
	require.NoError(t, err)
	defer r.Close()
	require.Equal(t, offs[last], r.WrotePosition(), "the end is the damaged last record")
	require.Equal(t, [][2]int64{{offs[k], offs[k+1]}}, r.Report().Damaged)
	noop := func(Record) error { return nil }
	require.ErrorIs(t, r.Read(offs[k], noop), ErrCorrupt)
	require.NoError(t, r.Read(offs[k+1], noop))
	require.NoError(t, r.Read(offs[k+2], noop))
	require.ErrorIs(t, r.Read(offs[last], noop), ErrNotFound)
	require.Less(t, offs[last], end)
	require.NoError(t, w.Close())
}
