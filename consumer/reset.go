package consumer

import (
	"fmt"
	"time"

	"github.com/mqlite/mqlite/internal/errs"
)

// Seek makes the delivery of a queue this consumer holds start again at
// offset, as RocketMQ's reset of a group's offsets does for a push
// consumer: offset is committed, the queue's messages fetched and not yet
// handed to the handler are dropped, and the queue is taken again from
// offset. Handler calls running on it finish, but their results no longer
// move the committed offset (a ReconsumeLater still sends their messages
// back to the retry path); an orderly consumer starts the queue again only
// once they returned. Messages from offset on may thus be delivered again,
// the usual at-least-once duplicate. offset must lie in the queue's [min,
// max] (ErrInvalidArgument); ErrNotFound if the queue is not held;
// ErrClosed after Shutdown or Close.
func (c *PushConsumer) Seek(topic string, queue int, offset int64) error {
	if c == nil {
		return errs.NilReceiver("consumer.PushConsumer")
	}
	p, err := c.m.heldPQ(topic, queue)
	if err != nil {
		return err
	}
	return c.m.reset(p, offset)
}

// SeekToTime seeks every held queue to its first message stored at or
// after t (the queue's max offset if none), as Seek does.
func (c *PushConsumer) SeekToTime(t time.Time) error {
	if c == nil {
		return errs.NilReceiver("consumer.PushConsumer")
	}
	return c.m.seekToTime(t, c.m.reset)
}

// reset commits offset for p's queue, drops p with its results revoked,
// and has the control goroutine take the queue again (reconcile), which
// starts from the committed offset.
func (m *member) reset(p *pq, offset int64) error {
	if err := p.checkSeek(offset); err != nil {
		return err
	}
	m.recMu.Lock()
	m.mu.Lock()
	held := m.mu.state == memberRunning && m.mu.pqs[p.q] == p
	p.mu.Lock()
	if !held || !p.consumableLocked() {
		p.mu.Unlock()
		m.mu.Unlock()
		m.recMu.Unlock()
		return fmt.Errorf("mqlite/consumer: queue %s is no longer held: %w", p.q, ErrNotFound)
	}
	delete(m.mu.pqs, p.q)
	m.rebuildListLocked()
	m.mu.Unlock()
	p.cell.v.Store(offset)
	p.revoked.Store(true) // what it still consumes is not committed
	p.mu.Unlock()
	p.drop()
	m.recMu.Unlock()
	m.poke()
	return nil
}
