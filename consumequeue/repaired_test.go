package consumequeue

import (
	"path/filepath"
	"testing"

	"github.com/mqlite/mqlite/vfs"
)

// TestRepaired: Open says which queues it repaired (entries dropped, or a
// file brought to size), and the Store the smallest MaxPhysEnd among
// them, from where a re-dispatch restores the dropped entries. An intact
// queue, and one whose last file simply ends, are not repaired.
func TestRepaired(t *testing.T) {
	cases := []struct {
		name    string
		damage  func(t *testing.T, fs vfs.FS, dir string)
		wantMax int64 // MaxOffset of queue B after Open
	}{
		{"intact", func(*testing.T, vfs.FS, string) {}, 40},
		{"zeroed entry", func(t *testing.T, fs vfs.FS, dir string) {
			path := filepath.Join(dir, fileName(0))
			b := readFile(t, fs, path)
			clear(b[3*EntrySize : 4*EntrySize])
			writeFile(t, fs, path, b)
		}, 3},
		{"missing middle file", func(t *testing.T, fs vfs.FS, dir string) {
			if err := fs.Remove(filepath.Join(dir, fileName(testPerFile*EntrySize))); err != nil {
				t.Fatal(err)
			}
		}, testPerFile},
		{"cut last file", func(t *testing.T, fs vfs.FS, dir string) {
			path := filepath.Join(dir, fileName(2*testPerFile*EntrySize))
			writeFile(t, fs, path, readFile(t, fs, path)[:5*EntrySize])
		}, 2*testPerFile + 5},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fs, root := vfs.NewMem(), "/cq"
			o := Options{FS: fs, Dir: root, EntriesPerFile: testPerFile}
			s, err := OpenStore(o)
			if err != nil {
				t.Fatal(err)
			}
			for id, n := range []int64{10, 40} { // queue A/0 ends early, A/1 (B) goes on
				q, err := s.Queue("A", id, true)
				if err != nil {
					t.Fatal(err)
				}
				appendRange(t, q, 0, n)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			c.damage(t, fs, filepath.Join(root, "A", "1"))

			s, err = OpenStore(o)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			a, _ := s.Queue("A", 0, false)
			b, _ := s.Queue("A", 1, false)
			equal(t, "A/0 repaired", a.Repaired(), false)
			equal(t, "A/1 max", b.MaxOffset(), c.wantMax)
			end, ok := s.RepairedPhysEnd()
			if c.wantMax == 40 {
				equal(t, "A/1 repaired", b.Repaired(), false)
				equal(t, "RepairedPhysEnd ok", ok, false)
				return
			}
			equal(t, "A/1 repaired", b.Repaired(), true)
			equal(t, "RepairedPhysEnd ok", ok, true)
			equal(t, "RepairedPhysEnd", end, entryFor(c.wantMax-1).End())
			equal(t, "below A/0's end", end < a.MaxPhysEnd(), c.wantMax < 10)
		})
	}
}

// A queue directory that lost its data files, with or without its meta
// file, is repaired from the CommitLog's start (MaxPhysEnd 0), and so is
// it at the next Open: both Opens see the same queue, until Rebuilt says
// re-dispatch is done and the queue gets its first file.
func TestRepairedEmptyDirectory(t *testing.T) {
	for _, keepMeta := range []bool{true, false} {
		fs, root := vfs.NewMem(), "/cq"
		o := Options{FS: fs, Dir: root, EntriesPerFile: testPerFile}
		s, err := OpenStore(o)
		if err != nil {
			t.Fatal(err)
		}
		q, err := s.Queue("A", 0, true)
		if err != nil {
			t.Fatal(err)
		}
		appendRange(t, q, 0, 5)
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		dir := filepath.Join(root, "A", "0")
		names, err := fs.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range names {
			if n != metaName || !keepMeta {
				if err := fs.Remove(filepath.Join(dir, n)); err != nil {
					t.Fatal(err)
				}
			}
		}
		for open := range 3 {
			s, err = OpenStore(o)
			if err != nil {
				t.Fatalf("keep meta %v, open %d: %v", keepMeta, open, err)
			}
			q, err := s.Queue("A", 0, false)
			if err != nil {
				t.Fatal(err)
			}
			equal(t, "max", q.MaxOffset(), int64(0))
			end, ok := s.RepairedPhysEnd()
			if open == 2 {
				// Rebuilt gave the queue its first file: an empty queue.
				equal(t, "repaired after Rebuilt", q.Repaired(), false)
				equal(t, "RepairedPhysEnd ok after Rebuilt", ok, false)
				equal(t, "files", dataFiles(t, fs, dir), []string{fileName(0)})
			} else {
				equal(t, "repaired", q.Repaired(), true)
				equal(t, "RepairedPhysEnd ok", ok, true)
				equal(t, "RepairedPhysEnd", end, int64(0))
			}
			if open == 1 {
				if err := s.Rebuilt(); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// A queue directory that does not exist yet is a new queue, not a
// repaired one.
func TestNewQueueIsNotRepaired(t *testing.T) {
	fs := vfs.NewMem()
	q, err := Open(Options{FS: fs, Dir: "/cq/A/0", EntriesPerFile: testPerFile})
	if err != nil {
		t.Fatal(err)
	}
	defer closeQ(t, q)
	equal(t, "repaired", q.Repaired(), false)
}
