package bench

import (
	"io/fs"
	"path/filepath"
	"testing"

	"github.com/mqlite/mqlite"
)

// diskUse sums the apparent sizes and the allocated bytes (st_blocks,
// where the platform has it) of the files under dir.
func diskUse(t *testing.T, dir string) (apparent, allocated int64) {
	t.Helper()
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		apparent += fi.Size()
		allocated += allocatedBytes(fi)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return apparent, allocated
}

// TestSmallStoreFootprint reports what each system takes on disk for a
// store holding one 5-byte message, while open and after Close. mqlite
// opens with the bench's explicit sizes (mqliteOptions) and with the
// library's defaults ("mqlite-defaults"). It only reports: run with -v.
func TestSmallStoreFootprint(t *testing.T) {
	systems := []System{mqliteSystem{}, mqliteDefaults{}, jetStreamSystem{}, pebbleSystem{}, boltSystem{}, walSystem{}}
	for _, sys := range systems {
		t.Run(sys.Name(), func(t *testing.T) {
			dir := t.TempDir()
			q, err := sys.Open(Params{Dir: dir, Producers: 1, Batch: 1})
			if err != nil {
				t.Fatal(err)
			}
			if err := q.Send(0, [][]byte{[]byte("hello")}); err != nil {
				q.Close()
				t.Fatal(err)
			}
			oa, ob := diskUse(t, dir)
			if err := q.Close(); err != nil {
				t.Fatal(err)
			}
			ca, cb := diskUse(t, dir)
			t.Logf("| %s | %.3f MB | %.3f MB | %.3f MB | %.3f MB |", sys.Name(), mb(oa), mb(ob), mb(ca), mb(cb))
		})
	}
}

func mb(n int64) float64 { return float64(n) / 1e6 }

// mqliteDefaults is mqlite opened with the library's default sizes.
type mqliteDefaults struct{ mqliteSystem }

func (mqliteDefaults) Name() string { return "mqlite-defaults" }

func (mqliteDefaults) Open(p Params) (Queue, error) {
	return openMqlite(p, &mqlite.Options{Flush: mqlite.FlushAsync})
}
