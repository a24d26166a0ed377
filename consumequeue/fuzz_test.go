package consumequeue

import (
	"path/filepath"
	"testing"

	"github.com/mqlite/mqlite/vfs"
)

// FuzzOpenDamaged writes arbitrary bytes as the data files of a queue and
// opens it: Open must succeed (only meta problems fail it), never panic, and
// leave a queue whose readable entries are all valid and which accepts the
// next append.
func FuzzOpenDamaged(f *testing.F) {
	var valid []byte
	for i := range int64(2*testPerFile + 3) {
		var b [EntrySize]byte
		putEntry(b[:], entryFor(i))
		valid = append(valid, b[:]...)
	}
	f.Add(valid)
	f.Add(valid[:len(valid)-7])
	f.Add([]byte{})
	f.Add(make([]byte, 3*testPerFile*EntrySize))
	f.Add(append(fillerBytes[:], valid[EntrySize:]...))
	flipped := append([]byte(nil), valid...)
	flipped[EntrySize*20+3] ^= 0x80
	f.Add(flipped)

	f.Fuzz(func(t *testing.T, data []byte) {
		fs := vfs.NewMem()
		o := Options{FS: fs, Dir: "/q", EntriesPerFile: testPerFile}
		if err := fs.MkdirAll(o.Dir, 0o755); err != nil {
			t.Fatal(err)
		}
		writeFile(t, fs, filepath.Join(o.Dir, metaName), encodeMeta(testPerFile))
		// Split the input over up to three files; the last may be short or long.
		const size = testPerFile * EntrySize
		for k := 0; k < 3 && (k == 0 || len(data) > k*size); k++ {
			chunk := data[min(k*size, len(data)):]
			if k < 2 {
				chunk = chunk[:min(size, len(chunk))]
			}
			writeFile(t, fs, filepath.Join(o.Dir, fileName(int64(k*size))), chunk)
		}
		q, err := Open(o)
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		begin, end := q.MinOffset(), q.MaxOffset()
		if begin < 0 || begin > end || end > 3*testPerFile {
			t.Fatalf("bounds [%d, %d)", begin, end)
		}
		buf := make([]Entry, 5)
		for i := begin; i < end; i++ {
			if _, err := q.Get(i); err != nil {
				t.Fatalf("Get(%d): %v", i, err)
			}
			if _, err := q.Read(i, buf); err != nil {
				t.Fatalf("Read(%d): %v", i, err)
			}
		}
		next := Entry{Offset: q.MaxPhysEnd(), Size: 1}
		if err := q.Append(end, next); err != nil && end < 3*testPerFile {
			t.Fatalf("Append(%d): %v", end, err)
		}
		if err := q.Close(); err != nil {
			t.Fatal(err)
		}
		q, err = Open(o)
		if err != nil {
			t.Fatalf("reopen: %v", err)
		}
		if q.MaxOffset() != end+1 && q.MaxOffset() != end {
			t.Fatalf("reopen: MaxOffset %d, was %d", q.MaxOffset(), end)
		}
		q.Close()
	})
}
