package commitlog

import (
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mqlite/mqlite/internal/vfs"
)

// pagerFS wraps an FS so that its mappings are vfs.Pagers that record
// every SmallPages call, by file name.
type pagerFS struct {
	vfs.FS
	mu    sync.Mutex
	calls map[string][]bool
}

func (f *pagerFS) OpenFile(name string, flag int, perm os.FileMode) (vfs.File, error) {
	h, err := f.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &pagerFile{File: h, fs: f, name: filepath.Base(name)}, nil
}

func (f *pagerFS) seen() map[string][]bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := make(map[string][]bool, len(f.calls))
	for k, v := range f.calls {
		c[k] = slices.Clone(v)
	}
	return c
}

type pagerFile struct {
	vfs.File
	fs   *pagerFS
	name string
}

func (h *pagerFile) Map(size int) (vfs.Mapping, error) {
	m, err := h.File.Map(size)
	if err != nil {
		return nil, err
	}
	return &pagerMapping{Mapping: m, fs: h.fs, name: h.name}, nil
}

type pagerMapping struct {
	vfs.Mapping
	fs   *pagerFS
	name string
}

func (m *pagerMapping) SmallPages(on bool) {
	m.fs.mu.Lock()
	defer m.fs.mu.Unlock()
	m.fs.calls[m.name] = append(m.fs.calls[m.name], on)
}

// TestSmallSyncs checks that with SmallSyncs the segment being written,
// and only it, keeps small pages: each new segment gets SmallPages(true)
// before it is written and SmallPages(false) once sealed, and a reopened
// log sets it on its last segment alone; without SmallSyncs nothing is
// called.
func TestSmallSyncs(t *testing.T) {
	for _, small := range []bool{true, false} {
		fs := &pagerFS{FS: vfs.NewMem(), calls: map[string][]bool{}}
		opts := Options{Dir: "/cl", FS: fs, SegmentSize: MinSegmentSize, RecoverFrom: -1, SmallSyncs: small}
		l, err := Open(opts)
		require.NoError(t, err)
		for i := 0; len(l.snap.Load().segs) < 4; i++ {
			_, err := l.Append(bytesAppender(payload(i, 1000)))
			require.NoError(t, err)
		}
		segs := l.Segments()
		require.NoError(t, l.Close())
		got := fs.seen()
		if !small {
			require.Empty(t, got, "SmallPages called without SmallSyncs")
			continue
		}
		for i, s := range segs {
			want := []bool{true, false}
			if i == len(segs)-1 {
				want = []bool{true}
			}
			require.Equal(t, want, got[filepath.Base(s.Path)], "segment %d of %d", i, len(segs))
		}
		clear(fs.calls)
		l, err = Open(opts)
		require.NoError(t, err)
		require.NoError(t, l.Close())
		got = fs.seen()
		last := filepath.Base(segs[len(segs)-1].Path)
		require.Equal(t, []bool{true}, got[last], "the write segment after reopening")
		delete(got, last)
		for name, calls := range got {
			// The allocator may have prepared the next segment before Close.
			require.Equal(t, []bool{true}, calls, "segment %s after reopening", name)
			require.NotContains(t, segNames(segs), name, "a sealed segment got SmallPages after reopening")
		}
	}
}

func segNames(segs []SegmentInfo) []string {
	var names []string
	for _, s := range segs {
		names = append(names, filepath.Base(s.Path))
	}
	return names
}
