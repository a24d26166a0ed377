package consumer

import (
	"context"

	"github.com/mqlite/mqlite/message"
)

// DefaultReadAheadBytes is the default Options.ReadAheadBytes: 8 MiB of
// raw records per consumer.
const DefaultReadAheadBytes = 8 << 20

// readAheadStart is the size a queue's read-ahead buffer starts at; it
// grows (grow) once a fill runs out of room, so that a queue read at its
// end, as new messages arrive, never takes more.
const readAheadStart = 16 << 10

// maxReadAheadBytes bounds Options.ReadAheadBytes.
const maxReadAheadBytes = 1 << 30

// ReadAheadSource is a Source that can also copy a queue's raw records
// ahead of the consumer. A consumer whose Source implements it keeps a
// read-ahead buffer per queue (Options.ReadAheadBytes) and decodes each
// record into a MessageExt only when its turn comes, so that what waits
// in memory is bytes without pointers: the garbage collector does not
// scan it, and its size lifts the heap goal, so that decoding collects
// less often.
type ReadAheadSource interface {
	Source
	// PullRaw blocks as Pull does until the queue has an entry at offset
	// from, then appends to dst the payloads of the entries at offsets >=
	// from whose stored tags hash passes f (nil f: all; f.Match is the
	// caller's), in order, as long as they fit in cap(dst.Buf), and
	// returns next, the offset after the last entry examined. Each record
	// was checked to be the one its entry names. An error after some
	// records leaves those in dst and next at the entry that failed. When
	// the first record does not fit, dst stays empty and next == from.
	PullRaw(ctx context.Context, topic string, queue int, from int64, f Filter, dst *RawRecords) (next int64, err error)
	// DecodeRaw decodes a record PullRaw copied (payload is its bytes in
	// dst.Buf) into b; the message shares no memory with payload.
	DecodeRaw(b *message.Batch, payload []byte, r RawRecord) (*message.MessageExt, error)
}

// RawRecords is the raw records a ReadAheadSource's PullRaw copies: their
// payloads one after another in Buf, and where each one is in Recs. It
// holds no pointers but its two slices.
type RawRecords struct {
	Buf  []byte      // the payloads; cap(Buf) is the budget
	Recs []RawRecord // in queue order
	// Full is set by Add when a record did not fit.
	Full bool
}

// RawRecord locates one record of a RawRecords.
type RawRecord struct {
	QueueOffset     int64 // its logical offset in the queue
	CommitLogOffset int64 // where its frame starts in the CommitLog
	Start, End      int32 // its payload is Buf[Start:End]
	StoreSize       int32 // the size of its frame in the CommitLog
}

// Add appends a copy of payload and its place, if it fits in cap(Buf);
// false if it does not.
func (rr *RawRecords) Add(payload []byte, queueOffset, commitLogOffset int64, storeSize int) bool {
	start := len(rr.Buf)
	if len(payload) > cap(rr.Buf)-start {
		rr.Full = true
		return false
	}
	rr.Buf = append(rr.Buf, payload...)
	rr.Recs = append(rr.Recs, RawRecord{QueueOffset: queueOffset, CommitLogOffset: commitLogOffset,
		Start: int32(start), End: int32(len(rr.Buf)), StoreSize: int32(storeSize)})
	return true
}

// reset empties rr, keeping its memory.
func (rr *RawRecords) reset() { rr.Buf, rr.Recs, rr.Full = rr.Buf[:0], rr.Recs[:0], false }

// readAhead is a queue's read-ahead buffer. Only the pq's fetcher
// goroutine uses it. It holds the records at offsets from pos on that
// PullRaw copied and no Pull has returned yet; filled at seek generation
// gen, up to end (the offset after the last entry PullRaw examined).
type readAhead struct {
	src     ReadAheadSource // nil: no read-ahead
	recs    RawRecords
	batch   message.Batch // decodes the messages
	head    int           // recs.Recs[:head] were handed on
	gen     uint64
	pos     int64
	end     int64
	granted int64 // of the member's ReadAheadBytes (beyond readAheadStart)
	full    bool  // the last fill ran out of room: grow before the next
}

// grow replaces a buffer that ran out of room by a larger one: as much of
// the consumer's unused ReadAheadBytes as there is, up to half of it, so
// that at least two queues read ahead at full speed. It does nothing once
// grown, or when nothing is left.
func (ra *readAhead) grow(m *member) {
	if ra.granted > 0 {
		return
	}
	budget := int64(m.o.ReadAheadBytes)
	for {
		used := m.readAheadUsed.Load()
		g := min(budget/2, budget-used)
		if g <= readAheadStart {
			return
		}
		if m.readAheadUsed.CompareAndSwap(used, used+g) {
			ra.granted = g
			ra.recs.Buf = make([]byte, 0, g) // allocated once, at full size
			return
		}
	}
}

// release gives the buffer's grant back when the fetcher ends.
func (ra *readAhead) release(m *member) {
	m.readAheadUsed.Add(-ra.granted)
	ra.granted, ra.recs = 0, RawRecords{}
}

// newReadAhead returns the fetcher's read-ahead: off (src nil) when the
// Source cannot copy raw records, the options turn it off, or messages are
// recycled (ReuseMessages leaves the collector nothing to do, and the copy
// into the buffer would only add work: BenchmarkConsume pull/poll32/reuse
// spent 326-416 ns of CPU a message with it, 222-231 without).
func (p *pq) newReadAhead() *readAhead {
	ra := new(readAhead)
	if src, ok := p.m.st.(ReadAheadSource); ok && p.m.o.ReadAheadBytes > 0 && p.m.pool == nil {
		ra.src = src
	}
	return ra
}

// holds says whether ra has records for a pull at from in generation gen.
func (ra *readAhead) holds(gen uint64, from int64) bool {
	return ra.head < len(ra.recs.Recs) && ra.gen == gen && ra.pos == from
}

// pull is the fetcher's Pull: from the read-ahead buffer when it holds
// the records at from, else through PullRaw, which refills it (or the
// Source's Pull when there is no read-ahead).
func (p *pq) pull(ctx context.Context, ra *readAhead, from int64, n int, gen uint64) ([]*message.MessageExt, int64, error) {
	m := p.m
	if ra.src == nil {
		return m.st.Pull(ctx, p.q.Topic, p.q.ID, from, n, p.sub.filter, m.pool)
	}
	if !ra.holds(gen, from) {
		switch {
		case ra.recs.Buf == nil:
			ra.recs.Buf = make([]byte, 0, min(readAheadStart, m.o.ReadAheadBytes))
		case ra.full:
			ra.grow(m)
		}
		ra.recs.reset()
		ra.head, ra.gen, ra.pos = 0, gen, from
		next, err := ra.src.PullRaw(ctx, p.q.Topic, p.q.ID, from, p.sub.filter, &ra.recs)
		ra.full = ra.recs.Full
		switch {
		case len(ra.recs.Recs) > 0:
			// An error after some records: the next PullRaw starts at the
			// entry that failed and reports it.
			ra.end = next
		case err == nil && next == from: // a record larger than the buffer: this once, a plain Pull
			ra.full = true
			return m.st.Pull(ctx, p.q.Topic, p.q.ID, from, n, p.sub.filter, m.pool)
		default:
			return nil, next, err
		}
	}
	return ra.take(p, n)
}

// take decodes up to n buffered records, leaving out those the
// subscription's filter rejects, and returns them with the offset after
// the last one examined.
func (ra *readAhead) take(p *pq, n int) ([]*message.MessageExt, int64, error) {
	batch, f := &ra.batch, p.sub.filter
	k := min(n, len(ra.recs.Recs)-ra.head)
	out := make([]*message.MessageExt, 0, k)
	for _, r := range ra.recs.Recs[ra.head : ra.head+k] {
		msg, err := ra.src.DecodeRaw(batch, ra.recs.Buf[r.Start:r.End], r)
		if err != nil {
			ra.recs.reset() // the next pull at this offset reads it again
			ra.head = 0
			return out, r.QueueOffset, err
		}
		ra.head++
		if f == nil || f.Match(&msg.Message) {
			out = append(out, msg)
		} else {
			message.Release(msg)
		}
	}
	next := ra.end
	if ra.head < len(ra.recs.Recs) {
		next = ra.recs.Recs[ra.head].QueueOffset
	}
	ra.pos = next
	return out, next, nil
}
