package mqlite

import (
	"context"
	"fmt"
	"time"

	"github.com/mqlite/mqlite/consumequeue"
	"github.com/mqlite/mqlite/consumer"
	"github.com/mqlite/mqlite/filter"
	"github.com/mqlite/mqlite/internal/errs"
	"github.com/mqlite/mqlite/message"
	"github.com/mqlite/mqlite/topic"
)

// Consumer types; see package consumer.
type (
	// ConsumerOptions configure a push or pull consumer.
	ConsumerOptions = consumer.Options
	// PushConsumer runs a handler over its queues' messages. It is
	// consumer.PushConsumer (go doc consumer.PushConsumer shows the
	// methods in full). Make one with Store.NewPushConsumer; its methods:
	//
	//	Subscribe(topic string, f Filter) error  // before Start; a topic created later is fine
	//	Start(h Handler) error                   // joins the group, runs h on every batch
	//	Seek(topic string, queue int, offset int64) error
	//	SeekToTime(t time.Time) error
	//	Assignment() []consumer.Queue            // includes the group's %RETRY% queue
	//	Pause(topic string, queues ...int) error // stop fetching and consuming (none listed: the whole topic)
	//	Resume(topic string, queues ...int) error
	//	Paused() []consumer.Queue
	//	Unsubscribe(topic string) error          // give the topic's queues to the group; persisted
	//	Stats() consumer.Stats
	//	Group() string
	//	ID() string
	//	Shutdown(ctx context.Context) error      // graceful: running handler calls finish
	//	Close() error                            // at once
	PushConsumer = consumer.PushConsumer
	// PullConsumer hands out messages through Poll. It is
	// consumer.PullConsumer (go doc consumer.PullConsumer shows the
	// methods in full). Make one with Store.NewPullConsumer; its methods:
	//
	//	Subscribe(topic string, f Filter) error  // group-managed queues; a topic created later is fine
	//	Assign(topic string, f Filter, queues ...int) error // chosen queues
	//	Poll(ctx context.Context, max int) ([]*MessageExt, error)
	//	TryPoll(max int) ([]*MessageExt, error)  // no wait: what is fetched already
	//	Commit() error
	//	CommitOffset(topic string, queue int, next int64) error
	//	Position(topic string, queue int) (int64, error)
	//	Seek(topic string, queue int, offset int64) error
	//	SeekToTime(t time.Time) error
	//	ReconsumeLater(ctx context.Context, m *MessageExt) error
	//	Assignment() []consumer.Queue            // includes the group's %RETRY% queue
	//	Stats() consumer.Stats
	//	Group() string
	//	ID() string
	//	Shutdown(ctx context.Context) error
	//	Close() error
	PullConsumer = consumer.PullConsumer
	// ConsumeResult is a handler's verdict.
	ConsumeResult = consumer.ConsumeResult
	// Handler consumes a batch of messages.
	Handler = consumer.Handler
	// QueueLag is a queue's backlog for a group.
	QueueLag = consumer.QueueLag
	// GroupInfo describes a consumer group.
	GroupInfo = consumer.GroupInfo
	// ConsumerOffset is a group's committed offset on one queue (for a
	// broadcasting group, one instance's).
	ConsumerOffset = consumer.QueueOffset
	// Filter selects the messages of a subscription.
	Filter = filter.Expression
)

// Handler verdicts, message models and allocation strategies.
const (
	ConsumeSuccess    = consumer.ConsumeSuccess
	ReconsumeLater    = consumer.ReconsumeLater
	Clustering        = consumer.Clustering
	Broadcasting      = consumer.Broadcasting
	Averagely         = consumer.Averagely
	AveragelyByCircle = consumer.AveragelyByCircle
	ConsistentHash    = consumer.ConsistentHash

	ConsumeFromLastOffset  = consumer.ConsumeFromLastOffset
	ConsumeFromFirstOffset = consumer.ConsumeFromFirstOffset
	ConsumeFromTimestamp   = consumer.ConsumeFromTimestamp
)

// Tag compiles a tag filter: "*" (or "") for everything, "A || B" for
// messages tagged A or B. Errors match ErrInvalidArgument.
func Tag(expr string) (Filter, error) { return filter.Tag(expr) }

// SQL compiles a SQL92 property filter, e.g. "amount > 100 AND region IN
// ('eu', 'us')". Errors match ErrInvalidArgument and give the position.
func SQL(expr string) (Filter, error) { return filter.SQL(expr) }

// NewPushConsumer returns a member of consumer group group that runs a
// handler; Subscribe, then Start. The store closes it on Close.
func (s *Store) NewPushConsumer(group string, opts ConsumerOptions) (*PushConsumer, error) {
	if err := s.ensureRetryTopic(group, opts); err != nil {
		return nil, err
	}
	opts.Hooks = s.hooks.merge(opts.Hooks)
	return s.consumers().NewPushConsumer(group, opts)
}

// NewPullConsumer returns a member of consumer group group that reads
// with Poll. The store closes it on Close.
func (s *Store) NewPullConsumer(group string, opts ConsumerOptions) (*PullConsumer, error) {
	if err := s.ensureRetryTopic(group, opts); err != nil {
		return nil, err
	}
	opts.Hooks = s.hooks.merge(opts.Hooks)
	return s.consumers().NewPullConsumer(group, opts)
}

// ensureRetryTopic creates a clustering group's retry topic (one queue)
// up front, as RocketMQ's broker does when a group registers, so members
// subscribe to it from the start.
func (s *Store) ensureRetryTopic(group string, opts ConsumerOptions) error {
	if err := s.writable("new consumer"); err != nil {
		return err
	}
	if err := topic.ValidateGroup(group); err != nil || opts.Model != Clustering {
		return nil // the consumer package reports bad names
	}
	_, err := s.sysQueueCount(topic.RetryTopic(group), 1)
	return err
}

// ConsumerLag reports, per queue, how far group's committed offsets are
// behind the queues' ends. A clustering group's retry queue
// (%RETRY%group) is listed too; QueueLag.IsRetry tells it apart.
func (s *Store) ConsumerLag(group string) ([]QueueLag, error) { return s.consumers().Lag(group) }

// ConsumerOffsets returns group's committed offsets: the next offset it
// consumes on each queue it has committed on.
func (s *Store) ConsumerOffsets(group string) ([]ConsumerOffset, error) {
	return s.consumers().Offsets(group)
}

// ResetConsumerOffsets moves group's committed offsets on every queue of
// topic to the first message stored at or after t, and returns them: a
// zero t replays everything the store still has, a t in the future skips
// the backlog. The group must have no running consumer (ErrGroupActive);
// running push consumers reposition with Seek or SeekToTime. It is
// RocketMQ's resetOffsetByTime; see consumer.Manager.ResetOffsets.
func (s *Store) ResetConsumerOffsets(group, topic string, t time.Time) ([]ConsumerOffset, error) {
	if err := s.writable("reset consumer offsets"); err != nil {
		return nil, err
	}
	return s.consumers().ResetOffsets(group, topic, t)
}

// SetConsumerOffset sets group's committed offset on one queue, which
// must lie in the queue's [MinOffset, MaxOffset]; the group must have no
// running consumer (ErrGroupActive).
func (s *Store) SetConsumerOffset(group, topic string, queue int, offset int64) error {
	if err := s.writable("set consumer offset"); err != nil {
		return err
	}
	return s.consumers().SetOffset(group, topic, queue, offset)
}

// ConsumerGroups describes every consumer group, live or persisted.
func (s *Store) ConsumerGroups() []GroupInfo { return s.consumers().Groups() }

// SetRetryPolicy chooses how long group's failed messages wait before
// they are delivered again (default RetryLevels).
func (s *Store) SetRetryPolicy(group string, p RetryPolicy) error {
	if p != RetryLevels && p != RetryExponential {
		return fmt.Errorf("mqlite: retry policy %d: %w", int(p), errs.ErrInvalidArgument)
	}
	s.retry.set(group, p)
	return nil
}

// newConsumers makes the consumer groups' manager; readOnly for a
// read-only store or a replica.
func (s *Store) newConsumers(readOnly bool) (*consumer.Manager, error) {
	return consumer.NewManager(consumerSource{s}, consumer.ManagerOptions{FS: s.fs, Dir: s.path(configDir),
		Clock: s.opts.Clock, Logger: s.opts.Logger, ParseFilter: parseFilter, PersistInterval: s.opts.OffsetPersistInterval,
		ReadOnly: s.readOnly || readOnly, Stepped: s.opts.Stepped})
}

func parseFilter(typ, expr string) (consumer.Filter, error) {
	switch typ {
	case filter.TypeTag:
		return filter.Tag(expr)
	case filter.TypeSQL92:
		return filter.SQL(expr)
	}
	return nil, fmt.Errorf("mqlite: unknown filter type %q: %w", typ, errs.ErrInvalidArgument)
}

// consumerSource is the store as consumers see it (consumer.Source).
type consumerSource struct{ s *Store }

func (c consumerSource) QueueCount(name string) (int, error) {
	cfg, err := c.s.topics.Get(name)
	return cfg.Queues, err
}

func (c consumerSource) MinOffset(name string, q int) (int64, error) { return c.s.MinOffset(name, q) }
func (c consumerSource) MaxOffset(name string, q int) (int64, error) { return c.s.MaxOffset(name, q) }
func (c consumerSource) OffsetForTime(name string, q int, t time.Time) (int64, error) {
	return c.s.OffsetForTime(name, q, t)
}

func (c consumerSource) SendBack(ctx context.Context, group string, m *message.MessageExt) error {
	return c.s.SendBack(ctx, group, m)
}

func (c consumerSource) Pull(ctx context.Context, name string, queue int, from int64, max int, f consumer.Filter, pool *message.Pool) ([]*message.MessageExt, int64, error) {
	return c.s.pull(ctx, name, queue, from, max, f, pool)
}

// pull is ReadQueue with a store-side filter: entries whose tags hash
// cannot match are skipped without reading the CommitLog; the rest are
// read and checked exactly. It returns the matches and the offset after
// the last entry examined.
func (s *Store) pull(ctx context.Context, name string, queue int, from int64, max int, f consumer.Filter, pool *message.Pool) ([]*message.MessageExt, int64, error) {
	if max <= 0 {
		return nil, from, fmt.Errorf("mqlite: max %d: %w", max, errs.ErrInvalidArgument)
	}
	q, err := s.cqueue(name, queue)
	if err != nil {
		return nil, from, err
	}
	if err := s.checkRetained(name, queue, q, from); err != nil {
		return nil, from, err
	}
	var buf [readChunk]consumequeue.Entry
	n, err := s.readVisible(ctx, q, from, buf[:min(max, len(buf))])
	if err != nil && n == 0 {
		return nil, from, err
	}
	out, k, err := s.readEntries(name, queue, from, buf[:n], f, pool)
	return out, from + int64(k), err
}

// waitQueue blocks until q has an entry at from.
func (s *Store) waitQueue(ctx context.Context, q *consumequeue.Queue, from int64) error {
	for {
		if from < q.MinOffset() {
			return fmt.Errorf("mqlite: offset %d below the queue's minimum %d: %w", from, q.MinOffset(), errs.ErrNotFound)
		}
		if q.MaxOffset() > from {
			return nil
		}
		ch, err := s.disp.waitCh(q, from)
		if err != nil {
			return err
		}
		select {
		case <-ch:
			s.disp.ran.Add(1)
		case <-ctx.Done():
			s.disp.leave(q, from)
			return ctx.Err()
		}
	}
}
