package indexfile

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/mqlite/mqlite/vfs"
)

// BenchmarkPut measures one Put with default file sizes (target: 0 allocs
// per op; a new file every 4,000,000 entries is amortized).
func BenchmarkPut(b *testing.B) {
	keys := make([]string, 4096)
	for i := range keys {
		keys[i] = fmt.Sprintf("orders#order-%08d", i)
	}
	run := func(b *testing.B, fsys vfs.FS, dir string) {
		x, err := Open(Options{FS: fsys, Dir: dir})
		if err != nil {
			b.Fatal(err)
		}
		defer x.Close()
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; b.Loop(); i++ {
			if err := x.Put(keys[i%len(keys)], int64(i)*256, t0+int64(i)); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("mem", func(b *testing.B) { run(b, vfs.NewMem(), "/i") })
	b.Run("os", func(b *testing.B) { run(b, vfs.OS, filepath.Join(b.TempDir(), "index")) })
}

const benchKeys = 1_000_000

var (
	benchOnce  sync.Once
	benchIndex *Index
	benchNames []string
)

// benchQueryIndex builds, once per process, an in-memory index of
// 1,000,000 distinct keys with default sizes, plus one hot key that every
// 100th record also carries.
func benchQueryIndex(b *testing.B) (*Index, []string) {
	benchOnce.Do(func() {
		x, err := Open(Options{FS: vfs.NewMem(), Dir: "/i"})
		if err != nil {
			b.Fatal(err)
		}
		benchNames = make([]string, benchKeys)
		for i := range benchKeys {
			benchNames[i] = fmt.Sprintf("orders#%016x", uint64(i)*0x9e3779b97f4a7c15)
			if err := x.Put(benchNames[i], int64(i)*512, t0+int64(i)); err != nil {
				b.Fatal(err)
			}
			if i%100 == 0 {
				if err := x.Put("orders#hot", int64(i)*512, t0+int64(i)); err != nil {
					b.Fatal(err)
				}
			}
		}
		benchIndex = x
	})
	return benchIndex, benchNames
}

// BenchmarkQuery looks up random keys among 1,000,000 indexed ones
// (reporting µs/query), and the 64 newest hits of a key carried by 10,000
// records.
func BenchmarkQuery(b *testing.B) {
	x, names := benchQueryIndex(b)
	b.Run("unique-key", func(b *testing.B) {
		rng := rand.New(rand.NewPCG(1, 2))
		b.ReportAllocs()
		for b.Loop() {
			got, err := x.Query(names[rng.IntN(len(names))], 0, 1<<53, 64)
			if err != nil || len(got) == 0 { // > 1: a 32-bit hash collision
				b.Fatalf("%v %v", got, err)
			}
		}
		b.ReportMetric(float64(b.Elapsed())/float64(time.Microsecond)/float64(b.N), "µs/query")
	})
	b.Run("hot-key-64", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			got, err := x.Query("orders#hot", 0, 1<<53, 64)
			if err != nil || len(got) != 64 {
				b.Fatalf("%d %v", len(got), err)
			}
		}
		b.ReportMetric(float64(b.Elapsed())/float64(time.Microsecond)/float64(b.N), "µs/query")
	})
}
