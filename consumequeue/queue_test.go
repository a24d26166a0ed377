package consumequeue

import (
	"bytes"
	"errors"
	"math"
	"strings"
	"testing"
)

func TestAppendAcrossFiles(t *testing.T) {
	modes(t, func(t *testing.T, e env) {
		q := mustOpen(t, e.opts())
		defer closeQ(t, q)
		checkRange(t, q, 0, 0)
		equal(t, "MaxPhysEnd of empty queue", q.MaxPhysEnd(), int64(0))
		const n = testPerFile*10 + 5
		appendRange(t, q, 0, n)
		checkRange(t, q, 0, n)
		equal(t, "data files", len(dataFiles(t, e.fs, e.dir)), 11)
		// Entry q is at logical byte q*20: file 3 starts at 48*20.
		equal(t, "file name", dataFiles(t, e.fs, e.dir)[3], "00000000000000000960")
		equal(t, "MaxPhysEnd", q.MaxPhysEnd(), entryFor(n-1).End())
		if err := q.Flush(); err != nil {
			t.Fatal(err)
		}
		// Every file has the full preallocated size.
		for _, name := range dataFiles(t, e.fs, e.dir) {
			size, _, err := e.fs.Stat(e.dir + "/" + name)
			if err != nil || size != testPerFile*EntrySize {
				t.Fatalf("%s: size %d, %v", name, size, err)
			}
		}
	})
}

func TestReopenKeepsEverything(t *testing.T) {
	modes(t, func(t *testing.T, e env) {
		q := mustOpen(t, e.opts())
		appendRange(t, q, 0, 37)
		closeQ(t, q)

		q = mustOpen(t, e.opts())
		checkRange(t, q, 0, 37)
		appendRange(t, q, 37, 48) // ends exactly at a file boundary
		closeQ(t, q)

		q = mustOpen(t, e.opts())
		checkRange(t, q, 0, 48)
		appendRange(t, q, 48, 200) // > 3 files: older ones are trusted, not scanned
		closeQ(t, q)

		q = mustOpen(t, e.opts())
		defer closeQ(t, q)
		checkRange(t, q, 0, 200)
	})
}

func TestDefaultOptions(t *testing.T) {
	modes(t, func(t *testing.T, e env) {
		q := mustOpen(t, Options{FS: e.fs, Dir: e.dir})
		appendRange(t, q, 0, 1000)
		closeQ(t, q)
		size, _, err := e.fs.Stat(e.file(0))
		if err != nil || size != DefaultEntriesPerFile*EntrySize {
			t.Fatalf("file size %d, %v; want 6000000", size, err)
		}
		q = mustOpen(t, Options{FS: e.fs, Dir: e.dir})
		defer closeQ(t, q)
		checkRange(t, q, 0, 1000)
	})
}

func TestDuplicateAppend(t *testing.T) {
	modes(t, func(t *testing.T, e env) {
		q := mustOpen(t, e.opts())
		defer closeQ(t, q)
		appendRange(t, q, 0, 40)
		// Re-dispatch of identical entries is ignored.
		appendRange(t, q, 0, 40)
		checkRange(t, q, 0, 40)
		// A different entry at an existing offset is a conflict.
		other := entryFor(5)
		other.TagsCode++
		wantErr(t, q.Append(5, other), ErrConflict, ErrInvalidArgument)
		checkRange(t, q, 0, 40)
	})
}

func TestAppendErrors(t *testing.T) {
	modes(t, func(t *testing.T, e env) {
		q := mustOpen(t, e.opts())
		defer closeQ(t, q)
		appendRange(t, q, 0, 10)
		for _, bad := range []Entry{
			{Offset: -1, Size: 10},
			{Offset: 1 << 40, Size: 0},
			{Offset: 1 << 40, Size: -5},
			{Offset: 0, Size: math.MaxInt32}, // the filler
			{Offset: math.MaxInt64 - 3, Size: 10},
		} {
			wantErr(t, q.Append(10, bad), ErrInvalidArgument)
		}
		wantErr(t, q.Append(-1, entryFor(10)), ErrInvalidArgument)
		wantErr(t, q.Append(math.MaxInt64, entryFor(10)), ErrInvalidArgument)
		// A gap in a non-empty queue.
		wantErr(t, q.Append(12, entryFor(12)), ErrConflict)
		// Pointing backwards into the CommitLog.
		wantErr(t, q.Append(10, entryFor(3)), ErrConflict)
		checkRange(t, q, 0, 10)
		appendRange(t, q, 10, 11)
		checkRange(t, q, 0, 11)
	})
}

func TestHoleFill(t *testing.T) {
	modes(t, func(t *testing.T, e env) {
		q := mustOpen(t, e.opts())
		if err := q.Append(37, entryFor(37)); err != nil {
			t.Fatal(err)
		}
		checkRange(t, q, 37, 38)
		equal(t, "files", dataFiles(t, e.fs, e.dir), []string{fileName(32 * EntrySize)})
		if _, err := q.Read(36, make([]Entry, 4)); !errors.Is(err, ErrNotFound) {
			t.Fatalf("Read below min: %v", err)
		}
		appendRange(t, q, 37, 70) // re-dispatch of 37, then new ones
		closeQ(t, q)

		// The slots before 37 hold valid fillers.
		b := readFile(t, e.fs, e.file(32))
		for s := 0; s < 5; s++ {
			if !bytes.Equal(b[s*EntrySize:(s+1)*EntrySize], fillerBytes[:]) {
				t.Fatalf("slot %d is not a filler", 32+s)
			}
		}
		q = mustOpen(t, e.opts())
		defer closeQ(t, q)
		checkRange(t, q, 37, 70)
		if err := q.Append(36, entryFor(36)); err != nil {
			t.Fatalf("re-dispatch below min: %v", err)
		}
	})
}

func TestHoleAfterRetention(t *testing.T) {
	modes(t, func(t *testing.T, e env) {
		q := mustOpen(t, e.opts())
		appendRange(t, q, 0, 21)
		// Retention empties the queue; its last file stays.
		if _, err := q.DeleteBelowPhys(entryFor(21).Offset); err != nil {
			t.Fatal(err)
		}
		checkRange(t, q, 21, 21)
		// The next entry lands in the same file, after a hole.
		if err := q.Append(25, entryFor(25)); err != nil {
			t.Fatal(err)
		}
		appendRange(t, q, 26, 30)
		checkRange(t, q, 25, 30)
		closeQ(t, q)
		q = mustOpen(t, e.opts())
		checkRange(t, q, 25, 30)

		// Empty again; the next entry lands several files further on.
		if _, err := q.DeleteBelowPhys(entryFor(100).Offset); err != nil {
			t.Fatal(err)
		}
		checkRange(t, q, 30, 30)
		if err := q.Append(100, entryFor(100)); err != nil {
			t.Fatal(err)
		}
		checkRange(t, q, 100, 101)
		equal(t, "files", dataFiles(t, e.fs, e.dir), []string{fileName(96 * EntrySize)})
		closeQ(t, q)
		q = mustOpen(t, e.opts())
		defer closeQ(t, q)
		checkRange(t, q, 100, 101)
	})
}

func TestTruncateAfterPhys(t *testing.T) {
	modes(t, func(t *testing.T, e env) {
		q := mustOpen(t, e.opts())
		appendRange(t, q, 0, 60)
		if err := q.Flush(); err != nil {
			t.Fatal(err)
		}
		// Drop everything after entry 20: the CommitLog ends inside entry 21.
		if err := q.TruncateAfterPhys(entryFor(21).Offset + 1); err != nil {
			t.Fatal(err)
		}
		checkRange(t, q, 0, 21)
		equal(t, "files", len(dataFiles(t, e.fs, e.dir)), 2)
		b := readFile(t, e.fs, e.file(16))
		if !bytes.Equal(b[5*EntrySize:], make([]byte, len(b)-5*EntrySize)) {
			t.Fatal("dropped entries were not zeroed")
		}
		if err := q.TruncateAfterPhys(1 << 50); err != nil { // nothing to drop
			t.Fatal(err)
		}
		closeQ(t, q)

		q = mustOpen(t, e.opts())
		checkRange(t, q, 0, 21)
		appendRange(t, q, 21, 40) // re-dispatch rebuilds
		// Truncate to a file boundary: the file starting there goes.
		if err := q.TruncateAfterPhys(entryFor(31).End()); err != nil {
			t.Fatal(err)
		}
		checkRange(t, q, 0, 32)
		equal(t, "files", len(dataFiles(t, e.fs, e.dir)), 2)
		closeQ(t, q)

		q = mustOpen(t, e.opts())
		checkRange(t, q, 0, 32)
		// Truncate everything.
		if err := q.TruncateAfterPhys(0); err != nil {
			t.Fatal(err)
		}
		checkRange(t, q, 0, 0)
		equal(t, "MaxPhysEnd", q.MaxPhysEnd(), int64(0))
		wantErr(t, q.TruncateAfterPhys(-1), ErrInvalidArgument)
		closeQ(t, q)
		q = mustOpen(t, e.opts())
		defer closeQ(t, q)
		checkRange(t, q, 0, 0)
		appendRange(t, q, 0, 5)
		checkRange(t, q, 0, 5)
	})
}

func TestTruncateKeepsFillers(t *testing.T) {
	modes(t, func(t *testing.T, e env) {
		q := mustOpen(t, e.opts())
		appendRange(t, q, 5, 10)
		if err := q.TruncateAfterPhys(entryFor(7).End()); err != nil {
			t.Fatal(err)
		}
		checkRange(t, q, 5, 8)
		if err := q.TruncateAfterPhys(0); err != nil {
			t.Fatal(err)
		}
		checkRange(t, q, 5, 5)
		closeQ(t, q)
		q = mustOpen(t, e.opts())
		defer closeQ(t, q)
		checkRange(t, q, 5, 5)
		appendRange(t, q, 5, 9)
		checkRange(t, q, 5, 9)
	})
}

func TestDeleteBelowPhys(t *testing.T) {
	modes(t, func(t *testing.T, e env) {
		q := mustOpen(t, e.opts())
		appendRange(t, q, 0, 50)
		n, err := q.DeleteBelowPhys(entryFor(20).Offset)
		if err != nil || n != 1 {
			t.Fatalf("DeleteBelowPhys = %d, %v; want 1 file", n, err)
		}
		checkRange(t, q, 20, 50)
		if _, err := q.Get(19); !errors.Is(err, ErrNotFound) {
			t.Fatalf("Get below min: %v", err)
		}
		if _, err := q.Read(3, make([]Entry, 4)); !errors.Is(err, ErrNotFound) {
			t.Fatalf("Read below min: %v", err)
		}
		equal(t, "files", len(dataFiles(t, e.fs, e.dir)), 3)
		// Re-dispatch of a retained-away entry is accepted.
		if err := q.Append(3, entryFor(3)); err != nil {
			t.Fatal(err)
		}
		// Min never moves back.
		if n, err := q.DeleteBelowPhys(0); n != 0 || err != nil {
			t.Fatalf("DeleteBelowPhys(0) = %d, %v", n, err)
		}
		checkRange(t, q, 20, 50)
		// Everything: never the last file.
		if n, err := q.DeleteBelowPhys(1 << 50); n != 2 || err != nil {
			t.Fatalf("DeleteBelowPhys(all) = %d, %v; want 2", n, err)
		}
		checkRange(t, q, 50, 50)
		equal(t, "files", dataFiles(t, e.fs, e.dir), []string{fileName(48 * EntrySize)})
		closeQ(t, q)

		// MinOffset is not persisted: Open starts at the first file, and
		// DeleteBelowPhys re-applies retention.
		q = mustOpen(t, e.opts())
		defer closeQ(t, q)
		checkRange(t, q, 48, 50)
		if _, err := q.DeleteBelowPhys(1 << 50); err != nil {
			t.Fatal(err)
		}
		checkRange(t, q, 50, 50)
		appendRange(t, q, 50, 70)
		checkRange(t, q, 50, 70)
	})
}

func TestClosed(t *testing.T) {
	modes(t, func(t *testing.T, e env) {
		q := mustOpen(t, e.opts())
		appendRange(t, q, 0, 20)
		closeQ(t, q)
		closeQ(t, q) // idempotent
		wantErr(t, q.Append(20, entryFor(20)), ErrClosed)
		_, err := q.Get(1)
		wantErr(t, err, ErrClosed)
		_, err = q.Read(1, make([]Entry, 1))
		wantErr(t, err, ErrClosed)
		wantErr(t, q.Flush(), ErrClosed)
		wantErr(t, q.TruncateAfterPhys(0), ErrClosed)
		_, err = q.DeleteBelowPhys(0)
		wantErr(t, err, ErrClosed)
	})
}

func TestOptionsValidation(t *testing.T) {
	_, err := Open(Options{EntriesPerFile: -1})
	wantErr(t, err, ErrInvalidArgument)
	for _, want := range []string{"Dir is empty", "EntriesPerFile -1"} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("error %q does not report %q", err, want)
		}
	}
	_, err = Open(Options{Dir: "/x", EntriesPerFile: MaxEntriesPerFile + 1})
	wantErr(t, err, ErrInvalidArgument)
	o, err := Options{Dir: "/x"}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	equal(t, "String", o.String(), `consumequeue.Options{FS: vfs.OS, Dir: "/x", EntriesPerFile: 65536, ReadOnly: false}`)
}

func TestEntryCodec(t *testing.T) {
	var b [EntrySize]byte
	if _, ok := decodeEntry(b[:]); ok {
		t.Fatal("all-zero entry decodes as valid")
	}
	want := Entry{Offset: 0x0102030405060708, Size: 0x11223344, TagsCode: 0xdeadbeef}
	putEntry(b[:], want)
	// Little-endian layout: offset, size, tags code, CRC.
	equal(t, "offset bytes", b[:8], []byte{8, 7, 6, 5, 4, 3, 2, 1})
	equal(t, "size bytes", b[8:12], []byte{0x44, 0x33, 0x22, 0x11})
	equal(t, "tags bytes", b[12:16], []byte{0xef, 0xbe, 0xad, 0xde})
	got, ok := decodeEntry(b[:])
	if !ok || got != want {
		t.Fatalf("decode = %+v, %v", got, ok)
	}
	for i := range EntrySize {
		c := b
		c[i] ^= 0x10
		if _, ok := decodeEntry(c[:]); ok {
			t.Fatalf("flipped byte %d still decodes", i)
		}
	}
	if f, ok := decodeEntry(fillerBytes[:]); !ok || !isFiller(f) {
		t.Fatal("filler does not decode as a filler")
	}
}

func entriesFor(from, to int64) []Entry {
	es := make([]Entry, 0, to-from)
	for i := from; i < to; i++ {
		es = append(es, entryFor(i))
	}
	return es
}

// AppendBatch stores what one Append per entry would, across files, with
// duplicates and a hole into an empty queue, and on an error reports how
// many entries it stored before the failing one (and stored just those).
func TestAppendBatch(t *testing.T) {
	modes(t, func(t *testing.T, e env) {
		q := mustOpen(t, e.opts())
		defer closeQ(t, q)
		batch := func(from, to int64) {
			t.Helper()
			n, err := q.AppendBatch(from, entriesFor(from, to))
			if err != nil || n != int(to-from) {
				t.Fatalf("AppendBatch(%d, %d entries) = %d, %v", from, to-from, n, err)
			}
		}
		batch(0, 7)
		batch(7, testPerFile*3+2) // crosses three file boundaries
		checkRange(t, q, 0, testPerFile*3+2)
		batch(testPerFile*3-5, testPerFile*3+10) // re-dispatched head, then new entries
		checkRange(t, q, 0, testPerFile*3+10)
		equal(t, "data files", len(dataFiles(t, e.fs, e.dir)), 4)

		end := int64(testPerFile*3 + 10)
		es := entriesFor(end, end+6)
		es[4] = entryFor(2) // points backwards
		n, err := q.AppendBatch(end, es)
		wantErr(t, err, ErrConflict)
		equal(t, "stored before the bad entry", n, 4)
		checkRange(t, q, 0, end+4)
		es = entriesFor(end+4, end+6)
		es[1].Size = 0
		n, err = q.AppendBatch(end+4, es)
		wantErr(t, err, ErrInvalidArgument)
		equal(t, "stored before the invalid entry", n, 1)
		checkRange(t, q, 0, end+5)
		other := entryFor(3)
		other.TagsCode++
		n, err = q.AppendBatch(2, []Entry{entryFor(2), other})
		wantErr(t, err, ErrConflict)
		equal(t, "duplicates before the conflict", n, 1)
		checkRange(t, q, 0, end+5)

		empty := mustOpen(t, Options{FS: e.fs, Dir: e.dir + "x", EntriesPerFile: testPerFile})
		defer closeQ(t, empty)
		if n, err := empty.AppendBatch(100, entriesFor(100, 103)); err != nil || n != 3 {
			t.Fatalf("AppendBatch into an empty queue at 100: %d, %v", n, err)
		}
		checkRange(t, empty, 100, 103)
	})
}
