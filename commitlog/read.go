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
// an ErrCorrupt when the record is damaged. It takes no lock: the segment
// stays mapped until fn returns, even if DeleteBefore removes it meanwhile.
func (l *Log) Read(off int64, fn func(Record) error) (err error) {
	w := l.wrote.Load() // before pinning: the snapshot holds every segment below w
	snap := l.pin()
	defer l.unpin(snap)
	if snap.closed {
		return errs.ErrClosed
	}
	if off < 0 || off >= w {
		return fmt.Errorf("mqlite/commitlog: offset %d outside [%d, %d): %w", off, l.MinOffset(), w, errs.ErrNotFound)
	}
	s := snap.at(off, l.opts.SegmentSize)
	if s == nil {
		if len(snap.segs) > 0 && off < snap.segs[0].start {
			return removedErr(off, snap.segs[0].start)
		}
		return fmt.Errorf("mqlite/commitlog: offset %d: %w", off, errs.ErrNotFound)
	}
	defer debug.SetPanicOnFault(guardFaults())
	defer l.catchFault(&err)
	pos := off - s.start
	n, k, reason := l.check(s, pos, true)
	switch k {
	case kRecord:
	case kBad:
		// Only a frame with our magic is a damaged record; check() also
		// reports garbage in the last bytes of a segment, where no frame fits.
		if pos+8 <= l.opts.SegmentSize && le.Uint32(s.buf[pos+4:]) == MagicV1 {
			return errs.Corrupt(s.path, pos, "%s", reason)
		}
		return fmt.Errorf("mqlite/commitlog: no record starts at offset %d: %w", off, errs.ErrNotFound)
	default:
		return fmt.Errorf("mqlite/commitlog: no record starts at offset %d: %w", off, errs.ErrNotFound)
	}
	return fn(Record{Offset: off, Size: int(n), Payload: s.buf[pos+FrameSize : pos+n]})
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
