package consumequeue

import (
	"maps"
	"math"
	"path/filepath"
	"testing"

	"github.com/mqlite/mqlite/vfs"
)

// treeBytes reads every file under root, by path.
func treeBytes(t *testing.T, fs vfs.FS, root string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	var walk func(dir string)
	walk = func(dir string) {
		names, err := fs.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range names {
			p := filepath.Join(dir, n)
			if _, isDir, _ := fs.Stat(p); isDir {
				walk(p)
				continue
			}
			out[p] = readFile(t, fs, p)
		}
	}
	walk(root)
	return out
}

// A queue created by Store.Queue leaves nothing on disk until its first
// entry.
func TestLazyQueueLeavesNothing(t *testing.T) {
	fs := vfs.NewMem()
	o := Options{FS: fs, Dir: "/lazy", EntriesPerFile: testPerFile}
	s, err := OpenStore(o)
	if err != nil {
		t.Fatal(err)
	}
	q, err := s.Queue("Waited", 0, true)
	if err != nil {
		t.Fatal(err)
	}
	equal(t, "MaxOffset", q.MaxOffset(), int64(0))
	if vfs.Exists(fs, "/lazy/Waited") {
		t.Fatal("a queue without entries made its directory")
	}
	used, err := s.Queue("Used", 3, true)
	if err != nil {
		t.Fatal(err)
	}
	appendRange(t, used, 0, 20)
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = OpenStore(o)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	equal(t, "Queues", s.Queues(), []QueueID{{"Used", 3}})
	q, _ = s.Queue("Used", 3, false)
	checkRange(t, q, 0, 20)
}

// A read-only Store beside the writer: it sees what was written before it
// opened, refuses appends, takes in later entries only on CatchUp (up to
// the limit), hides and trims only in memory, and changes no file.
func TestReadOnlyStore(t *testing.T) {
	modes(t, func(t *testing.T, e env) {
		root := filepath.Dir(filepath.Dir(e.dir))
		w, err := OpenStore(Options{FS: e.fs, Dir: root, EntriesPerFile: testPerFile})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		a0, _ := w.Queue("A", 0, true)
		a1, _ := w.Queue("A", 1, true)
		appendRange(t, a0, 0, 40) // three files
		appendRange(t, a1, 0, 5)

		r, err := OpenStore(Options{FS: vfs.ReadOnly(e.fs), Dir: root, EntriesPerFile: testPerFile, ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		defer func() {
			if err := r.Close(); err != nil {
				t.Fatal(err)
			}
		}()
		ra0, err := r.Queue("A", 0, false)
		if err != nil {
			t.Fatal(err)
		}
		ra1, _ := r.Queue("A", 1, false)
		checkRange(t, ra0, 0, 40)
		checkRange(t, ra1, 0, 5)
		wantErr(t, ra0.Append(40, entryFor(40)), ErrReadOnly)

		// The writer goes on: new entries, a new file, a new queue.
		appendRange(t, a0, 40, 50)
		appendRange(t, a1, 5, 8)
		b0, _ := w.Queue("B", 0, true)
		appendRange(t, b0, 0, 3)
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		before := treeBytes(t, e.fs, root)

		checkRange(t, ra0, 0, 40) // a view as of Open
		missing, _ := r.Queue("B", 0, true)
		equal(t, "B/0 before CatchUp", missing.MaxOffset(), int64(0))
		if err := r.CatchUp(entryFor(45).End()); err != nil {
			t.Fatal(err)
		}
		checkRange(t, ra0, 0, 46)
		checkRange(t, ra1, 0, 8)
		rb0, _ := r.Queue("B", 0, false)
		checkRange(t, rb0, 0, 3)
		if rb0 != missing {
			t.Fatal("CatchUp replaced a queue a reader holds")
		}

		if err := r.TruncateAfterPhys(entryFor(20).Offset); err != nil {
			t.Fatal(err)
		}
		checkRange(t, ra0, 0, 20)
		if err := r.CatchUp(math.MaxInt64); err != nil {
			t.Fatal(err)
		}
		checkRange(t, ra0, 0, 50)
		n, err := r.DeleteBelowPhys(entryFor(17).Offset)
		if err != nil || n != 0 {
			t.Fatalf("DeleteBelowPhys on a read-only Store = %d, %v", n, err)
		}
		checkRange(t, ra0, 17, 50)
		if err := r.Flush(); err != nil {
			t.Fatal(err)
		}
		if got := treeBytes(t, e.fs, root); !maps.EqualFunc(got, before, func(a, b []byte) bool { return string(a) == string(b) }) {
			t.Fatal("the read-only Store changed files")
		}
		wantErr(t, (&Store{opts: Options{Dir: "/w"}}).CatchUp(0), ErrInvalidArgument)
	})
}

// A read-only queue ends at the first invalid entry and repairs nothing; a
// file of the wrong size (being created) is not mapped; a directory
// without meta file is empty, data files without one are damage.
func TestReadOnlyQueueShapes(t *testing.T) {
	fs := vfs.NewMem()
	e := env{fs: fs, dir: "/shapes/T/0"}
	q := mustOpen(t, e.opts())
	appendRange(t, q, 0, 20)
	closeQ(t, q)
	b := readFile(t, fs, e.file(0))
	b[10*EntrySize+3] ^= 0xff
	writeFile(t, fs, e.file(0), b)
	writeFile(t, fs, e.file(32), nil) // being created by the writer
	before := treeBytes(t, fs, "/shapes")

	ro := e.opts()
	ro.FS, ro.ReadOnly = vfs.ReadOnly(fs), true
	ro.EntriesPerFile = 1000 // the meta file's 16 apply
	r := mustOpen(t, ro)
	checkRange(t, r, 0, 10)
	closeQ(t, r)
	equal(t, "files after a read-only open", len(treeBytes(t, fs, "/shapes")), len(before))
	equal(t, "damaged file", readFile(t, fs, e.file(0)), b)

	ro.Dir = "/shapes/Missing/0"
	r = mustOpen(t, ro)
	equal(t, "MaxOffset of a missing queue", r.MaxOffset(), int64(0))
	closeQ(t, r)
	if err := fs.MkdirAll("/shapes/NoMeta/0", 0o755); err != nil {
		t.Fatal(err)
	}
	ro.Dir = "/shapes/NoMeta/0"
	r = mustOpen(t, ro)
	closeQ(t, r)
	writeFile(t, fs, filepath.Join(ro.Dir, fileName(0)), make([]byte, testPerFile*EntrySize))
	_, err := Open(ro)
	wantErr(t, err, ErrCorrupt)
}
