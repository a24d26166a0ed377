package consumequeue

import (
	"bytes"
	"errors"
	"hash/crc32"
	"os"
	"path/filepath"
	"testing"

	"github.com/mqlite/mqlite/vfs"
)

// damaged builds a queue of n entries, closes it, applies damage to the
// files and reopens it.
func damaged(t *testing.T, e env, n int64, damage func()) *Queue {
	t.Helper()
	q := mustOpen(t, e.opts())
	appendRange(t, q, 0, n)
	closeQ(t, q)
	damage()
	return mustOpen(t, e.opts())
}

func truncateFile(t *testing.T, fs vfs.FS, path string, size int64) {
	t.Helper()
	f, err := fs.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	f.Close()
}

func patchFile(t *testing.T, fs vfs.FS, path string, off int, patch []byte) {
	t.Helper()
	b := readFile(t, fs, path)
	copy(b[off:], patch)
	writeFile(t, fs, path, b)
}

func TestRecoverTruncatedLastFile(t *testing.T) {
	modes(t, func(t *testing.T, e env) {
		q := damaged(t, e, 40, func() {
			truncateFile(t, e.fs, e.file(32), 5*EntrySize+7) // torn inside entry 37
		})
		checkRange(t, q, 0, 37)
		size, _, _ := e.fs.Stat(e.file(32))
		equal(t, "repaired size", size, int64(testPerFile*EntrySize))
		appendRange(t, q, 37, 45)
		closeQ(t, q)
		q = mustOpen(t, e.opts())
		defer closeQ(t, q)
		checkRange(t, q, 0, 45)
	})
}

func TestRecoverGarbageInLastFile(t *testing.T) {
	modes(t, func(t *testing.T, e env) {
		garbage := bytes.Repeat([]byte{0xa5, 0x17, 0xff, 0x03}, 20)
		q := damaged(t, e, 40, func() {
			patchFile(t, e.fs, e.file(32), 3*EntrySize, garbage)
		})
		checkRange(t, q, 0, 35)
		// Everything after the damage was zeroed, so no stale entry can
		// come back after the next appends.
		b := readFile(t, e.fs, e.file(32))
		if !bytes.Equal(b[3*EntrySize:], make([]byte, len(b)-3*EntrySize)) {
			t.Fatal("tail after the damage was not zeroed")
		}
		appendRange(t, q, 35, 36)
		closeQ(t, q)
		q = mustOpen(t, e.opts())
		defer closeQ(t, q)
		checkRange(t, q, 0, 36)
	})
}

func TestRecoverFlippedByteMidFile(t *testing.T) {
	modes(t, func(t *testing.T, e env) {
		// Entry 21 (file 1, slot 5) is damaged; valid entries 22..39 after
		// it, including all of file 2, are dropped: re-dispatch rebuilds them.
		q := damaged(t, e, 40, func() {
			b := readFile(t, e.fs, e.file(16))
			b[5*EntrySize+9] ^= 0x40
			writeFile(t, e.fs, e.file(16), b)
		})
		checkRange(t, q, 0, 21)
		equal(t, "files", len(dataFiles(t, e.fs, e.dir)), 2)
		appendRange(t, q, 21, 40)
		closeQ(t, q)
		q = mustOpen(t, e.opts())
		defer closeQ(t, q)
		checkRange(t, q, 0, 40)
	})
}

func TestRecoverBackwardsEntry(t *testing.T) {
	modes(t, func(t *testing.T, e env) {
		// A valid-CRC entry that points before its predecessor is damage too.
		q := damaged(t, e, 20, func() {
			var b [EntrySize]byte
			putEntry(b[:], entryFor(2))
			patchFile(t, e.fs, e.file(16), 1*EntrySize, b[:])
		})
		defer closeQ(t, q)
		checkRange(t, q, 0, 17)
	})
}

func TestRecoverZeroLengthFile(t *testing.T) {
	modes(t, func(t *testing.T, e env) {
		q := damaged(t, e, 40, func() { truncateFile(t, e.fs, e.file(32), 0) })
		checkRange(t, q, 0, 32)
		equal(t, "files", len(dataFiles(t, e.fs, e.dir)), 2) // only the first file may be empty
		closeQ(t, q)
		// A zero-length file in the middle ends the queue there.
		q = damaged(t, e, 40, func() { truncateFile(t, e.fs, e.file(16), 0) })
		defer closeQ(t, q)
		checkRange(t, q, 0, 16)
		equal(t, "files", len(dataFiles(t, e.fs, e.dir)), 1)
	})
}

func TestRecoverGap(t *testing.T) {
	modes(t, func(t *testing.T, e env) {
		q := damaged(t, e, 60, func() {
			if err := e.fs.Remove(e.file(16)); err != nil {
				t.Fatal(err)
			}
		})
		defer closeQ(t, q)
		checkRange(t, q, 0, 16)
		equal(t, "files", dataFiles(t, e.fs, e.dir), []string{fileName(0)})
	})
}

func TestRecoverLongFile(t *testing.T) {
	modes(t, func(t *testing.T, e env) {
		q := damaged(t, e, 20, func() { truncateFile(t, e.fs, e.file(16), 10_000) })
		defer closeQ(t, q)
		checkRange(t, q, 0, 20)
		size, _, _ := e.fs.Stat(e.file(16))
		equal(t, "repaired size", size, int64(testPerFile*EntrySize))
	})
}

func TestDamagedTrustedFile(t *testing.T) {
	modes(t, func(t *testing.T, e env) {
		// Files older than the last three are not scanned: damage there is
		// found by the CRC check on read.
		q := damaged(t, e, 100, func() {
			b := readFile(t, e.fs, e.file(16))
			b[3*EntrySize] ^= 1
			writeFile(t, e.fs, e.file(16), b)
		})
		defer closeQ(t, q)
		equal(t, "MaxOffset", q.MaxOffset(), int64(100))
		_, err := q.Get(19)
		wantErr(t, err, ErrCorrupt)
		var ce *CorruptError
		if !errors.As(err, &ce) || ce.Offset != 3*EntrySize || ce.Path != e.file(16) {
			t.Fatalf("error %v does not locate the damage", err)
		}
		buf := make([]Entry, 10)
		n, err := q.Read(15, buf)
		wantErr(t, err, ErrCorrupt)
		equal(t, "entries before the damage", n, 4)
		equal(t, "entry 18", buf[3], entryFor(18))
		// A re-dispatch of the damaged slot rewrites it with its entry.
		if err := q.Append(19, entryFor(19)); err != nil {
			t.Fatal(err)
		}
		got, err := q.Get(19)
		if err != nil {
			t.Fatal(err)
		}
		equal(t, "entry 19 rewritten", got, entryFor(19))
	})
}

func TestMetaChecks(t *testing.T) {
	modes(t, func(t *testing.T, e env) {
		q := mustOpen(t, e.opts())
		appendRange(t, q, 0, 5)
		closeQ(t, q)
		meta := filepath.Join(e.dir, metaName)
		good := readFile(t, e.fs, meta)
		equal(t, "meta", good, encodeMeta(testPerFile))
		equal(t, "magic", string(good[:4]), "MQCQ")

		// Another entries-per-file.
		_, err := Open(Options{FS: e.fs, Dir: e.dir, EntriesPerFile: 32})
		wantErr(t, err, ErrIncompatible, ErrInvalidArgument)
		// EntriesPerFile 0 adopts the queue's own, not the default.
		q = mustOpen(t, Options{FS: e.fs, Dir: e.dir})
		equal(t, "adopted entries per file", q.perFile, int64(testPerFile))
		equal(t, "entries kept", q.MaxOffset(), int64(5))
		closeQ(t, q)

		// Another version, with a valid CRC.
		bad := append([]byte(nil), good...)
		le.PutUint32(bad[4:], 2)
		le.PutUint32(bad[12:], crc32.Checksum(bad[:12], castagnoli))
		writeFile(t, e.fs, meta, bad)
		_, err = Open(e.opts())
		wantErr(t, err, ErrIncompatible, ErrInvalidArgument)
		// Another version of another length (whose CRC cannot be checked).
		writeFile(t, e.fs, meta, append(bad[:8:8], make([]byte, 16)...))
		_, err = Open(e.opts())
		wantErr(t, err, ErrIncompatible, ErrInvalidArgument)

		for name, b := range map[string][]byte{
			"bad CRC": append(append([]byte(nil), good[:15]...), good[15]^1),
			// A damaged version byte is damage, not another version.
			"flipped version": append(append(append([]byte(nil), good[:5]...), good[5]^4), good[6:]...),
			"bad magic":       append([]byte("XXXX"), good[4:]...),
			"short":           good[:10],
			"empty":           nil,
		} {
			writeFile(t, e.fs, meta, b)
			_, err = Open(e.opts())
			var ce *CorruptError
			if !errors.As(err, &ce) || !errors.Is(err, ErrCorrupt) {
				t.Fatalf("%s meta: %v, want *CorruptError", name, err)
			}
		}

		// Data files without meta.
		if err := e.fs.Remove(meta); err != nil {
			t.Fatal(err)
		}
		_, err = Open(e.opts())
		wantErr(t, err, ErrCorrupt)

		writeFile(t, e.fs, meta, good)
		q = mustOpen(t, e.opts())
		defer closeQ(t, q)
		checkRange(t, q, 0, 5)
	})
}

func TestMisalignedFileName(t *testing.T) {
	modes(t, func(t *testing.T, e env) {
		q := mustOpen(t, e.opts())
		appendRange(t, q, 0, 5)
		closeQ(t, q)
		writeFile(t, e.fs, filepath.Join(e.dir, fileName(100)), make([]byte, testPerFile*EntrySize))
		writeFile(t, e.fs, filepath.Join(e.dir, "README"), []byte("ignored"))
		_, err := Open(e.opts())
		wantErr(t, err, ErrCorrupt)
		if err := e.fs.Remove(filepath.Join(e.dir, fileName(100))); err != nil {
			t.Fatal(err)
		}
		q = mustOpen(t, e.opts())
		defer closeQ(t, q)
		checkRange(t, q, 0, 5)
	})
}
