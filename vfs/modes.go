package vfs

import (
	"fmt"
	"os"
)

// DefaultFileMode is the permission of the files a store creates unless
// told otherwise: owner-only, for a store of messages may hold personal
// data.
const DefaultFileMode os.FileMode = 0o600

// dirMode derives a directory's permission from a file permission: the
// search (x) bit wherever the read bit is set, so 0600 gives 0700 and
// 0640 gives 0750.
func dirMode(file os.FileMode) os.FileMode {
	file &= os.ModePerm
	return file | (file&0o444)>>2
}

// WithModes returns fs creating every file with permission file and every
// directory with the matching directory mode (the search bit wherever
// the read bit is set: 0600 gives 0700, 0640 gives 0750), whatever permission the caller asks for
// (the process umask still applies, as to any creation). Files and
// directories that exist keep theirs. Usage passes through.
func WithModes(fs FS, file os.FileMode) FS {
	file &= os.ModePerm
	return modeFS{FS: fs, file: file, dir: dirMode(file)}
}

type modeFS struct {
	FS
	file, dir os.FileMode
}

// OpenFile opens name, creating it with the wrapper's file mode.
func (m modeFS) OpenFile(name string, flag int, _ os.FileMode) (File, error) {
	return m.FS.OpenFile(name, flag, m.file)
}

// MkdirAll creates dir and its parents with the wrapper's directory mode.
func (m modeFS) MkdirAll(dir string, _ os.FileMode) error {
	return m.FS.MkdirAll(dir, m.dir)
}

// Usage passes through to the wrapped file system.
func (m modeFS) Usage(dir string) (used, total uint64, err error) {
	if u, ok := m.FS.(Usager); ok {
		return u.Usage(dir)
	}
	return 0, 0, nil
}

// String names the wrapped file system and the modes.
func (m modeFS) String() string {
	return fmt.Sprintf("%v (files %#o, directories %#o)", m.FS, m.file, m.dir)
}

// UnmapsFirst passes through the wrapped file system's order of unmapping
// and removing (see MustUnmapFirst), so that a wrapped Windows or strict
// file system keeps it.
func (m modeFS) UnmapsFirst() bool { return MustUnmapFirst(m.FS) }
