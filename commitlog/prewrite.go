package commitlog

import (
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/mqlite/mqlite/vfs"
)

// Pre-writing. A new segment is preallocated (fallocate): its blocks are
// reserved but "unwritten", and the first write into each block makes the
// file system convert its extent and journal the change, which the next
// sync must commit: a sync that covers a new block costs about a second
// device flush (a 4 KiB record enters a new block at every sync). RocketMQ
// and Pebble write into files written before (recycled ones) for the same
// reason. So a log that writes through its files (through.go) has the
// allocator, as it warms ahead of the writer (warm.go), write zeros ahead
// of the write position of a new segment and sync them
// (vfs.Prewriter): the conversions are committed off the writer's path,
// and the pages are in the page cache when the writer's pwrite arrives.
// Only the warming's lead is pre-written (2 MiB, growing with the write
// rate up to WarmBytes), not whole segments. A recycled segment's blocks
// are written already; it is warmed as before.
//
// The allocator and the writer must never write the same bytes at once: a
// zero landing after a record would erase it. The writer publishes the end
// of what it is about to write (reserved) and then looks for zeros being
// written over its range, waiting while they are; the allocator publishes
// the range it is about to write (zeroing) and then starts it at reserved
// at the earliest. With sequentially consistent atomics at least one of
// the two sees the other. The writer waits only for the zeros' write, not
// for their sync, and only when it catches up with the fill, which the
// lead makes rare. A sync of the zeros that also covers records written
// into them meanwhile does no harm.
//
// A failed pre-write is logged and the segment written as it is; a failed
// sync of the zeros fences the log, as any failed sync does: the file may
// have lost pages the writer wrote before it.

// prewriteChunk is the most the allocator pre-writes and syncs in one
// step: what a writer that catches up with it may wait for (the write,
// not the sync).
const prewriteChunk = 256 << 10

// prewriteState keeps the writer and the allocator's zero-fill apart.
type prewriteState struct {
	// reserved is the end of what the writer is about to write (a global
	// offset); the allocator pre-writes nothing below it.
	reserved atomic.Int64
	// zeroing is the range [from, to) whose zeros are being written, or
	// nil.
	zeroing atomic.Pointer[[2]int64]
}

// prewriteRef shares the descriptor a segment is written through
// (through.go) between the writer, which closes it when it leaves the
// segment, and the allocator's pre-writing, which may be using it then:
// the last of the two closes it.
type prewriteRef struct {
	mu    sync.Mutex
	f     vfs.File
	users int
	left  bool // the writer has left the segment
	// failed: a pre-write of the segment failed; it is not tried again.
	failed bool
}

// set makes f the descriptor to pre-write through.
func (r *prewriteRef) set(f vfs.File) {
	r.mu.Lock()
	r.f, r.left = f, false
	r.mu.Unlock()
}

// leave is the writer's: it reports whether f may be closed now, else
// the pre-writing using it closes it.
func (r *prewriteRef) leave() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.left = true
	return r.users == 0
}

// acquire returns the descriptor to pre-write through, nil if there is
// none or the writer has left the segment. Give it back with release.
func (r *prewriteRef) acquire() vfs.Prewriter {
	r.mu.Lock()
	defer r.mu.Unlock()
	p, ok := r.f.(vfs.Prewriter)
	if !ok || r.left || r.failed {
		return nil
	}
	r.users++
	return p
}

// release gives back what acquire returned, closing the descriptor if
// the writer has left meanwhile; failed marks the segment not to be
// pre-written again.
func (r *prewriteRef) release(failed bool) {
	r.mu.Lock()
	r.users--
	r.failed = r.failed || failed
	f := r.f
	last := r.left && r.users == 0
	r.mu.Unlock()
	if last {
		f.Close()
	}
}

// prewrites reports whether the allocator pre-writes s ahead of the
// writer.
func (l *Log) prewrites(s *segment) bool {
	return l.writeThrough && !s.recycled && !l.opts.noPrewrite
}

// reserve is the writer's side: called before it writes [from, to)
// (global offsets) of a segment, it waits while zeros are being written
// over part of the range.
func (l *Log) reserve(from, to int64) {
	l.pre.reserved.Store(to)
	for {
		z := l.pre.zeroing.Load()
		if z == nil || to <= z[0] || from >= z[1] {
			return
		}
		runtime.Gosched()
	}
}

// prewrite is the allocator's side: it writes zeros over the part of
// [from, end) of s (global offsets, inside s) that the writer has not
// reserved, syncs them, and maps the range for the readers. It reports
// false if it could not: the caller then warms the range as usual.
func (l *Log) prewrite(s *segment, from, end int64) bool {
	p := s.pw.acquire()
	if p == nil {
		return false
	}
	failed := false
	defer func() { s.pw.release(failed) }()
	// From the writer's reservation on (looked at again once the range
	// is published).
	if from = max(from, l.pre.reserved.Load()); from >= end {
		return true
	}
	l.pre.zeroing.Store(&[2]int64{from, end})
	if from = max(from, l.pre.reserved.Load()); from >= end {
		l.pre.zeroing.Store(nil)
		return true
	}
	a, b := from-s.start, end-s.start
	err := p.Prewrite(a, b-a)
	l.pre.zeroing.Store(nil)
	if err != nil {
		failed = true
		l.opts.Logger.Warn("mqlite/commitlog: pre-write a segment", "path", s.path, "err", err)
		return false
	}
	if err := p.SyncPrewrite(); err != nil {
		failed = true
		err = diskErr("sync", s.path, err)
		l.opts.Logger.Warn("mqlite/commitlog: sync a pre-written range", "path", s.path, "err", err)
		l.fence(err)
		return true
	}
	l.opts.populate(s.buf[a:b])
	return true
}

// prewriteHead pre-writes [off, end) of a new segment's head, if the
// allocator pre-writes seg, a chunk at a time; false: it did not.
func (l *Log) prewriteHead(seg *segment, off, end int) bool {
	if !l.prewrites(seg) {
		return false
	}
	for z := off; z < end; z += prewriteChunk {
		if !l.prewrite(seg, seg.start+int64(z), seg.start+int64(min(end, z+prewriteChunk))) {
			return false
		}
	}
	return true
}
