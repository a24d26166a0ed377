package mqlite

import (
	"context"
	"errors"

	"github.com/mqlite/mqlite/commitlog"
	"github.com/mqlite/mqlite/consumequeue"
	"github.com/mqlite/mqlite/consumer"
	"github.com/mqlite/mqlite/message"
)

// The store is a consumer.ReadAheadSource: consumers copy raw records
// ahead and decode them when they hand them on.
var _ consumer.ReadAheadSource = consumerSource{}

func (c consumerSource) PullRaw(ctx context.Context, name string, queue int, from int64, f consumer.Filter, dst *consumer.RawRecords) (int64, error) {
	return c.s.pullRaw(ctx, name, queue, from, f, dst)
}

func (c consumerSource) DecodeRaw(b *message.Batch, payload []byte, r consumer.RawRecord) (*message.MessageExt, error) {
	return c.s.decodeRaw(b, payload, r)
}

// errRawFull stops a ReadMany when the next record does not fit in the
// read-ahead buffer.
var errRawFull = errors.New("read-ahead buffer full")

// pullRaw is pull for consumer.ReadAheadSource.PullRaw: it waits as pull
// does for the first entry, then copies the payloads of the visible
// entries whose tags hash passes f into dst until the next one does not
// fit, checking each as readEntries does (the record is the one the
// entry names; its structure is sound), without decoding it.
func (s *Store) pullRaw(ctx context.Context, name string, queue int, from int64, f consumer.Filter, dst *consumer.RawRecords) (int64, error) {
	q, err := s.cqueue(name, queue)
	if err != nil {
		return from, err
	}
	if err := s.checkRetained(name, queue, q, from); err != nil {
		return from, err
	}
	var ents [readChunk]consumequeue.Entry
	n, err := s.readVisible(ctx, q, from, ents[:])
	if err != nil && n == 0 {
		return from, err
	}
	pos := from
	for n > 0 {
		k, full, err := s.copyRaw(name, queue, pos, ents[:n], f, dst)
		pos += int64(k)
		if err != nil || full {
			return pos, err
		}
		// Go on while more entries are visible, without waiting.
		if n, err = s.readVisibleNow(q, pos, ents[:]); err != nil {
			return pos, nil // the next PullRaw, at pos, reports it
		}
	}
	return pos, nil
}

// readVisibleNow is readVisible without waiting: 0 when no entry at from
// is visible yet.
func (s *Store) readVisibleNow(q *consumequeue.Queue, from int64, dst []consumequeue.Entry) (int, error) {
	if q.MaxOffset() <= from {
		return 0, nil
	}
	k, _, err := s.readTrimmed(q, from, dst)
	if k > 0 {
		return k, nil
	}
	return 0, err
}

// copyRaw copies the records of ents (the entries at logical offsets from
// on) that pass f's MatchCode into dst, under one pin of the CommitLog. k
// is how many entries it examined; full says it stopped at one whose
// record did not fit.
func (s *Store) copyRaw(topic string, queue int, from int64, ents []consumequeue.Entry, f consumer.Filter, dst *consumer.RawRecords) (k int, full bool, err error) {
	var offs [readChunk]int64
	var at [readChunk]int // offs[j] is the record of ents[at[j]]
	c := 0
	for i, e := range ents {
		if f == nil || f.MatchCode(e.TagsCode) {
			offs[c], at[c] = e.Offset, i
			c++
		}
	}
	n, err := s.log.ReadMany(offs[:c], func(j int, r commitlog.Record) error {
		i := at[j]
		if err := s.checkRaw(topic, queue, from+int64(i), ents[i], r); err != nil {
			return err
		}
		if !s.addRaw(dst, r, from+int64(i)) {
			return errRawFull
		}
		return nil
	})
	s.metrics.gets.Add(int64(n))
	switch {
	case errors.Is(err, errRawFull):
		return at[n], true, nil
	case err != nil:
		i := at[n]
		return i, false, s.entryReadErr(topic, queue, from+int64(i), ents[i].Offset, err)
	}
	return len(ents), false, nil
}

// addRaw adds the checked record r, at logical offset logical, to dst:
// decoded straight from the mapping when it is large (one copy of its
// bytes instead of two: into the buffer, then into the message; the
// message shares nothing with the mapping), else as a copy of its bytes.
// A large record that does not decode is copied, so that its decoding
// fails, and is reported, where a copied one's would. False: it does not
// fit.
func (s *Store) addRaw(dst *consumer.RawRecords, r commitlog.Record, logical int64) bool {
	if dst.Batch != nil && len(r.Payload) >= consumer.DirectDecodeBytes {
		if !dst.Fits(len(r.Payload)) {
			return false
		}
		if m, err := s.decodeMapped(dst.Batch, r, logical); err == nil {
			return dst.AddDecoded(m, len(r.Payload), logical, r.Offset, r.Size)
		}
	}
	return dst.Add(r.Payload, logical, r.Offset, r.Size)
}

// decodeMapped is decodeRaw of a record's bytes in the mapping. A memory
// fault there (the file shrank under the store) panics into ReadMany's
// guard, which reports it; b is emptied first, since the message it was
// decoding is half written and the next would be decoded on top of it.
func (s *Store) decodeMapped(b *message.Batch, r commitlog.Record, logical int64) (*MessageExt, error) {
	defer func() {
		if v := recover(); v != nil {
			*b = message.Batch{}
			panic(v)
		}
	}()
	return s.decodeRaw(b, r.Payload, consumer.RawRecord{QueueOffset: logical, CommitLogOffset: r.Offset, StoreSize: int32(r.Size)})
}

// checkRaw is decodeEntry's check of a record, on its bytes in place.
func (s *Store) checkRaw(topic string, queue int, logical int64, e consumequeue.Entry, r commitlog.Record) error {
	if err := s.checkPayload(r); err != nil {
		return err
	}
	v := viewOf(r)
	if string(v.Topic()) != topic || int(v.QueueID()) != queue || v.QueueOffset() != logical || r.Size != int(e.Size) {
		return s.corruptEntry(topic, queue, logical, "entry points at commitlog offset %d, which holds %s/%d@%d, not this queue's",
			r.Offset, v.Topic(), v.QueueID(), v.QueueOffset())
	}
	return nil
}

// decodeRaw is decodeEntry for a record pullRaw copied.
func (s *Store) decodeRaw(b *message.Batch, payload []byte, r consumer.RawRecord) (*MessageExt, error) {
	m, err := b.DecodeAt(payload, r.CommitLogOffset)
	if err != nil {
		return nil, s.corruptRecord(r.CommitLogOffset, "%v", err)
	}
	if err := message.Inflate(&m.Message, s.opts.MaxMessageSize); err != nil {
		message.Release(m)
		return nil, s.corruptRecord(r.CommitLogOffset, "%v", err)
	}
	m.CommitLogOffset = r.CommitLogOffset
	m.StoreSize = r.StoreSize
	return m, nil
}
