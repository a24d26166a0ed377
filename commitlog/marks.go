package commitlog

import "sync/atomic"

// Record starts known from appends. A primary's sender hands its replica
// chunks of whole frames (ViewRaw), which it used to find by walking
// every frame header of the span: for 4 KiB records a load on a new page
// each, a chain of dependent misses that cost the sender about as much
// CPU as writing the chunk to the socket. The appender knows where each
// record starts, so a segment it writes notes, for each block of
// markBlock bytes, where the first record starting in it is; a large span
// then ends at the last noted start below its limit, and only the frames
// at its two ends are checked (the replica checks every frame and CRC as
// it appends). Segments written before Open, by AppendRaw (a replica),
// or read-only have no notes and are walked as before.

const (
	markShift = 15 // 32 KiB blocks: 8 KiB of notes for a 1 GiB segment
	markBlock = 1 << markShift
	// markMinSpan is the smallest max for which ViewRaw uses the notes:
	// smaller spans (a replica keeping up) are walked.
	markMinSpan = 64 << 10
	// markMaxSegment bounds the segments that keep notes (512 KiB of them).
	markMaxSegment = 4 << 30
)

// marks holds, per block of a segment, 1 + the position in the block of
// the first record that starts in it, or 0 if none is known. Each entry
// is set once, by the appender under the log's mu; readers load it
// without a lock, for blocks below the write position they loaded.
type marks []atomic.Uint32

// markStart notes that a record starts at pos of s, a segment of size
// segSize. Called by the appender.
func (s *segment) markStart(pos, segSize int64) {
	m := s.marks.Load()
	if m == nil {
		if segSize > markMaxSegment {
			return
		}
		t := make(marks, (segSize+markBlock-1)>>markShift)
		m = &t
		s.marks.Store(m)
	}
	k := pos >> markShift
	if e := &(*m)[k]; e.Load() == 0 {
		e.Store(uint32(pos-k<<markShift) + 1)
	}
}

// startBelow returns the last noted record start in (pos, limit] of s,
// or 0 when none is noted. Blocks are searched down from limit's: the
// first start in limit's block may lie past limit, and then the one in
// the block below is taken.
func (s *segment) startBelow(pos, limit int64) int64 {
	m := s.marks.Load()
	if m == nil {
		return 0
	}
	for k := min(limit>>markShift, int64(len(*m))-1); k >= pos>>markShift; k-- {
		v := int64((*m)[k].Load())
		if v == 0 {
			continue
		}
		if p := k<<markShift + v - 1; p > pos && p <= limit {
			return p
		}
	}
	return 0
}

// unmarkFrom forgets the notes of records starting at pos of s or later
// (TruncateTo cut them). Called with every lock of the log held.
func (s *segment) unmarkFrom(pos int64) {
	m := s.marks.Load()
	if m == nil {
		return
	}
	for k := pos >> markShift; k < int64(len(*m)); k++ {
		if v := int64((*m)[k].Load()); v != 0 && k<<markShift+v-1 >= pos {
			(*m)[k].Store(0)
		}
	}
}

// markedSpan is rawSpan's end for a span of at most max bytes (max >=
// markMinSpan) from pos of s, w being the write position: the segment's
// written end when that is within max, else the last noted record start
// within max. It checks the frames at the span's two ends (structure and
// stored offset); ok is false when the notes do not say or a check fails,
// and the caller walks the frames.
func (l *Log) markedSpan(s *segment, w, pos int64, max int) (end int64, ok bool) {
	if max < markMinSpan {
		return 0, false
	}
	written := min(w-s.start, l.opts.SegmentSize)
	if limit := pos + int64(max); limit >= written {
		end = written
	} else if end = s.startBelow(pos, limit); end == 0 {
		return 0, false
	}
	if !l.isFrame(s, pos) || end < written && !l.isFrame(s, end) {
		return 0, false
	}
	return end, true
}

// isFrame reports whether a valid frame header (a record's or an
// end-of-segment marker's) is at pos of s.
func (l *Log) isFrame(s *segment, pos int64) bool {
	_, k, _ := l.check(s, pos, false)
	return k == kRecord || k == kBlank
}
