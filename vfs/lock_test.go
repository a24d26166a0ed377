package vfs

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// lockCase is a file system to run a lock test on, with a directory made
// for it.
type lockCase struct {
	name string
	fs   FS
	dir  string
}

// lockCases are the OS (two descriptors of one process behave like two
// processes for flock) and memory.
func lockCases(t *testing.T) []lockCase {
	cases := []lockCase{{"os", OS, t.TempDir()}, {"mem", NewMem(), "/locks"}}
	for _, c := range cases {
		require.NoError(t, c.fs.MkdirAll(c.dir, 0o755))
	}
	return cases
}

// Shared locks exclude an exclusive one and not each other, on the OS (two
// descriptors of one process behave like two processes for flock) and in
// memory; LockShared creates nothing.
func TestLockShared(t *testing.T) {
	for _, tc := range lockCases(t) {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(tc.dir, "readers")
			_, err := tc.fs.LockShared(path)
			require.ErrorIs(t, err, ErrNotExist)
			_, _, err = tc.fs.Stat(path)
			require.ErrorIs(t, err, ErrNotExist, "LockShared created nothing")

			fh, err := tc.fs.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
			require.NoError(t, err)
			require.NoError(t, fh.Close())
			ex, err := tc.fs.Lock(path)
			require.NoError(t, err)
			_, err = tc.fs.LockShared(path)
			require.ErrorIs(t, err, ErrLocked)
			require.NoError(t, ex.Close())

			a, err := tc.fs.LockShared(path)
			require.NoError(t, err)
			b, err := ReadOnly(tc.fs).LockShared(path)
			require.NoError(t, err, "shared holders do not exclude each other, read-only ones included")
			_, err = tc.fs.Lock(path)
			require.ErrorIs(t, err, ErrLocked)
			require.NoError(t, a.Close())
			_, err = tc.fs.Lock(path)
			require.ErrorIs(t, err, ErrLocked, "one shared holder left")
			require.NoError(t, b.Close())
			ex, err = tc.fs.Lock(path)
			require.NoError(t, err)
			require.NoError(t, ex.Close())
		})
	}
}

// A file renamed since the last directory sync is in a crash image under
// one name, never both: the old one unless the rename survived.
func TestCrashKeepsOneNameForARenamedFile(t *testing.T) {
	f := NewFaulty(NewMem())
	require.NoError(t, f.MkdirAll("/d", 0o755))
	h, err := f.OpenFile("/d/a", os.O_RDWR|os.O_CREATE, 0o644)
	require.NoError(t, err)
	_, err = h.WriteAt([]byte("data"), 0)
	require.NoError(t, err)
	require.NoError(t, h.Sync())
	require.NoError(t, h.Close())
	require.NoError(t, f.SyncDir("/d"))
	require.NoError(t, f.Rename("/d/a", "/d/b"))

	seen := map[string]int{}
	for i := range 40 {
		img := f.Crash(rand.New(rand.NewPCG(1, uint64(i))), 0.5)
		names, err := img.ReadDir("/d")
		require.NoError(t, err)
		require.Len(t, names, 1, "image %d: %v", i, names)
		got, err := ReadFile(img, filepath.Join("/d", names[0]))
		require.NoError(t, err)
		require.Equal(t, "data", string(got))
		seen[names[0]]++
	}
	require.Positive(t, seen["a"], "the rename may be lost")
	require.Positive(t, seen["b"], "or survive")

	names, err := f.Crash(rand.New(rand.NewPCG(1, 2)), 0).ReadDir("/d")
	require.NoError(t, err)
	require.Equal(t, []string{"a"}, names, "p=0: only what was synced")
	require.NoError(t, f.SyncDir("/d"))
	names, err = f.Crash(rand.New(rand.NewPCG(1, 2)), 0).ReadDir("/d")
	require.NoError(t, err)
	require.Equal(t, []string{"b"}, names)
}

// A lock is on the file, not the name: it follows the file through a
// rename, and the new file under the old name is free.
func TestLockFollowsRename(t *testing.T) {
	for _, tc := range lockCases(t) {
		t.Run(tc.name, func(t *testing.T) {
			a, b := filepath.Join(tc.dir, "a"), filepath.Join(tc.dir, "b")
			fh, err := tc.fs.OpenFile(a, os.O_RDWR|os.O_CREATE, 0o644)
			require.NoError(t, err)
			require.NoError(t, fh.Close())
			sh, err := tc.fs.LockShared(a)
			require.NoError(t, err)
			require.NoError(t, tc.fs.Rename(a, b))
			_, err = tc.fs.Lock(b)
			require.ErrorIs(t, err, ErrLocked, "the shared lock moved with the file")
			_, err = tc.fs.LockShared(a)
			require.ErrorIs(t, err, ErrNotExist)
			fh, err = tc.fs.OpenFile(a, os.O_RDWR|os.O_CREATE, 0o644)
			require.NoError(t, err)
			require.NoError(t, fh.Close())
			ex, err := tc.fs.Lock(a)
			require.NoError(t, err, "a new file under the old name is not locked")
			require.NoError(t, ex.Close())
			require.NoError(t, sh.Close())
			ex, err = tc.fs.Lock(b)
			require.NoError(t, err)
			require.NoError(t, ex.Close())
		})
	}
}

// Lock creates a missing file, on the OS and in memory alike, and fails
// for a missing directory.
func TestLockCreates(t *testing.T) {
	for _, tc := range lockCases(t) {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(tc.dir, "LOCK")
			lk, err := tc.fs.Lock(path)
			require.NoError(t, err)
			_, _, err = tc.fs.Stat(path)
			require.NoError(t, err, "Lock created the file")
			_, err = tc.fs.LockShared(path)
			require.ErrorIs(t, err, ErrLocked, "the lock is on the file it created")
			require.NoError(t, lk.Close())
			_, err = tc.fs.Lock(filepath.Join(tc.dir, "missing", "LOCK"))
			require.ErrorIs(t, err, ErrNotExist)
		})
	}
}
