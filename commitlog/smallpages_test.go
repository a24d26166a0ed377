package commitlog

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mqlite/mqlite/internal/vfs"
)

// TestSmallSyncs checks that with SmallSyncs the segment being written,
// and only it, keeps small pages: each new segment gets SmallPages(true)
// before it is written and SmallPages(false) once sealed, and a reopened
// log sets it on its last segment alone; without SmallSyncs nothing is
// called.
func TestSmallSyncs(t *testing.T) {
	for _, small := range []bool{true, false} {
		fs := newMapCountFS(vfs.NewMem())
		opts := Options{Dir: "/cl", FS: fs, SegmentSize: MinSegmentSize, RecoverFrom: -1, SmallSyncs: small}
		l, err := Open(opts)
		require.NoError(t, err)
		for i := 0; len(l.snap.Load().segs) < 4; i++ {
			_, err := l.Append(bytesAppender(payload(i, 1000)))
			require.NoError(t, err)
		}
		segs := l.Segments()
		require.NoError(t, l.Close())
		got := fs.smallPages()
		if !small {
			require.Empty(t, got, "SmallPages called without SmallSyncs")
			continue
		}
		for i, s := range segs {
			want := []bool{true, false}
			if i == len(segs)-1 {
				want = []bool{true}
			}
			require.Equal(t, want, got[s.Path], "segment %d of %d", i, len(segs))
		}
		l, err = Open(opts)
		require.NoError(t, err)
		require.NoError(t, l.Close())
		got = fs.smallPages()
		last := segs[len(segs)-1].Path
		require.Equal(t, []bool{true}, got[last], "the write segment after reopening")
		delete(got, last)
		for _, s := range segs {
			require.NotContains(t, got, s.Path, "a sealed segment got SmallPages after reopening")
		}
		for name, calls := range got { // the allocator may have prepared the next one
			require.Equal(t, []bool{true}, calls, "segment %s after reopening", name)
		}
	}
}
