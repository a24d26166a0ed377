package mqlite

import (
	"context"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mqlite/mqlite/clock"
	"github.com/mqlite/mqlite/topic"
	"github.com/mqlite/mqlite/vfs"
)

// waitTimersWaiting waits until the timer service that Open started waits
// on its own queue, so past its first wait for the CommitLog as of then to
// be dispatched (indexedNow): begun after a test's put, that wait is a
// woken reader to the dispatch, which then yields to it.
func waitTimersWaiting(t *testing.T, s *Store) {
	t.Helper()
	q, err := s.disp.cq.Queue(topic.Timer, 0, true)
	require.NoError(t, err)
	waitFor(t, "the timer service to wait on its queue", func() bool {
		s.disp.mu.Lock()
		defer s.disp.mu.Unlock()
		for k := range s.disp.mu.waiters {
			if k.q == q {
				return true
			}
		}
		return false
	})
}

// waitLoopAsleep waits until the dispatcher loop has parked (it does so
// once it finds nothing to dispatch).
func waitLoopAsleep(s *Store) {
	for !s.disp.sleeping.Load() {
		runtime.Gosched()
	}
}

// A sender that finds the loop asleep dispatches its record itself: the
// entry is readable when Put returns, with no wait and the loop still
// parked, and the key and ID lookups find it too.
func TestSenderDispatchesWhileLoopSleeps(t *testing.T) {
	for _, md := range []mode{modes[0], modes[2]} { // the async modes
		t.Run(md.name, func(t *testing.T) {
			fs, dir := md.fs(t)
			s := openMode(t, md, fs, dir)
			defer s.Close()
			ctx := context.Background()
			require.NoError(t, s.CreateTopic("orders", TopicConfig{Queues: 4}))
			q, err := s.cqueue("orders", 1)
			require.NoError(t, err)
			waitLoopAsleep(s)
			for i := range 20 {
				r, err := s.Put(ctx, &Message{Topic: "orders", Keys: []string{"k"}, Body: body(i)}, 1)
				require.NoError(t, err)
				require.EqualValues(t, i+1, q.MaxOffset(), "entry %d readable when Put returned", i)
				require.True(t, s.disp.sleeping.Load(), "the loop was not woken")
				require.Equal(t, r.End(), s.disp.dispatched())
			}
			hits, err := s.MessagesByKey("orders", "k", time.Now().Add(-time.Hour), time.Now().Add(time.Hour), 100)
			require.NoError(t, err)
			require.Len(t, hits, 20)
		})
	}
}

// With FlushSync a sender never dispatches: readers see only flushed
// records, and the flusher's wake-up publishes them.
func TestSyncSenderLeavesDispatchToFlush(t *testing.T) {
	md := modes[1]
	fs, dir := md.fs(t)
	s := openMode(t, md, fs, dir)
	defer s.Close()
	ctx := context.Background()
	_, err := s.Put(ctx, &Message{Topic: "orders", Body: body(1)}, 0)
	require.NoError(t, err)
	require.NoError(t, s.WaitVisible(ctx))
	require.LessOrEqual(t, s.disp.dispatched(), s.log.FlushedPosition())
}

// The rate window: caller-runs dispatch is allowed while the puts of the
// last window stay at or below inlineMaxPerMs per millisecond, and the
// window is measured again only after inlineWindowMs.
func TestInlineRateWindow(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))
	s, err := openFS(vfs.NewMem(), "/store", smallFiles(&Options{Clock: clk}))
	require.NoError(t, err)
	defer s.Close()
	d := s.disp
	d.run.Lock() // the loop and senders stay out
	defer d.run.Unlock()
	ms := time.Millisecond
	require.True(t, d.inlineAllowed(), "first window")

	s.metrics.puts.Add(inlineWindowMs*inlineMaxPerMs + 1)
	clk.Advance(inlineWindowMs * ms)
	require.False(t, d.inlineAllowed(), "one put over the rate")
	clk.Advance(ms)
	require.False(t, d.inlineAllowed(), "the window is not over: no new measurement")

	s.metrics.puts.Add(inlineWindowMs * inlineMaxPerMs)
	clk.Advance((inlineWindowMs - 1) * ms)
	require.True(t, d.inlineAllowed(), "exactly the rate")

	d.inline.ms += time.Hour.Milliseconds() // as if the wall clock went back an hour
	require.False(t, d.inlineAllowed(), "the clock went back: no rate known")
	clk.Advance(inlineWindowMs * ms)
	require.True(t, d.inlineAllowed())

	// Yielding to woken readers has the lower bound yieldMaxPerMs: between
	// the two, senders dispatch in place but do not yield.
	require.True(t, d.inline.yield, "a quiet window")
	s.metrics.puts.Add(inlineWindowMs*yieldMaxPerMs + 1)
	clk.Advance(inlineWindowMs * ms)
	require.True(t, d.inlineAllowed(), "above the yield rate, below the inline rate")
	require.False(t, d.inline.yield, "one put over the yield rate")
	s.metrics.puts.Add(inlineWindowMs * yieldMaxPerMs)
	clk.Advance(inlineWindowMs * ms)
	d.inlineAllowed()
	require.True(t, d.inline.yield, "exactly the yield rate")
}

// A sender that finds more than inlineMaxBytes waiting leaves them to the
// loop: a large batch is still dispatched, by the loop, completely.
func TestLargeBatchGoesToTheLoop(t *testing.T) {
	s, err := openFS(vfs.NewMem(), "/store", smallFiles(&Options{}))
	require.NoError(t, err)
	defer s.Close()
	ctx := context.Background()
	waitLoopAsleep(s)
	msgs := make([]*Message, 200)
	for i := range msgs {
		msgs[i] = &Message{Topic: "big", Body: make([]byte, 1024)}
	}
	res, err := s.PutBatch(ctx, msgs, 0)
	require.NoError(t, err)
	require.Greater(t, res[len(res)-1].End()-res[0].Offset, int64(inlineMaxBytes))
	require.NoError(t, s.WaitVisible(ctx))
	q, err := s.cqueue("big", 0)
	require.NoError(t, err)
	require.EqualValues(t, len(msgs), q.MaxOffset())
}

// Puts racing with Close: each either succeeds or fails with ErrClosed,
// nothing dispatches into closed files, and what succeeded is there after
// reopening.
func TestPutsRacingClose(t *testing.T) {
	for round := range *closeRounds {
		dir := filepath.Join(t.TempDir(), "store")
		s, err := Open(dir, &Options{SegmentSize: 64 << 10})
		require.NoError(t, err)
		ctx := context.Background()
		var wg sync.WaitGroup
		var acked atomic.Int64
		var live atomic.Int32 // senders still sending: one that failed otherwise leaves the wait below spinning
		live.Store(4)
		start := make(chan struct{})
		for g := range 4 {
			wg.Go(func() {
				defer live.Add(-1)
				<-start
				for i := 0; ; i++ {
					_, err := s.Put(ctx, &Message{Topic: "race", Body: body(i)}, g)
					if err != nil {
						assert.ErrorIs(t, err, ErrClosed)
						return
					}
					acked.Add(1)
				}
			})
		}
		close(start)
		for acked.Load() < int64(50*(round+1)) && live.Load() > 0 {
			runtime.Gosched()
		}
		require.NoError(t, s.Close())
		wg.Wait()
		s, err = Open(dir, nil)
		require.NoError(t, err)
		var n int64
		for q := range 4 {
			max, err := s.MaxOffset("race", q)
			require.NoError(t, err)
			n += max
		}
		require.Equal(t, acked.Load(), n, "every acknowledged put is in its queue")
		require.NoError(t, s.Close())
	}
}

// After the dispatcher stopped (Close), a sender that was still between
// its append and its notification dispatches nothing: the index files
// may be closing under it.
func TestNoSenderDispatchAfterStop(t *testing.T) {
	s, err := openFS(vfs.NewMem(), "/store", smallFiles(&Options{}))
	require.NoError(t, err)
	_, err = s.Put(context.Background(), &Message{Topic: "t", Body: body(1)}, 0)
	require.NoError(t, err)
	require.NoError(t, s.Close())
	d := s.disp
	published := false
	d.mu.Lock()
	d.onPublish = func(int64) { published = true }
	d.mu.Unlock()
	d.run.Lock()
	d.next = 0 // as if the record were still to be dispatched
	d.run.Unlock()
	d.sleeping.Store(true)
	d.notifySender()
	require.False(t, published, "a sender dispatched after stop")
}

// Whoever dispatches a record that wakes a blocked reader yields to it
// (so that the reader need not wait until that goroutine blocks): the
// sender dispatching in place (FlushAsync) and the loop (FlushSync, where
// only flushed records are dispatched). A dispatch that wakes nobody does
// not yield.
func TestDispatchYieldsToWokenReader(t *testing.T) {
	for _, md := range []mode{modes[2], modes[3]} { // file-async-tiny, file-sync-tiny
		t.Run(md.name, func(t *testing.T) {
			fs, dir := md.fs(t)
			s := openMode(t, md, fs, dir)
			defer s.Close()
			waitTimersWaiting(t, s)
			require.NoError(t, s.CreateTopic("orders", TopicConfig{Queues: 1}))
			q, err := s.cqueue("orders", 0)
			require.NoError(t, err)
			var yields atomic.Int64
			s.disp.run.Lock()
			s.disp.onYield = func() { yields.Add(1) }
			s.disp.run.Unlock()
			put := func() int64 {
				t.Helper()
				res, err := s.Put(context.Background(), &Message{Topic: "orders", Body: []byte("x")}, 0)
				require.NoError(t, err)
				return res.End()
			}
			end := put()
			waitFor(t, "the dispatch", func() bool { return s.disp.dispatched() >= end }) // no waiter of its own
			require.Zero(t, yields.Load(), "yielded with no reader waiting")
			read := make(chan error, 1)
			go func() {
				_, err := s.ReadQueue(context.Background(), "orders", 0, 1, 16)
				read <- err
			}()
			waitFor(t, "the reader to block", func() bool {
				s.disp.mu.Lock()
				defer s.disp.mu.Unlock()
				_, ok := s.disp.mu.waiters[waitKey{q, 1}]
				return ok
			})
			waitLoopAsleep(s) // FlushAsync: so the sender dispatches, not the loop
			s.disp.run.Lock() // and the loop has let go of run
			//lint:ignore SA2001 the empty section is the barrier
			s.disp.run.Unlock()
			ran := s.disp.ran.Load()
			put()
			require.NoError(t, <-read)
			// The loop (FlushSync) yields after waking the reader, which
			// the other core may run first: wait for the yield, then count.
			waitFor(t, "the yield to the woken reader", func() bool { return yields.Load() > 0 })
			require.EqualValues(t, 1, yields.Load(), "woke the reader without yielding to it")
			require.Equal(t, ran+1, s.disp.ran.Load(), "the woken reader did not count itself as run")
		})
	}
}

// A yield whose Gosched came back before any woken reader ran (the
// scheduler took the yielder from the global queue, as it does once in 61
// schedules) yields once more; one that let a reader run does not.
func TestYieldAgainIfNoWokenReaderRan(t *testing.T) {
	fs, dir := modes[0].fs(t)
	s := openMode(t, modes[0], fs, dir)
	defer s.Close()
	d := s.disp
	for _, readerRuns := range []bool{true, false} {
		calls := 0
		d.run.Lock()
		d.gosched = func() {
			calls++
			if readerRuns {
				d.ran.Add(1)
			}
		}
		mark := d.ran.Load()
		d.run.Unlock()
		d.yield(mark)
		want := map[bool]int{true: 1, false: 2}[readerRuns]
		require.Equal(t, want, calls, "Gosched calls when the woken reader runs: %v", readerRuns)
	}
}

// With FlushSync the loop, woken by the group commit after a sync, lets
// the senders that sync released run before it dispatches; with
// FlushAsync (no reader waiting) it has no one to give way to.
func TestSyncDispatchLetsReleasedSendersGoFirst(t *testing.T) {
	for _, tc := range []struct {
		md   mode
		want bool
	}{{modes[3], true}, {modes[2], false}} { // file-sync-tiny, file-async-tiny
		t.Run(tc.md.name, func(t *testing.T) {
			fs, dir := tc.md.fs(t)
			s := openMode(t, tc.md, fs, dir)
			defer s.Close()
			waitTimersWaiting(t, s)
			var calls atomic.Int64
			s.disp.run.Lock()
			s.disp.gosched = func() { calls.Add(1) }
			s.disp.run.Unlock()
			waitLoopAsleep(s)
			res, err := s.Put(context.Background(), &Message{Topic: "orders", Body: []byte("x")}, 0)
			require.NoError(t, err)
			waitFor(t, "the dispatch", func() bool { return s.disp.dispatched() >= res.End() })
			require.Equal(t, tc.want, calls.Load() > 0, "gosched calls: %d", calls.Load())
		})
	}
}
