package vfs

// WritesReachMappings reports whether a File.WriteAt into a file of fs is
// at once visible through every shared mapping of that file, and made
// durable by a Mapping.Sync of its range exactly as a store through the
// mapping is: one page cache behind both (the OS file system on Linux,
// where msync(MS_SYNC) of a shared file mapping is fdatasync of its
// range), or one buffer (MemFS). A writer may then write with pwrite, which
// dirties no page-table entry, while its readers keep reading through the
// mapping. An FS tells it with a method WritesReachMappings() bool; a
// wrapper forwards its inner FS's answer, as Faulty, ReadOnly and WithModes
// do. Elsewhere (Windows, the BSDs, macOS: not relied on) the answer is
// false and the writer writes through the mapping.
func WritesReachMappings(fs FS) bool {
	if u, ok := fs.(interface{ WritesReachMappings() bool }); ok {
		return u.WritesReachMappings()
	}
	return fs == OS && osWritesReachMappings
}

// WritesReachMappings reports true: a mapping of a MemFS file is its
// buffer, which WriteAt writes (a file is never grown while mapped).
func (m *MemFS) WritesReachMappings() bool { return true }

// WritesReachMappings is the wrapped file system's.
func (f *Faulty) WritesReachMappings() bool { return WritesReachMappings(f.inner) }

// WritesReachMappings is the wrapped file system's.
func (m modeFS) WritesReachMappings() bool { return WritesReachMappings(m.FS) }

// WritesReachMappings is the wrapped file system's.
func (r roFS) WritesReachMappings() bool { return WritesReachMappings(r.inner) }
