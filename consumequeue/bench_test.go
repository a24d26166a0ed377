package consumequeue

import (
	"path/filepath"
	"testing"

	"github.com/mqlite/mqlite/vfs"
)

func benchModes(b *testing.B, fn func(b *testing.B, o Options)) {
	b.Run("mem", func(b *testing.B) {
		fn(b, Options{FS: vfs.NewMem(), Dir: "/bench/T/0"})
	})
	b.Run("os", func(b *testing.B) {
		fn(b, Options{FS: vfs.OS, Dir: filepath.Join(b.TempDir(), "T", "0")})
	})
}

func BenchmarkAppend(b *testing.B) {
	benchModes(b, func(b *testing.B, o Options) {
		q := mustOpen(b, o)
		defer q.Close()
		b.SetBytes(EntrySize)
		b.ReportAllocs()
		i := int64(0)
		for b.Loop() {
			if err := q.Append(i, entryFor(i)); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
}

const benchEntries = 100_000

func BenchmarkGet(b *testing.B) {
	benchModes(b, func(b *testing.B, o Options) {
		q := mustOpen(b, o)
		defer q.Close()
		appendRange(b, q, 0, benchEntries)
		b.ReportAllocs()
		i := int64(0)
		for b.Loop() {
			if _, err := q.Get(i % benchEntries); err != nil {
				b.Fatal(err)
			}
			i += 7919
		}
	})
}

func BenchmarkRead(b *testing.B) {
	benchModes(b, func(b *testing.B, o Options) {
		q := mustOpen(b, o)
		defer q.Close()
		appendRange(b, q, 0, benchEntries)
		buf := make([]Entry, 32)
		b.SetBytes(int64(len(buf)) * EntrySize)
		b.ReportAllocs()
		from := int64(0)
		for b.Loop() {
			n, err := q.Read(from, buf)
			if err != nil {
				b.Fatal(err)
			}
			if from += int64(n); from >= benchEntries {
				from = 0
			}
		}
	})
}
