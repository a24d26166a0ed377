package indexfile

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/mqlite/mqlite/vfs"
)

// validFile returns the bytes of a tiny index file holding n entries, clean
// or dirty.
func validFile(tb testing.TB, n int, dirty bool) []byte {
	fsys := vfs.NewMem()
	x, err := Open(tinyOpts(fsys, "/i"))
	if err != nil {
		tb.Fatal(err)
	}
	for i := range n {
		if err := x.Put(fmt.Sprintf("k%d", i%5), int64(i), t0+int64(i)*700); err != nil {
			tb.Fatal(err)
		}
	}
	if err := x.Close(); err != nil {
		tb.Fatal(err)
	}
	b, err := vfs.ReadFile(fsys, "/i/"+fileName(0))
	if err != nil {
		tb.Fatal(err)
	}
	if dirty {
		binary.LittleEndian.PutUint16(b[hFlags:], flagDirty)
		binary.LittleEndian.PutUint32(b[hFlushed:], uint32(n/2+1))
		fixHeaderCRC(b)
	}
	return b
}

// FuzzOpenDamaged opens random bytes as an index file: Open, Query, Put and
// Close must never panic, and Open fails only with ErrVersion. With fixCRC
// the header checksum (and version) is repaired after mutation, so the
// fuzzer reaches the field checks, the repair and the chain walk.
func FuzzOpenDamaged(f *testing.F) {
	f.Add([]byte{}, false)
	f.Add([]byte("MQIX"), false)
	f.Add(make([]byte, int(FileSize(8, 32))), true)
	f.Add(validFile(f, 20, false), false)
	f.Add(validFile(f, 20, false), true)
	f.Add(validFile(f, 32, true), true)
	f.Add(validFile(f, 7, true), false)
	f.Fuzz(func(t *testing.T, data []byte, fixCRC bool) {
		if len(data) > 1<<20 {
			return
		}
		if fixCRC && len(data) >= HeaderSize {
			copy(data, magic)
			binary.LittleEndian.PutUint16(data[hVersion:], FormatVersion)
			fixHeaderCRC(data)
		}
		fsys := vfs.NewMem()
		o := tinyOpts(fsys, "/i")
		fsys.MkdirAll("/i", 0o755)
		writeRaw(t, fsys, "/i/"+fileName(0), data)
		x, err := Open(o)
		if err != nil {
			if !errors.Is(err, ErrVersion) {
				t.Fatalf("Open: %v", err)
			}
			return
		}
		defer x.Close()
		for k := range 6 {
			got, err := x.Query(fmt.Sprintf("k%d", k), 0, math.MaxInt64, 100)
			if err != nil || len(got) > 100 {
				t.Fatalf("Query: %v, %d results", err, len(got))
			}
		}
		end := x.EndPhyOffset()
		if end > math.MaxInt64/2 {
			return
		}
		for i := range 40 {
			if err := x.Put(fmt.Sprintf("k%d", i%6), end+int64(i), t0); err != nil {
				t.Fatalf("Put: %v", err)
			}
		}
		if got, err := x.Query("k1", 0, math.MaxInt64, 100); err != nil || len(got) == 0 {
			t.Fatalf("Query after Put: %v, %v", got, err)
		}
		if err := x.Close(); err != nil {
			t.Fatal(err)
		}
	})
}
