package delay

// This file is the stepped mode (Config.Stepped): no delivery loop runs;
// each Settle runs one pass on its caller's goroutine, so the deliveries
// of a test script come in an order fixed by the script.

import (
	"context"
	"fmt"
	"sync"

	"github.com/mqlite/mqlite/consumequeue"
	"github.com/mqlite/mqlite/internal/errs"
	"github.com/mqlite/mqlite/topic"
)

// stepLevels is the scheduler's state between stepped passes.
type stepLevels struct {
	mu     sync.Mutex // held by a pass; Stop waits for it
	ready  bool
	levels []*levelState
}

// stepTimers is the timer wheel's state between stepped passes.
type stepTimers struct {
	mu sync.Mutex // held by a pass; Stop waits for it
	q  *consumequeue.Queue
}

// closedCh reports whether quit is closed.
func closedCh(quit <-chan struct{}) bool {
	select {
	case <-quit:
		return true
	default:
		return false
	}
}

// stepPass delivers every delay-level message due at the clock's current
// time: the levels in ascending order, each in queue order, ServeBatch at
// a time, round after round until none has more due. ErrClosed once the
// scheduler stops.
func (d *Scheduler) stepPass(ctx context.Context) error {
	d.step.mu.Lock()
	defer d.step.mu.Unlock()
	if closedCh(d.quit) {
		return errs.ErrClosed
	}
	if !d.step.ready {
		levels, ok := d.levelStates()
		if !ok {
			return errs.ErrClosed
		}
		d.step.levels, d.step.ready = levels, true
	}
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		more := false
		for _, l := range d.step.levels {
			if closedCh(d.quit) {
				return errs.ErrClosed
			}
			_, full, ok := d.serve(l, ServeBatch)
			if !ok {
				return errs.ErrClosed
			}
			more = more || full
		}
		if !more {
			return nil
		}
	}
}

// stepPass buckets the timer messages stored since the last pass and
// delivers every one due at the clock's current time, by due time (then
// by CommitLog offset, the order they were bucketed in). A failure is
// returned (the next pass tries again); ErrClosed once the wheel stops.
func (t *Timers) stepPass(ctx context.Context) error {
	t.step.mu.Lock()
	defer t.step.mu.Unlock()
	if closedCh(t.quit) {
		return errs.ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if t.step.q == nil {
		q, err := t.h.Queue(topic.Timer, 0, true)
		if err != nil {
			return fmt.Errorf("mqlite: timer service: %w", err)
		}
		if !t.h.Indexed(t.quit) {
			return errs.ErrClosed
		}
		t.step.q = q
	}
	if err := t.enqueue(t.step.q); err != nil {
		return fmt.Errorf("mqlite: bucketing timers: %w", err)
	}
	if _, err := t.deliverDue(); err != nil {
		return fmt.Errorf("mqlite: delivering timers: %w", err)
	}
	return nil
}

// awaitUnlocked returns once mu is free: a stepped pass running under it
// has ended (a barrier, for Close).
func awaitUnlocked(mu *sync.Mutex) {
	mu.Lock()
	defer mu.Unlock()
}
