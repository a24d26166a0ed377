package flush

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqlite/mqlite/clock"
	"github.com/mqlite/mqlite/internal/errs"
)

// fakeLog is a Flusher whose Flush blocks until released.
type fakeLog struct {
	wrote, flushed atomic.Int64
	gate           chan struct{} // nil: no blocking
	fail           atomic.Pointer[error]
	calls          atomic.Int32
}

func (f *fakeLog) WrotePosition() int64   { return f.wrote.Load() }
func (f *fakeLog) FlushedPosition() int64 { return f.flushed.Load() }
func (f *fakeLog) Flush() (int64, error) {
	f.calls.Add(1)
	if f.gate != nil {
		<-f.gate
	}
	if p := f.fail.Load(); p != nil {
		return f.flushed.Load(), *p
	}
	w := f.wrote.Load()
	f.flushed.Store(w)
	return w, nil
}

func TestGroupCommitSharesSyncs(t *testing.T) {
	f := &fakeLog{gate: make(chan struct{})}
	g := NewGroupCommit(f, GroupCommitOptions{Timeout: -1})
	defer g.Close()
	f.wrote.Store(64)
	var wg sync.WaitGroup
	var ok atomic.Int32
	for i := range 64 {
		wg.Go(func() {
			if g.Wait(context.Background(), int64(i+1)) == nil {
				ok.Add(1)
			}
		})
	}
	// Release syncs until everyone is done; far fewer syncs than waiters.
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	for loop := true; loop; {
		select {
		case f.gate <- struct{}{}:
		case <-done:
			loop = false
		}
	}
	close(f.gate)
	require.EqualValues(t, 64, ok.Load())
	require.Less(t, int(f.calls.Load()), 64)
}

func TestGroupCommitFailureFailsEveryWaiter(t *testing.T) {
	f := &fakeLog{gate: make(chan struct{})}
	g := NewGroupCommit(f, GroupCommitOptions{Timeout: -1})
	defer g.Close()
	boom := errors.New("EIO")
	f.fail.Store(&boom)
	f.wrote.Store(64)
	errsCh := make(chan error, 64)
	for i := range 64 {
		go func() { errsCh <- g.Wait(context.Background(), int64(i+1)) }()
	}
	close(f.gate)
	for range 64 {
		require.ErrorIs(t, <-errsCh, boom)
	}
	f.fail.Store(nil)
	require.ErrorIs(t, g.Wait(context.Background(), 65), boom, "sticky: never retried")
}

func TestGroupCommitTimeoutOnVirtualTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeLog{gate: make(chan struct{})}
		g := NewGroupCommit(f, GroupCommitOptions{Timeout: time.Second})
		f.wrote.Store(10)
		res := make(chan error, 1)
		start := time.Now()
		go func() { res <- g.Wait(context.Background(), 10) }()
		require.ErrorIs(t, <-res, errs.ErrFlushTimeout)
		require.Equal(t, time.Second, time.Since(start))
		close(f.gate)
		g.Close()
		require.EqualValues(t, 10, f.flushed.Load(), "Close ran a last sync")
	})
}

func TestGroupCommitContext(t *testing.T) {
	f := &fakeLog{gate: make(chan struct{})}
	g := NewGroupCommit(f, GroupCommitOptions{Timeout: -1})
	f.wrote.Store(1)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.ErrorIs(t, g.Wait(ctx, 1), context.Canceled)
	close(f.gate)
	g.Close()
	require.ErrorIs(t, g.Wait(context.Background(), 5), errs.ErrClosed)
}

func TestPeriodicFlushesOnThresholdAndThorough(t *testing.T) {
	clk := clock.NewFake(time.Unix(0, 0))
	f := &fakeLog{}
	flushed := make(chan int64, 10)
	p := NewPeriodic(f, PeriodicOptions{Interval: 500 * time.Millisecond, LeastPages: 4, ThoroughInterval: 10 * time.Second,
		Clock: clk, OnFlush: func(n int64) { flushed <- n }})
	defer p.Close()
	f.wrote.Store(100) // below the threshold
	p.Notify()
	f.wrote.Store(5 * 4096)
	p.Notify()
	require.EqualValues(t, 5*4096, <-flushed)
	f.wrote.Store(5*4096 + 10)
	require.Equal(t, 1, clk.Waiters(), "the ticker")
	clk.Advance(10 * time.Second)
	require.EqualValues(t, 5*4096+10, <-flushed, "thorough flush of a small tail")
}

// Every sender a sync may cover has its timeout running already: a sync
// that starts at once finds the sender's timer there, so a fake clock
// advanced once the sync has begun times the sender out. The timer used
// to be made after the registration kicked the sync, and
// TestFlushTimeoutIsAStatus hung when the sync won that race (here about
// every run caught it with timers that start slowly).
func TestGroupCommitTimerBeforeTheSync(t *testing.T) {
	fake := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	var g *GroupCommit
	var covered, missing atomic.Int32
	f := &hookLog{onFlush: func() {
		g.mu.Lock()
		n := len(g.mu.waiters)
		g.mu.Unlock()
		if n > 0 {
			covered.Add(1)
		}
		if timers := fake.Waiters(); timers < n {
			missing.Add(1)
		}
	}}
	g = NewGroupCommit(f, GroupCommitOptions{Timeout: time.Second, Clock: slowTimers{fake}})
	defer g.Close()
	for i := range int64(200) {
		f.wrote.Store(i + 1)
		require.NoError(t, g.Wait(context.Background(), i+1))
	}
	require.Zero(t, missing.Load(), "syncs that began with a registered sender's timer not yet running")
	require.NotZero(t, covered.Load(), "no sync began with a sender registered")
}

// slowTimers is a clock whose timers take a while to start (the goroutine
// yields first), so that a sync kicked before the timer of its sender was
// made gets to begin before it is.
type slowTimers struct{ *clock.Fake }

func (c slowTimers) NewTimer(d time.Duration) clock.Timer {
	yieldAWhile()
	return slowTimer{c.Fake.NewTimer(d)}
}

type slowTimer struct{ clock.Timer }

func (t slowTimer) Reset(d time.Duration) {
	yieldAWhile()
	t.Timer.Reset(d)
}

func yieldAWhile() {
	for range 50 {
		runtime.Gosched()
	}
}

// hookLog is a Flusher that calls onFlush as each sync begins.
type hookLog struct {
	wrote, flushed atomic.Int64
	onFlush        func()
}

func (f *hookLog) WrotePosition() int64   { return f.wrote.Load() }
func (f *hookLog) FlushedPosition() int64 { return f.flushed.Load() }
func (f *hookLog) Flush() (int64, error) {
	f.onFlush()
	w := f.wrote.Load()
	f.flushed.Store(w)
	return w, nil
}
