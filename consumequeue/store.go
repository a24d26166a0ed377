package consumequeue

import (
	"cmp"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"sync"

	"github.com/mqlite/mqlite/internal/errs"
	"github.com/mqlite/mqlite/vfs"
)

// MaxTopicLen is the longest topic name a Store accepts.
const MaxTopicLen = 255

// maxQueueID bounds queue ids (RocketMQ's are Java ints).
const maxQueueID = 1<<31 - 1

// QueueID names a queue in a Store.
type QueueID struct {
	Topic string
	ID    int
}

// Store manages the queues under one root directory, laid out as
// {root}/{topic}/{queueId}/ (mqlite uses {data}/consumequeue as the root). It
// is safe for concurrent use; each Queue keeps its own single-writer rule.
type Store struct {
	opts Options // defaults applied; Dir is the root

	mu struct {
		sync.RWMutex
		queues map[QueueID]*Queue
		closed bool
	}
}

// OpenStore opens (creating if needed) the root opts.Dir and opens every
// {topic}/{queueId} directory in it, with opts (Dir aside) applied to each
// queue. Entries with other names are ignored and logged. If any queue fails
// to open, the ones opened are closed and the error is returned.
func OpenStore(opts Options) (*Store, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	s := &Store{opts: o}
	s.mu.queues = map[QueueID]*Queue{}
	if !o.ReadOnly {
		if err := o.FS.MkdirAll(o.Dir, 0o700); err != nil {
			return nil, fmt.Errorf("mqlite/consumequeue: open store %s: %w", o.Dir, errs.Disk(err))
		}
	}
	err = s.eachDir(func(topic string, id int) error {
		q, err := s.openQueue(topic, id, false)
		if err != nil {
			return err
		}
		s.mu.queues[QueueID{topic, id}] = q
		return nil
	})
	if err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// eachDir calls fn for every {topic}/{queueId} directory under the root,
// logging and skipping other entries. A read-only Store takes a missing
// root for an empty one.
func (s *Store) eachDir(fn func(topic string, id int) error) error {
	o := s.opts
	topics, err := o.FS.ReadDir(o.Dir)
	if o.ReadOnly && errors.Is(err, vfs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("mqlite/consumequeue: open store %s: %w", o.Dir, errs.Disk(err))
	}
	for _, topic := range topics {
		tdir := filepath.Join(o.Dir, topic)
		if _, isDir, err := o.FS.Stat(tdir); err != nil || !isDir || checkTopic(topic) != nil {
			o.Logger.Warn("consumequeue: ignoring entry in store root", "path", tdir)
			continue
		}
		ids, err := o.FS.ReadDir(tdir)
		if err != nil {
			return fmt.Errorf("mqlite/consumequeue: open store: list %s: %w", tdir, errs.Disk(err))
		}
		for _, name := range ids {
			qdir := filepath.Join(tdir, name)
			id, ok := parseQueueID(name)
			if _, isDir, err := o.FS.Stat(qdir); err != nil || !isDir || !ok {
				o.Logger.Warn("consumequeue: ignoring entry in topic directory", "path", qdir)
				continue
			}
			if err := fn(topic, id); err != nil {
				return err
			}
		}
	}
	return nil
}

// openQueue opens the queue (topic, id). With create, a queue whose
// directory does not exist is returned lazy: empty, and with nothing on
// disk until its first entry (a read-only one stays empty until CatchUp
// finds its directory).
func (s *Store) openQueue(topic string, id int, create bool) (*Queue, error) {
	o := s.opts
	o.Dir = filepath.Join(s.opts.Dir, topic, strconv.Itoa(id))
	if create {
		if o.ReadOnly {
			return lazyQueue(o), nil
		}
		if _, _, err := o.FS.Stat(o.Dir); errors.Is(err, vfs.ErrNotExist) {
			return lazyQueue(o), nil
		}
	}
	return Open(o)
}

// Queue returns the queue (topic, id). If it does not exist, it is created
// when create is set, else the error matches ErrNotFound. A created queue
// makes its directory only with its first entry: a queue that is only
// read, or waited on, leaves nothing on disk (and a read-only Store's
// stays empty). A bad topic name or id is ErrInvalidArgument. The Store
// owns the Queue: do not Close it.
func (s *Store) Queue(topic string, id int, create bool) (*Queue, error) {
	key := QueueID{topic, id}
	s.mu.RLock()
	q, ok := s.mu.queues[key]
	closed := s.mu.closed
	s.mu.RUnlock()
	switch {
	case closed:
		return nil, fmt.Errorf("mqlite/consumequeue: queue %s/%d: %w", topic, id, ErrClosed)
	case ok:
		return q, nil
	}
	if err := checkTopic(topic); err != nil {
		return nil, err
	}
	if id < 0 || id > maxQueueID {
		return nil, fmt.Errorf("mqlite/consumequeue: queue id %d outside [0, %d]: %w", id, maxQueueID, ErrInvalidArgument)
	}
	if !create {
		return nil, fmt.Errorf("mqlite/consumequeue: queue %s/%d: %w", topic, id, ErrNotFound)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closed {
		return nil, fmt.Errorf("mqlite/consumequeue: queue %s/%d: %w", topic, id, ErrClosed)
	}
	if q, ok := s.mu.queues[key]; ok {
		return q, nil
	}
	q, err := s.openQueue(topic, id, true)
	if err != nil {
		return nil, err
	}
	s.mu.queues[key] = q
	return q, nil
}

// Queues lists the open queues that exist on disk (not the ones created
// by Queue that got no entry yet), sorted by topic and id.
func (s *Store) Queues() []QueueID {
	s.mu.RLock()
	ids := make([]QueueID, 0, len(s.mu.queues))
	for id, q := range s.mu.queues {
		if !q.isLazy() {
			ids = append(ids, id)
		}
	}
	s.mu.RUnlock()
	slices.SortFunc(ids, func(a, b QueueID) int {
		return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.ID, b.ID))
	})
	return ids
}

// each runs fn on every queue (in Queues order) and joins the errors.
func (s *Store) each(fn func(QueueID, *Queue) error) error {
	s.mu.RLock()
	closed := s.mu.closed
	s.mu.RUnlock()
	if closed {
		return fmt.Errorf("mqlite/consumequeue: store %s: %w", s.opts.Dir, ErrClosed)
	}
	var errList []error
	for _, id := range s.Queues() {
		s.mu.RLock()
		q := s.mu.queues[id]
		s.mu.RUnlock()
		if q == nil {
			continue
		}
		if err := fn(id, q); err != nil {
			errList = append(errList, err)
		}
	}
	return errors.Join(errList...)
}

// Flush flushes every queue.
func (s *Store) Flush() error {
	return s.each(func(_ QueueID, q *Queue) error { return q.Flush() })
}

// MaxPhysEnd returns the largest MaxPhysEnd over all queues: how far the
// CommitLog has been dispatched into any queue (0 if none).
func (s *Store) MaxPhysEnd() int64 {
	var end int64
	s.each(func(_ QueueID, q *Queue) error {
		end = max(end, q.MaxPhysEnd())
		return nil
	})
	return end
}

// RepairedPhysEnd returns the smallest MaxPhysEnd over the queues that Open
// repaired (Queue.Repaired), and whether there is one: re-dispatching the
// CommitLog from there restores every entry recovery dropped. Queues with
// no entry left count 0.
func (s *Store) RepairedPhysEnd() (end int64, ok bool) {
	s.each(func(_ QueueID, q *Queue) error {
		if q.Repaired() && (!ok || q.MaxPhysEnd() < end) {
			end, ok = q.MaxPhysEnd(), true
		}
		return nil
	})
	return end, ok
}

// Rebuilt tells the Store that re-dispatch has rebuilt the queues Open
// repaired. A repaired queue still without a data file (the CommitLog
// holds no record of it) gets its first one, empty, at its end: else the
// next Open would find a meta file without data files again, and repair
// it (from the CommitLog's start) once more, and every Open after it.
func (s *Store) Rebuilt() error {
	return s.each(func(_ QueueID, q *Queue) error {
		if !q.Repaired() {
			return nil
		}
		return q.ensureFile()
	})
}

// TruncateAfterPhys calls TruncateAfterPhys(end) on every queue.
func (s *Store) TruncateAfterPhys(end int64) error {
	return s.each(func(_ QueueID, q *Queue) error { return q.TruncateAfterPhys(end) })
}

// DeleteBelowPhys calls DeleteBelowPhys(minPhys) on every queue and returns
// the total number of files removed.
func (s *Store) DeleteBelowPhys(minPhys int64) (int, error) {
	total := 0
	err := s.each(func(_ QueueID, q *Queue) error {
		n, err := q.DeleteBelowPhys(minPhys)
		total += n
		return err
	})
	return total, err
}

// Close closes every queue. It is idempotent; afterwards Queue and the
// other calls return ErrClosed.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.mu.closed {
		s.mu.Unlock()
		return nil
	}
	s.mu.closed = true
	queues := s.mu.queues
	s.mu.Unlock()
	var errList []error
	for _, q := range queues {
		if err := q.Close(); err != nil {
			errList = append(errList, err)
		}
	}
	return errors.Join(errList...)
}

// checkTopic reports whether topic is a valid topic name: 1 to MaxTopicLen
// characters from [A-Za-z0-9_%|-], safe as a directory name.
func checkTopic(topic string) error {
	if len(topic) == 0 || len(topic) > MaxTopicLen {
		return fmt.Errorf("mqlite/consumequeue: topic name of %d bytes, want 1 to %d: %w", len(topic), MaxTopicLen, ErrInvalidArgument)
	}
	for i := 0; i < len(topic); i++ {
		c := topic[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '%' || c == '|' || c == '-') {
			return fmt.Errorf("mqlite/consumequeue: topic %q: character %q not in [A-Za-z0-9_%%|-]: %w", topic, c, ErrInvalidArgument)
		}
	}
	return nil
}

// parseQueueID parses a queue directory name: a canonical decimal id.
func parseQueueID(name string) (int, bool) {
	id, err := strconv.Atoi(name)
	if err != nil || id < 0 || id > maxQueueID || strconv.Itoa(id) != name {
		return 0, false
	}
	return id, true
}
