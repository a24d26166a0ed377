package vfs

import (
	"errors"
	"io"
	"os"
	"sync"
)

// ErrMapped is the error (wrapped in an *os.PathError) of a remove,
// rename or truncate that StrictMapFS refuses because a mapping of the
// file is open.
var ErrMapped = errors.New("mqlite/vfs: file is mapped")

// StrictMapFS wraps an FS so that it refuses what Windows refuses: to
// remove, rename (as the source or the target) or truncate a file, or to
// grow it with Allocate, while a mapping of it is open; RemoveAll of a
// directory holding such a file fails too. The store's tests run under it
// on Linux so that the order Windows needs (unmap first) is exercised
// where the suite runs. Everything else passes through.
type StrictMapFS struct {
	inner FS

	mu     sync.Mutex
	mapped map[string]int // clean path -> open mappings
}

// NewStrictMapFS wraps inner.
func NewStrictMapFS(inner FS) *StrictMapFS {
	return &StrictMapFS{inner: inner, mapped: map[string]int{}}
}

// UnmapsFirst reports true: a file must be unmapped before it is removed,
// renamed or truncated (see MustUnmapFirst).
func (s *StrictMapFS) UnmapsFirst() bool { return true }

// Mapped reports the number of open mappings of name.
func (s *StrictMapFS) Mapped(name string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mapped[clean(name)]
}

// refuse is the error for op on name if a mapping of name is open.
func (s *StrictMapFS) refuse(op, name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mapped[clean(name)] > 0 {
		return &os.PathError{Op: op, Path: name, Err: ErrMapped}
	}
	return nil
}

// OpenFile opens name; with O_TRUNC it is refused while name is mapped.
func (s *StrictMapFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	if flag&os.O_TRUNC != 0 {
		if err := s.refuse("open truncating", name); err != nil {
			return nil, err
		}
	}
	f, err := s.inner.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &strictFile{File: f, fs: s, name: clean(name)}, nil
}

// Remove is refused with ErrMapped while name is mapped.
func (s *StrictMapFS) Remove(name string) error {
	if err := s.refuse("remove", name); err != nil {
		return err
	}
	return s.inner.Remove(name)
}

// RemoveAll is refused with ErrMapped while a file under name is mapped.
func (s *StrictMapFS) RemoveAll(name string) error {
	dir := clean(name)
	s.mu.Lock()
	for p, n := range s.mapped {
		if n > 0 && (p == dir || isUnder(p, dir)) {
			s.mu.Unlock()
			return &os.PathError{Op: "remove", Path: p, Err: ErrMapped}
		}
	}
	s.mu.Unlock()
	return s.inner.RemoveAll(name)
}

// Rename is refused with ErrMapped while either name is mapped.
func (s *StrictMapFS) Rename(oldname, newname string) error {
	if err := s.refuse("rename", oldname); err != nil {
		return err
	}
	if err := s.refuse("rename over", newname); err != nil {
		return err
	}
	return s.inner.Rename(oldname, newname)
}

// MkdirAll is the wrapped FS's.
func (s *StrictMapFS) MkdirAll(dir string, perm os.FileMode) error {
	return s.inner.MkdirAll(dir, perm)
}

// ReadDir is the wrapped FS's.
func (s *StrictMapFS) ReadDir(dir string) ([]string, error) { return s.inner.ReadDir(dir) }

// Stat is the wrapped FS's.
func (s *StrictMapFS) Stat(name string) (int64, bool, error) { return s.inner.Stat(name) }

// SyncDir is the wrapped FS's.
func (s *StrictMapFS) SyncDir(dir string) error { return s.inner.SyncDir(dir) }

// Lock is the wrapped FS's.
func (s *StrictMapFS) Lock(name string) (io.Closer, error) { return s.inner.Lock(name) }

// LockShared is the wrapped FS's.
func (s *StrictMapFS) LockShared(name string) (io.Closer, error) { return s.inner.LockShared(name) }

// Usage passes through to the wrapped file system.
func (s *StrictMapFS) Usage(dir string) (used, total uint64, err error) {
	if u, ok := s.inner.(Usager); ok {
		return u.Usage(dir)
	}
	return 0, 0, nil
}

type strictFile struct {
	File
	fs   *StrictMapFS
	name string
}

func (f *strictFile) Truncate(size int64) error {
	if err := f.fs.refuse("truncate", f.name); err != nil {
		return err
	}
	return f.File.Truncate(size)
}

// Allocate is refused on a mapped file if it would grow it.
func (f *strictFile) Allocate(size int64) error {
	if cur, err := f.File.Size(); err == nil && size > cur {
		if err := f.fs.refuse("fallocate", f.name); err != nil {
			return err
		}
	}
	return f.File.Allocate(size)
}

func (f *strictFile) Map(size int) (Mapping, error) {
	m, err := f.File.Map(size)
	if err != nil {
		return nil, err
	}
	f.fs.mu.Lock()
	f.fs.mapped[f.name]++
	f.fs.mu.Unlock()
	return &strictMapping{Mapping: m, fs: f.fs, name: f.name}, nil
}

type strictMapping struct {
	Mapping
	fs   *StrictMapFS
	name string
	once sync.Once
}

func (m *strictMapping) Unmap() error {
	err := m.Mapping.Unmap()
	m.once.Do(func() {
		m.fs.mu.Lock()
		if m.fs.mapped[m.name]--; m.fs.mapped[m.name] <= 0 {
			delete(m.fs.mapped, m.name)
		}
		m.fs.mu.Unlock()
	})
	return err
}

// MustUnmapFirst reports whether fs refuses to remove, rename or truncate
// a mapped file (OS on Windows, and StrictMapFS), so that the store unmaps
// a file before it does any of these. An FS tells it with a method
// UnmapsFirst() bool; a wrapper should forward its inner FS's answer, as
// Faulty, ReadOnly and WithModes do, or a store on a wrapped Windows file
// system fails where it removes or recycles a mapped file.
func MustUnmapFirst(fs FS) bool {
	if u, ok := fs.(interface{ UnmapsFirst() bool }); ok {
		return u.UnmapsFirst()
	}
	return fs == OS && osUnmapsFirst
}

// MappedFiles reports how many files have an open mapping.
func (s *StrictMapFS) MappedFiles() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.mapped)
}
