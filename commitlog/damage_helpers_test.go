package commitlog

// Recovery tests on damaged segment files (reliability plan S8, S10, S11,
// S13, S14): every test builds a log, closes it, edits the closed segment
// files directly (in a MemFS, or on disk where noted) and opens it again.

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mqlite/mqlite/vfs"
)

// tRec is one record appended by a test, with its payload.
type tRec struct {
	off     int64
	size    int // frame included
	payload []byte
}

func (r tRec) end() int64 { return r.off + int64(r.size) }

// testLog is a closed log in a MemFS and what was appended to it.
type testLog struct {
	fs   *vfs.MemFS
	dir  string
	seg  int64
	recs []tRec
	end  int64
}

// randPayload returns n random bytes, none of them zero, so that zeroing
// any byte of a payload damages the record.
func randPayload(rng *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(1 + rng.IntN(255))
	}
	return b
}

// logBuilder appends records of random payload sizes in [lo, hi].
type logBuilder struct {
	t   testing.TB
	rng *rand.Rand
	l   *Log
	tl  *testLog
}

func newLogBuilder(t testing.TB, rng *rand.Rand, seg int64) *logBuilder {
	t.Helper()
	fs := vfs.NewMem()
	tl := &testLog{fs: fs, dir: "/cl", seg: seg}
	l, err := Open(Options{Dir: tl.dir, FS: fs, SegmentSize: seg, RecoverFrom: -1, NoWarm: true})
	require.NoError(t, err)
	return &logBuilder{t: t, rng: rng, l: l, tl: tl}
}

func (b *logBuilder) add(n int) tRec {
	b.t.Helper()
	p := randPayload(b.rng, n)
	off, err := b.l.Append(bytesAppender(p))
	require.NoError(b.t, err)
	r := tRec{off: off, size: FrameSize + n, payload: p}
	b.tl.recs = append(b.tl.recs, r)
	return r
}

func (b *logBuilder) addRandom(count, lo, hi int) {
	for range count {
		b.add(lo + b.rng.IntN(hi-lo+1))
	}
}

func (b *logBuilder) flush() {
	b.t.Helper()
	_, err := b.l.Flush()
	require.NoError(b.t, err)
}

// segStart is the start of the segment holding the log's last record.
func (b *logBuilder) lastSeg() int64 {
	return b.l.WrotePosition() / b.tl.seg * b.tl.seg
}

func (b *logBuilder) close() *testLog {
	b.t.Helper()
	b.tl.end = b.l.WrotePosition()
	require.NoError(b.t, b.l.Close())
	return b.tl
}

// buildLog appends until the last segment holds at least minLast records
// and there are at least minSegs segments.
func buildLog(t testing.TB, rng *rand.Rand, seg int64, minSegs, minLast, lo, hi int) *testLog {
	t.Helper()
	b := newLogBuilder(t, rng, seg)
	for {
		b.addRandom(1, lo, hi)
		last := b.lastSeg()
		inLast := 0
		for _, r := range b.tl.recs {
			if r.off >= last {
				inLast++
			}
		}
		if int(last/seg)+1 >= minSegs && inLast >= minLast {
			break
		}
	}
	return b.close()
}

func (tl *testLog) segPath(start int64) string { return filepath.Join(tl.dir, segmentName(start)) }

// clone copies tl onto a fresh MemFS.
func (tl *testLog) clone(t testing.TB) *testLog {
	t.Helper()
	c := *tl
	c.fs = cloneMem(t, tl.fs, tl.dir)
	return &c
}

func (tl *testLog) open(t testing.TB, o Options) (*Log, error) {
	t.Helper()
	o.Dir, o.FS, o.SegmentSize, o.NoWarm = tl.dir, tl.fs, tl.seg, true
	return Open(o)
}

// segStarts lists the starts of the segments of the closed log.
func (tl *testLog) segStarts() []int64 {
	var out []int64
	for s := int64(0); s < tl.end || s == 0; s += tl.seg {
		out = append(out, s)
	}
	return out
}

// recsBefore returns the records that end at or before end.
func (tl *testLog) recsBefore(end int64) []tRec {
	var out []tRec
	for _, r := range tl.recs {
		if r.end() <= end {
			out = append(out, r)
		}
	}
	return out
}

// cloneMem copies every file under root of src into a new MemFS.
func cloneMem(t testing.TB, src vfs.FS, root string) *vfs.MemFS {
	t.Helper()
	dst := vfs.NewMem()
	var walk func(dir string)
	walk = func(dir string) {
		require.NoError(t, dst.MkdirAll(dir, 0o755))
		names, err := src.ReadDir(dir)
		require.NoError(t, err)
		for _, n := range names {
			p := filepath.Join(dir, n)
			_, isDir, err := src.Stat(p)
			require.NoError(t, err)
			if isDir {
				walk(p)
				continue
			}
			writeFile(t, dst, p, readFile(t, src, p))
		}
	}
	walk(root)
	return dst
}

// dirImage returns every file under root with its contents, directories
// marked with a trailing slash.
func dirImage(t testing.TB, fs vfs.FS, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	var walk func(dir string)
	walk = func(dir string) {
		names, err := fs.ReadDir(dir)
		require.NoError(t, err)
		for _, n := range names {
			p := filepath.Join(dir, n)
			_, isDir, err := fs.Stat(p)
			require.NoError(t, err)
			if isDir {
				out[p+"/"] = ""
				walk(p)
				continue
			}
			out[p] = string(readFile(t, fs, p))
		}
	}
	walk(root)
	return out
}

func readFile(t testing.TB, fs vfs.FS, path string) []byte {
	t.Helper()
	b, err := vfs.ReadFile(fs, path)
	require.NoError(t, err)
	return b
}

func writeFile(t testing.TB, fs vfs.FS, path string, data []byte) {
	t.Helper()
	f, err := fs.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	require.NoError(t, err)
	_, err = f.WriteAt(data, 0)
	require.NoError(t, err)
	require.NoError(t, f.Close())
}

func truncateFile(t testing.TB, fs vfs.FS, path string, size int64) {
	t.Helper()
	f, err := fs.OpenFile(path, os.O_RDWR, 0)
	require.NoError(t, err)
	require.NoError(t, f.Truncate(size))
	require.NoError(t, f.Close())
}

// editFile applies fn to the contents of path.
func editFile(t testing.TB, fs vfs.FS, path string, fn func(b []byte) []byte) {
	t.Helper()
	writeFile(t, fs, path, fn(readFile(t, fs, path)))
}

// checkRecords asserts that l holds exactly want (in order, byte for byte)
// and nothing else.
func checkRecords(t testing.TB, l *Log, want []tRec) {
	t.Helper()
	for _, r := range want {
		require.NoError(t, l.Read(r.off, func(got Record) error {
			if got.Size != r.size || !bytes.Equal(got.Payload, r.payload) {
				return fmt.Errorf("record at %d differs", r.off)
			}
			return nil
		}))
	}
	i := 0
	next, err := l.Scan(l.MinOffset(), l.WrotePosition(), true, func(got Record) error {
		if i >= len(want) || got.Offset != want[i].off {
			return fmt.Errorf("unexpected record %d at %d", i, got.Offset)
		}
		i++
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, len(want), i, "record count")
	require.Equal(t, l.WrotePosition(), next)
}

// appendAfterRecovery checks that a new record lands at the recovered end
// (or at the next segment when it does not fit) and survives a reopen.
func appendAfterRecovery(t testing.TB, tl *testLog, l *Log, kept []tRec, rng *rand.Rand) {
	t.Helper()
	end := l.WrotePosition()
	p := randPayload(rng, 1+rng.IntN(200))
	n := int64(FrameSize + len(p))
	off, err := l.Append(bytesAppender(p))
	require.NoError(t, err)
	pos := end % tl.seg
	if pos+n+BlankSize <= tl.seg || pos+n == tl.seg {
		require.Equal(t, end, off, "new record at the recovered end")
	} else {
		require.Equal(t, end-pos+tl.seg, off, "new record at the next segment")
	}
	require.NoError(t, l.Close())
	l2, err := tl.open(t, Options{RecoverFrom: -1})
	require.NoError(t, err)
	defer l2.Close()
	rep := l2.Report()
	require.Zero(t, rep.TruncatedBytes, "a clean reopen truncates nothing")
	require.Zero(t, rep.DroppedRecords)
	require.Equal(t, off+n, l2.WrotePosition())
	checkRecords(t, l2, append(append([]tRec(nil), kept...), tRec{off: off, size: int(n), payload: p}))
}

func hasNonZero(b []byte) bool { return !isZero(b) }
