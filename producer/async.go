package producer

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/mqlite/mqlite/internal/errs"
	"github.com/mqlite/mqlite/message"
)

// maxDrain bounds how many completed appends one durability wait covers.
const maxDrain = 512

// asyncState is the async-send machinery: SendAsync appends in the
// caller's goroutine and queues the callback; one worker goroutine waits
// for durability (one wait covers every queued send, so FlushSync sends
// share syncs) and calls the callbacks in order. slots bounds what is in
// flight.
type asyncState struct {
	p       *Producer
	slots   chan struct{}  // one token per send in flight
	pending chan asyncSend // capacity == cap(slots): never blocks
	quit    chan struct{}  // closed by Close: releases blocked senders
	done    chan struct{}  // closed when the worker has finished
	started sync.Once
	closing sync.Once
	mu      sync.RWMutex // senders hold it shared; Close exclusively
	closed  atomic.Bool
}

type asyncSend struct {
	res SendResult
	cb  func(SendResult, error)
}

func (a *asyncState) init(p *Producer) {
	a.p = p
	a.slots = make(chan struct{}, p.opts.MaxInFlight)
	a.pending = make(chan asyncSend, p.opts.MaxInFlight)
	a.quit = make(chan struct{})
	a.done = make(chan struct{})
}

// SendAsync stores m now (bad input, an unknown topic or a ctx already
// done return an error at once and store nothing) and calls cb once the
// message is durable as the flush mode promises, with the result or the
// durability error (ErrFlushTimeout with Status FlushDiskTimeout: stored,
// not confirmed). If SendAsync returns an error, cb is never called;
// otherwise it is called exactly once, on the producer's callback
// goroutine, in send order. When MaxInFlight sends are pending SendAsync
// blocks until one completes or ctx ends (then it returns ctx.Err() and
// stores nothing). cb must not block for long; it may send with Send or
// SendOneway but must not wait on SendAsync of the same producer.
func (p *Producer) SendAsync(ctx context.Context, m *message.Message, cb func(SendResult, error)) error {
	if p == nil {
		return errs.NilReceiver("producer.Producer")
	}
	if err := errs.CheckContext(ctx, "mqlite/producer: send async"); err != nil {
		return err
	}
	if cb == nil {
		return fmt.Errorf("mqlite/producer: nil callback: %w", errs.ErrInvalidArgument)
	}
	a := &p.async
	a.mu.RLock()
	defer a.mu.RUnlock()
	if err := a.acquire(ctx, "send"); err != nil {
		return err
	}
	res, err := p.store(ctx, m, WaitLater)
	if err != nil {
		<-a.slots
		return err
	}
	a.started.Do(func() { go a.worker() })
	a.pending <- asyncSend{res: res, cb: cb}
	return nil
}

// acquire takes one of the MaxInFlight slots, waiting for one while ctx
// and the producer live; the caller holds a.mu shared and gives the slot
// back (<-a.slots) when its send or request has completed.
func (a *asyncState) acquire(ctx context.Context, what string) error {
	if a.closed.Load() {
		return fmt.Errorf("mqlite/producer: %s: %w", what, errs.ErrClosed)
	}
	select {
	case a.slots <- struct{}{}:
		return nil
	default:
	}
	select {
	case a.slots <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-a.quit:
		return fmt.Errorf("mqlite/producer: %s: %w", what, errs.ErrClosed)
	}
}

// worker completes queued sends until Close and the queue is empty.
func (a *asyncState) worker() {
	defer close(a.done)
	batch := make([]asyncSend, 0, maxDrain)
	for {
		first, ok := <-a.pending
		if !ok {
			return
		}
		batch = append(batch[:0], first)
	drain:
		for len(batch) < maxDrain {
			select {
			case s, ok := <-a.pending:
				if !ok {
					break drain
				}
				batch = append(batch, s)
			default:
				break drain
			}
		}
		end := int64(0)
		for _, s := range batch {
			end = max(end, s.res.End())
		}
		err := a.p.st.AwaitDurable(context.Background(), end)
		for i := range batch {
			res, err := finish(batch[i].res, err)
			batch[i].cb(res, err)
			batch[i] = asyncSend{}
			<-a.slots
		}
	}
}

// Close stops the producer: new sends fail with ErrClosed, senders
// blocked on the in-flight bound are released with ErrClosed, and Close
// returns once every accepted async send has had its callback (their
// messages are stored; the callbacks report durability) and every
// pending Request and RequestAsync has ended (with ErrClosed). Idempotent.
func (p *Producer) Close() error {
	if p == nil {
		return errs.NilReceiver("producer.Producer")
	}
	a := &p.async
	a.closing.Do(func() {
		close(a.quit)
		a.mu.Lock()
		a.closed.Store(true)
		a.mu.Unlock()
		close(a.pending)
		a.started.Do(func() { close(a.done) }) // never started: nothing to wait for
		<-a.done
		p.closeRequests()
	})
	return nil
}
