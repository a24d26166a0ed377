package consumer

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/mqlite/mqlite/internal/errs"
	"github.com/mqlite/mqlite/message"
)

// PullConsumer returns messages when asked (Poll). Subscribe joins the
// group's rebalance at once; Assign takes queues manually instead (no
// rebalance, no locks: the caller owns the split). Background fetchers
// long-poll the store for each assigned queue, bounded by the per-queue
// cache limits, so Poll usually returns what is already fetched. It is safe
// for concurrent use.
type PullConsumer struct{ m *member }

// NewPullConsumer returns a pull consumer of group (see NewPushConsumer for
// the name rules). Options.Orderly is refused: Poll is in queue order.
func (mg *Manager) NewPullConsumer(group string, o Options) (*PullConsumer, error) {
	m, err := mg.newConsumer(group, o, kindPull)
	if err != nil {
		return nil, err
	}
	return &PullConsumer{m: m}, nil
}

// Group returns the consumer's group name.
func (c *PullConsumer) Group() string {
	if c == nil {
		return ""
	}
	return c.m.group
}

// ID returns the member's id in its group; empty before the first
// Subscribe or Assign.
func (c *PullConsumer) ID() string {
	if c == nil {
		return ""
	}
	return c.m.publicID()
}

// Subscribe adds topic with filter f (nil: every message) and joins the
// group's rebalance (at once; the queues given to this consumer start
// fetching). A topic the store does not know yet is fine: its queues are
// given out once it is created (by CreateTopic or a producer's first
// send), so consumers and producers may start in any order. Subscribing a
// topic again replaces its filter. Errors: ErrInvalidArgument (empty or
// illegal topic name, consumer uses Assign, group mismatch), ErrClosed.
func (c *PullConsumer) Subscribe(topic string, f Filter) error {
	if c == nil {
		return errs.NilReceiver("consumer.PullConsumer")
	}
	m := c.m
	if err := m.checkState(); err != nil {
		return err
	}
	if err := m.validateSubscription(topic); err != nil {
		return err
	}
	m.mu.Lock()
	if m.mu.manual {
		m.mu.Unlock()
		return fmt.Errorf("mqlite/consumer: Subscribe on a consumer with assigned queues: %w", ErrInvalidArgument)
	}
	old, had := m.mu.subs[topic]
	m.mu.subs[topic] = &subscription{topic: topic, filter: f}
	state := m.mu.state
	m.mu.Unlock()
	undo := func() {
		m.mu.Lock()
		if had {
			m.mu.subs[topic] = old
		} else {
			delete(m.mu.subs, topic)
		}
		m.mu.Unlock()
	}
	var err error
	if state == memberIdle {
		err = m.start(nil)
	} else {
		err = m.g.subscriptionsChanged(m)
	}
	if err != nil {
		undo()
		return err
	}
	m.g.rebalance()
	m.reconcile()
	return nil
}

// Assign consumes the given queues of topic (all of them when none is
// named) with filter f, outside the group's rebalance: the consumer takes
// no part in allocation and takes no queue lock, but shares the group's
// committed offsets. It replaces an earlier assignment of topic. Errors:
// ErrInvalidArgument (queue id out of range or repeated, consumer uses
// Subscribe), ErrTopicNotFound, ErrClosed.
func (c *PullConsumer) Assign(topic string, f Filter, queues ...int) error {
	if c == nil {
		return errs.NilReceiver("consumer.PullConsumer")
	}
	m := c.m
	if err := m.checkState(); err != nil {
		return err
	}
	n, err := m.validateTopic("assign", topic)
	if err != nil {
		return err
	}
	if len(queues) == 0 {
		for q := range n {
			queues = append(queues, q)
		}
	}
	seen := map[int]bool{}
	for _, q := range queues {
		if q < 0 || q >= n || seen[q] {
			return fmt.Errorf("mqlite/consumer: assign %s queue %d (the topic has %d queues, each named once): %w", topic, q, n, ErrInvalidArgument)
		}
		seen[q] = true
	}
	m.mu.Lock()
	if len(m.mu.subs) > 0 && !m.mu.manual {
		m.mu.Unlock()
		return fmt.Errorf("mqlite/consumer: Assign on a subscribed consumer: %w", ErrInvalidArgument)
	}
	wasManual := m.mu.manual
	m.mu.manual = true
	state := m.mu.state
	m.mu.Unlock()
	if state == memberIdle {
		if err := m.start(nil); err != nil {
			m.mu.Lock()
			m.mu.manual = wasManual
			m.mu.Unlock()
			return err
		}
	}
	s := &subscription{topic: topic, filter: f}
	m.mu.Lock()
	target := map[Queue]*subscription{}
	for q, sub := range m.mu.target {
		if q.Topic != topic {
			target[q] = sub
		}
	}
	for _, q := range queues {
		target[Queue{topic, q}] = s
	}
	m.mu.subs[topic] = s
	m.mu.Unlock()
	if err := m.g.subscriptionsChanged(m); err != nil {
		return err
	}
	m.setTarget(target)
	m.reconcile()
	return nil
}

// Poll returns up to max messages of the assigned queues, blocking until
// at least one is there, ctx ends (ctx.Err()) or the consumer closes
// (ErrClosed). Messages already fetched are returned even when ctx is
// done. With AutoCommit it first commits what earlier Polls returned.
// Messages of one queue come in queue order. With Options.ReuseMessages,
// the messages an earlier Poll returned are released first: they must not
// be used any more.
func (c *PullConsumer) Poll(ctx context.Context, max int) ([]*message.MessageExt, error) {
	if c == nil {
		return nil, errs.NilReceiver("consumer.PullConsumer")
	}
	if err := errs.CheckContext(ctx, "mqlite/consumer: poll"); err != nil {
		return nil, err
	}
	return c.poll(ctx, max, true)
}

// TryPoll is Poll without waiting: it returns the messages already
// fetched, up to max, or none (and no error) when none is. With a fake
// clock, call the store's Settle first so that the fetchers have caught
// up with what is stored.
func (c *PullConsumer) TryPoll(max int) ([]*message.MessageExt, error) {
	if c == nil {
		return nil, errs.NilReceiver("consumer.PullConsumer")
	}
	return c.poll(context.Background(), max, false)
}

// poll is Poll; without wait it returns at once when nothing is ready.
func (c *PullConsumer) poll(ctx context.Context, max int, wait bool) ([]*message.MessageExt, error) {
	m := c.m
	if max <= 0 {
		return nil, fmt.Errorf("mqlite/consumer: Poll max %d: %w", max, ErrInvalidArgument)
	}
	if err := m.checkState(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	started := m.mu.state == memberRunning
	m.mu.Unlock()
	if !started {
		return nil, fmt.Errorf("mqlite/consumer: Poll before Subscribe or Assign: %w", ErrInvalidArgument)
	}
	if m.o.AutoCommit {
		c.commitAll()
	}
	if m.pool != nil {
		m.swapPolled(nil)
	}
	for {
		if out := m.take(max); len(out) > 0 {
			if m.pool != nil {
				m.swapPolled(out)
			}
			return out, m.polledHook(ctx, out)
		}
		if !wait {
			return nil, nil
		}
		select {
		case <-m.ready:
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-m.closing:
			return nil, ErrClosed
		}
	}
}

// take removes up to max buffered messages, visiting queues round robin.
func (m *member) take(max int) []*message.MessageExt {
	m.mu.Lock()
	list := m.mu.list
	start := m.mu.rr
	m.mu.rr++
	m.mu.Unlock()
	var out []*message.MessageExt
	for i := range list {
		if len(out) == max {
			break
		}
		p := list[(start+i)%len(list)]
		p.mu.Lock()
		if p.consumableLocked() && p.mu.msgs.len() > 0 {
			got := p.popLocked(min(max-len(out), p.mu.msgs.len()))
			if out == nil {
				out = got // the caller's alone: popLocked caps it and the cache moves past it
			} else {
				out = append(out, got...)
			}
			p.uncacheLocked(got)
			if p.mu.msgs.len() > 0 {
				p.mu.delivered = p.mu.msgs.front().QueueOffset
			} else {
				p.mu.delivered = p.mu.next
			}
		}
		p.mu.Unlock()
	}
	if len(out) > 0 {
		m.stats.consumed.Add(int64(len(out)))
		if len(out) == max {
			m.notifyReady() // more may be buffered: wake another Poll
		}
	}
	return out
}

// Commit commits, for every queue held, the position after the messages
// Poll returned (filtered-out messages included).
func (c *PullConsumer) Commit() error {
	if c == nil {
		return errs.NilReceiver("consumer.PullConsumer")
	}
	if err := c.m.checkState(); err != nil {
		return err
	}
	c.commitAll()
	return nil
}

func (c *PullConsumer) commitAll() {
	for _, p := range c.m.activeList() {
		p.mu.Lock()
		if p.consumableLocked() {
			p.storeLocked(p.mu.delivered)
		}
		p.mu.Unlock()
	}
}

// CommitOffset commits next (the next offset to consume) for one queue.
// next may not pass what Poll returned for the queue (Position), nor be
// negative: ErrInvalidArgument, nothing changed. ErrNotFound if the queue
// is not held by this consumer.
func (c *PullConsumer) CommitOffset(topic string, queue int, next int64) error {
	p, err := c.held(topic, queue)
	if err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if next < 0 || next > p.mu.delivered {
		return fmt.Errorf("mqlite/consumer: commit %s offset %d: only offsets up to %d were delivered: %w", p.q, next, p.mu.delivered, ErrInvalidArgument)
	}
	if !p.consumableLocked() {
		return fmt.Errorf("mqlite/consumer: queue %s is no longer held: %w", p.q, ErrNotFound)
	}
	p.storeLocked(next)
	return nil
}

// held returns the pq of a queue this consumer holds, after the checks
// every per-queue call makes (nil receiver, state).
func (c *PullConsumer) held(topic string, queue int) (*pq, error) {
	if c == nil {
		return nil, errs.NilReceiver("consumer.PullConsumer")
	}
	return c.m.heldPQ(topic, queue)
}

// Position returns the queue's delivered position: the offset after the
// last message Poll returned or the store filtered out.
func (c *PullConsumer) Position(topic string, queue int) (int64, error) {
	p, err := c.held(topic, queue)
	if err != nil {
		return 0, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mu.delivered, nil
}

// Seek makes the next Poll of the queue start at offset (buffered messages
// are dropped). It does not commit. offset must lie in the queue's
// [min, max] (ErrInvalidArgument); ErrNotFound if the queue is not held.
func (c *PullConsumer) Seek(topic string, queue int, offset int64) error {
	p, err := c.held(topic, queue)
	if err != nil {
		return err
	}
	return p.seek(offset)
}

// checkSeek says why offset is not a position of p's queue, if it is not.
func (p *pq) checkSeek(offset int64) error {
	if err := checkPosition(p.m.st, p.q, offset); err != nil {
		return fmt.Errorf("mqlite/consumer: seek: %w", err)
	}
	return nil
}

// checkPosition says why offset lies outside q's [min, max] offsets, if it
// does (ErrInvalidArgument).
func checkPosition(st Source, q Queue, offset int64) error {
	minOff, err := st.MinOffset(q.Topic, q.ID)
	if err != nil {
		return err
	}
	maxOff, err := st.MaxOffset(q.Topic, q.ID)
	if err != nil {
		return err
	}
	if offset < minOff || offset > maxOff {
		return fmt.Errorf("%s offset %d outside [%d, %d]: %w", q, offset, minOff, maxOff, ErrInvalidArgument)
	}
	return nil
}

func (p *pq) seek(offset int64) error {
	if err := p.checkSeek(offset); err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.consumableLocked() {
		return fmt.Errorf("mqlite/consumer: queue %s is no longer held: %w", p.q, ErrNotFound)
	}
	p.mu.msgs.all(func(m *message.MessageExt) { p.uncacheOne(m) })
	p.spaceLocked()
	p.mu.msgs = msgQueue{}
	p.mu.next, p.mu.delivered = offset, offset
	p.mu.gen++
	p.mu.fetchErr = nil // the failure was at the old position
	if p.mu.pullCancel != nil {
		p.mu.pullCancel()
	}
	return nil
}

// SeekToTime seeks every held queue to its first message stored at or
// after t (the queue's max offset if none).
func (c *PullConsumer) SeekToTime(t time.Time) error {
	if c == nil {
		return errs.NilReceiver("consumer.PullConsumer")
	}
	return c.m.seekToTime(t, (*pq).seek)
}

// seekToTime seeks every held queue with seek to its first message stored
// at or after t.
func (m *member) seekToTime(t time.Time, seek func(*pq, int64) error) error {
	if err := m.checkState(); err != nil {
		return err
	}
	var errList []error
	for _, p := range m.activeList() {
		if !p.isActive() {
			continue
		}
		off, err := m.st.OffsetForTime(p.q.Topic, p.q.ID, t)
		if err == nil {
			err = seek(p, off)
		}
		if err != nil {
			errList = append(errList, fmt.Errorf("%s: %w", p.q, err))
		}
	}
	return errors.Join(errList...)
}

// ReconsumeLater hands m to the store's retry path (Source.SendBack) and
// is how a pull consumer reports a message it failed to process. It
// returns the store's error; clustering groups only (ErrInvalidArgument
// for broadcasting: the retry topic is shared by the whole group).
func (c *PullConsumer) ReconsumeLater(ctx context.Context, m *message.MessageExt) error {
	if c == nil {
		return errs.NilReceiver("consumer.PullConsumer")
	}
	if err := errs.CheckContext(ctx, "mqlite/consumer: reconsume later"); err != nil {
		return err
	}
	if err := c.m.checkState(); err != nil {
		return err
	}
	if m == nil {
		return fmt.Errorf("mqlite/consumer: nil message: %w", ErrInvalidArgument)
	}
	if c.m.publicID() == "" {
		return fmt.Errorf("mqlite/consumer: ReconsumeLater before Subscribe or Assign: %w", ErrInvalidArgument)
	}
	if c.m.o.Model == Broadcasting {
		return fmt.Errorf("mqlite/consumer: ReconsumeLater in a broadcasting group: %w", ErrInvalidArgument)
	}
	return c.m.sendBack(ctx, m)
}

// Assignment returns the queues assigned to this consumer, sorted. A
// clustering group's retry queue (%RETRY%group) is among them (see
// Queue.IsRetry).
func (c *PullConsumer) Assignment() []Queue {
	if c == nil {
		return nil
	}
	return slices.Clone(c.m.targetQueues())
}

// Stats returns counters and per-queue cache figures.
func (c *PullConsumer) Stats() Stats {
	if c == nil {
		return Stats{}
	}
	return c.m.statsSnapshot()
}

// Shutdown stops fetching, commits what Poll returned when AutoCommit is
// on, hands the queues over and persists offsets. Idempotent.
func (c *PullConsumer) Shutdown(ctx context.Context) error {
	if c == nil {
		return errs.NilReceiver("consumer.PullConsumer")
	}
	if ctx == nil {
		ctx = context.Background()
	}
	return c.m.shutdown(ctx)
}

// Close is Shutdown without waiting: a pull consumer has no handler calls
// to wait for. Idempotent; afterwards every call returns ErrClosed.
func (c *PullConsumer) Close() error {
	if c == nil {
		return errs.NilReceiver("consumer.PullConsumer")
	}
	return c.m.close()
}
