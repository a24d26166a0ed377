package commitlog

// Helpers for the retention tests.

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mqlite/mqlite/vfs"
)

// openCountedLog opens a log for the tests that count mappings: without
// warming, because the allocator pins a snapshot for a moment each time it
// warms (warm.go), and a segment it holds then is unmapped when it lets
// go, a moment after the reader the test is watching.
func openCountedLog(t *testing.T, fs vfs.FS, dir string, seg int64) *Log {
	t.Helper()
	l, err := Open(Options{Dir: dir, FS: fs, SegmentSize: seg, RecoverFrom: -1, NoWarm: true})
	require.NoError(t, err)
	return l
}

// indexed records carry their index in the first 8 bytes, so that any
// record a reader meets can be checked without a shared table.
func indexed(i int) bytesAppender {
	p := payload(i, 8+40+i%300)
	le.PutUint64(p, uint64(i))
	return p
}

// checkIndexed verifies a record written by indexed and returns its index.
func checkIndexed(r Record) (int, error) {
	if len(r.Payload) < 8 {
		return 0, fmt.Errorf("record at %d: %d bytes", r.Offset, len(r.Payload))
	}
	i := int(le.Uint64(r.Payload))
	if i < 0 || i > 1<<30 || !bytes.Equal(r.Payload, indexed(i)) {
		return 0, fmt.Errorf("record at %d: payload differs from record %d", r.Offset, i)
	}
	return i, nil
}

// fillSegments appends indexed records until the log has at least n
// segments and returns their offsets.
func fillSegments(t *testing.T, l *Log, n int) []int64 {
	t.Helper()
	var offs []int64
	for i := 0; len(l.Segments()) < n; i++ {
		off, err := l.Append(indexed(i))
		require.NoError(t, err)
		offs = append(offs, off)
	}
	return offs
}

// mapCountFS counts live mappings per file, to observe when segments are
// unmapped, and records the vfs.Pager calls on them ("small", "normal",
// "huge").
type mapCountFS struct {
	vfs.FS
	mu    sync.Mutex
	live  map[string]int
	pages map[string][]string
}

func newMapCountFS(inner vfs.FS) *mapCountFS {
	return &mapCountFS{FS: inner, live: map[string]int{}, pages: map[string][]string{}}
}

// UnmapsFirst is the wrapped file system's (vfs.MustUnmapFirst).
func (c *mapCountFS) UnmapsFirst() bool { return vfs.MustUnmapFirst(c.FS) }

// paging returns the vfs.Pager calls so far per file, and forgets them.
func (c *mapCountFS) paging() map[string][]string {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.pages
	c.pages = map[string][]string{}
	return p
}

func (c *mapCountFS) OpenFile(name string, flag int, perm os.FileMode) (vfs.File, error) {
	f, err := c.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &countFile{File: f, fs: c, name: filepath.Clean(name)}, nil
}

func (c *mapCountFS) add(name string, d int) {
	c.mu.Lock()
	c.live[name] += d
	c.mu.Unlock()
}

// mapped returns the number of live mappings of name.
func (c *mapCountFS) mapped(name string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.live[filepath.Clean(name)]
}

func (c *mapCountFS) total() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, v := range c.live {
		n += v
	}
	return n
}

type countFile struct {
	vfs.File
	fs   *mapCountFS
	name string
}

func (f *countFile) Map(size int) (vfs.Mapping, error) {
	m, err := f.File.Map(size)
	if err != nil {
		return nil, err
	}
	f.fs.add(f.name, 1)
	return &countMapping{Mapping: m, f: f}, nil
}

type countMapping struct {
	vfs.Mapping
	f        *countFile
	unmapped bool
}

func (m *countMapping) SmallPages(on bool) {
	if on {
		m.paged("small")
	} else {
		m.paged("normal")
	}
}

func (m *countMapping) HugePages() { m.paged("huge") }

func (m *countMapping) paged(how string) {
	m.f.fs.mu.Lock()
	defer m.f.fs.mu.Unlock()
	m.f.fs.pages[m.f.name] = append(m.f.fs.pages[m.f.name], how)
}

func (m *countMapping) Unmap() error {
	if !m.unmapped {
		m.unmapped = true
		m.f.fs.add(m.f.name, -1)
	}
	return m.Mapping.Unmap()
}

func requireRemoved(t *testing.T, err error) {
	t.Helper()
	require.ErrorIs(t, err, ErrNotFound)
	require.ErrorContains(t, err, "was removed")
}

func requireNoValue(t *testing.T, c chan error) {
	t.Helper()
	select {
	case err := <-c:
		t.Fatalf("unexpected: %v", err)
	default:
	}
}
