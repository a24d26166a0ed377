package mqlite

// Per-topic retention, PurgeTopic and DeleteTopic: logical retention.
// Segments are shared by every topic, so a topic's own limits
// (TopicConfig.RetentionAge and RetentionBytes) and a purge do not delete
// files: they raise the first offset of each of the topic's queues that a
// reader may see (retainedMin). Consumers, ReadQueue, Messages, MinOffset
// and lag all start there. A segment is deleted once every queue of every
// topic has moved past it (retention.go), or by the store's Retention.
//
// A purge's floors (per queue: offsets below are gone) and a deletion in
// progress live in config/floors.json (framed by cfgfile: magic, version,
// CRC32-C), written atomically. DeleteTopic writes its record with
// Deleting set first: that write is the deletion's commit point; it then
// removes the topic from the registry and the groups' offsets on it, and
// clears the mark. Open finishes a deletion a crash interrupted, so a
// crash at any file operation leaves the old state or the new one.

import (
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/mqlite/mqlite/consumequeue"
	"github.com/mqlite/mqlite/internal/cfgfile"
	"github.com/mqlite/mqlite/internal/errs"
	"github.com/mqlite/mqlite/message"
	"github.com/mqlite/mqlite/topic"
)

const (
	floorsFile    = "floors.json"
	floorsMagic   = 0x4D51464C // "MQFL"
	floorsVersion = 1
)

// topicFloor is one topic's record in floorsFile.
type topicFloor struct {
	// Floors holds, per queue, the first offset a purge left.
	Floors []int64 `json:"floors"`
	// Deleting marks a DeleteTopic that has committed but may not have
	// finished.
	Deleting bool `json:"deleting,omitempty"`
}

// retainState is the store's logical retention.
type retainState struct {
	mu     sync.Mutex // serialises PurgeTopic, DeleteTopic and the file
	floors atomic.Pointer[map[string]topicFloor]

	cacheMu sync.Mutex
	cache   map[retainKey]*retainCache
}

type retainKey struct {
	topic string
	queue int
}

// retainCache is a queue's retained start as last computed, with the
// bytes stored in [floor, upto) for the size bound.
type retainCache struct{ floor, upto, bytes int64 }

// loadFloors reads floorsFile.
func (s *Store) loadFloors() error {
	m := map[string]topicFloor{}
	if _, err := cfgfile.Read(s.fs, s.path(configDir), floorsFile, floorsMagic, floorsVersion, &m); err != nil {
		return err
	}
	for name, f := range m {
		for _, v := range f.Floors {
			if v < 0 {
				return errs.Corrupt(filepath.Join(s.path(configDir), floorsFile), cfgfile.HeaderSize, "topic %q: negative floor %d", name, v)
			}
		}
	}
	s.retain.floors.Store(&m)
	s.retain.cache = map[retainKey]*retainCache{}
	return nil
}

// finishDeletes completes the deletions a crash interrupted (Open).
func (s *Store) finishDeletes() error {
	for name, f := range *s.retain.floors.Load() {
		if f.Deleting {
			if err := s.completeDelete(name); err != nil {
				return fmt.Errorf("mqlite: finish deleting topic %q: %w", name, err)
			}
		}
	}
	return nil
}

// saveFloors persists m and publishes it (retain.mu held).
func (s *Store) saveFloors(m map[string]topicFloor) error {
	if err := cfgfile.Write(s.fs, s.path(configDir), floorsFile, floorsMagic, floorsVersion, m); err != nil {
		return err
	}
	s.retain.floors.Store(&m)
	return nil
}

// PurgeTopic removes every message stored in the topic so far, logically:
// its queues start at their current ends, for consumers, reads and lag,
// and a group resumes there. The records go when retention deletes their
// segments. It returns ErrTopicNotFound for an unknown topic and
// ErrInvalidTopic for a system topic; it is crash-safe (one atomic file
// write).
func (s *Store) PurgeTopic(name string) error {
	if err := s.writable("purge topic"); err != nil {
		return err
	}
	if topic.IsSystem(name) {
		return fmt.Errorf("mqlite: purge topic %q: %w: a system topic", name, message.ErrInvalidTopic)
	}
	c, err := s.topics.Get(name)
	if err != nil {
		return fmt.Errorf("mqlite: purge topic: %w", err)
	}
	s.retain.mu.Lock()
	defer s.retain.mu.Unlock()
	m := maps.Clone(*s.retain.floors.Load())
	m[name] = topicFloor{Floors: s.queueEnds(name, c.Queues, m[name].Floors)}
	return s.saveFloors(m)
}

// queueEnds is the next offset of each queue of a topic, taken under the
// append lock so that every message stored before is below it, and never
// below old's floors.
func (s *Store) queueEnds(name string, queues int, old []int64) []int64 {
	ends := make([]int64, max(queues, len(old)))
	s.log.Locked(func() {
		if e := s.queues[name]; e != nil {
			copy(ends, e.next)
		}
	})
	for q := range ends {
		if q < len(old) {
			ends[q] = max(ends[q], old[q])
		}
	}
	return ends
}

// DeleteTopic removes a user topic: its messages (logically, as
// PurgeTopic), its registration (sends fail, or auto-create it afresh,
// continuing after the old queue offsets), and every group's committed
// offsets on it. Delayed messages already waiting for it are delivered
// to it if it exists again by then. It is crash-safe: after a crash at
// any step, Open finds the topic as it was or finishes the deletion.
func (s *Store) DeleteTopic(name string) error {
	if err := s.writable("delete topic"); err != nil {
		return err
	}
	c, err := s.topics.Get(name)
	if err != nil {
		return fmt.Errorf("mqlite: delete topic: %w", err)
	}
	if topic.IsSystem(name) {
		return fmt.Errorf("mqlite: delete topic %q: it is a system topic: %w", name, errs.ErrInvalidArgument)
	}
	s.retain.mu.Lock()
	defer s.retain.mu.Unlock()
	m := maps.Clone(*s.retain.floors.Load())
	m[name] = topicFloor{Floors: s.queueEnds(name, c.Queues, m[name].Floors), Deleting: true}
	if err := s.saveFloors(m); err != nil {
		return err
	}
	return s.completeDelete(name)
}

// completeDelete is DeleteTopic after its commit point (retain.mu held,
// or Open): idempotent.
func (s *Store) completeDelete(name string) error {
	if err := s.topics.Delete(name); err != nil && !errors.Is(err, errs.ErrTopicNotFound) {
		return err
	}
	if err := s.consumers().ForgetTopic(name); err != nil {
		return err
	}
	s.consumers().TopicsChanged()
	m := maps.Clone(*s.retain.floors.Load())
	f := m[name]
	f.Deleting = false
	m[name] = f
	return s.saveFloors(m)
}

// retainedMin is the first offset of a queue a reader may see: its stored
// minimum, raised by a purge and by the topic's own retention.
func (s *Store) retainedMin(name string, queue int, q *consumequeue.Queue) (int64, error) {
	lo := q.MinOffset()
	if fl := s.retain.floors.Load(); fl != nil && len(*fl) > 0 {
		if f, ok := (*fl)[name]; ok && queue < len(f.Floors) {
			lo = max(lo, min(f.Floors[queue], q.MaxOffset()))
		}
	}
	age, bytes := s.topics.Retention(name)
	if age == 0 && bytes == 0 {
		return lo, nil
	}
	return s.ownRetention(retainKey{name, queue}, q, lo, age.Milliseconds(), bytes)
}

// ownRetention raises lo past the messages older than ageMs and past the
// oldest ones beyond bytes stored bytes, from the queue's cached state.
func (s *Store) ownRetention(k retainKey, q *consumequeue.Queue, lo, ageMs, bytes int64) (int64, error) {
	s.retain.cacheMu.Lock()
	defer s.retain.cacheMu.Unlock()
	c := s.retain.cache[k]
	if c == nil {
		c = &retainCache{floor: lo, upto: lo}
		s.retain.cache[k] = c
	}
	hi := q.MaxOffset()
	lo = max(lo, c.floor)
	if ageMs > 0 && lo < hi {
		t, err := s.firstYounger(q, lo, hi, s.nowMs()-ageMs)
		if err != nil {
			return 0, err
		}
		lo = t
	}
	if bytes > 0 {
		if err := s.sizeFloor(c, q, lo, hi, bytes); err != nil {
			return 0, err
		}
		lo = max(lo, c.floor)
	}
	c.floor = lo
	return lo, nil
}

// firstYounger is the first offset in [lo, hi) whose message was stored
// at or after cutoffMs (hi if none): one read when lo's is, a binary
// search otherwise.
func (s *Store) firstYounger(q *consumequeue.Queue, lo, hi, cutoffMs int64) (int64, error) {
	msAt := func(off int64) (int64, error) {
		e, err := q.Get(off)
		if err != nil {
			return 0, err
		}
		return s.storeMsOf(e)
	}
	ms, err := msAt(lo)
	if err != nil || ms >= cutoffMs {
		return lo, err
	}
	for lo++; lo < hi; {
		mid := lo + (hi-lo)/2
		ms, err := msAt(mid)
		if err != nil {
			return 0, err
		}
		if ms < cutoffMs {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo, nil
}

// sizeFloor keeps c.bytes the stored bytes of [c.floor, hi), lo first
// raising c.floor, and moves c.floor on while they exceed limit. Each
// entry is read at most twice in its life (added, dropped).
func (s *Store) sizeFloor(c *retainCache, q *consumequeue.Queue, lo, hi, limit int64) error {
	var buf [256]consumequeue.Entry
	sum := func(from, to int64) (int64, error) {
		var n int64
		for from < to {
			k, err := q.Read(from, buf[:min(int64(len(buf)), to-from)])
			for _, e := range buf[:k] {
				n += int64(e.Size)
			}
			if k == 0 {
				return n, err
			}
			from += int64(k)
		}
		return n, nil
	}
	if lo > c.floor {
		if lo >= c.upto {
			c.upto, c.bytes = lo, 0
		} else {
			gone, err := sum(c.floor, lo)
			if err != nil {
				return err
			}
			c.bytes -= gone
		}
		c.floor = lo
	}
	if hi > c.upto {
		added, err := sum(c.upto, hi)
		if err != nil {
			return err
		}
		c.bytes += added
		c.upto = hi
	}
	for c.bytes > limit && c.floor < c.upto {
		e, err := q.Get(c.floor)
		if err != nil {
			return err
		}
		c.bytes -= int64(e.Size)
		c.floor++
	}
	return nil
}

// checkRetained refuses a read from below the queue's retained start,
// as one from below its stored minimum: ErrNotFound.
func (s *Store) checkRetained(name string, queue int, q *consumequeue.Queue, from int64) error {
	lo, err := s.retainedMin(name, queue, q)
	if err != nil {
		return err
	}
	if from < lo {
		return fmt.Errorf("mqlite: offset %d below the queue's minimum %d: %w", from, lo, errs.ErrNotFound)
	}
	return nil
}

// freedBelow is the CommitLog offset below which no queue retains a
// message any more (every queue's retained start lies past it), when some
// topic has a retention of its own or a purge; -1 otherwise, or while a
// transaction is pending (its half message may lie anywhere). Retention
// may delete the segments below it before their age.
func (s *Store) freedBelow() int64 {
	own := len(*s.retain.floors.Load()) > 0
	for _, t := range s.topics.Topics() {
		own = own || t.Config.RetentionAge > 0 || t.Config.RetentionBytes > 0
	}
	if !own || s.PendingTransactions() > 0 {
		return -1
	}
	lowest := s.disp.dispatched()
	for _, id := range s.disp.cq.Queues() {
		q, err := s.disp.cq.Queue(id.Topic, id.ID, false)
		if err != nil {
			return -1
		}
		lo, err := s.retainedMin(id.Topic, id.ID, q)
		if err != nil {
			return -1
		}
		if lo < q.MaxOffset() {
			e, err := q.Get(lo)
			if err != nil {
				return -1
			}
			lowest = min(lowest, e.Offset)
		}
	}
	return lowest
}

// hiddenByRetention reports that m, read by its ID or a key, lies below
// its queue's retained start: a purge, a deletion or its topic's own
// retention hid it from readers while its segment is still on disk. Such a
// message is not found, as it would not be once its segment is gone.
func (s *Store) hiddenByRetention(m *MessageExt) (bool, error) {
	var floored bool
	if fl := s.retain.floors.Load(); fl != nil {
		_, floored = (*fl)[m.Topic]
	}
	age, bytes := s.topics.Retention(m.Topic)
	if (!floored && age == 0 && bytes == 0) || m.QueueOffset < 0 {
		return false, nil
	}
	q, err := s.disp.cq.Queue(m.Topic, m.QueueID, false)
	if errors.Is(err, consumequeue.ErrNotFound) {
		return floored, nil // a deleted topic's queue
	}
	if err != nil {
		return false, err
	}
	lo, err := s.retainedMin(m.Topic, m.QueueID, q)
	if err != nil {
		return false, err
	}
	return m.QueueOffset < lo, nil
}
