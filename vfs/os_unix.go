//go:build linux || darwin || freebsd || openbsd || netbsd || dragonfly

package vfs

import (
	"errors"
	"fmt"
	"os"
	"syscall"

	"github.com/edsrzf/mmap-go"
	"golang.org/x/sys/unix"
)

// osUnmapsFirst: a mapped file can be removed, renamed and truncated.
const osUnmapsFirst = false

// rename is rename(2), atomic over an existing newname.
func rename(oldname, newname string) error { return os.Rename(oldname, newname) }

func (osFS) SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// lockFile is flock(2), LOCK_EX or LOCK_SH, without waiting.
func lockFile(f *os.File, exclusive bool) error {
	how := unix.LOCK_SH
	if exclusive {
		how = unix.LOCK_EX
	}
	if err := unix.Flock(int(f.Fd()), how|unix.LOCK_NB); err != nil {
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return fmt.Errorf("%w: %s", ErrLocked, f.Name())
		}
		return err
	}
	return nil
}

// Map maps the file shared: writable, or read-only (PROT_READ) for a file
// opened O_RDONLY, where a stray store faults instead of reaching the file.
func (o *osFile) Map(size int) (Mapping, error) {
	prot := mmap.RDWR
	if o.ro {
		prot = mmap.RDONLY
	}
	m, err := mmap.MapRegion(o.f, size, prot, 0, 0)
	if err != nil {
		return nil, &os.PathError{Op: "mmap", Path: o.f.Name(), Err: err}
	}
	om := &osMapping{m: m, name: o.f.Name(), fd: -1}
	if !o.ro {
		if err := om.keepFD(o.f); err != nil {
			m.Unmap()
			return nil, err
		}
	}
	return om, nil
}

type osMapping struct {
	m    mmap.MMap
	name string
	// fd is a descriptor of the mapped file that Sync needs after the
	// file is closed (macOS: F_FULLFSYNC); -1 where Sync needs none.
	fd int
}

func (m *osMapping) Bytes() []byte { return m.m }

func (m *osMapping) Unmap() error {
	err := m.m.Unmap()
	if m.fd >= 0 {
		if cerr := unix.Close(m.fd); err == nil {
			err = cerr
		}
		m.fd = -1
	}
	return err
}

// Drop is Dropper's, on the whole pages inside [off, off+n).
func (m *osMapping) Drop(off, n int) {
	start := (off + PageSize - 1) &^ (PageSize - 1)
	end := min(off+n, len(m.m)) &^ (PageSize - 1)
	if start < end {
		unix.Madvise(m.m[start:end], unix.MADV_DONTNEED)
	}
}

// SmallPages is Pager's, on the whole mapping.
func (m *osMapping) SmallPages(on bool) {
	advice := unix.MADV_NORMAL
	if on {
		advice = unix.MADV_RANDOM
	}
	if len(m.m) > 0 {
		unix.Madvise(m.m, advice)
	}
}

// msync is msync(MS_SYNC) of the pages holding [off, off+n): a mapping's
// writes in that range are on the disk, or in its cache where the platform
// needs more (macOS's F_FULLFSYNC, see os_darwin.go).
func (m *osMapping) msync(off, n int) error {
	start := off &^ (PageSize - 1)
	end := min(off+n, len(m.m))
	if err := unix.Msync(m.m[start:end], unix.MS_SYNC); err != nil {
		return &os.PathError{Op: "msync", Path: m.name, Err: err}
	}
	return nil
}
