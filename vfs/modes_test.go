package vfs

import (
	"os"
	"runtime"
	"testing"
)

func TestDirMode(t *testing.T) {
	for file, want := range map[os.FileMode]os.FileMode{0o600: 0o700, 0o640: 0o750, 0o644: 0o755, 0o660: 0o770, 0o400: 0o500} {
		if got := dirMode(file); got != want {
			t.Errorf("dirMode(%#o) = %#o, want %#o", file, got, want)
		}
	}
}

// WithModes overrides the permission callers ask for, on files and
// directories, and passes Usage through.
func TestWithModes(t *testing.T) {
	mask := umask()
	dir := t.TempDir()
	fs := WithModes(OS, 0o640)
	if err := fs.MkdirAll(join(dir, "a/b"), 0o777); err != nil {
		t.Fatal(err)
	}
	f, err := fs.OpenFile(join(dir, "a/b/f"), os.O_RDWR|os.O_CREATE, 0o666)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := WriteFileAtomic(fs, join(dir, "a"), "cfg", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if runtime.GOOS == "windows" {
		return // no permission bits beyond read-only
	}
	for name, want := range map[string]os.FileMode{"a": 0o750, "a/b": 0o750, "a/b/f": 0o640, "a/cfg": 0o640} {
		fi, err := os.Stat(join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm(); got != want&^mask {
			t.Errorf("%s: mode %#o, want %#o", name, got, want&^mask)
		}
	}
	mem := NewMem()
	mem.SetCapacity(1 << 20)
	if _, total, ok, err := Usage(WithModes(mem, 0o600), "/"); err != nil || !ok || total != 1<<20 {
		t.Errorf("Usage through WithModes: total %d, ok %t, err %v", total, ok, err)
	}
}
