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
	if err != nil {
		return nil, err
	}
	if !s.addHandle(p) {
		p.Close()
		return nil, errs.ErrClosed
	}
	return p, nil
}

// producerStore is the Store a producer sees.
type producerStore struct{ s *Store }

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
	return p.s.append(context.Background(), m, queue, false, true)
}

func (p producerStore) AppendBatch(msgs []*message.Message, queue int) ([]message.PutResult, error) {
	return p.s.appendBatch(context.Background(), msgs, queue, true)
}

func (p producerStore) AwaitDurable(ctx context.Context, end int64) error {
	return p.s.awaitDurable(ctx, end)
}

func (p producerStore) Kick(int64) { p.s.kick() }

// handle is anything the store closes before itself.
type handle interface{ Close() error }

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
