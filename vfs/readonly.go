package vfs

import (
	"io"
	"os"

	"github.com/mqlite/mqlite/internal/errs"
)

// ErrReadOnly is the error (wrapped in an *os.PathError naming the
// operation and file) of every change attempted through ReadOnly; it is
// the root package's ErrReadOnly.
var ErrReadOnly = errs.ErrReadOnly

// writeFlags are the OpenFile flags that can change a file.
const writeFlags = os.O_WRONLY | os.O_RDWR | os.O_CREATE | os.O_TRUNC | os.O_APPEND

// ReadOnly wraps fs so that nothing can change through it: OpenFile with a
// flag that could write or create, Remove, RemoveAll, Rename, MkdirAll,
// SyncDir and Lock fail with ErrReadOnly, and so do WriteAt, Truncate,
// Allocate and Sync of the files it opens (which are O_RDONLY, so the OS
// maps them read-only) and Sync of their mappings. Reads, listings,
// LockShared (which changes no file), Usage and UnmapsFirst pass through.
// A read-only Store opens its directory through it, so that a code path
// that would write fails loudly instead of touching the files of the
// process that owns them.
func ReadOnly(fs FS) FS { return roFS{fs} }

type roFS struct{ inner FS }

func refused(op, name string) error { return &os.PathError{Op: op, Path: name, Err: ErrReadOnly} }

func (r roFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	if flag&writeFlags != 0 {
		return nil, refused("open for writing", name)
	}
	f, err := r.inner.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return roFile{File: f, name: name}, nil
}

func (r roFS) Remove(name string) error                  { return refused("remove", name) }
func (r roFS) RemoveAll(name string) error               { return refused("remove", name) }
func (r roFS) Rename(oldname, _ string) error            { return refused("rename", oldname) }
func (r roFS) MkdirAll(dir string, _ os.FileMode) error  { return refused("mkdir", dir) }
func (r roFS) SyncDir(dir string) error                  { return refused("sync", dir) }
func (r roFS) Lock(name string) (io.Closer, error)       { return nil, refused("lock", name) }
func (r roFS) LockShared(name string) (io.Closer, error) { return r.inner.LockShared(name) }
func (r roFS) ReadDir(dir string) ([]string, error)      { return r.inner.ReadDir(dir) }
func (r roFS) Stat(name string) (int64, bool, error)     { return r.inner.Stat(name) }
func (r roFS) Usage(dir string) (used, total uint64, err error) {
	if u, ok := r.inner.(Usager); ok {
		return u.Usage(dir)
	}
	return 0, 0, nil
}

type roFile struct {
	File
	name string
}

func (f roFile) WriteAt([]byte, int64) (int, error) { return 0, refused("write", f.name) }
func (f roFile) Truncate(int64) error               { return refused("truncate", f.name) }
func (f roFile) Allocate(int64) error               { return refused("fallocate", f.name) }
func (f roFile) Sync() error                        { return refused("sync", f.name) }

func (f roFile) Map(size int) (Mapping, error) {
	m, err := f.File.Map(size)
	if err != nil {
		return nil, err
	}
	return roMapping{Mapping: m, name: f.name}, nil
}

type roMapping struct {
	Mapping
	name string
}

func (m roMapping) Sync(int, int) error { return refused("msync", m.name) }

// UnmapsFirst passes through the wrapped file system's order of unmapping
// and removing (see MustUnmapFirst).
func (r roFS) UnmapsFirst() bool { return MustUnmapFirst(r.inner) }
