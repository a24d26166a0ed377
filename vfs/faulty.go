package vfs

import (
	"encoding/binary"
	"io"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"unsafe"
)

// Op names an operation of the FS seam, for fault injection.
type Op int

// The operations a Faulty FS can fail.
const (
	OpOpen Op = iota + 1
	OpRemove
	OpRename
	OpMkdir
	OpSyncDir
	OpWrite
	OpRead
	OpTruncate
	OpAllocate
	OpSync         // File.Sync
	OpMap          // File.Map
	OpMapSync      // Mapping.Sync
	OpPrewrite     // Prewriter.Prewrite: zeros written ahead of a writer
	OpPrewriteSync // Prewriter.SyncPrewrite
)

// Injector decides whether an operation on path fails; a nil result lets it
// proceed.
type Injector func(op Op, path string) error

// Faulty wraps an FS (normally a MemFS), failing operations chosen by an
// Injector and keeping a durable image of every file: the bytes as of its
// last successful sync, and the directory entries as of the last successful
// SyncDir. A file that already existed in the wrapped FS counts as durable
// as it was when first opened, so a crash image can be wrapped again and
// crashed a second time. Crash builds the file system a power loss would
// leave.
type Faulty struct {
	inner FS

	mu     sync.Mutex
	inject Injector
	live   map[string]*node // current names
	synced map[string]*node // names as of the last directory sync
}

type node struct {
	durable []byte // contents as of the last successful sync
	// prewritten are the ranges (offset, length) Prewrite wrote since
	// the last SyncPrewrite.
	prewritten [][2]int64
	h          File // a handle to read live contents
}

// NewFaulty wraps inner.
func NewFaulty(inner FS) *Faulty {
	return &Faulty{inner: inner, live: map[string]*node{}, synced: map[string]*node{}}
}

// UnmapsFirst is the wrapped file system's (MustUnmapFirst).
func (f *Faulty) UnmapsFirst() bool { return MustUnmapFirst(f.inner) }

// SetInjector installs (or with nil removes) the fault injector.
func (f *Faulty) SetInjector(in Injector) {
	f.mu.Lock()
	f.inject = in
	f.mu.Unlock()
}

func (f *Faulty) check(op Op, path string) error {
	f.mu.Lock()
	in := f.inject
	f.mu.Unlock()
	if in == nil {
		return nil
	}
	return in(op, path)
}

// OpenFile opens name in the wrapped FS (OpOpen). The first time it sees a
// name that already holds a file there, that file counts as durable.
func (f *Faulty) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	name = clean(name)
	if err := f.check(OpOpen, name); err != nil {
		return nil, err
	}
	f.mu.Lock()
	_, known := f.live[name]
	f.mu.Unlock()
	// A file that was in inner before this wrapper first saw it (an image
	// being recovered) is durable as it is: its bytes and its entry.
	var pre []byte
	preexisting := false
	if !known {
		if _, isDir, err := f.inner.Stat(name); err == nil && !isDir {
			if r, err := f.inner.OpenFile(name, os.O_RDONLY, 0); err == nil {
				pre, err = readAll(r)
				preexisting = err == nil
				r.Close()
			}
		}
	}
	h, err := f.inner.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	n, ok := f.live[name]
	if !ok {
		n = &node{h: h}
		if preexisting {
			n.durable = pre
			f.synced[name] = n
		}
		f.live[name] = n
	}
	f.mu.Unlock()
	return &faultyFile{fs: f, File: h, name: name, n: n}, nil
}

// Remove removes name (OpRemove); the removal is durable after SyncDir.
func (f *Faulty) Remove(name string) error {
	name = clean(name)
	if err := f.check(OpRemove, name); err != nil {
		return err
	}
	if err := f.inner.Remove(name); err != nil {
		return err
	}
	f.mu.Lock()
	delete(f.live, name)
	f.mu.Unlock()
	return nil
}

// RemoveAll removes the tree at name (OpRemove); durable after SyncDir.
func (f *Faulty) RemoveAll(name string) error {
	name = clean(name)
	if err := f.check(OpRemove, name); err != nil {
		return err
	}
	if err := f.inner.RemoveAll(name); err != nil {
		return err
	}
	f.mu.Lock()
	for p := range f.live {
		if p == name || isUnder(p, name) {
			delete(f.live, p)
		}
	}
	f.mu.Unlock()
	return nil
}

func isUnder(p, dir string) bool {
	for d := filepath.Dir(p); ; d = filepath.Dir(d) {
		if d == dir {
			return true
		}
		if d == filepath.Dir(d) {
			return false
		}
	}
}

// Rename renames oldname (OpRename, with oldname's path); durable after
// SyncDir.
func (f *Faulty) Rename(oldname, newname string) error {
	oldname, newname = clean(oldname), clean(newname)
	if err := f.check(OpRename, oldname); err != nil {
		return err
	}
	if err := f.inner.Rename(oldname, newname); err != nil {
		return err
	}
	f.mu.Lock()
	if n, ok := f.live[oldname]; ok {
		delete(f.live, oldname)
		f.live[newname] = n
	}
	f.mu.Unlock()
	return nil
}

// MkdirAll creates dir and its parents (OpMkdir).
func (f *Faulty) MkdirAll(dir string, perm os.FileMode) error {
	if err := f.check(OpMkdir, dir); err != nil {
		return err
	}
	return f.inner.MkdirAll(dir, perm)
}

// ReadDir is the wrapped FS's; no fault is injected.
func (f *Faulty) ReadDir(dir string) ([]string, error) { return f.inner.ReadDir(dir) }

// Stat is the wrapped FS's; no fault is injected.
func (f *Faulty) Stat(name string) (int64, bool, error) { return f.inner.Stat(name) }

// Lock is the wrapped FS's; no fault is injected.
func (f *Faulty) Lock(name string) (io.Closer, error) { return f.inner.Lock(name) }

// LockShared is the inner FS's.
func (f *Faulty) LockShared(name string) (io.Closer, error) { return f.inner.LockShared(name) }

// SyncDir makes the current entries of dir (additions, renames and
// removals) part of the durable image.
func (f *Faulty) SyncDir(dir string) error {
	dir = clean(dir)
	if err := f.check(OpSyncDir, dir); err != nil {
		return err
	}
	if err := f.inner.SyncDir(dir); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for p := range f.synced {
		if filepath.Dir(p) == dir {
			delete(f.synced, p)
		}
	}
	for p, n := range f.live {
		if filepath.Dir(p) == dir {
			f.synced[p] = n
		}
	}
	return nil
}

// Crash returns a new in-memory file system holding what a power loss at
// this moment could leave: every directory entry that was synced (plus each
// unsynced one with probability p), each file's durable bytes, and each page
// that differs from them with probability p. The receiver is unchanged.
func (f *Faulty) Crash(rng *rand.Rand, p float64) *MemFS {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := NewMem()
	names := map[string]*node{}
	for name, n := range f.synced {
		names[name] = n
	}
	// Each change of an entry since the last directory sync (a create, a
	// rename) survives with probability p. A file renamed since has one
	// name in the image, never both: a rename is atomic.
	for _, name := range slices.Sorted(maps.Keys(f.live)) { // sorted: a seeded Crash is reproducible
		n := f.live[name]
		if names[name] == n || rng.Float64() >= p {
			continue
		}
		for old, m := range names {
			if m == n {
				delete(names, old)
			}
		}
		names[name] = n
	}
	for name, n := range names {
		data := append([]byte(nil), n.durable...)
		if live, err := liveBytes(n.h); err == nil {
			if len(live) > len(data) && rng.Float64() < p {
				data = append(data, make([]byte, len(live)-len(data))...)
			}
			for off := 0; off < len(data) && off < len(live); off += PageSize {
				end := min(off+PageSize, len(data), len(live))
				if rng.Float64() < p {
					copy(data[off:end], live[off:end])
				}
			}
		}
		out.MkdirAll(filepath.Dir(name), 0o755)
		h, _ := out.OpenFile(name, os.O_CREATE|os.O_RDWR, 0o644)
		h.WriteAt(data, 0)
	}
	return out
}

// liveBytes reads a file's current contents, racing with writers through
// mappings when the file system allows it (see memHandle.snapshot).
func liveBytes(h File) ([]byte, error) {
	if s, ok := h.(interface{ snapshot() []byte }); ok {
		return s.snapshot(), nil
	}
	return readAll(h)
}

func readAll(h File) ([]byte, error) {
	size, err := h.Size()
	if err != nil {
		return nil, err
	}
	b := make([]byte, size)
	_, err = h.ReadAt(b, 0)
	if err == io.EOF {
		err = nil
	}
	return b, err
}

type faultyFile struct {
	File
	fs   *Faulty
	name string
	n    *node
}

func (h *faultyFile) WriteAt(p []byte, off int64) (int, error) {
	if err := h.fs.check(OpWrite, h.name); err != nil {
		return 0, err
	}
	return h.File.WriteAt(p, off)
}

func (h *faultyFile) ReadAt(p []byte, off int64) (int, error) {
	if err := h.fs.check(OpRead, h.name); err != nil {
		return 0, err
	}
	return h.File.ReadAt(p, off)
}

func (h *faultyFile) Truncate(size int64) error {
	if err := h.fs.check(OpTruncate, h.name); err != nil {
		return err
	}
	return h.File.Truncate(size)
}

func (h *faultyFile) Allocate(size int64) error {
	if err := h.fs.check(OpAllocate, h.name); err != nil {
		return err
	}
	return h.File.Allocate(size)
}

func (h *faultyFile) Sync() error {
	if err := h.fs.check(OpSync, h.name); err != nil {
		return err
	}
	if err := h.File.Sync(); err != nil {
		return err
	}
	live, err := liveBytes(h.File)
	if err != nil {
		return err
	}
	h.fs.mu.Lock()
	h.n.durable = live
	h.fs.mu.Unlock()
	return nil
}

func (h *faultyFile) Map(size int) (Mapping, error) {
	if err := h.fs.check(OpMap, h.name); err != nil {
		return nil, err
	}
	m, err := h.File.Map(size)
	if err != nil {
		return nil, err
	}
	return &faultyMapping{Mapping: m, f: h}, nil
}

type faultyMapping struct {
	Mapping
	f *faultyFile
}

// Sync copies [off, off+n) into the durable image after the inner sync
// succeeds. The file length becomes durable too.
func (m *faultyMapping) Sync(off, n int) error {
	if err := m.f.fs.check(OpMapSync, m.f.name); err != nil {
		return err
	}
	if err := m.Mapping.Sync(off, n); err != nil {
		return err
	}
	b := m.Bytes()
	end := min(off+n, len(b))
	fs := m.f.fs
	fs.mu.Lock()
	defer fs.mu.Unlock()
	nd := m.f.n
	if len(nd.durable) < len(b) {
		nd.durable = append(nd.durable, make([]byte, len(b)-len(nd.durable))...)
	}
	copyWords(nd.durable[off:end], b[off:end])
	return nil
}

// copyWords copies src into dst (same length) reading src's aligned
// 4-byte words atomically, as a kernel writing a page back sees them: a
// writer may update words inside a synced range with atomic stores (the
// IndexFile's hash slots) while the sync runs.
func copyWords(dst, src []byte) {
	i := 0
	for ; i < len(src) && uintptr(unsafe.Pointer(&src[i]))%4 != 0; i++ {
		dst[i] = src[i]
	}
	for ; i+4 <= len(src); i += 4 {
		binary.NativeEndian.PutUint32(dst[i:], atomic.LoadUint32((*uint32)(unsafe.Pointer(&src[i]))))
	}
	copy(dst[i:], src[i:])
}
