package mqlite

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqlite/mqlite/clock"
	"github.com/mqlite/mqlite/vfs"
)

// expireQueue1 fills queue 0 of topic t and expires segments until
// retention has removed every record of queue 1 (n messages).
func expireQueue1(t *testing.T, s *Store, clk *clock.Fake, n int64) {
	t.Helper()
	for round := 0; ; round++ {
		q1, err := s.MinOffset("t", 1)
		require.NoError(t, err)
		if q1 == n {
			return
		}
		require.Less(t, round, 20, "retention never removed queue 1's records")
		for range 100 {
			_, err := s.Put(context.Background(), &Message{Topic: "t", Body: make([]byte, 1000)}, 0)
			require.NoError(t, err)
		}
		require.NoError(t, s.WaitVisible(context.Background()))
		clk.Advance(2 * time.Hour)
		_, err = s.CleanExpired()
		require.NoError(t, err)
	}
}

// RebuildIndexes of a store whose oldest segments retention removed keeps
// every queue's offsets, that of a queue with no record left too, given
// the checkpoint's queue counts; without them (a version 1 checkpoint) it
// refuses and changes nothing.
func TestRebuildIndexesAfterRetention(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "s")
	opts := lostFilesOptions()()
	opts.NoWarm = true
	clk := opts.Clock.(*clock.Fake)
	s, err := Open(dir, opts)
	require.NoError(t, err)
	putBodies(t, s, "t", 1, 30)
	expireQueue1(t, s, clk, 30)
	q0min, err := s.MinOffset("t", 0)
	require.NoError(t, err)
	q0max, err := s.MaxOffset("t", 0)
	require.NoError(t, err)
	require.Positive(t, q0min)
	require.NoError(t, s.Close())

	cpPath := filepath.Join(dir, checkpointName)
	good, err := os.ReadFile(cpPath)
	require.NoError(t, err)
	cp, err := decodeCheckpoint(cpPath, good)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(cpPath, encodeV1(cp.flushed, cp.dispatched), 0o644))
	before := snapshotFS(t, vfs.OS, dir)
	_, err = RebuildIndexes(dir, opts)
	require.ErrorIs(t, err, ErrInvalidArgument)
	require.Contains(t, err.Error(), "retention")
	require.Equal(t, before, snapshotFS(t, vfs.OS, dir), "a refused rebuild changed files")

	require.NoError(t, os.WriteFile(cpPath, good, 0o644))
	rep, err := RebuildIndexes(dir, opts)
	require.NoError(t, err)
	require.Equal(t, rep.CommitLogEnd-q0minPhys(t, dir, opts), rep.Redispatched, "the whole CommitLog re-dispatched")

	s, err = Open(dir, opts)
	require.NoError(t, err)
	defer s.Close()
	for q, want := range map[int][2]int64{0: {q0min, q0max}, 1: {30, 30}} {
		lo, err := s.MinOffset("t", q)
		require.NoError(t, err)
		hi, err := s.MaxOffset("t", q)
		require.NoError(t, err)
		require.Equal(t, want, [2]int64{lo, hi}, "queue %d", q)
	}
	r, err := s.Put(context.Background(), &Message{Topic: "t", Body: []byte("next")}, 1)
	require.NoError(t, err)
	require.EqualValues(t, 30, r.QueueOffset)
	require.NoError(t, s.WaitVisible(context.Background()))
	requireVerified(t, s)
}

// q0minPhys is the CommitLog's first offset, read by a read-only Store.
func q0minPhys(t *testing.T, dir string, opts *Options) int64 {
	t.Helper()
	ro := *opts
	ro.ReadOnly = true
	s, err := Open(dir, &ro)
	require.NoError(t, err)
	defer s.Close()
	return s.log.MinOffset()
}
