package vfs

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// Usager is implemented by file systems that can report the use of the
// volume holding a directory.
type Usager interface {
	// Usage reports the bytes used and the total size of the volume
	// holding dir.
	Usage(dir string) (used, total uint64, err error)
}

// Usage reports the volume use of dir on fs, ok == false when fs cannot
// tell.
func Usage(fs FS, dir string) (used, total uint64, ok bool, err error) {
	u, isUsager := fs.(Usager)
	if !isUsager {
		return 0, 0, false, nil
	}
	used, total, err = u.Usage(dir)
	return used, total, err == nil && total > 0, err
}

// Usage reports the volume use from statfs(2): blocks not available to
// an unprivileged writer count as used.
func (osFS) Usage(dir string) (used, total uint64, err error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, 0, fmt.Errorf("statfs %s: %w", dir, err)
	}
	bs := uint64(st.Bsize)
	total = st.Blocks * bs
	return total - st.Bavail*bs, total, nil
}

// SetCapacity gives the in-memory file system a volume size for Usage
// (0, the default, means it reports no usage).
func (m *MemFS) SetCapacity(bytes uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.capacity = bytes
}

// Usage reports the bytes held by files against the capacity set with
// SetCapacity.
func (m *MemFS) Usage(string) (used, total uint64, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, f := range m.files {
		f.mu.RLock()
		used += uint64(len(f.data))
		f.mu.RUnlock()
	}
	return used, m.capacity, nil
}

// Usage passes through to the wrapped file system.
func (f *Faulty) Usage(dir string) (used, total uint64, err error) {
	if u, ok := f.inner.(Usager); ok {
		return u.Usage(dir)
	}
	return 0, 0, nil
}
