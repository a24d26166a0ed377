package commitlog

import (
	"os"
	"runtime"
)

// Pre-writing. A new segment is preallocated (fallocate): its blocks are
// reserved but "unwritten", and the first write into each block makes the
// file system convert its extent and journal that change, which the next
// sync must commit: a sync covering a new block costs about a second
// device flush (4 KiB records enter a new block at every sync). RocketMQ
// and Pebble write into files written before (recycled ones) for the same
// reason. So a log that writes through its files (through.go) has the
// allocator, as it warms ahead of the writer, write zeros ahead of the
// write position in new segments and sync them: the conversions are
// committed off the hot path, and the pages are in the page cache when the
// writer's pwrite arrives. A recycled segment's blocks are written
// already; it is warmed as before.
//
// The allocator and the writer must never write the same bytes at once: a
// zero landing after a record would erase it. The writer publishes the end
// of what it is about to write (reserved) and then looks for a zero-fill
// in progress over its range, waiting for it to end; the allocator
// publishes the range it is about to fill (zeroing) and then starts it at
// reserved at the earliest. With sequentially consistent atomics at least
// one of the two sees the other. The writer only waits when it catches up
// with the fill, which the warming's lead (2 MiB at least) makes rare.

// zeroChunk is the most the allocator fills and syncs in one step: what
// a writer that catches up may wait for.
const zeroChunk = 256 << 10

var zeros = make([]byte, zeroChunk)

// prewrites reports whether the allocator fills s ahead of the writer.
func (l *Log) prewrites(s *segment) bool {
	return l.writeThrough && !s.recycled && !l.opts.noPrewrite
}

// reserve is the writer's side: called before it writes [from, to) (global
// offsets), it waits while a fill in progress overlaps the range.
func (l *Log) reserve(from, to int64) {
	l.reserved.Store(to)
	for {
		z := l.zeroing.Load()
		if z == nil || to <= z[0] || from >= z[1] {
			return
		}
		runtime.Gosched()
	}
}

// prewrite is the allocator's side: it writes zeros over [from, end) of
// s (global offsets, inside s) that the writer has not reserved, syncs
// them, and maps them for the readers. A failure is only logged (the
// writer writes the range anyway), except a failed sync, which fences the
// log as any failed sync does.
func (l *Log) prewrite(s *segment, from, end int64) {
	// Keep s mapped: it is in the pinned snapshot, or the newest segment
	// not rolled to yet, which only the allocator's exit releases.
	snap := l.pin()
	defer l.unpin(snap)
	if snap.closed || (snap.at(s.start, l.opts.SegmentSize) != s && !newest(snap, s)) {
		return
	}
	l.zeroing.Store(&[2]int64{from, end})
	defer l.zeroing.Store(nil)
	from = max(from, l.reserved.Load())
	if from >= end {
		return
	}
	f, err := l.opts.FS.OpenFile(s.path, os.O_RDWR, 0o600)
	if err != nil {
		l.opts.Logger.Warn("mqlite/commitlog: open a segment to pre-write it", "path", s.path, "err", err)
		return
	}
	defer f.Close()
	a, b := from-s.start, end-s.start
	if _, err := f.WriteAt(zeros[:b-a], a); err != nil {
		l.opts.Logger.Warn("mqlite/commitlog: pre-write a segment", "path", s.path, "err", err)
		return
	}
	if err := s.m.Sync(int(a), int(b-a)); err != nil {
		err = diskErr("sync", s.path, err)
		l.opts.Logger.Warn("mqlite/commitlog: sync a pre-written range", "path", s.path, "err", err)
		l.fence(err)
		return
	}
	l.opts.populate(s.buf[a:b])
}

// newest reports whether s starts after every segment of snap: the
// segment the allocator prepared and the writer has not rolled to yet.
func newest(snap *snapshot, s *segment) bool {
	return len(snap.segs) == 0 || s.start > snap.segs[len(snap.segs)-1].start
}
