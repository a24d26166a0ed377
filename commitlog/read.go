package commitlog

import (
	"fmt"
	"runtime/debug"

	"github.com/mqlite/mqlite/internal/errs"
)

// Record is a view of one stored record. Payload aliases the mapped
// segment: it is valid only inside the callback that received it.
type Record struct {
	Offset  int64 // global offset of the record
	Size    int   // whole record, frame included
	Payload []byte
}

// Read verifies the record at off (frame, stored offset, CRC32-C) and calls
// fn with a view of it. It returns ErrNotFound when off is outside the log
// (below MinOffset: removed by retention) or not the start of a record, and
// an ErrCorrupt naming the segment file and position when the record there
// is damaged, in any field of its frame (damagedFrame). It takes no lock: the segment
// stays mapped until fn returns, even if DeleteBefore removes it meanwhile.
func (l *Log) Read(off int64, fn func(Record) error) (err error) {
	w := l.wrote.Load() // before pinning: the snapshot holds every segment below w
	snap := l.pin()
	defer l.unpin(snap)
	if snap.closed {
		return errs.ErrClosed
	}
	defer debug.SetPanicOnFault(guardFaults())
	defer l.catchFault(&err)
	r, err := l.recordAt(snap, w, off)
	if err != nil {
		return err
	}
	return fn(r)
}

// ReadMany is Read for each offset of offs, in order, under one pin of the
// segment list: fn(i, r) gets the record at offs[i], verified as Read
// verifies it (frame, stored offset, CRC32-C). It stops at the first
// offset that fails (with Read's error) or the first error fn returns, and
// returns how many records fn accepted before that.
func (l *Log) ReadMany(offs []int64, fn func(i int, r Record) error) (n int, err error) {
	w := l.wrote.Load() // before pinning, as in Read
	snap := l.pin()
	defer l.unpin(snap)
	if snap.closed {
		return 0, errs.ErrClosed
	}
	defer debug.SetPanicOnFault(guardFaults())
	defer l.catchFault(&err)
	for ; n < len(offs); n++ { // n is right even if a fault ends the loop
		r, err := l.recordAt(snap, w, offs[n])
		if err != nil {
			return n, err
		}
		if err := fn(n, r); err != nil {
			return n, err
		}
	}
	return n, nil
}

// recordAt finds and verifies the record at off in snap, which holds every
// segment below w. The caller guards against faults.
func (l *Log) recordAt(snap *snapshot, w, off int64) (Record, error) {
	if off < 0 || off >= w {
		return Record{}, fmt.Errorf("mqlite/commitlog: offset %d outside [%d, %d): %w", off, l.MinOffset(), w, errs.ErrNotFound)
	}
	s := snap.at(off, l.opts.SegmentSize)
	if s == nil {
		if len(snap.segs) > 0 && off < snap.segs[0].start {
			return Record{}, removedErr(off, snap.segs[0].start)
		}
		return Record{}, fmt.Errorf("mqlite/commitlog: offset %d: %w", off, errs.ErrNotFound)
	}
	pos := off - s.start
	n, k, reason := l.check(s, pos, true)
	switch k {
	case kRecord:
	case kBad:
		if l.damagedFrame(s, pos) {
			return Record{}, errs.Corrupt(s.path, pos, "record at offset %d: %s", off, reason)
		}
		return Record{}, fmt.Errorf("mqlite/commitlog: no record starts at offset %d: %w", off, errs.ErrNotFound)
	default:
		return Record{}, fmt.Errorf("mqlite/commitlog: no record starts at offset %d: %w", off, errs.ErrNotFound)
	}
	return Record{Offset: off, Size: int(n), Payload: s.buf[pos+FrameSize : pos+n]}, nil
}

// damagedFrame tells whether the invalid frame at pos of s is a damaged
// record rather than a position inside one: it still has our magic, or it
// still stores its own offset. One changed bit leaves at least one of the
// two, whichever header field it hits (a record's stored offset is eight
// bytes that equal its position: a payload matches it only by design). So
// an offset an index handed out (a ConsumeQueue entry, an IndexFile hit, a
// message ID) reads as ErrCorrupt when its frame is damaged, not as
// ErrNotFound, which means "no record was ever there". check() also reports
// garbage in the last bytes of a segment, where no frame fits: not a record.
func (l *Log) damagedFrame(s *segment, pos int64) bool {
	rest := l.opts.SegmentSize - pos
	b := s.buf[pos:]
	return rest >= 8 && le.Uint32(b[4:]) == MagicV1 ||
		rest >= 20 && int64(le.Uint64(b[12:])) == s.start+pos
}

// Scan calls fn for each record in [from, to), in order, skipping
// end-of-segment markers; from must be a record boundary (or a segment
// end) and not below MinOffset (ErrNotFound: removed by retention). It
// checks each frame's structure and stored offset; verifyCRC adds the
// checksum. It returns the position after the last record visited. A
// record that fails the checks ends the scan with an ErrCorrupt. The
// segments it visits stay mapped until it returns, like Read's.
func (l *Log) Scan(from, to int64, verifyCRC bool, fn func(Record) error) (next int64, err error) {
	to = min(to, l.wrote.Load()) // before pinning, as in Read
	snap := l.pin()
	defer l.unpin(snap)
	if snap.closed {
		return from, errs.ErrClosed
	}
	defer debug.SetPanicOnFault(guardFaults())
	defer l.catchFault(&err)
	next = from
	for next < to {
		s := snap.at(next, l.opts.SegmentSize)
		if s == nil {
			if len(snap.segs) > 0 && next >= 0 && next < snap.segs[0].start {
				return next, removedErr(next, snap.segs[0].start)
			}
			return next, fmt.Errorf("mqlite/commitlog: offset %d: %w", next, errs.ErrNotFound)
		}
		pos := next - s.start
		n, k, reason := l.check(s, pos, verifyCRC)
		switch k {
		case kRecord:
			if err := fn(Record{Offset: next, Size: int(n), Payload: s.buf[pos+FrameSize : pos+n]}); err != nil {
				return next, err
			}
			next += n
		case kBlank:
			next = s.start + l.opts.SegmentSize
		case kZero:
			return next, errs.Corrupt(s.path, pos, "zeros where a record should be (below the written position %d)", to)
		default:
			return next, errs.Corrupt(s.path, pos, "%s", reason)
		}
	}
	return next, nil
}
