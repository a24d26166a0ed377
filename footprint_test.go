package mqlite

import (
	"context"
	"io/fs"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// maxSmallFootprint is what a small store may take on disk with default
// options, open or closed.
const maxSmallFootprint = 100 << 20

// dirSize sums the apparent sizes of the files under dir, and (where the
// platform tells, see blocksOf) their allocated bytes.
func dirSize(t *testing.T, dir string) (apparent, allocated int64) {
	t.Helper()
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		apparent += fi.Size()
		allocated += blocksOf(fi)
		return nil
	})
	require.NoError(t, err)
	return apparent, allocated
}

// A default store holding one 5-byte message takes at most
// maxSmallFootprint of disk while open and after Close, counting both the
// files' sizes and (on Linux) their allocated blocks, preallocation
// included.
func TestDefaultFootprint(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, nil)
	require.NoError(t, err)
	defer s.Close()
	_, err = s.Put(context.Background(), &Message{Topic: "small", Body: []byte("hello")}, 0)
	require.NoError(t, err)
	require.NoError(t, s.WaitVisible(context.Background()))
	apparent, allocated := dirSize(t, dir)
	t.Logf("open: %d bytes apparent, %d allocated", apparent, allocated)
	require.LessOrEqual(t, apparent, int64(maxSmallFootprint), "apparent size while open")
	require.LessOrEqual(t, allocated, int64(maxSmallFootprint), "allocated blocks while open")
	require.NoError(t, s.Close())
	apparent, allocated = dirSize(t, dir)
	t.Logf("closed: %d bytes apparent, %d allocated", apparent, allocated)
	require.LessOrEqual(t, apparent, int64(maxSmallFootprint), "apparent size after Close")
	require.LessOrEqual(t, allocated, int64(maxSmallFootprint), "allocated blocks after Close")
}

// Open("") is an error, not a store in the current directory.
func TestOpenEmptyDir(t *testing.T) {
	for _, o := range []*Options{nil, {InMemory: true}, {ReadOnly: true}} {
		s, err := Open("", o)
		require.ErrorIs(t, err, ErrInvalidArgument)
		require.Nil(t, s)
	}
}
