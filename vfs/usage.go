package vfs

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

// Usage reports the volume use of dir as df(1) does: used is the blocks
// not free (total - free, the root reserve counting as free), and total is
// used + the blocks available to an unprivileged writer, so that
// used/total is df's Use%. A volume with a root reserve has fewer bytes
// than its size to give; they are not "used".
func (osFS) Usage(dir string) (used, total uint64, err error) {
	size, free, avail, err := statVolume(dir)
	if err != nil {
		return 0, 0, err
	}
	used, total = dfUsage(size, free, avail)
	return used, total, nil
}

// dfUsage is df's arithmetic on a volume of size bytes, free of them free
// (to root), avail of them available to others: used = size - free, and
// the total used is measured against is used + avail. Out-of-range
// figures (free > size, avail > free, as a file system being changed may
// report) are clamped.
func dfUsage(size, free, avail uint64) (used, total uint64) {
	free = min(free, size)
	avail = min(avail, free)
	used = size - free
	return used, used + avail
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
