package flush

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mqlite/mqlite/clock"
	"github.com/mqlite/mqlite/internal/errs"
)

// GroupCommit batches waiting senders onto shared syncs.
type GroupCommit struct {
	f       Flusher
	timeout time.Duration
	clk     clock.Clock
	onFlush func(int64)

	mu struct {
		sync.Mutex
		flushed int64
		err     error
		closed  bool
		waiters []*gcWaiter // registered in Wait, signalled by the loop
	}
	pool      sync.Pool
	syncStart atomic.Int64 // unix ns when the running sync began; 0 when idle
	kick      chan struct{}
	quit      chan struct{}
	done      chan struct{}
}

// GroupCommitOptions configure a GroupCommit.
type GroupCommitOptions struct {
	Timeout time.Duration // default 5 s (RocketMQ syncFlushTimeout); negative = none
	Clock   clock.Clock   // default clock.Real
	OnFlush func(flushed int64)
}

// NewGroupCommit starts the group commit goroutine.
func NewGroupCommit(f Flusher, opts GroupCommitOptions) *GroupCommit {
	if opts.Timeout == 0 {
		opts.Timeout = 5 * time.Second
	}
	if opts.Clock == nil {
		opts.Clock = clock.Real
	}
	g := &GroupCommit{f: f, timeout: opts.Timeout, clk: opts.Clock, onFlush: opts.OnFlush,
		kick: make(chan struct{}, 1), quit: make(chan struct{}), done: make(chan struct{})}
	g.mu.flushed = f.FlushedPosition()
	go g.loop()
	return g
}

func (g *GroupCommit) loop() {
	defer close(g.done)
	for {
		select {
		case <-g.kick:
			g.syncOnce()
		case <-g.quit:
			g.syncOnce()
			g.mu.Lock()
			g.mu.closed = true
			g.wakeLocked(func(*gcWaiter) bool { return true })
			g.mu.Unlock()
			return
		}
	}
}

// gcWaiter is one sender waiting in Wait. Waiters are pooled, with their
// channel and timer, so that a FlushSync send allocates nothing here.
type gcWaiter struct {
	off int64
	ch  chan struct{} // cap 1: signalled once when the waiter's outcome is known
	tm  clock.Timer   // reused across waits
}

func (g *GroupCommit) syncOnce() {
	g.syncStart.Store(time.Now().UnixNano()) // wall time: a stall is physical
	flushed, err := g.f.Flush()
	g.syncStart.Store(0)
	g.mu.Lock()
	if flushed > g.mu.flushed {
		g.mu.flushed = flushed
	}
	if err != nil && g.mu.err == nil {
		g.mu.err = err
	}
	done, failed := g.mu.flushed, g.mu.err != nil
	g.wakeLocked(func(w *gcWaiter) bool { return failed || w.off <= done })
	g.mu.Unlock()
	if err == nil && g.onFlush != nil {
		g.onFlush(flushed)
	}
}

// wakeLocked signals and forgets the waiters ready reports.
func (g *GroupCommit) wakeLocked(ready func(*gcWaiter) bool) {
	kept := g.mu.waiters[:0]
	for _, w := range g.mu.waiters {
		if ready(w) {
			w.ch <- struct{}{}
		} else {
			kept = append(kept, w)
		}
	}
	clear(g.mu.waiters[len(kept):])
	g.mu.waiters = kept
}

// outcomeLocked is Wait's answer from the shared state, or done == false.
func (g *GroupCommit) outcomeLocked(off int64) (done bool, err error) {
	switch {
	case g.mu.flushed >= off:
		return true, nil
	case g.mu.err != nil:
		return true, g.mu.err
	case g.mu.closed:
		return true, errs.ErrClosed
	}
	return false, nil
}

// Wait returns nil once everything below off is durable. It returns the
// sync error if the sync covering off failed (and every later call returns
// it: the flusher never retries a failed sync), ErrFlushTimeout after the
// timeout (the record stays stored), ctx.Err() when ctx ends first, and
// ErrClosed if the service closed before off was flushed.
func (g *GroupCommit) Wait(ctx context.Context, off int64) error {
	g.mu.Lock()
	if done, err := g.outcomeLocked(off); done {
		g.mu.Unlock()
		return err
	}
	w, _ := g.pool.Get().(*gcWaiter)
	if w == nil {
		w = &gcWaiter{ch: make(chan struct{}, 1)}
	}
	w.off = off
	g.mu.waiters = append(g.mu.waiters, w)
	g.mu.Unlock()
	defer g.pool.Put(w)
	g.Kick()

	var timeout <-chan time.Time
	if g.timeout > 0 {
		if w.tm == nil {
			w.tm = g.clk.NewTimer(g.timeout)
		} else {
			w.tm.Reset(g.timeout)
		}
		defer w.tm.Stop()
		timeout = w.tm.C()
	}
	var gaveUp error
	select {
	case <-w.ch:
		g.mu.Lock()
		_, err := g.outcomeLocked(off)
		g.mu.Unlock()
		return err
	case <-ctx.Done():
		gaveUp = ctx.Err()
	case <-timeout:
		gaveUp = fmt.Errorf("mqlite/flush: offset %d not flushed within %s: %w", off, g.timeout, errs.ErrFlushTimeout)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if i := slices.Index(g.mu.waiters, w); i >= 0 {
		g.mu.waiters = slices.Delete(g.mu.waiters, i, i+1)
		return gaveUp
	}
	<-w.ch // signalled meanwhile: take the signal back, and the outcome
	if done, err := g.outcomeLocked(off); done {
		return err
	}
	return gaveUp
}

// SyncingSince reports when the sync in progress began (ok == false when
// none is running), so the store can tell a stalled disk.
func (g *GroupCommit) SyncingSince() (time.Time, bool) {
	ns := g.syncStart.Load()
	return time.Unix(0, ns), ns != 0
}

// Kick starts a sync round without waiting for it (a no-op if one is
// already pending).
func (g *GroupCommit) Kick() {
	select {
	case g.kick <- struct{}{}:
	default:
	}
}

// Close runs a last sync and stops the goroutine. Idempotent.
func (g *GroupCommit) Close() {
	select {
	case <-g.quit:
	default:
		close(g.quit)
	}
	<-g.done
}
