package mqlite

import (
	"errors"
	"strconv"

	"github.com/mqlite/mqlite/consumequeue"
	"github.com/mqlite/mqlite/internal/errs"
)

// Queue marks: the checkpoint keeps every queue's entry count, so that
// Open can tell a queue that lost its directory or its last files (a
// ConsumeQueue holding fewer entries than the checkpoint counted, while
// the CommitLog still holds every record the checkpoint had dispatched)
// from one that never had them, and rebuild it from the CommitLog. Without
// them such a queue came back short or empty, its next puts took queue
// offsets its records already had, and with the topic registry lost too
// the topic came back with too few queues (found by FuzzOpenCorruptedDir:
// rmdir consumequeue/orders/1 and topics.json moved away).

// marksAndDispatched returns the queue marks and the dispatched offset
// they belong to. The queues are listed first; their ends are read
// together with the offset while no dispatch runs, so every entry a mark
// counts points below it. A queue created in between has no mark, and is
// not checked by the next Open.
func (s *Store) marksAndDispatched() ([]queueMark, int64) {
	d := s.disp
	ids := d.cq.Queues() // sorted by topic and id
	qs := make([]*consumequeue.Queue, 0, len(ids))
	marks := make([]queueMark, 0, len(ids))
	for _, id := range ids {
		if q, err := d.cq.Queue(id.Topic, id.ID, false); err == nil { // else closed: Close writes no checkpoint from here
			qs = append(qs, q)
			marks = append(marks, queueMark{QueueID: id})
		}
	}
	d.run.Lock()
	defer d.run.Unlock()
	for i, q := range qs {
		marks[i].next = q.MaxOffset()
	}
	return marks, d.dispatched()
}

func compareQueueIDs(a, b consumequeue.QueueID) int {
	switch {
	case a.Topic < b.Topic:
		return -1
	case a.Topic > b.Topic:
		return 1
	}
	return a.ID - b.ID
}

// marksTrusted reports whether the checkpoint's marks can be held against
// the ConsumeQueue: they exist, and the CommitLog still holds every record
// they count (a crash that lost the log's tail lost those entries too).
func marksTrusted(cp checkpoint, cpOK bool, end int64) bool {
	return cpOK && cp.marks != nil && end >= cp.marksAt
}

// queueBelowMarks names a queue that holds fewer entries than the
// checkpoint counted, if there is one; with skipRepaired, not one that
// recovery repaired (its re-dispatch starts from where it ends).
func (s *Store) queueBelowMarks(cq *consumequeue.Store, marks []queueMark, skipRepaired bool) (string, bool) {
	for _, m := range marks {
		q, err := cq.Queue(m.Topic, m.ID, false)
		switch {
		case errors.Is(err, errs.ErrNotFound):
			if m.next > 0 {
				return m.String(), true // the directory is gone
			}
		case err != nil, skipRepaired && q.Repaired():
		case q.MaxOffset() < m.next:
			return m.String(), true
		}
	}
	return "", false
}

// queueEntries returns a queue's next offset, 0 for a queue with no
// directory; false for a name the ConsumeQueue refuses.
func queueEntries(cq *consumequeue.Store, id consumequeue.QueueID) (int64, bool) {
	q, err := cq.Queue(id.Topic, id.ID, false)
	switch {
	case err == nil:
		return q.MaxOffset(), true
	case errors.Is(err, errs.ErrNotFound):
		return 0, true
	}
	return 0, false
}

// keepMarkedOffsets moves each queue still below its mark after a full
// re-dispatch on to the mark (consumequeue.Queue.Restart), so that queue
// offsets never go back: the records of its missing entries are below the
// CommitLog's start (retention took them while their queue's files were
// gone), or the queue has none at all. A queue that still holds entries
// cannot be moved on (a gap inside a queue): it is logged and left; its
// next puts take offsets it handed out before.
func (s *Store) keepMarkedOffsets(cq *consumequeue.Store, marks []queueMark) error {
	for _, m := range marks {
		n, ok := queueEntries(cq, m.QueueID)
		if !ok || n >= m.next {
			continue
		}
		q, err := cq.Queue(m.Topic, m.ID, true)
		if err != nil {
			return err
		}
		if q.MinOffset() < q.MaxOffset() {
			s.opts.Logger.Error("mqlite: a queue holds fewer entries than the checkpoint counted, and the CommitLog has no more; its next puts take offsets it handed out before",
				"queue", m.String(), "entries", n, "counted", m.next)
			continue
		}
		if err := q.Restart(m.next); err != nil {
			return err
		}
		s.opts.Logger.Warn("mqlite: a queue lost its files and the records they pointed to; it goes on from the offset the checkpoint counted",
			"queue", m.String(), "next", m.next)
	}
	return nil
}

// String names the queue as topic/id.
func (m queueMark) String() string { return m.QueueID.Topic + "/" + strconv.Itoa(m.ID) }
