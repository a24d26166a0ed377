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
//
// One goroutine runs the syncs. An idle one starts a sync as soon as a
// sender registers in Wait. Right after a sync it gathers instead: it
// waits until as many senders are registered as were waiting when the
// sync ended (the ones it released come back with their next record), or
// for at most as long as that sync took (capped at maxGather), whichever
// comes first. Without the gather the next sync would start at once with
// only the senders that registered during the last one, while the
// released ones waited a whole sync for the sync after it: two cohorts,
// each sync covering about half of the senders. A lone sender gathers
// nothing: its own registration is the one awaited, so its next sync
// starts at once.
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
		// want is how many registered waiters end the gather in
		// progress; 0 when the loop is not gathering (then every
		// registration signals it).
		want int
	}
	pool      sync.Pool
	syncStart atomic.Int64 // unix ns when the running sync began; 0 when idle
	kick      chan struct{}
	quit      chan struct{}
	done      chan struct{}
	ready     []*gcWaiter // the loop's: waiters to signal once mu is released
}

// maxGather caps how long the loop waits for released senders to come
// back: with a slow disk, waiting a whole sync for a sender that is not
// coming would cost too much.
const maxGather = time.Millisecond

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
	// The gather bound is wall time (virtual under testing/synctest), not
	// the injectable clock: it measures the disk and the scheduler, and a
	// fake clock nobody advances must not stall the syncs.
	gather := time.NewTimer(maxGather)
	gather.Stop()
	defer gather.Stop()
	var expired <-chan time.Time // gather.C while gathering, else nil
	for {
		select {
		case <-g.kick:
			if expired != nil && !g.gathered() {
				continue // an early registration or a Kick: the bound still runs
			}
		case <-expired:
		case <-g.quit:
			g.syncOnce()
			g.mu.Lock()
			g.mu.closed = true
			g.wakeLocked(func(*gcWaiter) bool { return true })
			g.mu.Unlock()
			g.signalReady()
			return
		}
		if expired != nil {
			gather.Stop()
			expired = nil
		}
		if took, gathering := g.round(); gathering {
			gather.Reset(min(took, maxGather))
			expired = gather.C
		}
	}
}

// gathered reports whether the gather in progress has the senders it
// waits for.
func (g *GroupCommit) gathered() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.mu.waiters) >= g.mu.want
}

// round runs one sync if anything is unsynced and reports how long it took
// and whether to gather before the next one. With nothing unsynced it only
// releases the waiters a flush by someone else covered.
func (g *GroupCommit) round() (took time.Duration, gathering bool) {
	g.mu.Lock()
	g.mu.want = 0 // first: a waiter registering after the check below signals again
	g.mu.Unlock()
	if flushed := g.f.FlushedPosition(); g.f.WrotePosition() <= flushed {
		g.mu.Lock()
		g.mu.flushed = max(g.mu.flushed, flushed)
		done := g.mu.flushed
		g.wakeLocked(func(w *gcWaiter) bool { return w.off <= done })
		g.mu.Unlock()
		g.signalReady()
		return 0, false
	}
	start := time.Now()
	waiting := g.syncOnce()
	return time.Since(start), waiting > 0
}

// gcWaiter is one sender waiting in Wait. Waiters are pooled, with their
// channel and timer, so that a FlushSync send allocates nothing here.
type gcWaiter struct {
	off int64
	err error         // the outcome, set before ch is signalled
	ch  chan struct{} // cap 1: signalled once when the waiter's outcome is known
	tm  clock.Timer   // reused across waits
}

// syncOnce runs one sync, releases the waiters it covered (all of them if
// it failed) and returns how many waiters there were when it ended; that
// many registrations end the gather that follows.
func (g *GroupCommit) syncOnce() (waiting int) {
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
	waiting = len(g.mu.waiters)
	done, failed := g.mu.flushed, g.mu.err != nil
	g.wakeLocked(func(w *gcWaiter) bool { return failed || w.off <= done })
	if !failed {
		g.mu.want = waiting
	}
	g.mu.Unlock()
	g.signalReady()
	if err == nil && g.onFlush != nil {
		g.onFlush(flushed)
	}
	return waiting
}

// wakeLocked forgets the waiters ready reports, records their outcome and
// queues them for signalReady, so that they are signalled after mu is
// released and do not wake up only to wait for it.
func (g *GroupCommit) wakeLocked(ready func(*gcWaiter) bool) {
	kept := g.mu.waiters[:0]
	for _, w := range g.mu.waiters {
		if ready(w) {
			_, w.err = g.outcomeLocked(w.off)
			g.ready = append(g.ready, w)
		} else {
			kept = append(kept, w)
		}
	}
	clear(g.mu.waiters[len(kept):])
	g.mu.waiters = kept
}

// signalReady signals the waiters wakeLocked queued.
func (g *GroupCommit) signalReady() {
	for _, w := range g.ready {
		w.ch <- struct{}{}
	}
	clear(g.ready)
	g.ready = g.ready[:0]
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
// ErrClosed if the service closed before off was flushed. Registering is
// what starts the sync (or ends the gather) covering off: callers need
// not Kick.
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
	w.off, w.err = off, nil
	// Every registered waiter's timeout is already running, so a sync
	// finds the timers of all the senders it covers (what a fake clock
	// advanced from inside the sync needs).
	var timeout <-chan time.Time
	if g.timeout > 0 {
		if w.tm == nil {
			w.tm = g.clk.NewTimer(g.timeout)
		} else {
			w.tm.Reset(g.timeout)
		}
		timeout = w.tm.C()
	}
	g.mu.waiters = append(g.mu.waiters, w)
	start := len(g.mu.waiters) >= g.mu.want
	g.mu.Unlock()
	defer g.pool.Put(w)
	if timeout != nil {
		defer w.tm.Stop()
	}
	if start {
		g.signal()
	}

	var gaveUp error
	select {
	case <-w.ch:
		return w.err
	case <-ctx.Done():
		gaveUp = ctx.Err()
	case <-timeout:
		gaveUp = fmt.Errorf("mqlite/flush: offset %d not flushed within %s: %w", off, g.timeout, errs.ErrFlushTimeout)
	}
	g.mu.Lock()
	i := slices.Index(g.mu.waiters, w)
	if i >= 0 {
		g.mu.waiters = slices.Delete(g.mu.waiters, i, i+1)
	}
	g.mu.Unlock()
	if i >= 0 {
		return gaveUp
	}
	<-w.ch // released meanwhile: take the signal back, and the outcome
	return w.err
}

// SyncingSince reports when the sync in progress began (ok == false when
// none is running), so the store can tell a stalled disk.
func (g *GroupCommit) SyncingSince() (time.Time, bool) {
	ns := g.syncStart.Load()
	return time.Unix(0, ns), ns != 0
}

// Kick makes sure a sync round runs soon, without waiting for it: at once
// when the service is idle, at the end of the gather in progress
// otherwise. It is for data appended without a waiter (a no-op if a round
// is pending already).
func (g *GroupCommit) Kick() { g.signal() }

// signal wakes the loop (a no-op if a wake-up is pending).
func (g *GroupCommit) signal() {
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
