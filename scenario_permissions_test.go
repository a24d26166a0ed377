//go:build linux

package mqlite

// S25: permissions and locking against the real OS.

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// permissionChecks opens stores it may read but not write: a writable
// Open fails with an ErrIO that matches fs.ErrPermission, a read-only one
// works. It returns what failed, or "".
func permissionChecks(store, roDir, id string, report func(string)) string {
	_, err := Open(store, &Options{})
	if !errors.Is(err, fs.ErrPermission) || !errors.Is(err, ErrIO) {
		return "writable open of a store of another user: " + errString(err)
	}
	report(err.Error())
	s, err := Open(store, &Options{ReadOnly: true})
	if err != nil {
		return "read-only open of a readable store: " + err.Error()
	}
	_, err = s.MessageByID(id)
	if cerr := s.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "read through a read-only open: " + err.Error()
	}
	if _, err := Open(roDir, &Options{}); !errors.Is(err, fs.ErrPermission) {
		return "open in a read-only directory: " + errString(err)
	}
	if _, err := Open(filepath.Join(roDir, "new"), &Options{}); !errors.Is(err, fs.ErrPermission) {
		return "create under a read-only directory: " + errString(err)
	}
	return ""
}

func errString(err error) string {
	if err == nil {
		return "no error"
	}
	return err.Error()
}

// TestChildPermissions runs permissionChecks as another user.
func TestChildPermissions(t *testing.T) {
	base := childDir(t, "TestChildPermissions")
	report := func(msg string) { emit("error %s", msg) }
	if msg := permissionChecks(filepath.Join(base, "store"), filepath.Join(base, "empty"), os.Getenv("MQLITE_PERM_ID"), report); msg != "" {
		childFail(t, "%s", msg)
	}
	emit("done")
}

// Read-only files and directories give typed errors at Open (ErrIO
// matching fs.ErrPermission, nothing half-opened), and a read-only Open
// reads them. As root, whom permissions do not stop, the checks run in a
// child with the credentials of nobody (65534).
func TestPermissionErrors(t *testing.T) {
	base, err := os.MkdirTemp("", "mqlite-perm-")
	require.NoError(t, err)
	t.Cleanup(func() {
		filepath.WalkDir(base, func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				os.Chmod(p, 0o755)
			}
			return nil
		})
		os.RemoveAll(base)
	})
	require.NoError(t, os.Chmod(base, 0o755)) // others may traverse it
	store := filepath.Join(base, "store")
	// FileMode 0644: others may read it (the default is owner-only).
	s, err := Open(store, &Options{SegmentSize: 16 << 10, ConsumeQueueEntries: 64, FileMode: 0o644})
	require.NoError(t, err)
	r, err := s.Put(context.Background(), &Message{Topic: "p", Body: []byte("readable")}, 0)
	require.NoError(t, err)
	require.NoError(t, s.Close())
	require.NoError(t, os.Mkdir(filepath.Join(base, "empty"), 0o755))

	if os.Geteuid() != 0 {
		// Permissions apply to this process: make everything read-only.
		require.NoError(t, filepath.WalkDir(base, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				defer os.Chmod(p, 0o555) // after its entries
				return nil
			}
			return os.Chmod(p, 0o444)
		}))
		report := func(msg string) { t.Logf("S25: writable open of a read-only store: %s", msg) }
		if msg := permissionChecks(store, filepath.Join(base, "empty"), r.MsgID(), report); msg != "" {
			t.Fatal(msg)
		}
		return
	}
	// The test binary lives in a directory only its owner may enter.
	bin := filepath.Join(base, "bin")
	require.NoError(t, os.Mkdir(bin, 0o755))
	exe := filepath.Join(bin, "mqlite.test")
	require.NoError(t, copyFile(os.Args[0], exe))
	args0 := os.Args[0]
	os.Args[0] = exe
	c, err := startChild(t, "TestChildPermissions", base,
		&syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}, "MQLITE_PERM_ID="+r.MsgID())
	os.Args[0] = args0
	if err != nil {
		t.Skipf("cannot run a child as nobody: %v", err)
	}
	t.Logf("S25 (as nobody): writable open of root's store: %s", strings.Join(c.expect("error"), " "))
	c.expect("done")
	c.wait()
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// TestChildTryOpen opens the store once and prints "opened" or "locked".
func TestChildTryOpen(t *testing.T) {
	dir := childDir(t, "TestChildTryOpen")
	s, err := Open(dir, liveOptions())
	switch {
	case errors.Is(err, ErrLocked):
		emit("result locked")
	case err != nil:
		childFail(t, "open: %v", err)
	default:
		emit("result opened")
		if err := s.Close(); err != nil {
			childFail(t, "close: %v", err)
		}
	}
}

// The directory lock holds across processes: another process gets
// ErrLocked while this one has the store, and opens it after Close; this
// one gets ErrLocked while a child has it, and opens it once the child is
// killed with -9 (flock goes with the process). A second Open in this
// process is TestSecondOpenIsLocked.
func TestLockAcrossProcesses(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	s, err := Open(dir, liveOptions())
	require.NoError(t, err)
	try := func() string {
		c, err := startChild(t, "TestChildTryOpen", dir, nil)
		require.NoError(t, err)
		res := c.expect("result")[0]
		c.wait()
		return res
	}
	require.Equal(t, "locked", try(), "another process while this one holds the store")
	require.NoError(t, s.Close())
	require.Equal(t, "opened", try(), "another process after Close")

	c, err := startChild(t, "TestChildLiveWriter", dir, nil)
	require.NoError(t, err)
	c.expect("opened")
	_, err = Open(dir, liveOptions())
	require.ErrorIs(t, err, ErrLocked, "while a child holds the store")
	c.kill()
	s, err = Open(dir, liveOptions())
	require.NoError(t, err, "after kill -9 of the holder")
	require.NoError(t, s.Close())
}
