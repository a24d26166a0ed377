package vfs

import (
	"errors"
	"fmt"
	"os"
	"unsafe"

	"golang.org/x/sys/windows"
)

// Windows. A file that has a mapped view cannot be truncated, renamed or
// deleted until the view is unmapped (see NewStrictMapFS, which enforces
// the same rule on any FS so that tests on Linux exercise the order).
// Mappings are made here, not by mmap-go, because a view must flush
// through a file handle of its own after the file is closed.

// osUnmapsFirst: a mapped file cannot be removed, renamed or truncated.
const osUnmapsFirst = true

// rename is MoveFileEx with MOVEFILE_REPLACE_EXISTING (atomic over an
// existing newname on NTFS, as os.Rename does) and MOVEFILE_WRITE_THROUGH
// (it returns once the move is on disk).
func rename(oldname, newname string) error {
	from, err := windows.UTF16PtrFromString(oldname)
	if err != nil {
		return &os.LinkError{Op: "rename", Old: oldname, New: newname, Err: err}
	}
	to, err := windows.UTF16PtrFromString(newname)
	if err != nil {
		return &os.LinkError{Op: "rename", Old: oldname, New: newname, Err: err}
	}
	if err := windows.MoveFileEx(from, to, windows.MOVEFILE_REPLACE_EXISTING|windows.MOVEFILE_WRITE_THROUGH); err != nil {
		return &os.LinkError{Op: "rename", Old: oldname, New: newname, Err: err}
	}
	return nil
}

// SyncDir checks that dir is a directory. Windows cannot flush a
// directory handle, and NTFS journals its entries: a rename or create
// written through (rename above) is durable.
func (osFS) SyncDir(dir string) error {
	fi, err := os.Stat(dir)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return &os.PathError{Op: "syncdir", Path: dir, Err: errors.New("not a directory")}
	}
	return nil
}

// lockOffset is where the locked byte lies, far past any data: Windows
// locks are mandatory, so a lock on byte 0 would block reads of it.
const lockOffset = 1 << 62

// lockFile is LockFileEx, exclusive or shared, without waiting, on one
// byte of f. Like flock, the lock belongs to the handle: a second handle
// of the same process is refused as another process would be.
func lockFile(f *os.File, exclusive bool) error {
	flags := uint32(windows.LOCKFILE_FAIL_IMMEDIATELY)
	if exclusive {
		flags |= windows.LOCKFILE_EXCLUSIVE_LOCK
	}
	ol := windows.Overlapped{Offset: uint32(lockOffset & 0xffffffff), OffsetHigh: uint32(lockOffset >> 32)}
	err := windows.LockFileEx(windows.Handle(f.Fd()), flags, 0, 1, 0, &ol)
	if errors.Is(err, windows.ERROR_LOCK_VIOLATION) || errors.Is(err, windows.ERROR_SHARING_VIOLATION) {
		return fmt.Errorf("%w: %s", ErrLocked, f.Name())
	}
	return err
}

// Allocate sets the length (SetEndOfFile): NTFS reserves the blocks of a
// file's length, zero-filled on first access. A file already size long
// or longer is left as it is.
func (o *osFile) Allocate(size int64) error {
	return o.grow(size)
}

// Sync is FlushFileBuffers (os.File.Sync), which writes the file's data
// and metadata through the drive's cache.
func (o *osFile) Sync() error { return o.f.Sync() }

// Map maps [0, size) with CreateFileMapping and MapViewOfFile: writable
// (keeping a duplicate handle for Sync's FlushFileBuffers), or read-only
// for a file opened O_RDONLY.
func (o *osFile) Map(size int) (Mapping, error) {
	if size <= 0 {
		return nil, &os.PathError{Op: "mmap", Path: o.f.Name(), Err: errors.New("empty mapping")}
	}
	prot, access := uint32(windows.PAGE_READWRITE), uint32(windows.FILE_MAP_WRITE)
	if o.ro {
		prot, access = windows.PAGE_READONLY, windows.FILE_MAP_READ
	}
	h := windows.Handle(o.f.Fd())
	sz := uint64(size)
	sec, err := windows.CreateFileMapping(h, nil, prot, uint32(sz>>32), uint32(sz), nil)
	if err != nil {
		return nil, &os.PathError{Op: "CreateFileMapping", Path: o.f.Name(), Err: err}
	}
	// The view holds the section: its handle can go at once.
	addr, err := windows.MapViewOfFile(sec, access, 0, 0, uintptr(size))
	windows.CloseHandle(sec)
	if err != nil {
		return nil, &os.PathError{Op: "MapViewOfFile", Path: o.f.Name(), Err: err}
	}
	m := &osMapping{b: unsafe.Slice((*byte)(*(*unsafe.Pointer)(unsafe.Pointer(&addr))), size), addr: addr, name: o.f.Name()}
	if !o.ro {
		p := windows.CurrentProcess()
		if err := windows.DuplicateHandle(p, h, p, &m.file, 0, false, windows.DUPLICATE_SAME_ACCESS); err != nil {
			windows.UnmapViewOfFile(addr)
			return nil, &os.PathError{Op: "DuplicateHandle", Path: o.f.Name(), Err: err}
		}
	}
	return m, nil
}

type osMapping struct {
	b    []byte
	addr uintptr
	name string
	file windows.Handle // a handle of the file for FlushFileBuffers; 0 if read-only
}

func (m *osMapping) Bytes() []byte { return m.b }

// Sync is FlushViewOfFile of the pages holding [off, off+n), which writes
// them to the file, then FlushFileBuffers, which writes the file through
// the drive's cache.
func (m *osMapping) Sync(off, n int) error {
	if n <= 0 {
		return nil
	}
	if m.file == 0 {
		return &os.PathError{Op: "FlushViewOfFile", Path: m.name, Err: os.ErrInvalid}
	}
	start := off &^ (PageSize - 1)
	end := min(off+n, len(m.b))
	if start >= end {
		return nil
	}
	if err := windows.FlushViewOfFile(m.addr+uintptr(start), uintptr(end-start)); err != nil {
		return &os.PathError{Op: "FlushViewOfFile", Path: m.name, Err: err}
	}
	if err := windows.FlushFileBuffers(m.file); err != nil {
		return &os.PathError{Op: "FlushFileBuffers", Path: m.name, Err: err}
	}
	return nil
}

func (m *osMapping) Unmap() error {
	if m.b == nil {
		return nil
	}
	err := windows.UnmapViewOfFile(m.addr)
	m.b = nil
	if m.file != 0 {
		if cerr := windows.CloseHandle(m.file); err == nil {
			err = cerr
		}
		m.file = 0
	}
	if err != nil {
		return &os.PathError{Op: "UnmapViewOfFile", Path: m.name, Err: err}
	}
	return nil
}

// Drop is Dropper's: nothing on Windows (no such advice).
func (m *osMapping) Drop(off, n int) {}

// SmallPages is Pager's: nothing on Windows.
func (m *osMapping) SmallPages(on bool) {}
