package commitlog

import (
	"runtime/debug"
	"time"
)

// Warming. A write into a page of a mapped file that is not resident yet
// takes a page fault: on this kind of machine 1 µs for a recycled page and
// 10-20 µs for memory the guest never touched, against ~40 ns for the
// whole append of a small record. So the allocator goroutine pre-faults
// (MADV_POPULATE_WRITE) the Options.WarmBytes after the write position, in the
// current segment and, once it has handed the next one to the appender, at
// that one's head. The append path takes no fault unless the writer
// outruns the kernel, and then it faults pages in itself, beside the
// warming, instead of waiting for it. Warming starts with the first append
// after Open: a log opened to be read pre-faults nothing.
//
// The lead follows the writer: it starts at minWarm, doubles while the
// writer covers more than the lead in warmHorizon, and halves while it
// covers less than a quarter, between minWarm and WarmBytes. Pre-faulted
// pages are dirty (MADV_POPULATE_WRITE), and the kernel writes a page back
// once it has been dirty for 30 s: a slow writer with the full lead would
// have every page of the log written twice, first as zeros.
//
// The appender asks for more every eighth of the lead (one comparison
// per append, a channel send per step); the allocator owns the warmed
// position. Populating does not change a byte of the file, so it may race
// with appends into the same pages.
// warmChunk is the most the allocator populates in one call. Small, since
// a goroutine in a system call holds its P (see vfs's syncChunk),
// and populating memory the VM never touched runs at ~400 MB/s here.
const warmChunk = 512 << 10

// minWarm is the smallest lead: one huge page (vfs.Pager's HugePages),
// which a fault populates whole anyway.
const minWarm = 2 << 20

// warmHorizon is how much of the writer's time the lead covers.
const warmHorizon = time.Second

// minLead is the smallest lead: minWarm, or all of WarmBytes if less.
func (l *Log) minLead() int64 { return min(l.opts.WarmBytes, minWarm) }

// warmLocked publishes a new warming target for write position w and
// wakes the allocator. Called under mu.
func (l *Log) warmLocked(w int64) {
	now := time.Now()
	lead, floor := l.mu.warmLead, l.minLead()
	if lead == 0 {
		lead = floor // the first append since Open: nothing known of the rate
	} else {
		// What the writer covers in warmHorizon at its rate since the
		// last request (a zero interval counts as fast).
		dt := now.Sub(l.mu.warmTime)
		covers := float64(w-l.mu.warmPos) * float64(warmHorizon) / float64(max(dt, 1))
		switch {
		case covers > float64(lead):
			lead = min(2*lead, l.opts.WarmBytes)
		case covers < float64(lead)/4:
			lead = max(lead/2, floor)
		}
	}
	l.mu.warmLead, l.mu.warmPos, l.mu.warmTime = lead, w, now
	l.mu.warmAt = w + max(lead/8, 1)
	l.warmHeadTo.Store(lead)
	l.warmFrom.Store(w) // before warmTo: a warmer that sees the new target sees where it starts
	l.warmTo.Store(w + lead)
	select {
	case l.warmKick <- struct{}{}:
	default:
	}
}

// warmAhead populates from *done up to the published target, one chunk
// per call; it reports whether more is left. It runs in the allocator
// goroutine and touches only segments of a pinned snapshot, so nothing it
// populates can be unmapped under it.
func (l *Log) warmAhead(done *int64) (more bool) {
	to := l.warmTo.Load()
	if *done >= to {
		return false
	}
	snap := l.pin()
	defer l.unpin(snap)
	if snap.closed || len(snap.segs) == 0 {
		return false
	}
	last := snap.segs[len(snap.segs)-1]
	// From the write position of the request at most: what lies behind
	// it (older segments, at Open) is not going to be written.
	from := max(*done, l.warmFrom.Load(), snap.segs[0].start)
	if from >= to {
		return false // a newer request is on its way, with its own kick
	}
	if from >= last.start+l.opts.SegmentSize {
		return false // the target is in a segment not rolled to yet: its head was warmed when prepared
	}
	s := snap.at(from, l.opts.SegmentSize)
	end := min(to, s.start+l.opts.SegmentSize, from+warmChunk)
	defer debug.SetPanicOnFault(guardFaults())
	defer func() {
		if recover() != nil {
			more = false // a fault here is the appender's to report
		}
	}()
	if l.prewrites(s) {
		if e := min(end, from+prewriteChunk); l.prewrite(s, from, e) {
			*done = e
			return e < to
		}
	}
	l.opts.populate(s.buf[from-s.start : end-s.start])
	*done = end
	return end < to
}

// warmHead populates the head of a segment the allocator just handed over,
// a chunk at a time, serving the current segment's warming in between.
func (l *Log) warmHead(seg *segment, done *int64) {
	head := min(len(seg.buf), int(max(l.warmHeadTo.Load(), l.minLead())))
	for off := 0; off < head; off += warmChunk {
		for l.warmAhead(done) {
		}
		select {
		case <-l.quit:
			return
		default:
		}
		end := min(head, off+warmChunk)
		if l.wrote.Load() >= seg.start+int64(end) {
			continue // the appender rolled in and wrote past it
		}
		if l.prewriteHead(seg, off, end) {
			continue
		}
		l.opts.populate(seg.buf[off:end])
	}
}
