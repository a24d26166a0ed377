package mqlite

import (
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mqlite/mqlite/clock"
	"github.com/mqlite/mqlite/vfs"
)

// A crash at every file operation of DeleteTopic and PurgeTopic (a kill
// -9 image and a power-loss image each) opens as the state before or the
// state after, never a mix.
func TestCrashAtEveryDeleteAndPurgeStep(t *testing.T) {
	for _, op := range []string{"delete", "purge"} {
		t.Run(op, func(t *testing.T) {
			ops := runDeleteScript(t, op, -1, nil)
			require.Positive(t, ops)
			olds, news := 0, 0
			for at := range ops {
				var imgs []*vfs.MemFS
				runDeleteScript(t, op, at, &imgs)
				for k, img := range imgs {
					o := smallFiles(&Options{Clock: clock.NewFake(t0)})
					s, err := openFS(img, "/store", o)
					require.NoError(t, err, "op %d image %d", at, k)
					old := deleteState(t, s, op)
					if old {
						olds++
					} else {
						news++
					}
					require.NoError(t, s.Close())
				}
			}
			t.Logf("%s: %d file operations, %d images in the old state, %d in the new", op, ops, olds, news)
			require.Positive(t, olds)
			require.Positive(t, news)
		})
	}
}

// runDeleteScript sets a store up, then deletes or purges topic t with a
// crash image pair taken as file operation at of it begins (at < 0: none);
// it returns how many file operations the deletion made.
func runDeleteScript(t *testing.T, op string, at int, imgs *[]*vfs.MemFS) int {
	t.Helper()
	ffs := vfs.NewFaulty(vfs.NewMem())
	o := smallFiles(&Options{Clock: clock.NewFake(t0)})
	s, err := openFS(ffs, "/store", o)
	require.NoError(t, err)
	require.NoError(t, s.CreateTopic("t", TopicConfig{Queues: 2}))
	putStrings(t, s, "t", "a", "b", "c")
	require.Len(t, pollAll(t, s, "g", "t"), 3)
	require.NoError(t, s.Close())
	s, err = openFS(ffs, "/store", o)
	require.NoError(t, err)
	rng := rand.New(rand.NewPCG(uint64(at), 3))
	var mu sync.Mutex // background work (a segment's preallocation) may do file operations too
	n := 0
	ffs.SetInjector(func(vfs.Op, string) error {
		mu.Lock()
		defer mu.Unlock()
		if n == at {
			*imgs = append(*imgs, ffs.Crash(rng, 1), ffs.Crash(rng, rng.Float64()))
		}
		n++
		return nil
	})
	if op == "delete" {
		require.NoError(t, s.DeleteTopic("t"))
	} else {
		require.NoError(t, s.PurgeTopic("t"))
	}
	ffs.SetInjector(nil)
	mu.Lock()
	ops := n
	mu.Unlock()
	require.NoError(t, s.Close())
	return ops
}

// deleteState says whether s shows topic t as before the script's
// deletion or purge (true) or after it (false), and fails on a mix.
func deleteState(t *testing.T, s *Store, op string) bool {
	t.Helper()
	_, regErr := s.Topic("t")
	registered := regErr == nil
	offsets := hasOffsetOn(t, s, "g", "t")
	var hidden bool
	if registered {
		lo, err := s.MinOffset("t", 0)
		require.NoError(t, err)
		hidden = lo > 0
	}
	if op == "purge" {
		require.True(t, registered)
		require.True(t, offsets)
		return !hidden
	}
	if registered {
		require.True(t, offsets && !hidden, "registered %t, offsets %t, hidden %t", registered, offsets, hidden)
		return true
	}
	require.False(t, offsets, "deleted, but the group's offsets remain")
	return false
}
