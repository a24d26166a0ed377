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
	// caller's), in order, as long as they fit in cap(dst.Buf) (with
	// AddDecoded, when dst.Batch is set, for those of DirectDecodeBytes
	// or more), and
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
// payloads one after another in Buf, and where each one is in Recs. A
// record of DirectDecodeBytes or more may instead be decoded by PullRaw
// straight from where the store keeps it (AddDecoded, into Batch), so that
// its bytes are copied once, not twice; it then waits in Msgs. Buf and
// Recs hold no pointers, so the collector never scans the copied records.
type RawRecords struct {
	Buf  []byte      // the payloads; cap(Buf) is the budget
	Recs []RawRecord // in queue order
	// Msgs holds the records decoded as they were read (RawRecord.Msg).
	Msgs []*message.MessageExt
	// Batch decodes the records AddDecoded takes; nil: PullRaw copies
	// every record with Add.
	Batch *message.Batch
	// Full is set by Add, Fits or AddDecoded when a record did not fit.
	Full bool
	held int // the payload bytes of Msgs, counted against cap(Buf)
}

// DirectDecodeBytes is the payload size from which a ReadAheadSource's
// PullRaw decodes a record as it reads it (AddDecoded) rather than copying
// its bytes into the buffer to decode them later: for a large record the
// second copy costs more than the pointers a waiting message adds.
const DirectDecodeBytes = 1 << 10

// RawRecord locates one record of a RawRecords.
type RawRecord struct {
	QueueOffset     int64 // its logical offset in the queue
	CommitLogOffset int64 // where its frame starts in the CommitLog
	Start, End      int32 // its payload is Buf[Start:End]
	StoreSize       int32 // the size of its frame in the CommitLog
	// Msg is 1 + its index in Msgs when it was decoded as it was read
	// (Start and End are then 0); 0 for a record in Buf.
	Msg int32
}

// fits says whether n more payload bytes fit in the budget; if not, it
// sets Full.
func (rr *RawRecords) fits(n int) bool {
	if n > cap(rr.Buf)-len(rr.Buf)-rr.held {
		rr.Full = true
		return false
	}
	return true
}

// Add appends a copy of payload and its place, if it fits in cap(Buf)
// (with the payloads of Msgs); false if it does not.
func (rr *RawRecords) Add(payload []byte, queueOffset, commitLogOffset int64, storeSize int) bool {
	start := len(rr.Buf)
	if !rr.fits(len(payload)) {
		return false
	}
	rr.Buf = append(rr.Buf, payload...)
	rr.Recs = append(rr.Recs, RawRecord{QueueOffset: queueOffset, CommitLogOffset: commitLogOffset,
		Start: int32(start), End: int32(len(rr.Buf)), StoreSize: int32(storeSize)})
	return true
}

// Fits says whether a payload of n bytes fits (false sets Full): what a
// ReadAheadSource asks before it decodes a record for AddDecoded. Besides
// the budget, a fill decodes at most DirectDecodeAhead bytes of records
// (the first one always, if it fits the budget), so that a fetcher hands
// its first messages on soon, not after decoding a whole buffer.
func (rr *RawRecords) Fits(n int) bool {
	if rr.held > 0 && rr.held+n > DirectDecodeAhead {
		rr.Full = true
		return false
	}
	return rr.fits(n)
}

// DirectDecodeAhead bounds the bytes of records one fill decodes as it
// reads them (see Fits): 1 MiB, 256 records of 4 KiB.
const DirectDecodeAhead = 1 << 20

// AddDecoded appends msg, a record of payloadLen bytes that the source
// decoded with Batch as it read it (msg shares no memory with the store),
// if it Fits; false if it does not.
func (rr *RawRecords) AddDecoded(msg *message.MessageExt, payloadLen int, queueOffset, commitLogOffset int64, storeSize int) bool {
	if !rr.Fits(payloadLen) {
		return false
	}
	rr.held += payloadLen
	rr.Msgs = append(rr.Msgs, msg)
	rr.Recs = append(rr.Recs, RawRecord{QueueOffset: queueOffset, CommitLogOffset: commitLogOffset,
		StoreSize: int32(storeSize), Msg: int32(len(rr.Msgs))})
	return true
}

// reset empties rr, keeping its memory; the decoded messages it still
// holds are dropped (the collector takes them).
func (rr *RawRecords) reset() {
	clear(rr.Msgs)
	rr.Buf, rr.Recs, rr.Msgs, rr.Full, rr.held = rr.Buf[:0], rr.Recs[:0], rr.Msgs[:0], false, 0
}

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
		ra.recs.Batch = &ra.batch
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

// decode returns buffered record r as a message: the one PullRaw decoded
// as it read it (handed over: the buffer keeps no reference), or a
// decoding of its bytes.
func (ra *readAhead) decode(r RawRecord) (*message.MessageExt, error) {
	if r.Msg > 0 {
		msg := ra.recs.Msgs[r.Msg-1]
		ra.recs.Msgs[r.Msg-1] = nil
		return msg, nil
	}
	return ra.src.DecodeRaw(&ra.batch, ra.recs.Buf[r.Start:r.End], r)
}

// take decodes up to n buffered records, leaving out those the
// subscription's filter rejects, and returns them with the offset after
// the last one examined.
func (ra *readAhead) take(p *pq, n int) ([]*message.MessageExt, int64, error) {
	f := p.sub.filter
	k := min(n, len(ra.recs.Recs)-ra.head)
	out := make([]*message.MessageExt, 0, k)
	for _, r := range ra.recs.Recs[ra.head : ra.head+k] {
		msg, err := ra.decode(r)
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
