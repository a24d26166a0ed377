package consumequeue

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/mqlite/mqlite/vfs"
)

// testPerFile makes files roll every 16 entries.
const testPerFile = 16

// env is one file-system mode of the conformance suite.
type env struct {
	fs  vfs.FS
	dir string // queue directory
}

func (e env) opts() Options {
	return Options{FS: e.fs, Dir: e.dir, EntriesPerFile: testPerFile}
}

// file returns the path of the data file holding logical offset start.
func (e env) file(start int64) string {
	return filepath.Join(e.dir, fileName(start*EntrySize))
}

// modes runs fn against the in-memory FS, the real OS, and the OS under
// Windows' rule (no remove, rename or truncate of a mapped file).
func modes(t *testing.T, fn func(t *testing.T, e env)) {
	t.Run("mem", func(t *testing.T) {
		fn(t, env{fs: vfs.NewMem(), dir: "/cq/TopicA/0"})
	})
	t.Run("os", func(t *testing.T) {
		fn(t, env{fs: vfs.OS, dir: filepath.Join(t.TempDir(), "TopicA", "0")})
	})
	t.Run("strict", func(t *testing.T) { // the OS under Windows' rule (vfs.StrictMapFS)
		fn(t, env{fs: vfs.NewStrictMapFS(vfs.OS), dir: filepath.Join(t.TempDir(), "TopicA", "0")})
	})
}

// entryFor is the deterministic entry at logical offset i: records are laid
// out forward in the CommitLog without overlap.
func entryFor(i int64) Entry {
	return Entry{Offset: 1000 + i*128, Size: int32(40 + i%80), TagsCode: uint32(i) * 2654435761}
}

func mustOpen(t testing.TB, o Options) *Queue {
	t.Helper()
	q, err := Open(o)
	if err != nil {
		t.Fatalf("Open(%v): %v", o, err)
	}
	return q
}

func closeQ(t testing.TB, q *Queue) {
	t.Helper()
	if err := q.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

func appendRange(t testing.TB, q *Queue, from, to int64) {
	t.Helper()
	for i := from; i < to; i++ {
		if err := q.Append(i, entryFor(i)); err != nil {
			t.Fatalf("Append(%d): %v", i, err)
		}
	}
}

// checkRange verifies that the queue holds exactly [min, max) with the
// entries of entryFor, through Get and batch Read.
func checkRange(t testing.TB, q *Queue, min, max int64) {
	t.Helper()
	if got := q.MinOffset(); got != min {
		t.Fatalf("MinOffset = %d, want %d", got, min)
	}
	if got := q.MaxOffset(); got != max {
		t.Fatalf("MaxOffset = %d, want %d", got, max)
	}
	for i := min; i < max; i++ {
		e, err := q.Get(i)
		if err != nil {
			t.Fatalf("Get(%d): %v", i, err)
		}
		if e != entryFor(i) {
			t.Fatalf("Get(%d) = %+v, want %+v", i, e, entryFor(i))
		}
	}
	buf := make([]Entry, 7)
	for from := min; from < max; {
		n, err := q.Read(from, buf)
		if err != nil {
			t.Fatalf("Read(%d): %v", from, err)
		}
		if want := int(minI(7, max-from)); n != want {
			t.Fatalf("Read(%d) = %d entries, want %d", from, n, want)
		}
		for k := range n {
			if buf[k] != entryFor(from+int64(k)) {
				t.Fatalf("Read(%d)[%d] = %+v, want %+v", from, k, buf[k], entryFor(from+int64(k)))
			}
		}
		from += int64(n)
	}
	if n, err := q.Read(max, buf); n != 0 || err != nil {
		t.Fatalf("Read(max) = %d, %v; want 0, nil", n, err)
	}
	for _, bad := range []int64{min - 1, max} {
		if _, err := q.Get(bad); !errors.Is(err, ErrNotFound) {
			t.Fatalf("Get(%d) = %v, want ErrNotFound", bad, err)
		}
	}
	wantPhys := int64(0)
	if max > min {
		wantPhys = entryFor(max - 1).End()
	}
	if max > min && q.MaxPhysEnd() != wantPhys {
		t.Fatalf("MaxPhysEnd = %d, want %d", q.MaxPhysEnd(), wantPhys)
	}
}

func minI(a, b int64) int64 {
	if a < b {
		return a
	}
	return b
}

func wantErr(t testing.TB, err error, targets ...error) {
	t.Helper()
	if err == nil {
		t.Fatalf("got nil error, want %v", targets)
	}
	for _, target := range targets {
		if !errors.Is(err, target) {
			t.Fatalf("error %q does not match %v", err, target)
		}
	}
}

func equal[T any](t testing.TB, what string, got, want T) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s = %v, want %v", what, got, want)
	}
}

// readFile and writeFile edit files behind the queue's back.
func readFile(t testing.TB, fs vfs.FS, path string) []byte {
	t.Helper()
	b, err := vfs.ReadFile(fs, path)
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	return b
}

func writeFile(t testing.TB, fs vfs.FS, path string, b []byte) {
	t.Helper()
	f, err := fs.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	if _, err := f.WriteAt(b, 0); err != nil && !errors.Is(err, io.EOF) {
		t.Fatalf("write %s: %v", path, err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func dataFiles(t testing.TB, fs vfs.FS, dir string) []string {
	t.Helper()
	names, err := fs.ReadDir(dir)
	if err != nil {
		t.Fatalf("ReadDir(%s): %v", dir, err)
	}
	var out []string
	for _, n := range names {
		if _, ok := parseFileName(n); ok {
			out = append(out, n)
		}
	}
	return out
}
