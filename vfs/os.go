package vfs

import (
	"io"
	"os"
	"path/filepath"
	"sort"
)

// The real file system. This file holds what every platform shares; the
// rest is in one file per platform family:
//
//   - os_unix.go (Linux and the BSDs, macOS included): flock, SyncDir by
//     fsync of the directory, mappings by mmap-go;
//   - os_linux.go: fallocate, fdatasync, msync, and the page advice
//     (MADV_DONTNEED, MADV_RANDOM, MADV_HUGEPAGE, MADV_POPULATE_*), SEEK_DATA
//     and mincore;
//   - os_darwin.go: F_PREALLOCATE, and F_FULLFSYNC after fsync and msync
//     (a plain fsync on macOS leaves the data in the drive's cache);
//   - os_bsd.go: ftruncate for preallocation, fsync, msync;
//   - os_bsdpages.go (macOS and the BSDs): page advice where it exists,
//     no-ops where it does not;
//   - os_windows.go: LockFileEx, SetEndOfFile, FlushViewOfFile +
//     FlushFileBuffers, MoveFileEx with write-through.

// OS is the real file system.
var OS FS = osFS{}

type osFS struct{}

func join(dir, name string) string { return filepath.Join(dir, name) }

func (osFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	f, err := os.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &osFile{f: f, ro: flag&(os.O_WRONLY|os.O_RDWR) == 0}, nil
}

func (osFS) Remove(name string) error                    { return os.Remove(name) }
func (osFS) RemoveAll(name string) error                 { return os.RemoveAll(name) }
func (osFS) Rename(o, n string) error                    { return rename(o, n) }
func (osFS) MkdirAll(dir string, perm os.FileMode) error { return os.MkdirAll(dir, perm) }

func (osFS) ReadDir(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(ents))
	for i, e := range ents {
		names[i] = e.Name()
	}
	sort.Strings(names)
	return names, nil
}

func (osFS) Stat(name string) (int64, bool, error) {
	fi, err := os.Stat(name)
	if err != nil {
		return 0, false, err
	}
	return fi.Size(), fi.IsDir(), nil
}

// lockFileMode is the mode of a lock file Lock creates: only its owner
// needs it.
const lockFileMode = 0o600

func (osFS) Lock(name string) (io.Closer, error) {
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, lockFileMode)
	if err != nil {
		return nil, err
	}
	return lock(f, true)
}

func (osFS) LockShared(name string) (io.Closer, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	return lock(f, false)
}

// lock locks f (exclusive or shared) without waiting, and returns it as
// the lock's closer; it closes f if the lock is refused (ErrLocked). The
// lock is on the file (it follows it through renames), and on the one the
// name still names once it is held: if the name was renamed away or
// replaced between the open and the lock, lock fails with an error
// wrapping ErrNotExist.
func lock(f *os.File, exclusive bool) (io.Closer, error) {
	if err := lockFile(f, exclusive); err != nil {
		f.Close()
		return nil, err
	}
	held, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if now, err := os.Stat(f.Name()); err != nil || !os.SameFile(held, now) {
		f.Close()
		return nil, &os.PathError{Op: "lock", Path: f.Name(), Err: os.ErrNotExist}
	}
	return f, nil
}

type osFile struct {
	f  *os.File
	ro bool // opened O_RDONLY: mapped read-only
}

func (o *osFile) ReadAt(p []byte, off int64) (int, error)  { return o.f.ReadAt(p, off) }
func (o *osFile) WriteAt(p []byte, off int64) (int, error) { return o.f.WriteAt(p, off) }
func (o *osFile) Close() error                             { return o.f.Close() }
func (o *osFile) Truncate(size int64) error                { return o.f.Truncate(size) }

func (o *osFile) Size() (int64, error) {
	fi, err := o.f.Stat()
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}
