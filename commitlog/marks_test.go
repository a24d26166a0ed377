package commitlog

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mqlite/mqlite/vfs"
)

// TestViewRawEndsLargeSpansAtNotedStarts: a log that appended its records
// hands out large spans (max >= markMinSpan) that end at a noted record
// start, or at the written end of a segment, without walking: every span
// is whole frames (a replica takes each with AppendRaw), at most max
// bytes, at least max less two blocks and a record, and the copy ends
// byte-identical. The same log reopened (no notes) walks, to the same
// bytes. Small spans are walked, as before.
func TestViewRawEndsLargeSpansAtNotedStarts(t *testing.T) {
	const seg = 1 << 20
	fs := vfs.NewMem()
	src := openLog(t, fs, "/src", seg)
	defer src.Close()
	maxRec := 0
	for i := 0; src.WrotePosition() < 3*seg+seg/2; i++ {
		n := 50 + (i*331)%4000
		maxRec = max(maxRec, FrameSize+n)
		_, err := src.Append(bytesAppender(payload(i, n)))
		require.NoError(t, err)
	}
	end := src.WrotePosition()
	copyAll := func(src *Log, dir string, max int) []int {
		dst := openLog(t, fs, dir, seg)
		defer dst.Close()
		var sizes []int
		var buf []byte
		for from := int64(0); from < end; {
			out, next, err := src.ReadRaw(from, max, buf)
			require.NoError(t, err)
			require.LessOrEqual(t, len(out), max)
			_, err = dst.AppendRaw(from, out)
			require.NoError(t, err, "chunk at %d", from)
			sizes = append(sizes, len(out))
			from, buf = next, out
		}
		require.True(t, bytes.Equal(segmentBytes(t, fs, src, end), segmentBytes(t, fs, dst, end)))
		return sizes
	}
	const max = 256 << 10
	sizes := copyAll(src, "/a", max)
	segEnds := 0
	for i, n := range sizes {
		if n < max-2*markBlock-maxRec {
			segEnds++ // the last chunk of a segment, or of the log
			require.Less(t, segEnds, 6, "chunk %d of %d bytes", i, n)
		}
	}
	// The noted starts decide where a span ends.
	s := src.snap.Load().segs[1]
	require.NotNil(t, s.marks.Load())
	p := s.startBelow(1000, 1000+max)
	require.Greater(t, p, int64(1000+max-2*markBlock))
	require.LessOrEqual(t, p, int64(1000+max))
	isStart := false
	_, err := src.Scan(s.start, s.start+seg, false, func(r Record) error {
		isStart = isStart || r.Offset-s.start == p
		return nil
	})
	require.NoError(t, err)
	require.True(t, isStart, "the noted start %d is a record's", p)

	requireNotesTrue(t, src)

	// Reopened, the log has no notes and walks to the same bytes.
	require.NoError(t, src.Close())
	again, err := Open(Options{Dir: "/src", FS: fs, SegmentSize: seg, RecoverFrom: -1})
	require.NoError(t, err)
	defer again.Close()
	require.Nil(t, again.snap.Load().segs[1].marks.Load())
	copyAll(again, "/b", max)
	copyAll(again, "/c", 8<<10)
}

// requireNotesTrue checks that every noted start of l's segments is the
// first record that starts in its block.
func requireNotesTrue(t *testing.T, l *Log) {
	t.Helper()
	firsts := map[int64]int64{} // block's global start -> first record start in it
	_, err := l.Scan(l.MinOffset(), l.WrotePosition(), false, func(r Record) error {
		b := r.Offset &^ (markBlock - 1)
		if _, ok := firsts[b]; !ok {
			firsts[b] = r.Offset
		}
		return nil
	})
	require.NoError(t, err)
	noted := 0
	for _, s := range l.snap.Load().segs {
		m := s.marks.Load()
		if m == nil {
			continue
		}
		for k := range *m {
			if v := int64((*m)[k].Load()); v != 0 {
				b := s.start + int64(k)<<markShift
				require.Equal(t, firsts[b], b+v-1, "block at %d", b)
				noted++
			}
		}
	}
	require.Positive(t, noted)
}

// TestTruncateToForgetsNotes: the notes of records TruncateTo cut are
// gone, and appends after it note their own starts: every note left is
// the first start of its block, and large spans still copy whole frames.
func TestTruncateToForgetsNotes(t *testing.T) {
	const seg = 1 << 20
	fs := vfs.NewMem()
	l := openLog(t, fs, "/l", seg)
	defer l.Close()
	var offs []int64
	for i := 0; l.WrotePosition() < seg+seg/2; i++ {
		off, err := l.Append(bytesAppender(payload(i, 3000)))
		require.NoError(t, err)
		offs = append(offs, off)
	}
	requireNotesTrue(t, l)
	cut := offs[len(offs)*3/4]
	require.NoError(t, l.TruncateTo(cut))
	s := l.snap.Load().segs[1]
	require.Zero(t, s.startBelow(cut-s.start, seg), "no note past the cut")
	for i := 0; l.WrotePosition() < 2*seg+seg/3; i++ {
		_, err := l.Append(bytesAppender(payload(i, 700+i%2000)))
		require.NoError(t, err)
	}
	requireNotesTrue(t, l)
	dst := openLog(t, fs, "/d", seg)
	defer dst.Close()
	chunks := copyRaw(t, l, dst, 256<<10)
	require.Less(t, chunks, 15)
	end := l.WrotePosition()
	require.True(t, bytes.Equal(segmentBytes(t, fs, l, end), segmentBytes(t, fs, dst, end)))
}
