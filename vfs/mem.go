package vfs

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
)

// NewMem returns an empty in-memory file system. Syncs are no-ops; mappings
// share the file's bytes.
func NewMem() *MemFS {
	return &MemFS{files: map[string]*memFile{}, dirs: map[string]bool{"/": true, ".": true}, locks: map[*memFile]int{}}
}

// MemFS is an in-memory FS, safe for concurrent use.
type MemFS struct {
	mu    sync.Mutex
	files map[string]*memFile
	dirs  map[string]bool
	// locks: -1 held exclusively, n > 0 by n shared holders; keyed by the
	// file, so that a lock follows it through renames.
	locks map[*memFile]int

	capacity uint64 // for Usage; 0 = unknown
}

type memFile struct {
	mu   sync.RWMutex
	data []byte
}

func clean(name string) string { return filepath.Clean(name) }

// OpenFile opens name; O_CREATE creates it if its directory exists.
func (m *MemFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	name = clean(name)
	m.mu.Lock()
	defer m.mu.Unlock()
	f, existed, err := m.fileLocked(name, flag&os.O_CREATE != 0)
	if err != nil {
		return nil, err
	}
	if existed && flag&os.O_TRUNC != 0 {
		f.mu.Lock()
		f.data = nil
		f.mu.Unlock()
	}
	return &memHandle{f: f, name: name, ro: flag&(os.O_WRONLY|os.O_RDWR) == 0}, nil
}

// Remove deletes a file or an empty directory.
func (m *MemFS) Remove(name string) error {
	name = clean(name)
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.files[name]; ok {
		delete(m.files, name)
		return nil
	}
	if m.dirs[name] {
		for p := range m.files {
			if filepath.Dir(p) == name {
				return &os.PathError{Op: "remove", Path: name, Err: fmt.Errorf("directory not empty")}
			}
		}
		delete(m.dirs, name)
		return nil
	}
	return &os.PathError{Op: "remove", Path: name, Err: os.ErrNotExist}
}

// RemoveAll deletes name and everything under it; a missing name is
// not an error.
func (m *MemFS) RemoveAll(name string) error {
	name = clean(name)
	m.mu.Lock()
	defer m.mu.Unlock()
	prefix := name + string(filepath.Separator)
	for p := range m.files {
		if p == name || strings.HasPrefix(p, prefix) {
			delete(m.files, p)
		}
	}
	for d := range m.dirs {
		if d == name || strings.HasPrefix(d, prefix) {
			delete(m.dirs, d)
		}
	}
	return nil
}

// Rename moves a file to newname, replacing what is there.
func (m *MemFS) Rename(oldname, newname string) error {
	oldname, newname = clean(oldname), clean(newname)
	m.mu.Lock()
	defer m.mu.Unlock()
	f, ok := m.files[oldname]
	if !ok {
		return &os.LinkError{Op: "rename", Old: oldname, New: newname, Err: os.ErrNotExist}
	}
	delete(m.files, oldname)
	m.files[newname] = f
	return nil
}

// MkdirAll creates dir and its parents.
func (m *MemFS) MkdirAll(dir string, perm os.FileMode) error {
	dir = clean(dir)
	m.mu.Lock()
	defer m.mu.Unlock()
	for d := dir; ; d = filepath.Dir(d) {
		m.dirs[d] = true
		if d == filepath.Dir(d) {
			break
		}
	}
	return nil
}

// ReadDir lists the names in dir, sorted.
func (m *MemFS) ReadDir(dir string) ([]string, error) {
	dir = clean(dir)
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.dirs[dir] {
		return nil, &os.PathError{Op: "readdir", Path: dir, Err: os.ErrNotExist}
	}
	var names []string
	for p := range m.files {
		if filepath.Dir(p) == dir {
			names = append(names, filepath.Base(p))
		}
	}
	for d := range m.dirs {
		if d != dir && filepath.Dir(d) == dir {
			names = append(names, filepath.Base(d))
		}
	}
	sort.Strings(names)
	return names, nil
}

// Stat reports a file's length, or that name is a directory.
func (m *MemFS) Stat(name string) (int64, bool, error) {
	name = clean(name)
	m.mu.Lock()
	defer m.mu.Unlock()
	if f, ok := m.files[name]; ok {
		f.mu.RLock()
		defer f.mu.RUnlock()
		return int64(len(f.data)), false, nil
	}
	if m.dirs[name] {
		return 0, true, nil
	}
	return 0, false, &os.PathError{Op: "stat", Path: name, Err: os.ErrNotExist}
}

// SyncDir does nothing: a MemFS loses nothing (wrap it in a Faulty to
// model what a power loss keeps).
func (m *MemFS) SyncDir(dir string) error { return nil }

// Lock creates name if it is missing, as the OS's does.
func (m *MemFS) Lock(name string) (io.Closer, error) {
	name = clean(name)
	m.mu.Lock()
	defer m.mu.Unlock()
	f, _, err := m.fileLocked(name, true)
	if err != nil {
		return nil, err
	}
	if m.locks[f] != 0 {
		return nil, fmt.Errorf("%w: %s", ErrLocked, name)
	}
	m.locks[f] = -1
	return m.unlocker(f), nil
}

// LockShared takes a shared lock on the existing file name (see FS).
func (m *MemFS) LockShared(name string) (io.Closer, error) {
	name = clean(name)
	m.mu.Lock()
	defer m.mu.Unlock()
	f, _, err := m.fileLocked(name, false)
	if err != nil {
		return nil, err
	}
	if m.locks[f] < 0 {
		return nil, fmt.Errorf("%w: %s", ErrLocked, name)
	}
	m.locks[f]++
	return m.unlocker(f), nil
}

// fileLocked is the file name (mu held), created if create and its
// directory exists; existed says it was there already.
func (m *MemFS) fileLocked(name string, create bool) (f *memFile, existed bool, err error) {
	if f, ok := m.files[name]; ok {
		return f, true, nil
	}
	if !create || !m.dirs[filepath.Dir(name)] {
		return nil, false, &os.PathError{Op: "open", Path: name, Err: os.ErrNotExist}
	}
	f = &memFile{}
	m.files[name] = f
	return f, false, nil
}

// unlocker releases one hold of the lock kept under key, once.
func (m *MemFS) unlocker(key *memFile) io.Closer {
	var once sync.Once
	return closerFunc(func() error {
		once.Do(func() {
			m.mu.Lock()
			if n := m.locks[key]; n > 1 {
				m.locks[key] = n - 1
			} else {
				delete(m.locks, key)
			}
			m.mu.Unlock()
		})
		return nil
	})
}

type closerFunc func() error

func (c closerFunc) Close() error { return c() }

type memHandle struct {
	f    *memFile
	name string
	ro   bool // opened O_RDONLY: writes fail as on the OS (EBADF)
}

// badFD is the error of a write through a handle opened O_RDONLY.
func (h *memHandle) badFD(op string) error {
	return &os.PathError{Op: op, Path: h.name, Err: syscall.EBADF}
}

func (h *memHandle) ReadAt(p []byte, off int64) (int, error) {
	h.f.mu.RLock()
	defer h.f.mu.RUnlock()
	if off >= int64(len(h.f.data)) {
		return 0, io.EOF
	}
	n := copy(p, h.f.data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (h *memHandle) WriteAt(p []byte, off int64) (int, error) {
	if h.ro {
		return 0, h.badFD("write")
	}
	h.f.mu.Lock()
	defer h.f.mu.Unlock()
	if end := off + int64(len(p)); end > int64(len(h.f.data)) {
		h.f.grow(end)
	}
	return copy(h.f.data[off:], p), nil
}

func (f *memFile) grow(size int64) {
	if size <= int64(cap(f.data)) {
		f.data = f.data[:size]
		return
	}
	nd := make([]byte, size)
	copy(nd, f.data)
	f.data = nd
}

func (h *memHandle) Close() error { return nil }

// snapshot copies the file's bytes for a crash image. Writers may be
// storing into a mapping of the file meanwhile: a torn copy is exactly what
// a power loss at that instant can leave, so the copy is deliberately not
// synchronised with them and is hidden from the race detector.
func (h *memHandle) snapshot() []byte {
	h.f.mu.RLock()
	defer h.f.mu.RUnlock()
	out := make([]byte, len(h.f.data))
	copyNoRace(out, h.f.data)
	return out
}

//go:norace
func copyNoRace(dst, src []byte) {
	//lint:ignore S1001 the builtin copy reports its ranges to the race detector; this loop must not
	for i := range src {
		dst[i] = src[i]
	}
}

func (h *memHandle) Size() (int64, error) {
	h.f.mu.RLock()
	defer h.f.mu.RUnlock()
	return int64(len(h.f.data)), nil
}

func (h *memHandle) Truncate(size int64) error {
	if h.ro {
		return h.badFD("truncate")
	}
	h.f.mu.Lock()
	defer h.f.mu.Unlock()
	if size <= int64(len(h.f.data)) {
		clear(h.f.data[size:])
		h.f.data = h.f.data[:size]
		return nil
	}
	h.f.grow(size)
	return nil
}

func (h *memHandle) Allocate(size int64) error {
	if h.ro {
		return h.badFD("fallocate")
	}
	h.f.mu.Lock()
	defer h.f.mu.Unlock()
	if size > int64(len(h.f.data)) {
		h.f.grow(size)
	}
	return nil
}

func (h *memHandle) Sync() error { return nil }

func (h *memHandle) Map(size int) (Mapping, error) {
	h.f.mu.RLock()
	defer h.f.mu.RUnlock()
	if size > len(h.f.data) {
		return nil, &os.PathError{Op: "mmap", Path: h.name, Err: fmt.Errorf("map of %d bytes past end of file (%d)", size, len(h.f.data))}
	}
	return memMapping(h.f.data[:size:size]), nil
}

type memMapping []byte

func (m memMapping) Bytes() []byte         { return m }
func (m memMapping) Sync(off, n int) error { return nil }
func (m memMapping) Unmap() error          { return nil }
