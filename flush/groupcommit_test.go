package flush

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// slowLog is a Flusher whose sync takes d of (virtual) time and covers
// what was written when it began, as msync of a range does.
type slowLog struct {
	d              time.Duration
	wrote, flushed atomic.Int64
	calls          atomic.Int32
}

func (f *slowLog) WrotePosition() int64   { return f.wrote.Load() }
func (f *slowLog) FlushedPosition() int64 { return f.flushed.Load() }
func (f *slowLog) Flush() (int64, error) {
	f.calls.Add(1)
	to := f.wrote.Load()
	time.Sleep(f.d)
	f.flushed.Store(to)
	return to, nil
}

// senders runs n goroutines that each append one byte and wait for it,
// rounds times, and returns how many waits failed.
func senders(g *GroupCommit, f *slowLog, n, rounds int) (failed int32) {
	var wg sync.WaitGroup
	var bad atomic.Int32
	for range n {
		wg.Go(func() {
			for range rounds {
				if g.Wait(context.Background(), f.wrote.Add(1)) != nil {
					bad.Add(1)
				}
			}
		})
	}
	wg.Wait()
	return bad.Load()
}

// TestGroupCommitGathersReleasedSenders: 16 senders that each send again
// as soon as they are acknowledged share every sync after the first,
// instead of splitting into two cohorts that alternate (which takes about
// twice as many syncs).
func TestGroupCommitGathersReleasedSenders(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &slowLog{d: 250 * time.Microsecond}
		g := NewGroupCommit(f, GroupCommitOptions{Timeout: -1})
		defer g.Close()
		const n, rounds = 16, 20
		require.Zero(t, senders(g, f, n, rounds))
		require.EqualValues(t, n*rounds, f.flushed.Load())
		require.LessOrEqual(t, int(f.calls.Load()), rounds+1, "one sync per round, plus the first one that only some senders made")
	})
}

// TestGroupCommitLoneSenderIsNotDelayed: a single sender's own return ends
// the gather at once, so its sends take one sync each and nothing more.
func TestGroupCommitLoneSenderIsNotDelayed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &slowLog{d: time.Millisecond}
		g := NewGroupCommit(f, GroupCommitOptions{Timeout: -1})
		defer g.Close()
		start := time.Now()
		require.Zero(t, senders(g, f, 1, 10))
		require.Equal(t, 10*time.Millisecond, time.Since(start))
		require.EqualValues(t, 10, f.calls.Load())
	})
}

// TestGroupCommitGatherIsBounded: when fewer senders come back than were
// released, the next sync starts after at most the last sync's duration
// (capped at maxGather), and the gather after it expects only those.
func TestGroupCommitGatherIsBounded(t *testing.T) {
	for _, d := range []time.Duration{200 * time.Microsecond, 5 * time.Millisecond} {
		synctest.Test(t, func(t *testing.T) {
			f := &slowLog{d: d}
			g := NewGroupCommit(f, GroupCommitOptions{Timeout: -1})
			defer g.Close()
			f.wrote.Store(4) // the first sync covers all four, however they are scheduled
			var wg sync.WaitGroup
			for i := range 4 {
				wg.Go(func() { assert.NoError(t, g.Wait(context.Background(), int64(i+1))) })
			}
			wg.Wait() // released 4; 1 comes back
			require.EqualValues(t, 1, f.calls.Load())
			before := f.calls.Load()
			wait := func() time.Duration {
				start := time.Now()
				require.NoError(t, g.Wait(context.Background(), f.wrote.Add(1)))
				return time.Since(start)
			}
			require.Equal(t, min(d, maxGather)+d, wait(), "the gather waited for the bound, not longer")
			require.Equal(t, d, wait(), "then it expects one sender")
			require.EqualValues(t, 2, f.calls.Load()-before)
		})
	}
}

// TestGroupCommitSyncsOnlyUnsyncedData: a round with nothing unsynced
// runs no Flush (and releases waiters a flush by someone else covered);
// data appended without a waiter is still flushed on Kick.
func TestGroupCommitSyncsOnlyUnsyncedData(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &slowLog{d: time.Millisecond}
		notified := make(chan int64, 4)
		g := NewGroupCommit(f, GroupCommitOptions{Timeout: -1, OnFlush: func(n int64) { notified <- n }})
		defer g.Close()
		g.Kick()
		synctest.Wait()
		require.Zero(t, f.calls.Load(), "nothing written: no sync")

		f.wrote.Store(10)
		g.Kick()
		require.EqualValues(t, 10, <-notified, "appended without a waiter, flushed on Kick")
		require.EqualValues(t, 1, f.calls.Load())
		require.NoError(t, g.Wait(context.Background(), 10))

		f.wrote.Store(20)
		f.flushed.Store(20) // flushed by another caller of the log
		require.NoError(t, g.Wait(context.Background(), 20))
		synctest.Wait()
		require.EqualValues(t, 1, f.calls.Load(), "covered already: no sync")
	})
}

// TestGroupCommitKickDuringGather: data appended without a waiter while
// the loop waits for released senders is synced when the bound ends.
func TestGroupCommitKickDuringGather(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const d = 400 * time.Microsecond
		f := &slowLog{d: d}
		notified := make(chan int64, 4)
		g := NewGroupCommit(f, GroupCommitOptions{Timeout: -1, OnFlush: func(n int64) { notified <- n }})
		defer g.Close()
		f.wrote.Store(2)
		var wg sync.WaitGroup
		for i := range 2 {
			wg.Go(func() { assert.NoError(t, g.Wait(context.Background(), int64(i+1))) })
		}
		wg.Wait() // released 2, who do not come back
		require.EqualValues(t, 2, <-notified)
		start := time.Now()
		f.wrote.Store(3)
		g.Kick()
		require.EqualValues(t, 3, <-notified)
		require.Equal(t, 2*d, time.Since(start), "the rest of the gather, then the sync")
		require.EqualValues(t, 2, f.calls.Load())
	})
}
