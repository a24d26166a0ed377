package mqlite

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/mqlite/mqlite/commitlog"
	"github.com/mqlite/mqlite/consumequeue"
	"github.com/mqlite/mqlite/internal/errs"
	"github.com/mqlite/mqlite/message"
)

// MaxKeyResults caps MessagesByKey, as RocketMQ's maxMsgsNumBatch does.
const MaxKeyResults = 64

func (s *Store) cqueue(topic string, queue int) (*consumequeue.Queue, error) {
	if s.closed.Load() {
		return nil, errs.ErrClosed
	}
	if err := message.ValidateTopic(topic, message.MaxSysTopicLen); err != nil {
		return nil, err
	}
	n := s.topics.Queues(topic)
	if n == 0 {
		return nil, fmt.Errorf("mqlite: topic %q: %w", topic, errs.ErrTopicNotFound)
	}
	if queue < 0 || queue >= n {
		return nil, fmt.Errorf("mqlite: queue id %d outside [0, %d) of topic %q: %w", queue, n, topic, errs.ErrInvalidArgument)
	}
	q, err := s.disp.cq.Queue(topic, queue, true)
	if err != nil {
		return nil, err
	}
	return q, nil
}

// MinOffset is the first logical offset of the queue still stored and
// retained: below it, retention removed the messages, or the topic's own
// retention (TopicConfig) or a PurgeTopic hides them.
func (s *Store) MinOffset(topic string, queue int) (int64, error) {
	q, err := s.cqueue(topic, queue)
	if err != nil {
		return 0, err
	}
	return s.retainedMin(topic, queue, q)
}

// MaxOffset is the next logical offset of the queue (one past the last
// message visible to readers).
func (s *Store) MaxOffset(topic string, queue int) (int64, error) {
	q, err := s.cqueue(topic, queue)
	if err != nil {
		return 0, err
	}
	return q.MaxOffset(), nil
}

// entryFilter is the part of a subscription's filter the read path uses
// (consumer.Filter); nil accepts every message.
type entryFilter interface {
	MatchCode(tagsCode uint32) bool
	Match(m *message.Message) bool
}

// batches keeps what is left of the blocks reads decode messages into, for
// the next reads: a Batch hands out each byte once, so its remainder may
// serve anyone.
var batches sync.Pool

// readChunk is how many entries readEntries reads under one pin of the
// CommitLog.
const readChunk = 64

// readEntries reads the messages that ents, the entries at logical offsets
// from, from+1, ..., point at, skipping those f rejects (by the tags hash
// without reading, then exactly). Each record is verified (frame, CRC32-C,
// payload lengths) and checked to be the one its entry claims (topic,
// queue, offset, size), so a damaged index can never deliver another
// message. The records are read under one pin per readChunk entries and
// decoded into a pooled message.Batch, or into pool's recycled blocks when
// pool is not nil (a message the filter rejects is released at once; the
// caller releases the others). It returns the messages and the number
// of entries examined: len(ents), or on error the index of the entry that
// failed (the messages before it are returned).
func (s *Store) readEntries(topic string, queue int, from int64, ents []consumequeue.Entry, f entryFilter, pool *message.Pool) ([]*MessageExt, int, error) {
	k := 0
	for _, e := range ents {
		if f == nil || f.MatchCode(e.TagsCode) {
			k++
		}
	}
	if k == 0 {
		return nil, len(ents), nil
	}
	out := make([]*MessageExt, 0, k)
	var batch *message.Batch
	if pool != nil {
		batch = pool.Get()
		defer pool.Put(batch)
	} else {
		batch, _ = batches.Get().(*message.Batch)
		if batch == nil {
			batch = new(message.Batch)
		}
		defer batches.Put(batch)
	}
	read := 0
	defer func() { s.metrics.gets.Add(int64(read)) }()
	var offs [readChunk]int64
	var at [readChunk]int // offs[j] is the record of ents[at[j]]
	for done := 0; done < len(ents); {
		end := min(done+readChunk, len(ents))
		c := 0
		for i := done; i < end; i++ {
			if f == nil || f.MatchCode(ents[i].TagsCode) {
				offs[c], at[c] = ents[i].Offset, i
				c++
			}
		}
		n, err := s.log.ReadMany(offs[:c], func(j int, r commitlog.Record) error {
			i := at[j]
			m, err := s.decodeEntry(batch, topic, queue, from+int64(i), ents[i], r)
			if err != nil {
				return err
			}
			if f == nil || f.Match(&m.Message) {
				out = append(out, m)
			} else {
				message.Release(m)
			}
			return nil
		})
		read += n
		if err != nil {
			i := at[n]
			return out, i, s.entryReadErr(topic, queue, from+int64(i), ents[i].Offset, err)
		}
		done = end
	}
	return out, len(ents), nil
}

// decodeEntry decodes the record r an entry at logical points at into
// batch, and checks that it is the record the entry claims.
func (s *Store) decodeEntry(batch *message.Batch, topic string, queue int, logical int64, e consumequeue.Entry, r commitlog.Record) (*MessageExt, error) {
	m, err := batch.DecodeAt(r.Payload, r.Offset)
	if err != nil {
		return nil, s.corruptRecord(r.Offset, "%v", err)
	}
	if m.Topic != topic || int(m.QueueID) != queue || m.QueueOffset != logical || r.Size != int(e.Size) {
		return nil, s.corruptEntry(topic, queue, logical, "entry points at commitlog offset %d, which holds %s/%d@%d, not this queue's",
			r.Offset, m.Topic, m.QueueID, m.QueueOffset)
	}
	if err := message.Inflate(&m.Message, s.opts.MaxMessageSize); err != nil {
		return nil, s.corruptRecord(r.Offset, "%v", err)
	}
	m.CommitLogOffset = r.Offset
	m.StoreSize = int32(r.Size)
	return m, nil
}

// corruptEntry is an ErrCorrupt for the ConsumeQueue entry at logical
// offset logical of the queue, naming its file and its position there.
func (s *Store) corruptEntry(topic string, queue int, logical int64, format string, args ...any) error {
	q, err := s.disp.cq.Queue(topic, queue, false)
	if err != nil {
		return errs.Corrupt(filepath.Join(s.path("consumequeue"), topic, strconv.Itoa(queue)), logical*consumequeue.EntrySize, format, args...)
	}
	path, off := q.Locate(logical)
	return errs.Corrupt(path, off, format, args...)
}

// MaxReadBytes bounds the records one ReadQueue returns (their store
// sizes), as RocketMQ bounds a pull served from memory
// (maxTransferBytesOnMessageInMemory): a call returns at least one message
// however large, and no more once the next would pass the bound.
const MaxReadBytes = 256 << 10

// removedByRetention reports that reading the record at off failed
// because retention removed it: an IndexFile outlives the first records it
// names, so key lookups meet such offsets and skip them.
func (s *Store) removedByRetention(off int64, err error) bool {
	return errors.Is(err, errs.ErrNotFound) && off < s.log.MinOffset()
}

// entryReadErr is err, the failed read of commitlog offset off that the
// entry at logical offset logical of the queue points at. ErrNotFound
// there, unless retention removed the record, means the entry points at
// no record (zeros, an end-of-segment marker, the inside of another
// record; not past the log's end, which a read-only view meets): the log
// or the entry is damaged, an ErrCorrupt naming the
// entry, which a consumer may skip (SkipDamaged), not a missing message
// to wait for.
func (s *Store) entryReadErr(topic string, queue int, logical, off int64, err error) error {
	if !errors.Is(err, errs.ErrNotFound) || s.removedByRetention(off, err) || off >= s.log.WrotePosition() {
		return err
	}
	return s.corruptEntry(topic, queue, logical, "entry points at commitlog offset %d, where no record starts: %v", off, err)
}

// ReadQueue returns up to max messages of the queue from logical offset
// from (at most 256 a call, and MaxReadBytes of records). When none is
// there yet it blocks until one arrives (the dispatcher wakes it at once,
// no polling), ctx ends, or the store closes: from may be the next offset
// the queue will assign (the long poll), or one a Put returned that is
// not visible yet. A from past the next offset the queue will assign
// fails at once with ErrOffsetOutOfRange (a read-only Store, which cannot
// know the writer's next offset, waits instead); one below the queue's
// MinOffset, negative ones included, with ErrNotFound. A record that
// cannot be read (ErrCorrupt, naming its file and offset) ends the call:
// the messages before it are returned with the error.
func (s *Store) ReadQueue(ctx context.Context, topic string, queue int, from int64, max int) ([]*MessageExt, error) {
	if err := s.enter(ctx, "read queue"); err != nil {
		return nil, err
	}
	if max <= 0 {
		return nil, fmt.Errorf("mqlite: max %d: %w", max, errs.ErrInvalidArgument)
	}
	q, err := s.cqueue(topic, queue)
	if err != nil {
		return nil, err
	}
	if from > q.MaxOffset() && !s.readOnly {
		// Past what is dispatched: past what is assigned too? (Only
		// here, off the long poll's path, is the append lock taken.)
		if next := s.assignedNext(topic, queue); from > next {
			return nil, fmt.Errorf("mqlite: read %s/%d from offset %d, past the next offset %d: %w",
				topic, queue, from, next, errs.ErrOffsetOutOfRange)
		}
	}
	if err := s.checkRetained(topic, queue, q, from); err != nil {
		return nil, err
	}
	var buf [256]consumequeue.Entry // on the stack: no garbage per call
	entries := buf[:min(max, len(buf))]
	n, err := s.readVisible(ctx, q, from, entries)
	if err != nil {
		return nil, err
	}
	var bytes int64
	for k := range n {
		if bytes += int64(entries[k].Size); bytes > MaxReadBytes && k > 0 {
			n = k
			break
		}
	}
	out, _, err := s.readEntries(topic, queue, from, entries[:n], nil, nil)
	return out, err
}

// readTrimmed reads q's entries from from into dst: n read, the first k
// of them visible (below the dispatcher's published position, taken
// before the read: conservative).
func (s *Store) readTrimmed(q *consumequeue.Queue, from int64, dst []consumequeue.Entry) (k, n int, err error) {
	limit := s.disp.dispatched()
	n, err = q.Read(from, dst)
	for k < n && dst[k].Offset < limit {
		k++
	}
	return k, n, err
}

// readVisible waits until q has an entry at from that is visible, then
// copies the visible entries from there into dst. Visible means below the
// dispatcher's published position, which it advances once per chunk of
// records: so a batch, appended as one chunk, is seen whole or not at all.
func (s *Store) readVisible(ctx context.Context, q *consumequeue.Queue, from int64, dst []consumequeue.Entry) (int, error) {
	for {
		if err := s.waitQueue(ctx, q, from); err != nil {
			return 0, err
		}
		k, n, err := s.readTrimmed(q, from, dst)
		if k > 0 || (err != nil && n == 0) {
			return k, err
		}
		if n == 0 {
			continue
		}
		ch, err := s.disp.waitCh(nil, dst[0].Offset+1)
		if err != nil {
			return 0, err
		}
		select {
		case <-ch:
			s.disp.ran.Add(1)
		case <-ctx.Done():
			s.disp.leave(nil, dst[0].Offset+1)
			return 0, ctx.Err()
		}
	}
}

// WaitVisible returns once every message stored before the call is
// visible to readers (ReadQueue, consumers, key lookups); with FlushSync
// that includes being durable. For tests and harnesses that need a
// barrier between writing and reading.
func (s *Store) WaitVisible(ctx context.Context) error {
	if err := s.enter(ctx, "wait visible"); err != nil {
		return err
	}
	if s.closed.Load() {
		return errs.ErrClosed
	}
	if s.readOnly {
		return nil // nothing is stored through it: what it shows is all there is
	}
	end := s.log.WrotePosition()
	if err := s.awaitLocal(ctx, end); err != nil {
		return err
	}
	s.disp.notify()
	ch, err := s.disp.waitCh(nil, end)
	if err != nil {
		return err
	}
	select {
	case <-ch:
		return s.disp.failure()
	case <-ctx.Done():
		s.disp.leave(nil, end)
		return ctx.Err()
	}
}

// Messages iterates over the queue's messages from logical offset from up
// to the current end, without blocking. It stops after yielding an error.
func (s *Store) Messages(topic string, queue int, from int64) iter.Seq2[*MessageExt, error] {
	return func(yield func(*MessageExt, error) bool) {
		q, err := s.cqueue(topic, queue)
		if err != nil {
			yield(nil, err)
			return
		}
		lo, err := s.retainedMin(topic, queue, q)
		if err != nil {
			yield(nil, err)
			return
		}
		from = max(from, lo)
		limit := s.disp.dispatched()
		var buf [64]consumequeue.Entry
		for from < q.MaxOffset() {
			// A damaged entry ends the read after the entries before it,
			// which are yielded first.
			n, rerr := q.Read(from, buf[:])
			for i, e := range buf[:n] {
				if e.Offset >= limit { // a chunk still being dispatched
					n, rerr = i, nil
					break
				}
			}
			if n == 0 {
				if rerr != nil {
					yield(nil, rerr)
				}
				return
			}
			msgs, _, err := s.readEntries(topic, queue, from, buf[:n], nil, nil)
			if err == nil {
				err = rerr
			}
			for _, m := range msgs {
				if !yield(m, nil) {
					return
				}
			}
			if err != nil {
				yield(nil, err)
				return
			}
			from += int64(n)
		}
	}
}

// storeMsOf reads the store time of the message an entry points at.
func (s *Store) storeMsOf(e consumequeue.Entry) (int64, error) {
	var ms int64
	err := s.log.Read(e.Offset, func(r commitlog.Record) error {
		if err := s.checkPayload(r); err != nil {
			return err
		}
		ms = viewOf(r).StoreMs()
		return nil
	})
	return ms, err
}

// OffsetForTime returns the logical offset of the first message in the
// queue stored at or after t (binary search over store times); MaxOffset
// if every message is older.
func (s *Store) OffsetForTime(topic string, queue int, t time.Time) (int64, error) {
	q, err := s.cqueue(topic, queue)
	if err != nil {
		return 0, err
	}
	target := t.UnixMilli()
	lo, hi := q.MinOffset(), q.MaxOffset()
	for lo < hi {
		mid := lo + (hi-lo)/2
		e, err := q.Get(mid)
		if err != nil {
			return 0, err
		}
		ms, err := s.storeMsOf(e)
		if err != nil {
			return 0, err
		}
		if ms < target {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo, nil
}

// MessagesByKey returns messages of topic whose key (or unique key) is key
// and whose store time lies in [from, to], newest first, at most max
// (capped at MaxKeyResults). Hash collisions are resolved by checking each
// candidate message. Messages a purge, DeleteTopic or the topic's own
// retention hid from readers are left out.
func (s *Store) MessagesByKey(topic, key string, from, to time.Time, max int) ([]*MessageExt, error) {
	if s.closed.Load() {
		return nil, errs.ErrClosed
	}
	if err := message.ValidateTopic(topic, message.MaxSysTopicLen); err != nil {
		return nil, err
	}
	if key == "" || max <= 0 || to.Before(from) {
		return nil, fmt.Errorf("mqlite: key %q, max %d, range [%s, %s]: %w", key, max, from, to, errs.ErrInvalidArgument)
	}
	max = min(max, MaxKeyResults)
	offs, err := s.disp.idx.Query(topic+"#"+key, from.UnixMilli(), to.UnixMilli(), 4*max)
	if err != nil {
		return nil, err
	}
	var out []*MessageExt
	for _, off := range offs {
		if off >= s.disp.dispatched() {
			continue // not yet visible to readers
		}
		m, err := s.ReadAt(off)
		if s.removedByRetention(off, err) {
			continue
		}
		if err != nil {
			return nil, err
		}
		ms := m.StoreTimestamp.UnixMilli()
		if m.Topic != topic || ms < from.UnixMilli() || ms > to.UnixMilli() || (m.UniqKey != key && !slices.Contains(m.Keys, key)) {
			continue // a hash collision
		}
		if hidden, err := s.hiddenByRetention(m); err != nil || hidden {
			if err != nil {
				return nil, err
			}
			continue
		}
		if out = append(out, m); len(out) == max {
			break
		}
	}
	return out, nil
}
