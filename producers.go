package mqlite

import (
	"context"
	"fmt"

	"github.com/mqlite/mqlite/internal/errs"
	"github.com/mqlite/mqlite/message"
	"github.com/mqlite/mqlite/producer"
	"github.com/mqlite/mqlite/topic"
)

// Producer sends messages. It is producer.Producer (go doc
// producer.Producer shows the methods in full). Make one with
// Store.NewProducer; its methods:
//
//	Send(ctx context.Context, m *Message) (SendResult, error)
//	SendAsync(ctx context.Context, m *Message, cb func(SendResult, error)) error
//	SendBatch(ctx context.Context, msgs []*Message) ([]SendResult, error)
//	SendBatchInto(ctx context.Context, msgs []*Message, dst []SendResult) ([]SendResult, error)
//	SendOneway(m *Message) error
//	Request(ctx context.Context, m *Message) (*MessageExt, error)   // see Store.Reply
//	RequestAsync(ctx context.Context, m *Message, cb func(*MessageExt, error)) error
//	Close() error
type Producer = producer.Producer

// ProducerOptions configure a Producer; see producer.Options.
type ProducerOptions = producer.Options

// SendResult describes a sent message; see producer.SendResult.
type SendResult = producer.SendResult

// SendStatus is the outcome of a send that stored its message.
type SendStatus = producer.SendStatus

// Send statuses, as RocketMQ names them.
const (
	SendOK           = producer.SendOK
	FlushDiskTimeout = producer.FlushDiskTimeout
)

// QueueSelector picks a message's queue; see producer.Selector.
type QueueSelector = producer.Selector

// NewProducer returns a Producer on this store. The store closes it on
// Close (waiting for its pending async sends); closing it earlier is fine.
func (s *Store) NewProducer(opts ProducerOptions) (*Producer, error) {
	if err := s.writable("new producer"); err != nil {
		return nil, err
	}
	opts.Hooks = s.hooks.merge(opts.Hooks)
	p, err := producer.New(producerStore{s}, opts)
	return registered(s, p, err)
}

// producerStore is the store as a producer sees it: a producer.Sink, whose
// Send and SendBatch carry a send through the write path in one call
// (producer.Appender's step-by-step methods stay for the transaction
// service, which shares Validate).
type producerStore struct{ s *Store }

// Send validates m, resolves its topic once, picks its queue, compresses
// and appends it, then waits or kicks as w says (see producer.Sink).
func (p producerStore) Send(ctx context.Context, m *message.Message, o *producer.Options, pick *producer.Picker, w producer.Wait) (message.PutResult, error) {
	if err := p.Validate(m); err != nil {
		return message.PutResult{}, err
	}
	if err := producer.CheckSize(m, o); err != nil {
		return message.PutResult{}, err
	}
	queue, err := p.pick(m, o, pick)
	if err != nil {
		return message.PutResult{}, err
	}
	out, err := producer.Compress(m, o)
	if err != nil {
		return message.PutResult{}, err
	}
	c := putCheck{validated: true, resolved: true}
	var claim dedupClaim
	if p.s.dedup != nil && out.DedupID != "" && p.s.newClaim(out, &claim) {
		c.claim = &claim
	}
	res, err := p.s.appendChecked(ctx, out, queue, c)
	if err != nil {
		return message.PutResult{}, err
	}
	switch w {
	case producer.WaitDurable:
		return res, p.s.awaitDurable(ctx, res.End())
	case producer.WaitKick:
		p.s.kick()
	}
	return res, nil
}

// SendBatch checks msgs, resolves their topic, picks their queue and
// appends them as one, then waits until they are durable.
func (p producerStore) SendBatch(ctx context.Context, msgs []*message.Message, o *producer.Options, pick *producer.Picker) ([]message.PutResult, error) {
	return p.SendBatchInto(ctx, msgs, o, pick, nil)
}

// SendBatchInto is SendBatch with its results in dst's memory when it has
// room (Producer.SendBatchInto).
func (p producerStore) SendBatchInto(ctx context.Context, msgs []*message.Message, o *producer.Options, pick *producer.Picker, dst []message.PutResult) ([]message.PutResult, error) {
	if err := producer.CheckBatch(msgs, o, p.Validate); err != nil {
		return nil, err
	}
	queue, err := p.pick(msgs[0], o, pick)
	if err != nil {
		return nil, err
	}
	rs, err := p.s.sendBatchInto(ctx, msgs, queue, true, dst)
	if err != nil {
		return nil, err
	}
	return rs, p.s.awaitDurable(ctx, rs[len(rs)-1].End())
}

// pick resolves m's topic (creating it when allowed) and picks its queue.
func (p producerStore) pick(m *message.Message, o *producer.Options, pick *producer.Picker) (int, error) {
	n, err := p.QueueCount(m.Topic, o.AutoCreateQueues)
	if err != nil {
		return 0, err
	}
	return pick.Pick(m, n)
}

func (p producerStore) Validate(m *message.Message) error {
	if err := message.Validate(m, p.s.opts.MaxMessageSize, topicLimit(m), uniqLen, p.s.opts.Clock.Now()); err != nil {
		return err
	}
	if topic.IsSystem(m.Topic) {
		return fmt.Errorf("%w: %q is reserved for the store", message.ErrInvalidTopic, m.Topic)
	}
	return nil
}

func (p producerStore) QueueCount(topic string, auto int) (int, error) {
	if p.s.closed.Load() {
		return 0, errs.ErrClosed
	}
	return p.s.queueCount(topic, auto)
}

func (p producerStore) Append(m *message.Message, queue int) (message.PutResult, error) {
	return p.s.send(context.Background(), m, queue, false, true)
}

func (p producerStore) AppendBatch(msgs []*message.Message, queue int) ([]message.PutResult, error) {
	return p.s.sendBatch(context.Background(), msgs, queue, true)
}

func (p producerStore) AwaitDurable(ctx context.Context, end int64) error {
	return p.s.awaitDurable(ctx, end)
}

func (p producerStore) Kick(int64) { p.s.kick() }

// handle is anything the store closes before itself.
type handle interface{ Close() error }

// registered returns h, just made (unless err), once it is registered to
// be closed by Close; a store closed meanwhile closes it and returns
// ErrClosed.
func registered[H handle](s *Store, h H, err error) (H, error) {
	var none H
	if err != nil {
		return none, err
	}
	if !s.addHandle(h) {
		h.Close()
		return none, errs.ErrClosed
	}
	return h, nil
}

// addHandle registers h to be closed by Close; false if the store is
// closed already.
func (s *Store) addHandle(h handle) bool {
	s.handles.Lock()
	defer s.handles.Unlock()
	if s.closed.Load() {
		return false
	}
	if s.handles.set == nil {
		s.handles.set = map[handle]struct{}{}
	}
	s.handles.set[h] = struct{}{}
	return true
}

// closeHandles closes every handle; called by Close before the store
// stops.
func (s *Store) closeHandles() error {
	s.handles.Lock()
	hs := s.handles.set
	s.handles.set = nil
	s.handles.Unlock()
	var first error
	for h := range hs {
		if err := h.Close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}
