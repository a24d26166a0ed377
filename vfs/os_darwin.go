package vfs

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// On macOS fsync(2) and msync(2) hand the data to the drive, which may keep
// it in its volatile cache; fcntl(F_FULLFSYNC) also asks the drive to write
// its cache to stable storage. Every Sync here ends with it (os.File.Sync
// does so too), falling back to fsync where the file system does not
// support it (some network file systems).

// fullSync is F_FULLFSYNC on fd, or fsync where that is not supported.
func fullSync(fd int) error {
	_, err := unix.FcntlInt(uintptr(fd), unix.F_FULLFSYNC, 0)
	if errors.Is(err, unix.ENOTSUP) || errors.Is(err, unix.ENOTTY) || errors.Is(err, unix.EINVAL) {
		err = unix.Fsync(fd)
	}
	return err
}

// Allocate reserves [0, size) with F_PREALLOCATE (contiguous if it can,
// else anywhere), then sets the length with ftruncate: F_PREALLOCATE
// reserves blocks without changing the length. A file system that cannot
// preallocate gets the length change alone; a file already size long or
// longer is left as it is (as fallocate leaves it on Linux).
func (o *osFile) Allocate(size int64) error {
	fi, err := o.f.Stat()
	if err != nil {
		return err
	}
	if size > fi.Size() {
		st := unix.Fstore_t{Flags: unix.F_ALLOCATECONTIG | unix.F_ALLOCATEALL, Posmode: unix.F_PEOFPOSMODE, Length: size - fi.Size()}
		fd := int(o.f.Fd())
		err := unix.FcntlFstore(uintptr(fd), unix.F_PREALLOCATE, &st)
		if err != nil {
			st.Flags = unix.F_ALLOCATEALL
			err = unix.FcntlFstore(uintptr(fd), unix.F_PREALLOCATE, &st)
		}
		if err != nil && !errors.Is(err, unix.ENOTSUP) && !errors.Is(err, unix.EINVAL) {
			return &os.PathError{Op: "fcntl F_PREALLOCATE", Path: o.f.Name(), Err: err}
		}
		return o.f.Truncate(size)
	}
	return nil
}

// Sync is fsync then F_FULLFSYNC (os.File.Sync on macOS).
func (o *osFile) Sync() error {
	if err := fullSync(int(o.f.Fd())); err != nil {
		return &os.PathError{Op: "fcntl F_FULLFSYNC", Path: o.f.Name(), Err: err}
	}
	return nil
}

// keepFD keeps a duplicate of f's descriptor, which Sync needs for
// F_FULLFSYNC after f is closed.
func (m *osMapping) keepFD(f *os.File) error {
	fd, err := unix.Dup(int(f.Fd()))
	if err != nil {
		return &os.PathError{Op: "dup", Path: m.name, Err: err}
	}
	unix.CloseOnExec(fd)
	m.fd = fd
	return nil
}

// Sync is msync(MS_SYNC) of the pages holding [off, off+n), then
// F_FULLFSYNC of the file.
func (m *osMapping) Sync(off, n int) error {
	if n <= 0 {
		return nil
	}
	if err := m.msync(off, n); err != nil {
		return err
	}
	if m.fd < 0 {
		return &os.PathError{Op: "msync", Path: m.name, Err: os.ErrInvalid}
	}
	if err := fullSync(m.fd); err != nil {
		return &os.PathError{Op: "fcntl F_FULLFSYNC", Path: m.name, Err: err}
	}
	return nil
}
