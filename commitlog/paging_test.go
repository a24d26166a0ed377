package commitlog

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mqlite/mqlite/vfs"
)

// TestSegmentPaging checks how the segments are paged in (vfs.Pager):
// with SmallSyncs each segment gets small pages before it is written and
// read-ahead back once sealed; without, huge pages before it is written
// and nothing after, unless warming is off (then nothing at all). A
// reopened log sets its last segment alone.
func TestSegmentPaging(t *testing.T) {
	for _, c := range []struct {
		small, noWarm bool
		write, sealed []string
	}{
		{small: true, write: []string{"small"}, sealed: []string{"small", "normal"}},
		{small: true, noWarm: true, write: []string{"small"}, sealed: []string{"small", "normal"}},
		{write: []string{"huge"}, sealed: []string{"huge"}},
		{noWarm: true},
	} {
		small, write, sealed := c.small, c.write, c.sealed
		fs := newMapCountFS(vfs.NewMem())
		opts := Options{Dir: "/cl", FS: fs, SegmentSize: MinSegmentSize, RecoverFrom: -1, SmallSyncs: small, NoWarm: c.noWarm}
		l, err := Open(opts)
		require.NoError(t, err)
		for i := 0; len(l.snap.Load().segs) < 4; i++ {
			_, err := l.Append(bytesAppender(payload(i, 1000)))
			require.NoError(t, err)
		}
		segs := l.Segments()
		require.NoError(t, l.Close())
		got := fs.paging()
		for i, s := range segs {
			want := sealed
			if i == len(segs)-1 {
				want = write
			}
			require.Equal(t, want, got[s.Path], "small %v: segment %d of %d", small, i, len(segs))
		}
		l, err = Open(opts)
		require.NoError(t, err)
		require.NoError(t, l.Close())
		got = fs.paging()
		last := segs[len(segs)-1].Path
		require.Equal(t, write, got[last], "small %v: the write segment after reopening", small)
		if write == nil {
			require.Empty(t, got, "small %v, no warming: paged after reopening", small)
			continue
		}
		delete(got, last)
		for _, s := range segs {
			require.NotContains(t, got, s.Path, "small %v: a sealed segment was paged after reopening", small)
		}
		for name, calls := range got { // the allocator may have prepared the next one
			require.Equal(t, write, calls, "small %v: segment %s after reopening", small, name)
		}
	}
}
