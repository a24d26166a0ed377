package mqlite

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/mqlite/mqlite/clock"
	"github.com/mqlite/mqlite/consumequeue"
	"github.com/mqlite/mqlite/internal/cfgfile"
	"github.com/mqlite/mqlite/internal/errs"
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

const (
	delayFile        = "delayOffset.json"
	delayMagic       = 0x4D51444C // "MQDL"
	delayVersion     = 1
	delayPersistTick = 10 * time.Second // RocketMQ's flushDelayOffsetInterval
)

// scheduler delivers delay-level messages: a message with DelayLevel n is
// stored in the schedule topic's queue n-1 (see delayed); one goroutine
// waits for the head of each level's queue to be due (store time plus the
// level's delay, on the store's clock), then stores it in its real topic
// and queue. Each level is FIFO with one delay, so due times are monotone.
// Progress per level is persisted every 10 s and on Close; after a restart
// the messages delivered since the last save are checked against the index
// (by unique key) and not delivered twice.
type scheduler struct {
	s      *Store
	levels []time.Duration
	kicked <-chan struct{} // the dispatcher appended to the schedule topic (dispatcher.scheduled)
	quit   chan struct{}
	wg     sync.WaitGroup
	bar    *passBarrier // Settle: a pass over every level

	mu       sync.Mutex
	progress map[string]int64 // level (decimal) -> next schedule-queue offset
	saved    map[string]int64
}

func newScheduler(s *Store) (*scheduler, error) {
	d := &scheduler{s: s, levels: s.opts.DelayLevels, kicked: s.disp.scheduled, quit: make(chan struct{}), progress: map[string]int64{}, bar: newPassBarrier()}
	if _, err := s.topics.EnsureAtLeast(topic.Schedule, len(d.levels)); err != nil {
		return nil, err
	}
	var err error
	if d.progress, err = s.loadDelayProgress(); err != nil {
		return nil, err
	}
	d.saved = maps.Clone(d.progress)
	for key, off := range d.progress {
		level, _ := strconv.Atoi(key) // checked by loadDelayProgress
		if level > len(d.levels) {
			continue // a level this Open does not serve: kept as it is
		}
		// Before Open returns, so no message sent since is in the queue.
		if end := s.recoveredEnd(topic.Schedule, level-1); off > end {
			// The queue lost its tail after the progress was saved (or
			// the file lies): waiting for offset off would strand every
			// message sent at this level until the queue got there.
			s.opts.Logger.Warn("mqlite: delay progress lies past the end of its queue; moved back",
				"level", level, "progress", off, "end", end)
			d.progress[key] = end // saved by the next save (saved differs)
		}
	}
	return d, nil
}

// recoveredEnd is the end of a queue (0 for one never written), for the
// services' progress checks while Open runs.
func (s *Store) recoveredEnd(name string, id int) int64 {
	q, err := s.disp.cq.Queue(name, id, false)
	if err != nil {
		return 0
	}
	return q.MaxOffset()
}

// maxDelayLevels bounds Options.DelayLevels.
const maxDelayLevels = 64

// loadDelayProgress reads the delay levels' progress: an ErrCorrupt naming
// the file for a key that is not a level (1..64, in decimal as written;
// levels beyond Options.DelayLevels are kept, from a store that had more)
// or a negative offset.
func (s *Store) loadDelayProgress() (map[string]int64, error) {
	p := map[string]int64{}
	if _, err := cfgfile.Read(s.fs, s.path(configDir), delayFile, delayMagic, delayVersion, &p); err != nil {
		return nil, err
	}
	file := filepath.Join(s.path(configDir), delayFile)
	for key, off := range p {
		level, err := strconv.Atoi(key)
		switch {
		case err != nil || strconv.Itoa(level) != key || level < 1 || level > maxDelayLevels:
			return nil, errs.Corrupt(file, cfgfile.HeaderSize, "level %q is not a delay level 1..%d", key, maxDelayLevels)
		case off < 0:
			return nil, errs.Corrupt(file, cfgfile.HeaderSize, "level %s: negative offset %d", key, off)
		}
	}
	return p, nil
}

func (d *scheduler) start() {
	d.wg.Add(2)
	go d.run()
	go d.persistLoop()
}

// stop ends the goroutines and saves the progress.
func (d *scheduler) stop() error {
	close(d.quit)
	d.wg.Wait()
	return d.save()
}

// save persists the progress once what it claims delivered is durable.
func (d *scheduler) save() error {
	d.mu.Lock()
	p := maps.Clone(d.progress)
	d.mu.Unlock()
	if maps.Equal(p, d.saved) {
		return nil
	}
	if _, err := d.s.log.Flush(); err != nil {
		return err
	}
	// Under FlushSync the dispatcher indexes only flushed records and is
	// woken by the group commit's flushes; this flush is not one of them.
	// Without a wake, a record it made durable (a delivery appended just
	// before) stayed invisible until the next flush, which in an idle store
	// never came: the group commit found nothing left to sync.
	d.s.disp.notify()
	if err := cfgfile.Write(d.s.fs, d.s.path(configDir), delayFile, delayMagic, delayVersion, p); err != nil {
		return err
	}
	d.saved = p
	return nil
}

func (d *scheduler) persistLoop() {
	defer d.wg.Done()
	t := d.s.opts.Clock.NewTicker(delayPersistTick)
	defer t.Stop()
	for {
		select {
		case <-d.quit:
			return
		case <-t.C():
			if err := d.save(); err != nil {
				d.s.opts.Logger.Warn("mqlite: saving delay progress failed", "err", err)
			}
		}
	}
}

// sleepUntil waits until the clock reaches t, wake fires, or quit closes
// (then it returns false). A clock that can arm a timer for an instant
// (clock.AtTimer: a Fake) gets one for t. Otherwise the timer is armed for
// a duration, so a clock that moves between reading it and arming (this
// goroutine descheduled) arms it late by as much: the clock is read again
// after arming, and a timer armed more than sleepSlack late is armed
// again. (A fake clock needs the instant: one that jumped to 1 ms short of
// t, and then to t while the timer was being armed, left it armed for 1 ms
// after t, and held at t never fired it.)
func sleepUntil(clk clock.Clock, t time.Time, wake <-chan struct{}, quit <-chan struct{}) bool {
	return sleepUntilPoked(clk, t, wake, nil, quit)
}

// sleepUntilPoked is sleepUntil that also returns true when poke fires
// (a Settle asking for a pass).
func sleepUntilPoked(clk clock.Clock, t time.Time, wake, poke <-chan struct{}, quit <-chan struct{}) bool {
	at, isAt := clk.(clock.AtTimer)
	for {
		now := clk.Now()
		if !now.Before(t) {
			return true
		}
		var tm clock.Timer
		if isAt {
			tm = at.NewTimerAt(t)
		} else if tm = clk.NewTimer(t.Sub(now)); clk.Now().Sub(now) > sleepSlack {
			tm.Stop()
			continue
		}
		ok := true
		select {
		case <-tm.C():
		case <-wake:
		case <-poke:
		case <-quit:
			ok = false
		}
		tm.Stop()
		return ok
	}
}

// sleepSlack is how late sleepUntil lets a timer be armed.
const sleepSlack = time.Millisecond

// levelState is one delay level's place in the scheduler's loop.
type levelState struct {
	level       int
	key         string // level in decimal, its key in progress
	q           *consumequeue.Queue
	off         int64     // next entry to deliver
	verifyUntil int64     // entries below may have been delivered before the last save
	retry       backoff   // failed deliveries of the head
	retryAt     time.Time // the head's next attempt after a failure; zero if none
}

// serveBatch is how many messages a level delivers before the loop moves
// on to the next level, so that a backlog at one level does not hold up
// the others.
const serveBatch = 64

// run is the scheduler's one goroutine: it serves every level in turn,
// each until its head is not yet due (or is backing off after a failure)
// or its queue is empty, then sleeps until the earliest due time or until
// the dispatcher appends to the schedule topic (kick). One goroutine, not
// one per level: every goroutine's stack is scanned by each collection,
// and the 18 default levels are almost always idle.
func (d *scheduler) run() {
	defer d.wg.Done()
	levels, ok := d.levelStates()
	if !ok {
		return
	}
	for {
		gen := d.bar.begin()
		var next time.Time
		more := false
		for _, l := range levels {
			at, full, ok := d.serve(l, serveBatch)
			if !ok {
				return
			}
			more = more || full
			if !at.IsZero() && (next.IsZero() || at.Before(next)) {
				next = at
			}
		}
		select {
		case <-d.quit:
			return
		default:
		}
		if !more {
			d.bar.idle(gen)
		}
		switch {
		case more:
		case next.IsZero():
			select {
			case <-d.kicked:
			case <-d.bar.poke:
			case <-d.quit:
				return
			}
		default:
			if !sleepUntilPoked(d.s.opts.Clock, next, d.kicked, d.bar.poke, d.quit) {
				return
			}
		}
	}
}

// levelStates opens the levels' queues with their progress; a level whose
// queue cannot be opened is logged and left out. After a restart the
// entries a level may have delivered since its last save are checked
// against the index, so the loop first waits for re-dispatch to reach the
// CommitLog's end; false if the store stops meanwhile.
func (d *scheduler) levelStates() ([]*levelState, bool) {
	var levels []*levelState
	verify := false
	for level := 1; level <= len(d.levels); level++ {
		q, err := d.s.disp.cq.Queue(topic.Schedule, level-1, true)
		if err != nil {
			d.s.opts.Logger.Error("mqlite: delay level stopped", "level", level, "err", err)
			continue
		}
		l := &levelState{level: level, key: strconv.Itoa(level), q: q, verifyUntil: q.MaxOffset()}
		d.mu.Lock()
		l.off = d.progress[l.key]
		d.mu.Unlock()
		verify = verify || l.off < l.verifyUntil
		levels = append(levels, l)
	}
	if verify && !d.indexed() {
		return nil, false
	}
	return levels, true
}

// serve delivers up to limit due messages of level l. It returns when the
// level waits next (zero: for a new entry), whether it stopped at limit
// with more perhaps due, and false when the store is closing.
func (d *scheduler) serve(l *levelState, limit int) (at time.Time, full, ok bool) {
	clk := d.s.opts.Clock
	for range limit {
		now := clk.Now()
		if now.Before(l.retryAt) {
			return l.retryAt, false, true
		}
		if first := l.q.MinOffset(); l.off < first {
			l.off = first
		}
		if l.q.MaxOffset() <= l.off {
			return time.Time{}, false, true
		}
		m, err := d.head(l.q, l.level, l.off)
		if err == nil {
			due := m.StoreTimestamp.Add(d.levels[l.level-1])
			if now.Before(due) {
				return due, false, true
			}
			err = d.deliver(m, l.off < l.verifyUntil)
		}
		if err != nil {
			if errors.Is(err, errs.ErrClosed) {
				return time.Time{}, false, false
			}
			wait := l.retry.fail()
			d.s.opts.Logger.Warn("mqlite: delayed delivery failed; retrying", "level", l.level, "offset", l.off, "err", err, "retry_in", wait)
			l.retryAt = clk.Now().Add(wait)
			return l.retryAt, false, true
		}
		l.retry.reset()
		l.retryAt = time.Time{}
		l.off++
		d.mu.Lock()
		d.progress[l.key] = l.off
		d.mu.Unlock()
	}
	return time.Time{}, true, true
}

// indexed waits until the CommitLog as of now is dispatched, so the index
// knows every message delivered before a restart; false when stopping.
func (d *scheduler) indexed() bool { return d.s.indexedNow(d.quit) }

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

// head reads the message that entry off of level's queue q points at,
// checking that it is that entry's: a damaged queue (say, another queue's
// file in its place) must not deliver another message early.
func (d *scheduler) head(q *consumequeue.Queue, level int, off int64) (*MessageExt, error) {
	e, err := q.Get(off)
	if err != nil {
		return nil, err
	}
	m, err := d.s.ReadAt(e.Offset)
	if err != nil {
		return nil, err
	}
	if m.Topic != topic.Schedule || int(m.QueueID) != level-1 || m.QueueOffset != off {
		return nil, d.s.corruptEntry(topic.Schedule, level-1, off, "entry points at commitlog offset %d, which holds %s/%d@%d, not this queue's",
			e.Offset, m.Topic, m.QueueID, m.QueueOffset)
	}
	return m, nil
}

// deliver stores a due schedule-topic message in its real topic and queue.
// verify skips one already delivered before a restart.
func (d *scheduler) deliver(m *MessageExt, verify bool) error {
	return d.s.deliverDue(m, verify, "delayed")
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
// sys is for the store's own puts (retries) to its own topics.
func (s *Store) delayed(m *Message, queue int, sys, validated bool) (*Message, int, message.Reroute, bool, error) {
	if !validated {
		if err := message.Validate(m, s.opts.MaxMessageSize, topicLimit(m), uniqLen, s.opts.Clock.Now()); err != nil {
			return nil, 0, message.Reroute{}, false, err
		}
	}
	check := s.checkQueue(m, queue, false)
	if sys {
		check = s.checkSysQueue(m.Topic, queue)
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
	c := *m
	c.DeliverAt = time.Time{}
	return &c, queue, r, false, nil
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
