package mqlite

import (
	"fmt"
	"sync"

	"github.com/mqlite/mqlite/commitlog"
	"github.com/mqlite/mqlite/message"
)

// batchScratch is the working memory of one PutBatch: its jobs, by value
// in one slice, and the CommitLog's view of them. It is pooled, so that a
// batch allocates only the results it returns.
type batchScratch struct {
	jobs []putJob
	apps []commitlog.Appender
}

// maxPooledBatch bounds the jobs a pooled scratch keeps: a rare huge
// batch does not pin its memory.
const maxPooledBatch = 4096

var batchScratches = sync.Pool{New: func() any { return new(batchScratch) }}

// getBatch returns a scratch with n jobs of s, ready to fill.
func (s *Store) getBatch(n int) *batchScratch {
	b := batchScratches.Get().(*batchScratch)
	if cap(b.jobs) < n {
		b.jobs = make([]putJob, n)
		b.apps = make([]commitlog.Appender, n)
	}
	b.jobs, b.apps = b.jobs[:n], b.apps[:n]
	for i := range b.jobs {
		b.jobs[i].s = s
		b.apps[i] = &b.jobs[i]
	}
	return b
}

// putBatchScratch drops b's references to messages and the store and
// pools it.
func (s *Store) putBatchScratch(b *batchScratch) {
	if cap(b.jobs) > maxPooledBatch {
		return
	}
	for i := range b.jobs {
		b.jobs[i].m, b.jobs[i].s = nil, nil
	}
	clear(b.apps)
	batchScratches.Put(b)
}

// prepareBatch checks msgs for a put to queue and fills b's jobs: one
// clock read for the batch, and the queue checked once per run of
// messages to the same topic.
func (s *Store) prepareBatch(b *batchScratch, msgs []*Message, queue int, validated bool) error {
	nowMs := s.nowMs()
	checked := "" // the topic whose queue was checked last
	for i, m := range msgs {
		if m != nil && (m.DelayLevel > 0 || !m.DeliverAt.IsZero()) {
			return fmt.Errorf("mqlite: batch message %d: delayed messages cannot be batched: %w", i, message.ErrInvalidDelay)
		}
		c := putCheck{validated: validated}
		if m != nil && i > 0 && m.Topic == checked {
			c.resolved = true
		}
		if err := s.checkPut(m, queue, c, nil, nowMs); err != nil {
			return fmt.Errorf("mqlite: batch message %d: %w", i, err)
		}
		checked = m.Topic
		b.jobs[i].fill(m, queue, nil, nowMs)
	}
	return nil
}
