package vfs

import (
	"os"
	"testing"

	"github.com/stretchr/testify/require"
)

// StrictMapFS refuses, while a mapping of a file is open, what Windows
// refuses (remove, rename either way, truncate, growth, O_TRUNC, RemoveAll
// of its directory), changing nothing; once unmapped, all of it works.
func TestStrictMapFSRefusesMappedChanges(t *testing.T) {
	fs := NewStrictMapFS(NewMem())
	require.True(t, MustUnmapFirst(fs))
	require.False(t, MustUnmapFirst(NewMem()))
	require.NoError(t, fs.MkdirAll("/d", 0o755))
	f, err := fs.OpenFile("/d/a", os.O_RDWR|os.O_CREATE, 0o644)
	require.NoError(t, err)
	require.NoError(t, f.Allocate(8192))
	m, err := f.Map(8192)
	require.NoError(t, err)
	copy(m.Bytes(), "data")
	other, err := fs.OpenFile("/d/b", os.O_RDWR|os.O_CREATE, 0o644)
	require.NoError(t, err)
	require.NoError(t, other.Close())
	require.Equal(t, 1, fs.Mapped("/d/a"))
	require.Equal(t, 1, fs.MappedFiles())

	for name, err := range map[string]error{
		"remove":      fs.Remove("/d/a"),
		"rename":      fs.Rename("/d/a", "/d/c"),
		"rename over": fs.Rename("/d/b", "/d/a"),
		"truncate":    f.Truncate(0),
		"grow":        f.Allocate(16384),
		"removeall":   fs.RemoveAll("/d"),
	} {
		require.ErrorIs(t, err, ErrMapped, name)
	}
	_, err = fs.OpenFile("/d/a", os.O_RDWR|os.O_TRUNC, 0)
	require.ErrorIs(t, err, ErrMapped)
	require.NoError(t, f.Allocate(4096), "no growth: allowed")
	names, err := fs.ReadDir("/d")
	require.NoError(t, err)
	require.Equal(t, []string{"a", "b"}, names, "nothing changed")
	size, _, err := fs.Stat("/d/a")
	require.NoError(t, err)
	require.EqualValues(t, 8192, size)

	require.NoError(t, f.Close(), "closing the file keeps the mapping")
	require.ErrorIs(t, fs.Remove("/d/a"), ErrMapped)
	require.NoError(t, m.Unmap())
	require.NoError(t, m.Unmap(), "a second Unmap counts once")
	require.Zero(t, fs.MappedFiles())
	require.NoError(t, fs.Rename("/d/b", "/d/a"))
	require.NoError(t, fs.Remove("/d/a"))
	require.NoError(t, fs.RemoveAll("/d"))
}
