package vfs

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"syscall"
	"testing"
)

func mustNot(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, ErrReadOnly) {
		t.Fatalf("%s through ReadOnly: got %v, want ErrReadOnly", what, err)
	}
}

// Every change through ReadOnly fails with ErrReadOnly and reaches nothing;
// reads pass through.
func TestReadOnlyRefusesChanges(t *testing.T) {
	for _, tc := range []struct {
		name string
		fs   FS
		dir  string
	}{{"mem", NewMem(), "/d"}, {"os", OS, t.TempDir()}} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(tc.dir, "f")
			if err := tc.fs.MkdirAll(tc.dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := WriteFileAtomic(tc.fs, tc.dir, "f", []byte("payload!")); err != nil {
				t.Fatal(err)
			}
			ro := ReadOnly(tc.fs)
			for _, flag := range []int{os.O_RDWR, os.O_WRONLY, os.O_RDONLY | os.O_CREATE, os.O_RDONLY | os.O_TRUNC, os.O_RDONLY | os.O_APPEND} {
				_, err := ro.OpenFile(path, flag, 0o644)
				mustNot(t, "OpenFile", err)
			}
			mustNot(t, "Remove", ro.Remove(path))
			mustNot(t, "RemoveAll", ro.RemoveAll(tc.dir))
			mustNot(t, "Rename", ro.Rename(path, path+"2"))
			mustNot(t, "MkdirAll", ro.MkdirAll(filepath.Join(tc.dir, "sub"), 0o755))
			mustNot(t, "SyncDir", ro.SyncDir(tc.dir))
			_, err := ro.Lock(filepath.Join(tc.dir, "lock"))
			mustNot(t, "Lock", err)
			mustNot(t, "WriteFileAtomic", WriteFileAtomic(ro, tc.dir, "g", []byte("x")))

			f, err := ro.OpenFile(path, os.O_RDONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			_, err = f.WriteAt([]byte("x"), 0)
			mustNot(t, "WriteAt", err)
			mustNot(t, "Truncate", f.Truncate(1))
			mustNot(t, "Allocate", f.Allocate(1<<20))
			mustNot(t, "Sync", f.Sync())
			m, err := f.Map(8)
			if err != nil {
				t.Fatal(err)
			}
			mustNot(t, "Mapping.Sync", m.Sync(0, 8))
			if string(m.Bytes()) != "payload!" {
				t.Fatalf("mapped %q", m.Bytes())
			}
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
			if string(m.Bytes()) != "payload!" {
				t.Fatal("the mapping did not outlive the descriptor")
			}
			if err := m.Unmap(); err != nil {
				t.Fatal(err)
			}
			b, err := ReadFile(ro, path)
			if err != nil || string(b) != "payload!" {
				t.Fatalf("ReadFile through ReadOnly: %q, %v", b, err)
			}
			names, err := ro.ReadDir(tc.dir)
			if err != nil || len(names) != 1 || names[0] != "f" {
				t.Fatalf("the directory changed: %v, %v", names, err)
			}
		})
	}
}

// A file opened O_RDONLY on the OS is mapped PROT_READ: a store faults
// (recoverably, with SetPanicOnFault) instead of reaching the file. On
// the in-memory FS writes through such a handle fail like the OS's.
func TestReadOnlyHandles(t *testing.T) {
	dir := t.TempDir()
	if err := WriteFileAtomic(OS, dir, "f", make([]byte, PageSize)); err != nil {
		t.Fatal(err)
	}
	f, err := OS.OpenFile(filepath.Join(dir, "f"), os.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m, err := f.Map(PageSize)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Unmap()
	faulted := func() (ok bool) {
		defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
		defer func() {
			_, isRuntime := recover().(runtime.Error)
			ok = isRuntime
		}()
		m.Bytes()[0] = 1
		return false
	}()
	if !faulted {
		t.Fatal("a store into a read-only mapping did not fault")
	}

	mem := NewMem()
	if err := mem.MkdirAll("/m", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := WriteFileAtomic(mem, "/m", "f", []byte("abc")); err != nil {
		t.Fatal(err)
	}
	h, err := mem.OpenFile("/m/f", os.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.WriteAt([]byte("x"), 0); !errors.Is(err, syscall.EBADF) {
		t.Fatalf("WriteAt through an O_RDONLY handle: %v", err)
	}
	if err := h.Truncate(0); !errors.Is(err, syscall.EBADF) {
		t.Fatalf("Truncate through an O_RDONLY handle: %v", err)
	}
}
