package mqlite

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"sync"
	"time"

	"github.com/mqlite/mqlite/internal/errs"
	"github.com/mqlite/mqlite/message"
	"github.com/mqlite/mqlite/topic"
)

// Properties of the retry path, with RocketMQ's names.
const (
	// PropRetryTopic keeps the original topic of a retried or dead message.
	PropRetryTopic = "RETRY_TOPIC"
	// PropOriginMsgID keeps the ID of the message as first stored.
	PropOriginMsgID = "ORIGIN_MESSAGE_ID"
	// PropMaxReconsumeTimes carries a consumer's retry limit to SendBack.
	PropMaxReconsumeTimes = "MAX_RECONSUME_TIMES"
	// PropOriginQueue keeps the queue a dead message was consumed from.
	PropOriginQueue = "ORIGIN_QID"
	// propRetryDelay carries RetryAfter's delay to SendBack (in memory).
	propRetryDelay = "RETRY_DELAY_MS"
)

// DefaultMaxReconsumeTimes is how many times a failed message is retried
// before it goes to the dead-letter queue, as RocketMQ's.
const DefaultMaxReconsumeTimes = 16

// RetryPolicy chooses how long a failed message waits before it is
// delivered again.
type RetryPolicy int

const (
	// RetryLevels is RocketMQ's ladder: the n-th retry waits delay level
	// 2+n (10s, 30s, 1m, 2m, ... 2h, then 2h).
	RetryLevels RetryPolicy = iota
	// RetryExponential is RocketMQ 5's: 5 s x 2^(n-1), at most 2 h.
	RetryExponential
)

// RetryAfter sets the delay before a message the handler is about to
// fail (ReconsumeLater) is delivered again, overriding the group's
// RetryPolicy for this failure. d <= 0 sends it to the dead-letter queue
// at once.
func RetryAfter(m *MessageExt, d time.Duration) {
	if m.Properties == nil {
		m.Properties = map[string]string{}
	}
	m.Properties[propRetryDelay] = strconv.FormatInt(d.Milliseconds(), 10)
}

// retryPolicies holds each group's policy, set by its consumers.
type retryPolicies struct {
	mu sync.Mutex
	m  map[string]RetryPolicy
}

func (r *retryPolicies) set(group string, p RetryPolicy) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m == nil {
		r.m = map[string]RetryPolicy{}
	}
	r.m[group] = p
}

func (r *retryPolicies) get(group string) RetryPolicy {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.m[group]
}

// retryDelay is the wait before retry number n (1-based) of group.
func (s *Store) retryDelay(group string, n int) time.Duration {
	if s.retry.get(group) == RetryExponential {
		return min(5*time.Second<<min(n-1, 20), 2*time.Hour)
	}
	levels := s.opts.DelayLevels
	return levels[min(2+n, len(levels))-1]
}

// SendBack hands a message group failed to consume to the retry path: it
// is stored in the group's retry topic (%RETRY%group, which the group's
// consumers read) with its reconsume count incremented, after the group's
// RetryPolicy delay; past the group's limit (the consumer's
// MaxReconsumeTimes, default 16) it goes to the dead-letter topic
// %DLQ%group instead, where DeadLetters lists it and Redrive sends it
// back. Consumers call it for a ReconsumeLater; pull consumers too.
func (s *Store) SendBack(ctx context.Context, group string, m *MessageExt) error {
	if err := s.enter(ctx, "send back"); err != nil {
		return err
	}
	if err := s.writable("send back"); err != nil {
		return err
	}
	if err := topic.ValidateGroup(group); err != nil {
		return err
	}
	if m == nil {
		return message.ErrNilMessage
	}
	c := m.Message
	c.Properties = maps.Clone(m.Properties)
	if c.Properties == nil {
		c.Properties = map[string]string{}
	}
	orig := c.Properties[PropRetryTopic]
	if orig == "" {
		orig = m.Topic
	}
	if c.Properties[PropOriginMsgID] == "" {
		c.Properties[PropOriginMsgID] = m.MsgID
	}
	limit := DefaultMaxReconsumeTimes
	if v, err := strconv.Atoi(c.Properties[PropMaxReconsumeTimes]); err == nil && v >= 0 {
		limit = v
	}
	delay := time.Duration(-1)
	if v, err := strconv.ParseInt(c.Properties[propRetryDelay], 10, 64); err == nil {
		delay = time.Duration(v) * time.Millisecond
		if delay <= 0 {
			limit = 0
		}
	}
	delete(c.Properties, propRetryDelay)
	delete(c.Properties, PropMaxReconsumeTimes)
	c.Properties[PropRetryTopic] = orig
	c.DelayLevel, c.DeliverAt, c.SysFlag = 0, time.Time{}, c.SysFlag&^message.SysTxTypeMask

	if int(m.ReconsumeTimes) >= limit {
		c.Topic = topic.DLQTopic(group)
		c.Properties[PropOriginQueue] = strconv.Itoa(int(m.QueueID))
		// A crash between the DLQ write and the consumer's commit brings
		// the message back once more: keep one DLQ copy.
		if dead, err := s.inDLQ(ctx, c.Topic, c.UniqKey, c.BornTimestamp); err != nil || dead {
			return err
		}
		return s.sentBack(group, m, &c, 0, s.putSystem(ctx, &c, 0))
	}
	// A crash between this send-back and the consumer's commit delivers m
	// again: do not start a second retry chain.
	if sent, err := s.retryScheduled(ctx, c.UniqKey, m.StoreTimestamp, m.ReconsumeTimes+1); err != nil || sent {
		return err
	}
	c.ReconsumeTimes = m.ReconsumeTimes + 1
	c.Topic = topic.RetryTopic(group)
	if delay < 0 {
		delay = s.retryDelay(group, int(c.ReconsumeTimes))
	}
	if level := s.levelOf(delay); level > 0 {
		c.DelayLevel = level
	} else {
		c.DeliverAt = s.opts.Clock.Now().Add(delay)
	}
	return s.sentBack(group, m, &c, delay, s.putSystem(ctx, &c, 0)) // routed through the schedule or timer topic
}

// inDLQ reports whether the dead-letter topic already holds the message
// with this unique key (born at born).
func (s *Store) inDLQ(ctx context.Context, dlq, uniq string, born time.Time) (bool, error) {
	if s.topics.Queues(dlq) == 0 {
		return false, nil
	}
	if err := s.WaitVisible(ctx); err != nil {
		return false, err
	}
	return s.hasUniqKey(dlq, uniq, born.Add(-time.Second), nil)
}

// retryScheduled reports whether retry number n of the message with this
// unique key was scheduled after since (when the delivery being failed
// was stored): the schedule and timer topics hold it until it is due.
func (s *Store) retryScheduled(ctx context.Context, uniq string, since time.Time, n int32) (bool, error) {
	if uniq == "" {
		return false, nil
	}
	if err := s.WaitVisible(ctx); err != nil {
		return false, err
	}
	for _, t := range []string{topic.Schedule, topic.Timer} {
		if ok, err := s.hasUniqKey(t, uniq, since, func(m *MessageExt) bool { return m.ReconsumeTimes == n }); err != nil || ok {
			return ok, err
		}
	}
	return false, nil
}

// levelOf is the delay level of exactly d, or 0.
func (s *Store) levelOf(d time.Duration) int {
	for i, l := range s.opts.DelayLevels {
		if l == d {
			return i + 1
		}
	}
	return 0
}

// putSystem stores m in a system topic (created with one queue on first
// use) and waits as the flush mode promises.
func (s *Store) putSystem(ctx context.Context, m *Message, queue int) error {
	if _, err := s.sysQueueCount(m.Topic, 1); err != nil {
		return err
	}
	res, err := s.append(ctx, m, queue, true, true)
	if err != nil {
		return err
	}
	return s.awaitDurable(ctx, res.End())
}

// DeadLetters returns up to max messages of group's dead-letter queue
// from offset from (0 is the oldest still stored), without blocking. Each
// keeps its original topic in PropRetryTopic.
func (s *Store) DeadLetters(group string, from int64, max int) ([]*MessageExt, error) {
	if err := topic.ValidateGroup(group); err != nil {
		return nil, err
	}
	if max <= 0 {
		return nil, fmt.Errorf("mqlite: max %d: %w", max, errs.ErrInvalidArgument)
	}
	name := topic.DLQTopic(group)
	if s.topics.Queues(name) == 0 {
		return nil, nil // nothing died yet
	}
	var out []*MessageExt
	for m, err := range s.Messages(name, 0, from) {
		if err != nil {
			return out, err
		}
		if out = append(out, m); len(out) == max {
			break
		}
	}
	return out, nil
}

// Redrive sends the dead message with ID id (from group's dead-letter
// queue) back to its original topic and queue as a new message (reconsume
// count reset, a new unique key), so every group subscribed there gets it
// again. The dead-letter queue keeps its copy: re-driving twice sends it
// twice. It returns a SendResult, as a Producer's Send does (Topic is the
// topic it went to; Status FlushDiskTimeout with ErrFlushTimeout when the
// message is stored but its FlushSync timed out).
func (s *Store) Redrive(ctx context.Context, group, id string) (SendResult, error) {
	if err := s.enter(ctx, "redrive"); err != nil {
		return SendResult{}, err
	}
	if err := s.writable("redrive"); err != nil {
		return SendResult{}, err
	}
	if err := topic.ValidateGroup(group); err != nil {
		return SendResult{}, err
	}
	m, err := s.MessageByID(id)
	if err != nil {
		return SendResult{}, err
	}
	if m.Topic != topic.DLQTopic(group) {
		return SendResult{}, fmt.Errorf("mqlite: message %s is in %q, not in the dead-letter queue of %q: %w", id, m.Topic, group, errs.ErrInvalidArgument)
	}
	c := m.Message
	c.Topic = m.Properties[PropRetryTopic]
	c.Properties = maps.Clone(m.Properties)
	queue, _ := strconv.Atoi(c.Properties[PropOriginQueue])
	for _, p := range []string{PropRetryTopic, PropOriginQueue, PropOriginMsgID} {
		delete(c.Properties, p)
	}
	c.ReconsumeTimes = 0
	c.UniqKey = "" // a new message: its own unique key, its own retries and death
	n, err := s.queueCount(c.Topic, 0)
	if err != nil {
		return SendResult{}, err
	}
	if queue < 0 || queue >= n {
		queue = 0
	}
	r, err := s.append(ctx, &c, queue, false, true)
	if err != nil {
		return SendResult{}, err
	}
	res := SendResult{Topic: c.Topic, PutResult: r}
	s.redriven(group, m, &c, r)
	err = s.awaitDurable(ctx, r.End())
	if errors.Is(err, errs.ErrFlushTimeout) {
		res.Status = FlushDiskTimeout
	}
	return res, err
}

// RedriveAll re-drives every dead message of group from offset from on
// (see Redrive) and returns the offset after the last one.
func (s *Store) RedriveAll(ctx context.Context, group string, from int64) (int64, error) {
	if err := s.enter(ctx, "redrive all"); err != nil {
		return 0, err
	}
	for {
		ms, err := s.DeadLetters(group, from, 64)
		if err != nil || len(ms) == 0 {
			return from, err
		}
		for _, m := range ms {
			if _, err := s.Redrive(ctx, group, m.MsgID); err != nil {
				return from, err
			}
			from = m.QueueOffset + 1
		}
	}
}
