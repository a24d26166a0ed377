package mqlite

import (
	"context"
	"fmt"
	"maps"
	"strconv"
	"time"

	"github.com/mqlite/mqlite/consumequeue"
	"github.com/mqlite/mqlite/delay"
	"github.com/mqlite/mqlite/message"
	"github.com/mqlite/mqlite/topic"
)

// DefaultDelayLevels are RocketMQ's 18 delay levels: level n waits
// DefaultDelayLevels[n-1].
var DefaultDelayLevels = []time.Duration{
	time.Second, 5 * time.Second, 10 * time.Second, 30 * time.Second,
	time.Minute, 2 * time.Minute, 3 * time.Minute, 4 * time.Minute, 5 * time.Minute,
	6 * time.Minute, 7 * time.Minute, 8 * time.Minute, 9 * time.Minute, 10 * time.Minute,
	20 * time.Minute, 30 * time.Minute, time.Hour, 2 * time.Hour,
}

// timerDir is the timer wheel's bucket directory under the store's.
const timerDir = "timer"

// openDelays opens the delay scheduler and the timer wheel (package delay)
// on the recovered store, their system topics created first.
func (s *Store) openDelays(sv *services) error {
	if _, err := s.topics.EnsureAtLeast(topic.Schedule, len(s.opts.DelayLevels)); err != nil {
		return err
	}
	if _, err := s.topics.EnsureAtLeast(topic.Timer, 1); err != nil {
		return err
	}
	var err error
	sv.sched, sv.timers, err = s.newDelays()
	return err
}

// newDelays makes the delay scheduler and the timer service from their
// persisted progress (Open, and a replica's Promote).
func (s *Store) newDelays() (*delay.Scheduler, *delay.Timers, error) {
	cfg := delay.Config{FS: s.fs, ConfigDir: s.path(configDir), TimerDir: s.path(timerDir), Levels: s.opts.DelayLevels,
		Clock: s.opts.Clock, Logger: s.opts.Logger, Kicked: s.disp.scheduled, Stepped: s.opts.Stepped}
	sched, err := delay.NewScheduler(delayHost{s}, cfg)
	if err != nil {
		return nil, nil, err
	}
	timers, err := delay.NewTimers(delayHost{s}, cfg)
	if err != nil {
		sched.Stop()
		return nil, nil, err
	}
	return sched, timers, nil
}

// delayHost is the store as package delay sees it.
type delayHost struct{ s *Store }

func (h delayHost) Queue(name string, id int, create bool) (*consumequeue.Queue, error) {
	return h.s.disp.cq.Queue(name, id, create)
}

func (h delayHost) ReadAt(offset int64) (*MessageExt, error) { return h.s.ReadAt(offset) }

func (h delayHost) Deliver(m *MessageExt, verify bool, kind string) error {
	return h.s.deliverDue(m, verify, kind)
}

// Flush flushes the CommitLog and wakes the dispatcher: under FlushSync it
// indexes only flushed records and is woken by the group commit's flushes,
// which this one is not. Without a wake, a record it made durable (a
// delivery appended just before) stayed invisible until the next flush,
// which in an idle store never came: the group commit found nothing left
// to sync.
func (h delayHost) Flush() error {
	if _, err := h.s.log.Flush(); err != nil {
		return err
	}
	h.s.disp.notify()
	return nil
}

func (h delayHost) Indexed(quit <-chan struct{}) bool { return h.s.indexedNow(quit) }

func (h delayHost) WaitCh(q *consumequeue.Queue, offset int64) (<-chan struct{}, error) {
	return h.s.disp.waitCh(q, offset)
}

func (h delayHost) LogEnd() int64 { return h.s.log.WrotePosition() }

// indexedNow waits until the CommitLog as of now is dispatched (after a
// restart, re-dispatch runs in the background), so that the index knows
// every message delivered before; false when quit closes or the store
// stops.
func (s *Store) indexedNow(quit <-chan struct{}) bool {
	ch, err := s.disp.waitCh(nil, s.log.WrotePosition())
	if err != nil {
		return false
	}
	select {
	case <-ch:
		return true
	case <-quit:
		return false
	}
}

// deliverDue stores a due delayed or timer message in its real topic and
// queue; verify skips one the index shows delivered before a restart. A
// malformed message, or one whose topic or queue is gone, is dropped and
// logged.
func (s *Store) deliverDue(m *MessageExt, verify bool, kind string) error {
	real, queue, err := fromSchedule(&m.Message)
	if err != nil {
		s.opts.Logger.Error("mqlite: dropping a malformed "+kind+" message", "offset", m.CommitLogOffset, "err", err)
		return nil
	}
	if verify {
		if ok, err := s.hasUniqKey(real.Topic, real.UniqKey, m.StoreTimestamp, sameAttempt(real)); err != nil || ok {
			return err
		}
	}
	if s.topics.Queues(real.Topic) <= queue {
		s.opts.Logger.Warn("mqlite: dropping a "+kind+" message for a missing topic or queue", "topic", real.Topic, "queue", queue)
		return nil
	}
	if _, err := s.append(context.Background(), real, queue, true, true); err != nil {
		return err
	}
	s.kick()
	return nil
}

// delayed validates a message with a delay level or deliver-at time and
// routes it to the schedule topic (queue level-1) or the timer topic,
// keeping its real topic and queue in properties, without copying it. A
// deliver-at time already past is delivered at once (a copy without it).
// c.sys is for the store's own puts (retries) to its own topics.
func (s *Store) delayed(m *Message, queue int, c putCheck) (*Message, int, message.Reroute, bool, error) {
	if !c.validated {
		if err := message.Validate(m, s.opts.MaxMessageSize, topicLimit(m), uniqLen, s.opts.Clock.Now()); err != nil {
			return nil, 0, message.Reroute{}, false, err
		}
	}
	var check error
	switch {
	case c.sys:
		check = s.checkSysQueue(m.Topic, queue)
	case !c.resolved:
		check = s.checkQueue(m, queue, false)
	}
	if check != nil {
		return nil, 0, message.Reroute{}, false, check
	}
	r := message.Reroute{RealTopic: m.Topic, RealQueue: strconv.Itoa(queue)}
	switch {
	case m.DelayLevel > len(s.opts.DelayLevels):
		return nil, 0, r, false, fmt.Errorf("%w: level %d, the store has %d levels", message.ErrInvalidDelay, m.DelayLevel, len(s.opts.DelayLevels))
	case m.DelayLevel > 0:
		r.Topic = topic.Schedule
		return m, m.DelayLevel - 1, r, true, nil
	case m.DeliverAt.After(s.opts.Clock.Now()):
		r.Topic = topic.Timer
		return m, 0, r, true, nil
	}
	cp := *m
	cp.DeliverAt = time.Time{}
	return &cp, queue, r, false, nil
}

// sameAttempt matches the delivery of real (same reconsume count: the
// links of a retry chain share a unique key).
func sameAttempt(real *Message) func(*MessageExt) bool {
	return func(m *MessageExt) bool { return m.ReconsumeTimes == real.ReconsumeTimes }
}

// fromSchedule restores a message's real topic and queue.
func fromSchedule(m *Message) (*Message, int, error) {
	real := m.Properties[message.PropRealTopic]
	qid, err := strconv.Atoi(m.Properties[message.PropRealQueueID])
	if real == "" || err != nil || qid < 0 {
		return nil, 0, fmt.Errorf("no real topic or queue")
	}
	c := *m
	c.Topic, c.DelayLevel, c.DeliverAt = real, 0, time.Time{}
	c.Properties = maps.Clone(m.Properties)
	delete(c.Properties, message.PropRealTopic)
	delete(c.Properties, message.PropRealQueueID)
	if len(c.Properties) == 0 {
		c.Properties = nil
	}
	return &c, qid, nil
}

// hasUniqKey reports whether topic holds a message with this unique key
// stored at or after since (and, when match is not nil, for which match
// is true: a retry chain shares one unique key).
func (s *Store) hasUniqKey(topicName, uniq string, since time.Time, match func(*MessageExt) bool) (bool, error) {
	m, err := s.findUniqKey(topicName, uniq, since, match)
	return m != nil, err
}

// findUniqKey is hasUniqKey returning the message found (nil if none).
func (s *Store) findUniqKey(topicName, uniq string, since time.Time, match func(*MessageExt) bool) (*MessageExt, error) {
	if uniq == "" {
		return nil, nil
	}
	offs, err := s.disp.idx.Query(topicName+"#"+uniq, since.UnixMilli(), s.opts.Clock.Now().Add(time.Hour).UnixMilli(), 16)
	if err != nil {
		return nil, err
	}
	for _, off := range offs {
		m, err := s.ReadAt(off)
		if s.removedByRetention(off, err) {
			// Not a delivery to skip. Failing here stalled a delay level,
			// or the timers, retrying the lookup for ever.
			continue
		}
		if err != nil {
			return nil, err
		}
		if m.UniqKey == uniq && m.Topic == topicName && !m.StoreTimestamp.Before(since.Truncate(time.Millisecond)) && (match == nil || match(m)) {
			return m, nil
		}
	}
	return nil, nil
}

// timerBacklog is how many timer messages are stored but not yet in a
// bucket file (for benchmarks and stats).
func (s *Store) timerBacklog() int64 {
	q, err := s.disp.cq.Queue(topic.Timer, 0, false)
	if err != nil || q == nil {
		return 0
	}
	return q.MaxOffset() - s.timers().Enqueued()
}
