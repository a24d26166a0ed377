package mqlite_test

// Black-box tests of Options.FS: a user's fault tests, written with the
// public API only (package vfs's in-memory and fault-injecting file
// systems), as a broker or application built on mqlite would write them.

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqlite/mqlite"
	"github.com/mqlite/mqlite/vfs"
)

var errDiskDied = errors.New("test: the disk died")

// fsPut sends n FlushSync messages and returns their IDs and bodies.
func fsPut(t *testing.T, s *mqlite.Store, from, n int) map[string]string {
	t.Helper()
	acked := map[string]string{}
	for i := from; i < from+n; i++ {
		body := fmt.Sprintf("message %d", i)
		res, err := s.Put(context.Background(), &mqlite.Message{Topic: "fs", Body: []byte(body)}, i%4)
		require.NoError(t, err)
		acked[res.MsgID()] = body
	}
	return acked
}

// fsRequireAll checks that every acknowledged message reads back.
func fsRequireAll(t *testing.T, s *mqlite.Store, acked map[string]string) {
	t.Helper()
	for id, body := range acked {
		m, err := s.MessageByID(id)
		require.NoError(t, err, "acknowledged message %s", id)
		require.Equal(t, body, string(m.Body))
	}
}

// TestOptionsFSSyncErrorFences: a sync that fails on the user's FS fails
// the send with ErrIO, fences the store (later sends fail with ErrFenced,
// reads work, Close reports the fence), and a power-loss image of the
// file system reopens with every acknowledged message.
func TestOptionsFSSyncErrorFences(t *testing.T) {
	faulty := vfs.NewFaulty(vfs.NewMem())
	opts := &mqlite.Options{FS: faulty, Flush: mqlite.FlushSync, SyncFlushTimeout: time.Hour, SegmentSize: 1 << 20}
	s, err := mqlite.Open("/fenced", opts)
	require.NoError(t, err)
	acked := fsPut(t, s, 0, 20)

	var failed int
	faulty.SetInjector(func(op vfs.Op, path string) error {
		if (op == vfs.OpMapSync || op == vfs.OpSync) && strings.Contains(path, "commitlog") {
			failed++
			return errDiskDied
		}
		return nil
	})
	_, err = s.Put(context.Background(), &mqlite.Message{Topic: "fs", Body: []byte("lost")}, 0)
	require.ErrorIs(t, err, mqlite.ErrIO)
	require.ErrorIs(t, err, errDiskDied, "the cause stays in the chain")
	require.Positive(t, failed)
	_, err = s.Put(context.Background(), &mqlite.Message{Topic: "fs", Body: []byte("refused")}, 0)
	require.ErrorIs(t, err, mqlite.ErrFenced)
	fsRequireAll(t, s, acked) // reads keep working

	img := faulty.Crash(rand.New(rand.NewPCG(7, 11)), 0.5)
	require.ErrorIs(t, s.Close(), mqlite.ErrFenced)

	s2, err := mqlite.Open("/fenced", &mqlite.Options{FS: img, Flush: mqlite.FlushSync})
	require.NoError(t, err)
	fsRequireAll(t, s2, acked)
	more := fsPut(t, s2, 100, 5) // the reopened store is not fenced
	fsRequireAll(t, s2, more)
	require.NoError(t, s2.Close())
}

// TestOptionsFSPowerLoss: for a range of seeds and survival shares, a
// power-loss image taken while the store is open (no Close) keeps every
// message a FlushSync send acknowledged.
func TestOptionsFSPowerLoss(t *testing.T) {
	for seed := uint64(1); seed <= 6; seed++ {
		p := []float64{0, 0.3, 1}[seed%3]
		t.Run(fmt.Sprintf("seed%d_p%.1f", seed, p), func(t *testing.T) {
			faulty := vfs.NewFaulty(vfs.NewMem())
			// A loaded machine may hold a sync past the default 1 s of
			// flow control; this test is about what survives power loss.
			opts := &mqlite.Options{FS: faulty, Flush: mqlite.FlushSync, SegmentSize: 64 << 10, FlowControlThreshold: time.Minute}
			s, err := mqlite.Open("/pl", opts)
			require.NoError(t, err)
			acked := fsPut(t, s, 0, 200+int(seed)*37) // rolls segments
			img := faulty.Crash(rand.New(rand.NewPCG(seed, 3)), p)
			require.NoError(t, s.Close())

			s2, err := mqlite.Open("/pl", &mqlite.Options{FS: img, Flush: mqlite.FlushSync, SegmentSize: 64 << 10})
			require.NoError(t, err)
			defer s2.Close()
			fsRequireAll(t, s2, acked)
			rep, err := s2.Verify(context.Background(), nil)
			require.NoError(t, err)
			require.True(t, rep.OK, "verify after power loss: %v", rep.Problems)
		})
	}
}

// TestOptionsFSCombinations: FS with InMemory is refused; a MemFS given
// as FS keeps the store across Close and Open; ReadOnly and
// RebuildIndexes run on the given FS too.
func TestOptionsFSCombinations(t *testing.T) {
	mem := vfs.NewMem()
	_, err := mqlite.Open("/c", &mqlite.Options{FS: mem, InMemory: true})
	require.ErrorIs(t, err, mqlite.ErrInvalidArgument)
	_, err = mqlite.RebuildIndexes("/c", &mqlite.Options{FS: mem, InMemory: true})
	require.ErrorIs(t, err, mqlite.ErrInvalidArgument)
	names, err := mem.ReadDir("/")
	require.NoError(t, err)
	require.Empty(t, names, "a refused Open creates nothing")

	s, err := mqlite.Open("/c", &mqlite.Options{FS: mem, Flush: mqlite.FlushSync})
	require.NoError(t, err)
	acked := fsPut(t, s, 0, 30)
	require.NoError(t, s.Close())
	require.True(t, vfs.Exists(mem, "/c/commitlog"), "the store's files are on the given FS")

	ro, err := mqlite.Open("/c", &mqlite.Options{FS: mem, ReadOnly: true})
	require.NoError(t, err)
	fsRequireAll(t, ro, acked)
	_, err = ro.Put(context.Background(), &mqlite.Message{Topic: "fs", Body: []byte("x")}, 0)
	require.ErrorIs(t, err, mqlite.ErrReadOnly)
	require.NoError(t, ro.Close())

	_, err = mqlite.RebuildIndexes("/c", &mqlite.Options{FS: mem})
	require.NoError(t, err)
	s, err = mqlite.Open("/c", &mqlite.Options{FS: mem})
	require.NoError(t, err)
	defer s.Close()
	fsRequireAll(t, s, acked)
	n, err := s.MaxOffset("fs", 1)
	require.NoError(t, err)
	require.EqualValues(t, 8, n, "queue 1 holds messages 1, 5, ..., 29 after the rebuild")
}
