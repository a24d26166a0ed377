package vfs

import (
	"errors"
	"io"
	"os"
)

// PageSize is the unit of dirty tracking and of power-loss images.
const PageSize = 4096

// ErrNotExist is returned (wrapped) when a file does not exist; it matches
// os.ErrNotExist.
var ErrNotExist = os.ErrNotExist

// ErrLocked is returned by Lock when another holder has the lock.
var ErrLocked = errors.New("mqlite/vfs: locked by another holder")

// FS is the set of file-system operations the store needs.
type FS interface {
	// OpenFile opens name with os.O_* flags (the engine uses O_RDONLY,
	// O_RDWR, O_CREATE and O_TRUNC, as the os package means them); perm
	// applies to a file it creates. A missing file without O_CREATE is
	// ErrNotExist.
	OpenFile(name string, flag int, perm os.FileMode) (File, error)
	// Remove deletes a file or an empty directory.
	Remove(name string) error
	// RemoveAll deletes a directory tree.
	RemoveAll(name string) error
	// Rename atomically replaces newname with oldname: after a power
	// loss the file is under one name or the other (see SyncDir).
	Rename(oldname, newname string) error
	// MkdirAll creates dir and its parents.
	MkdirAll(dir string, perm os.FileMode) error
	// ReadDir lists the names in dir (files and directories, without
	// their path), sorted.
	ReadDir(dir string) ([]string, error)
	// Stat reports the size of a file and whether it is a directory; a
	// missing name is ErrNotExist.
	Stat(name string) (size int64, isDir bool, err error)
	// SyncDir makes the entries of dir durable: the files created,
	// renamed into and removed from it before the call survive a power
	// loss once it returns nil.
	SyncDir(dir string) error
	// Lock takes an exclusive lock on the file name, creating it if it is
	// missing, failing with ErrLocked at once if another holder (this or
	// another process) has it.
	Lock(name string) (io.Closer, error)
	// LockShared takes a shared lock on the existing file name, failing
	// with ErrLocked at once if an exclusive holder has it, and with
	// ErrNotExist if there is no such file (it creates nothing). While
	// any shared holder remains, Lock fails.
	//
	// Both lock the file, not the name: a lock follows its file through
	// renames, and a call that finds, once it holds the lock, that the
	// name no longer names that file (renamed or removed meanwhile) fails
	// with ErrNotExist.
	LockShared(name string) (io.Closer, error)
}

// File is an open file.
type File interface {
	io.ReaderAt
	io.WriterAt
	io.Closer
	// Size reports the file's length.
	Size() (int64, error)
	// Truncate sets the file's length; growing adds zeros.
	Truncate(size int64) error
	// Allocate reserves disk blocks for [0, size), making the length at
	// least size, so that later writes through a mapping cannot fail for
	// lack of space.
	Allocate(size int64) error
	// Sync makes the file's contents and length, as of the call and
	// including what was written through its mappings, durable
	// (fdatasync). It does not make its directory entry durable
	// (SyncDir). A nil error must mean the data survives a power loss.
	Sync() error
	// Map maps [0, size) of the file shared: writable, or read-only when
	// the file was opened O_RDONLY. size must not exceed the file's length.
	// The mapping stays valid after the file is closed.
	Map(size int) (Mapping, error)
}

// Mapping is a shared mapping of a file (writable unless the file was
// opened O_RDONLY).
type Mapping interface {
	// Bytes is the mapped memory. It is valid until Unmap.
	Bytes() []byte
	// Sync makes [off, off+n) of the mapping, as of the call, durable
	// (msync), with a file length covering the mapping. Other goroutines
	// may write other bytes of the mapping meanwhile. A nil error must
	// mean the range survives a power loss.
	Sync(off, n int) error
	// Unmap releases the mapping. The slice from Bytes must not be used after.
	Unmap() error
}

// Dropper is implemented by the mappings whose page table entries can be
// dropped without losing a byte: shared mappings of real files (OS).
//
// Drop is for memory the writer has finished with. Writing back a page
// that is mapped writable and dirty makes the kernel write-protect its
// entry first, one TLB shootdown (an inter-processor interrupt, slow on
// a virtual machine) per page; dropping a range of entries costs one for
// all of them, and the write-back that follows finds nothing to protect.
type Dropper interface {
	// Drop removes the whole pages of [off, off+n) from the page tables
	// (MADV_DONTNEED). The data stays in the page cache and the file,
	// dirty pages are still written back, and the next access faults the
	// page in again. It is a hint: it never changes a byte, and may run
	// while other goroutines read the range.
	Drop(off, n int)
}

// Pager is implemented by the mappings of real files (OS), whose page
// cache the kernel fills in large folios (up to 2 MiB) when a page fault
// reads ahead around the page it needs. A write into a large folio marks
// all of it dirty, so that a sync of a few new bytes writes the whole
// folio back: a log synced after every small append would write up to a
// MiB for each.
type Pager interface {
	// SmallPages(true) makes the faults on the mapping bring in single
	// pages from now on (MADV_RANDOM: no read-ahead around a fault), so
	// that a sync writes back only the pages that were written;
	// SmallPages(false) restores read-ahead (MADV_NORMAL), for readers of
	// what is no longer written. Pages already in memory keep their
	// folios. It is a hint: it never changes a byte.
	SmallPages(on bool)
	// HugePages lets the kernel bring the pages in as 2 MiB folios and
	// map each folio with one entry (MADV_HUGEPAGE), where the file
	// system and the transparent huge page setting allow it. The first
	// access to a page through a new mapping then costs a fraction of a
	// 4 KiB entry's (on this VM a page written in a recycled segment,
	// whose folios are still in memory, about 0.2 µs against 1.5), but a
	// write marks its whole folio dirty: it is for memory that is synced
	// in large ranges. A hint, like SmallPages.
	HugePages()
}

// WriteFileAtomic replaces name with data: it writes a temporary file, syncs
// it, renames it over name and syncs the directory.
func WriteFileAtomic(fs FS, dir, name string, data []byte) error {
	tmp := join(dir, name+".tmp")
	f, err := fs.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.WriteAt(data, 0); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := fs.Rename(tmp, join(dir, name)); err != nil {
		return err
	}
	return fs.SyncDir(dir)
}

// ReadFile reads the whole file name.
func ReadFile(fs FS, name string) ([]byte, error) {
	f, err := fs.OpenFile(name, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return nil, err
	}
	if size > 64<<20 {
		return nil, errors.New("mqlite/vfs: metadata file too large: " + name)
	}
	b := make([]byte, size)
	if _, err := f.ReadAt(b, 0); err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	return b, nil
}

// Exists reports whether name exists.
func Exists(fs FS, name string) bool {
	_, _, err := fs.Stat(name)
	return err == nil
}
