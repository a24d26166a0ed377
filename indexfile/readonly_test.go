package indexfile

import (
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/mqlite/mqlite/vfs"
)

func fileBytes(t *testing.T, fsys vfs.FS, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, n := range indexFiles(t, fsys, dir) {
		b, err := vfs.ReadFile(fsys, filepath.Join(dir, n))
		if err != nil {
			t.Fatal(err)
		}
		out[n] = string(b)
	}
	return out
}

// A read-only index beside its writer answers as the writer does for what
// was indexed before it opened, still finds old keys whose chains run
// through later entries, refuses every change and touches no file.
func TestReadOnlyIndex(t *testing.T) {
	eachFS(t, func(t *testing.T, fsys vfs.FS, dir string) {
		w := mustOpen(t, tinyOpts(fsys, dir))
		key := func(i int) string { return fmt.Sprintf("k%d", i%10) }
		for i := range 70 { // three files of 32 entries
			mustPut(t, w, key(i), int64(100*i), t0+int64(i)*1000)
		}
		if n := len(indexFiles(t, fsys, dir)); n != 3 {
			t.Fatalf("%d files, want 3", n)
		}
		ro := tinyOpts(vfs.ReadOnly(fsys), dir)
		ro.ReadOnly = true
		r := mustOpen(t, ro)
		for k := range 10 {
			eq(t, "key "+key(k), queryAll(t, r, key(k)), queryAll(t, w, key(k)))
		}
		for i := 70; i < 80; i++ { // into the live file, after the reader opened
			mustPut(t, w, key(i), int64(100*i), t0+int64(i)*1000)
		}
		before := fileBytes(t, fsys, dir)
		got := queryAll(t, r, key(3))
		want := queryAll(t, w, key(3)) // 730 first, then ... 30
		if len(got) != len(want) && !slicesEqual(got, want[1:]) {
			t.Fatalf("key k3: got %v, want %v (or without the newest)", got, want)
		}
		for _, err := range []error{r.Put("k", 10_000, t0), r.Flush(), r.TruncateAfterPhys(0)} {
			if !errors.Is(err, ErrReadOnly) {
				t.Fatalf("a change on a read-only index: %v", err)
			}
		}
		if _, err := r.DeleteBelowPhys(10_000); !errors.Is(err, ErrReadOnly) {
			t.Fatalf("DeleteBelowPhys: %v", err)
		}
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
		if after := fileBytes(t, fsys, dir); fmt.Sprint(after) != fmt.Sprint(before) {
			t.Fatal("the read-only index changed files")
		}
	})
}

func slicesEqual(a, b []int64) bool { return fmt.Sprint(a) == fmt.Sprint(b) }

// A damaged file ends what a read-only index uses (nothing is deleted); a
// missing directory is an empty index.
func TestReadOnlyIndexShapes(t *testing.T) {
	fsys := vfs.NewMem()
	const dir = "/ro/index"
	w := mustOpen(t, tinyOpts(fsys, dir))
	for i := range 70 {
		mustPut(t, w, "k", int64(100*i), t0+int64(i)*1000)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	names := indexFiles(t, fsys, dir)
	b, err := vfs.ReadFile(fsys, filepath.Join(dir, names[1]))
	if err != nil {
		t.Fatal(err)
	}
	b[20] ^= 0xff // a header field: the CRC fails
	if err := vfs.WriteFileAtomic(fsys, dir, names[1], b); err != nil {
		t.Fatal(err)
	}
	before := fileBytes(t, fsys, dir)
	ro := tinyOpts(vfs.ReadOnly(fsys), dir)
	ro.ReadOnly = true
	r := mustOpen(t, ro)
	got := queryAll(t, r, "k")
	if len(got) != 32 || got[0] != 3100 || got[31] != 0 {
		t.Fatalf("only the first file is usable: got %v", got)
	}
	r.Close()
	if after := fileBytes(t, fsys, dir); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatal("the read-only index changed files")
	}
	ro.Dir = "/ro/none"
	r = mustOpen(t, ro)
	if got := queryAll(t, r, "k"); len(got) != 0 || r.EndPhyOffset() != 0 {
		t.Fatalf("a missing directory: %v, %d", got, r.EndPhyOffset())
	}
}
