package errs

import (
	"errors"
	"fmt"
	"io/fs"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestDisk(t *testing.T) {
	require.NoError(t, Disk(nil))
	eio := &fs.PathError{Op: "write", Path: "/x", Err: syscall.EIO}
	got := Disk(eio)
	require.ErrorIs(t, got, ErrIO)
	require.ErrorIs(t, got, syscall.EIO)
	require.NotErrorIs(t, got, ErrDiskFull)
	for _, errno := range []syscall.Errno{syscall.ENOSPC, syscall.EDQUOT, syscall.EFBIG} {
		got := Disk(fmt.Errorf("allocate: %w", errno))
		require.ErrorIs(t, got, ErrDiskFull, errno)
		require.ErrorIs(t, got, errno)
		require.NotErrorIs(t, got, ErrIO, errno)
	}
	// Already typed: returned as it is, so that wrapping twice adds
	// nothing and a damaged file or a fence does not become an ErrIO.
	for _, typed := range []error{
		fmt.Errorf("sync: %w (%w)", ErrIO, eio), fmt.Errorf("%w: %w", ErrFenced, eio), Corrupt("/x", 4, "bad"),
		fmt.Errorf("write: %w", ErrReadOnly), ErrClosed, fmt.Errorf("%w (%w)", ErrDiskFull, syscall.ENOSPC),
	} {
		require.True(t, Disk(typed) == typed, "Disk(%v) = %v, want it unchanged", typed, Disk(typed))
	}
	got = Disk(fmt.Errorf("open: %w", fs.ErrNotExist))
	require.ErrorIs(t, got, fs.ErrNotExist, "a missing file stays recognisable")
	require.ErrorIs(t, got, ErrIO)
	require.False(t, errors.Is(Disk(eio), ErrCorrupt))
}
