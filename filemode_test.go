//go:build unix

package mqlite

import (
	"context"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// exerciseFiles makes a store create every kind of file it has: topics,
// messages with keys (IndexFile), a delay level and a DeliverAt timer
// (schedule and timer files), a transaction, a consumer group with a
// committed offset, and the checkpoint and config files written on Close.
// It returns the modes of the files as they were while the store was
// open (the abort marker among them).
func exerciseFiles(t *testing.T, dir string, o *Options) map[string]os.FileMode {
	t.Helper()
	s, err := Open(dir, o)
	require.NoError(t, err)
	defer s.Close()
	ctx := context.Background()
	require.NoError(t, s.CreateTopic("files", TopicConfig{Queues: 2}))
	p, err := s.NewProducer(ProducerOptions{})
	require.NoError(t, err)
	_, err = p.Send(ctx, &Message{Topic: "files", Keys: []string{"order-1"}, Body: []byte("keyed")})
	require.NoError(t, err)
	_, err = p.Send(ctx, &Message{Topic: "files", DelayLevel: 3, Body: []byte("delayed")})
	require.NoError(t, err)
	_, err = p.Send(ctx, &Message{Topic: "files", DeliverAt: time.Now().Add(time.Hour), Body: []byte("timed")})
	require.NoError(t, err)
	require.NoError(t, p.Close())
	tp, err := s.NewTransactionProducer(func(context.Context, *MessageExt) TxState { return CommitMessage }, TransactionOptions{Group: "tx"})
	require.NoError(t, err)
	_, err = tp.SendInTransaction(ctx, &Message{Topic: "files", Body: []byte("tx")},
		func(context.Context, *Message) TxState { return CommitMessage })
	require.NoError(t, err)
	require.NoError(t, tp.Close())
	pc, err := s.NewPullConsumer("readers", ConsumerOptions{ConsumeFromWhere: ConsumeFromFirstOffset})
	require.NoError(t, err)
	require.NoError(t, pc.Subscribe("files", nil))
	got, err := pc.Poll(ctx, 10)
	require.NoError(t, err)
	require.NotEmpty(t, got)
	require.NoError(t, pc.Commit())
	require.NoError(t, pc.Close())
	require.NoError(t, s.WaitVisible(ctx))
	open := fileModes(t, dir)
	require.Contains(t, open, abortName)
	require.NoError(t, s.Close())
	return open
}

// fileModes walks dir and returns the permission of every file and directory
// in it (dir included), by path relative to dir.
func fileModes(t *testing.T, dir string) map[string]os.FileMode {
	t.Helper()
	got := map[string]os.FileMode{}
	require.NoError(t, filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		got[rel] = fi.Mode().Perm()
		return err
	}))
	return got
}

// Every file a store creates is owner-only (0600, directories 0700) by
// default, and Options.FileMode widens them all (0640, directories 0750),
// as far as the umask lets it.
func TestFileModes(t *testing.T) {
	mask := syscall.Umask(0)
	syscall.Umask(mask)
	for _, c := range []struct {
		opts      *Options
		file, dir os.FileMode
	}{{nil, 0o600, 0o700}, {&Options{FileMode: 0o640}, 0o640, 0o750}} {
		dir := filepath.Join(t.TempDir(), "store")
		got := exerciseFiles(t, dir, c.opts)
		maps.Copy(got, fileModes(t, dir))
		for name, mode := range got {
			want := c.file
			if name == lockName {
				want = 0o600 // the file seam's Lock: owner-only whatever FileMode says
			}
			if fi, err := os.Stat(filepath.Join(dir, name)); err == nil && fi.IsDir() {
				want = c.dir
			}
			require.Equal(t, want&^os.FileMode(mask), mode, "%s: mode %#o", name, mode)
		}
		for _, sub := range []string{"commitlog", "consumequeue", "index", "config"} {
			require.True(t, hasPrefix(got, sub), "no %s files were checked: %v", sub, got)
		}
		require.Greater(t, len(got), 15, "too few files to check: %v", got)
	}
	_, err := Open(t.TempDir(), &Options{FileMode: 0o400})
	require.ErrorIs(t, err, ErrInvalidArgument, "the owner must keep write")
	_, err = Open(t.TempDir(), &Options{FileMode: os.ModeDir | 0o600})
	require.ErrorIs(t, err, ErrInvalidArgument, "permission bits only")
}

func hasPrefix(got map[string]os.FileMode, dir string) bool {
	for name := range got {
		if len(name) > len(dir) && name[:len(dir)+1] == dir+"/" {
			return true
		}
	}
	return false
}
