package delay

import (
	"context"
	"sync"

	"github.com/mqlite/mqlite/internal/errs"
)

// passBarrier lets Settle ask a background loop for one full pass that
// starts after the request, and wait until the loop has finished it and
// is parked again. A loop calls begin at the top of each pass and idle
// just before it parks, and wakes on poke. Requests made while a pass is
// running are served by the next pass (the poke is buffered).
type passBarrier struct {
	poke chan struct{} // cap 1: a pass was requested
	mu   sync.Mutex
	req  uint64        // passes requested
	done uint64        // the request count the last finished pass began with
	ch   chan struct{} // closed and replaced when done moves
}

func newPassBarrier() *passBarrier {
	return &passBarrier{poke: make(chan struct{}, 1), ch: make(chan struct{})}
}

// begin is called by the loop at the start of a pass; it returns the
// request count the pass serves.
func (b *passBarrier) begin() uint64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.req
}

// idle is called by the loop when the pass that began with gen has done
// all the work due and the loop is about to park.
func (b *passBarrier) idle(gen uint64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if gen > b.done {
		b.done = gen
		close(b.ch)
		b.ch = make(chan struct{})
	}
}

// sync requests a pass and waits until one that began after the request
// has finished, ctx ends or quit closes (the loop stopped).
func (b *passBarrier) sync(ctx context.Context, quit <-chan struct{}) error {
	b.mu.Lock()
	b.req++
	want := b.req
	b.mu.Unlock()
	select {
	case b.poke <- struct{}{}:
	default:
	}
	for {
		b.mu.Lock()
		if b.done >= want {
			b.mu.Unlock()
			return nil
		}
		ch := b.ch
		b.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		case <-quit:
			return errs.ErrClosed
		}
	}
}
