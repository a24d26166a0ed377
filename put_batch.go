package mqlite

import (
	"context"
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

// PutBatchInto is PutBatch returning the results in dst's memory when
// cap(dst) >= len(msgs) (as dst[:len(msgs)], overwritten), else in a new
// slice: a sender that passes the previous batch's results back in
// allocates nothing per batch, which spares the garbage collector a
// result (112 bytes) per message. The results must not be used after
// being passed in again. With send hooks or messages carrying a DedupID
// it is PutBatch followed by a copy.
func (s *Store) PutBatchInto(ctx context.Context, msgs []*Message, queue int, dst []PutResult) ([]PutResult, error) {
	if s == nil || s.hooks.h.Sends() || (s.dedup != nil && anyDedupID(msgs)) {
		res, err := s.PutBatch(ctx, msgs, queue)
		if res == nil {
			return nil, err
		}
		out := resultsFor(dst, len(res))
		copy(out, res)
		return out, err
	}
	if err := s.enter(ctx, "put batch"); err != nil {
		return nil, err
	}
	res, err := s.appendBatchInto(ctx, msgs, queue, false, dst)
	if err != nil {
		return nil, err
	}
	return res, s.awaitDurable(ctx, res[len(res)-1].End())
}

// resultsFor returns n results in dst's memory if it has room, else new.
func resultsFor(dst []PutResult, n int) []PutResult {
	if cap(dst) >= n {
		return dst[:n]
	}
	return make([]PutResult, n)
}
