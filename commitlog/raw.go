package commitlog

import (
	"fmt"
	"hash/crc32"
	"runtime/debug"
	"slices"

	"github.com/mqlite/mqlite/internal/errs"
)

// Raw access for replication: a primary reads its log as encoded bytes
// (ReadRaw), a replica appends those bytes at the same offsets
// (AppendRaw), so that both logs stay byte-identical, frames, stored
// offsets, end-of-segment markers and all. A replica whose history
// diverged from its primary's cuts its tail (TruncateTo).

// ReadRaw copies whole frames starting at from, a record boundary (or the
// end of a segment), into dst[:0] and returns them with the offset after
// them. It copies at least one record when one is there, even if it is
// larger than max, and never more than max bytes otherwise; it stops at a
// segment's end (an end-of-segment marker is copied like a record, and
// next is then the following segment's start). It returns nothing and
// next == from when from is the write position. Below MinOffset it
// returns ErrNotFound; a frame that fails its checks (structure, stored
// offset) is an ErrCorrupt. The CRC32-C is left to AppendRaw, which checks
// every frame as it takes it: one pass over the bytes instead of two.
func (l *Log) ReadRaw(from int64, max int, dst []byte) (out []byte, next int64, err error) {
	out = dst[:0]
	next, err = l.ViewRaw(from, max, func(b []byte) error {
		out = append(out, b...)
		return nil
	})
	return out, next, err
}

// ViewRaw is ReadRaw without the copy: it calls fn with the frames ReadRaw
// would copy, a view of the mapping valid only while fn runs (not called
// when there are none or on an error), and returns the offset after them,
// or from and fn's error or ReadRaw's. A primary's sender writes a chunk to its replica from the
// view. The segment stays pinned while fn runs: a DeleteBefore meanwhile
// unmaps it only once fn has returned.
func (l *Log) ViewRaw(from int64, max int, fn func(b []byte) error) (next int64, err error) {
	w := l.wrote.Load()
	snap := l.pin()
	defer l.unpin(snap)
	if snap.closed {
		return from, errs.ErrClosed
	}
	defer debug.SetPanicOnFault(guardFaults())
	defer l.catchFault(&err)
	s, pos, end, err := l.rawSpan(snap, w, from, max)
	if err != nil || end == pos {
		return from, err
	}
	if err := fn(s.buf[pos:end]); err != nil {
		return from, err
	}
	return from + (end - pos), nil
}

// rawSpan finds the frames ViewRaw hands over: [pos, end) of s.
func (l *Log) rawSpan(snap *snapshot, w, from int64, max int) (s *segment, pos, end int64, err error) {
	if s, err = l.segmentAt(snap, w, from); err != nil || s == nil {
		return nil, 0, 0, err
	}
	pos = from - s.start
	end = pos
	for s.start+end < w && end < l.opts.SegmentSize {
		n, k, reason := l.check(s, end, false) // the replica checks each CRC as it appends
		switch k {
		case kRecord, kBlank:
		case kZero:
			return s, pos, end, errs.Corrupt(s.path, end, "zeros where a record should be (below the written position %d)", w)
		default:
			return s, pos, end, errs.Corrupt(s.path, end, "%s", reason)
		}
		if end > pos && end-pos+n > int64(max) {
			break
		}
		end += n
		if k == kBlank {
			break
		}
	}
	return s, pos, end, nil
}

// segmentAt finds the segment of snap holding from, below the write
// position w: nil and no error when from is w (nothing to read).
func (l *Log) segmentAt(snap *snapshot, w, from int64) (*segment, error) {
	if from >= w {
		if from > w {
			return nil, fmt.Errorf("mqlite/commitlog: read from %d past the write position %d: %w", from, w, errs.ErrInvalidArgument)
		}
		return nil, nil
	}
	s := snap.at(from, l.opts.SegmentSize)
	if s == nil {
		if len(snap.segs) > 0 && from < snap.segs[0].start && (from%l.opts.SegmentSize != 0 || from == 0) {
			return nil, removedErr(from, snap.segs[0].start)
		}
		return nil, fmt.Errorf("mqlite/commitlog: offset %d: %w", from, errs.ErrNotFound)
	}
	return s, nil
}

// AppendRaw appends b, whole frames a primary's ReadRaw returned, at
// offset off, which must be the write position. Every frame is checked
// before anything is written (structure, stored offset equal to its
// position here, CRC32-C, an end-of-segment marker filling its segment
// exactly): a bad chunk changes nothing and is an ErrCorrupt. It returns
// the new write position: after an end-of-segment marker (or a record
// that ends its segment exactly) that is the next segment's start, which
// the next AppendRaw creates. With Options.RawThrough a large chunk goes
// into the segment file with one WriteAt; a failed write fences the log.
func (l *Log) AppendRaw(off int64, b []byte) (end int64, err error) {
	return l.appendRaw(off, b, nil)
}

// AppendRawSum is AppendRaw for a chunk whose transport checksum covers
// only the bytes the frames' own CRC32-C do not (UncoveredCRC): sum must
// be UncoveredCRC(seed, b). It is checked with the frames, before
// anything is written (ErrCorrupt otherwise): each byte of the chunk goes
// through one CRC pass.
func (l *Log) AppendRawSum(off int64, b []byte, seed, sum uint32) (end int64, err error) {
	return l.appendRaw(off, b, &[2]uint32{seed, sum})
}

// UncoveredCRC updates crc (CRC32-C) with the bytes of b, whole frames as
// ReadRaw returns them, that no frame's own CRC32-C covers: the rest of
// each end-of-segment marker after its header. A frame whose size does not
// fit ends the walk with the rest of b taken whole.
func UncoveredCRC(crc uint32, b []byte) uint32 {
	for p := 0; p < len(b); {
		f := b[p:]
		if len(f) < BlankSize {
			return crc32.Update(crc, castagnoli, f)
		}
		size := int(le.Uint32(f[0:]))
		if size < BlankSize || size > len(f) {
			return crc32.Update(crc, castagnoli, f)
		}
		if le.Uint32(f[4:]) == BlankMagic {
			crc = crc32.Update(crc, castagnoli, f[BlankSize:size])
		}
		p += size
	}
	return crc
}

func (l *Log) appendRaw(off int64, b []byte, sum *[2]uint32) (end int64, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.mu.closed {
		return 0, errs.ErrClosed
	}
	if err := l.Fenced(); err != nil {
		return 0, err
	}
	if w := l.wrote.Load(); off != w {
		return 0, fmt.Errorf("mqlite/commitlog: raw append at %d, the log ends at %d: %w", off, w, errs.ErrInvalidArgument)
	}
	if len(b) == 0 {
		return off, nil
	}
	defer debug.SetPanicOnFault(guardFaults())
	defer l.catchFault(&err)
	cur := l.mu.cur
	if off == cur.start+l.opts.SegmentSize {
		prev := cur
		if cur, err = l.rollLocked(); err != nil {
			return 0, err
		}
		// The chunk before ended prev (its marker included): done with
		// the descriptor it was written through.
		if cerr := prev.closeForWrite(); cerr != nil {
			l.opts.Logger.Warn("mqlite/commitlog: close a sealed segment", "path", prev.path, "err", cerr)
		}
	}
	pos := off - cur.start
	if err := l.checkRaw(cur, pos, b); err != nil {
		return 0, err
	}
	if sum != nil && UncoveredCRC(sum[0], b) != sum[1] {
		return 0, errs.Corrupt(cur.path, pos, "raw chunk: chunk checksum mismatch")
	}
	end = off + int64(len(b))
	through := cur.f != nil && (l.writeThrough || len(b) >= rawThroughMin)
	if !through {
		l.reserve(off, end) // not while the allocator writes zeros there (prewrite.go)
		copy(cur.buf[pos:], b)
	} else if err := l.writeAt(cur, pos, b); err != nil { // reserves too
		return 0, err
	}
	l.wrote.Store(end)
	// A small chunk that ends its segment is the tail of a catch-up's
	// large ones (ReadRaw stops at a segment's end): no warming for it.
	small := !through && end < cur.start+l.opts.SegmentSize
	if end >= l.mu.warmAt && (l.writeThrough || !l.rawThrough || small) {
		l.warmLocked(end)
	}
	return end, nil
}

// rawThroughMin is the smallest chunk a log with RawThrough (and not
// SmallSyncs) writes with WriteAt. A small chunk (a replica keeping up
// with a primary's few sends) is copied into the warmed mapping, cheaper
// than a system call (ext4 takes the inode lock and may journal the
// time stamps on each); a large one (catching up) is written with
// WriteAt and not warmed ahead, which would fault in and zero each page
// before the copy.
const rawThroughMin = 64 << 10

// checkRaw validates the frames of b as if written at pos of s.
func (l *Log) checkRaw(s *segment, pos int64, b []byte) error {
	path := s.path
	for p := int64(0); p < int64(len(b)); {
		at := pos + p
		rest := l.opts.SegmentSize - at
		left := int64(len(b)) - p
		if left < BlankSize || rest < BlankSize {
			return errs.Corrupt(path, at, "raw chunk: %d bytes left, no frame fits", left)
		}
		f := b[p:]
		size, magic := int64(le.Uint32(f[0:])), le.Uint32(f[4:])
		switch {
		case magic == BlankMagic:
			if size != rest || size != left || le.Uint32(f[8:]) != crc32.Checksum(f[0:8], castagnoli) {
				return errs.Corrupt(path, at, "raw chunk: bad end-of-segment marker")
			}
			return nil
		case magic != MagicV1:
			return errs.Corrupt(path, at, "raw chunk: bad magic %#x", magic)
		case size < FrameSize || size > rest || size > left:
			return errs.Corrupt(path, at, "raw chunk: record size %d out of bounds", size)
		case int64(le.Uint64(f[12:])) != s.start+at:
			return errs.Corrupt(path, at, "raw chunk: record stores offset %d, it belongs at %d", int64(le.Uint64(f[12:])), s.start+at)
		case le.Uint32(f[8:]) != frameCRC(f[:size]):
			return errs.Corrupt(path, at, "raw chunk: checksum mismatch")
		}
		// After a record the primary leaves room for a marker, or ends
		// the segment exactly (appendLocked).
		if after := rest - size; after != 0 && after < BlankSize {
			return errs.Corrupt(path, at, "raw chunk: record leaves %d bytes in its segment", after)
		}
		p += size
	}
	return nil
}

// IsBoundary reports whether off is where a record starts in this log, the
// end of a segment, or the write position: a place a replica's log may end.
func (l *Log) IsBoundary(off int64) bool {
	w := l.wrote.Load()
	snap := l.pin()
	defer l.unpin(snap)
	if snap.closed || off > w || off < l.MinOffset() {
		return false
	}
	if off == w || off%l.opts.SegmentSize == 0 {
		return true
	}
	s := snap.at(off, l.opts.SegmentSize)
	if s == nil {
		return false
	}
	defer debug.SetPanicOnFault(guardFaults())
	ok := false
	func() {
		defer func() { _ = recover() }()
		_, k, _ := l.check(s, off-s.start, true)
		ok = k == kRecord || k == kBlank
	}()
	return ok
}

// TruncateTo cuts the log back to off, a record boundary at or above
// MinOffset: the bytes from off to the write position are zeroed and
// synced, later segments are removed, and the write and flushed
// positions move back to off. A replica uses it to drop a tail its
// primary never had. Reads past off fail with ErrNotFound afterwards.
func (l *Log) TruncateTo(off int64) error {
	if !l.IsBoundary(off) {
		return fmt.Errorf("mqlite/commitlog: truncate to %d: not a record boundary in [%d, %d]: %w",
			off, l.MinOffset(), l.wrote.Load(), errs.ErrInvalidArgument)
	}
	if err := l.lockAll(); err != nil {
		return err
	}
	defer l.unlockAll()
	w := l.wrote.Load()
	if off >= w {
		return nil
	}
	segs := l.snap.Load().segs
	i := int((off - segs[0].start) / l.opts.SegmentSize)
	if i >= len(segs) { // off ends the last segment exactly
		i = len(segs) - 1
	}
	s := segs[i]
	pos := off - s.start
	hi := min(w-s.start, l.opts.SegmentSize)
	if w > s.start+l.opts.SegmentSize {
		hi = l.opts.SegmentSize // the rest, a marker included
	}
	if pos < hi {
		clear(s.buf[pos:hi])
		if err := s.m.Sync(int(pos), int(hi-pos)); err != nil {
			err = diskErr("sync", s.path, err)
			l.fence(err)
			return err
		}
	}
	if i+1 < len(segs) {
		if err := l.cutSegmentsLocked(segs, i); err != nil {
			return err
		}
	}
	l.wrote.Store(off)
	l.flushed.Store(min(l.flushed.Load(), off))
	return nil
}

// cutSegmentsLocked removes segs[i+1:] (last first) and makes segs[i]
// the write segment again; the allocator's prepared segment, if any, goes
// too and it is asked for the one after segs[i]. The segments cut keep
// their mappings until Close (the allocator may still be warming the
// newest), under names Open removes (".tmp"); their files are removed at
// Close.
func (l *Log) cutSegmentsLocked(segs []*segment, i int) error {
	cut := slices.Clone(segs[i+1:])
	if !l.mu.allocIdle {
		if p := <-l.allocReady; p.seg != nil {
			cut = append(cut, p.seg)
		}
	}
	for j := len(cut) - 1; j >= 0; j-- {
		s := cut[j]
		if err := l.opts.FS.Rename(s.path, s.path+cutSuffix); err != nil {
			err = diskErr("rename", s.path, err)
			l.fence(err)
			return err
		}
		s.path += cutSuffix
	}
	l.ret.Lock()
	l.publishLocked(&snapshot{segs: slices.Clone(segs[:i+1])})
	l.ret.Unlock()
	l.cut = append(l.cut, cut...)
	if err := l.opts.FS.SyncDir(l.opts.Dir); err != nil {
		err = diskErr("sync dir", l.opts.Dir, err)
		l.fence(err)
		return err
	}
	l.mu.cur = segs[i]
	segs[i].toWrite(&l.opts)
	l.mu.allocIdle = false
	l.allocReq <- segs[i].start + l.opts.SegmentSize
	return nil
}

// cutSuffix marks the file of a segment TruncateTo cut; Open removes it.
const cutSuffix = ".cut.tmp"

// releaseCut unmaps and removes the segments TruncateTo cut, at Close once
// the allocator has stopped.
func (l *Log) releaseCut() error {
	var err error
	for _, s := range l.cut {
		if rerr := s.release(); err == nil && rerr != nil {
			err = diskErr("unmap", s.path, rerr)
		}
		if rerr := l.opts.FS.Remove(s.path); err == nil && rerr != nil {
			err = diskErr("remove", s.path, rerr)
		}
	}
	l.cut = nil
	return err
}

// RestartAt makes an empty log (nothing written, starting at 0) start at
// start instead, a multiple of the segment size: a new replica of a
// primary whose retention removed its first segments begins where the
// primary's log now begins. The old first segment is removed.
func (l *Log) RestartAt(start int64) error {
	if start < 0 || start%l.opts.SegmentSize != 0 {
		return fmt.Errorf("mqlite/commitlog: restart at %d: not a multiple of the segment size %d: %w", start, l.opts.SegmentSize, errs.ErrInvalidArgument)
	}
	if err := l.lockAll(); err != nil {
		return err
	}
	defer l.unlockAll()
	segs := l.snap.Load().segs
	if len(segs) != 1 || segs[0].start != 0 || l.wrote.Load() != 0 {
		return fmt.Errorf("mqlite/commitlog: restart at %d: the log is not empty: %w", start, errs.ErrInvalidArgument)
	}
	if start == 0 {
		return nil
	}
	seg, err := l.openSegment(start, true)
	if err != nil {
		return err
	}
	seg.toWrite(&l.opts)
	// The new segment is published first and the old one cut after, so
	// that a crash in between leaves a log that starts at start.
	if err := l.opts.FS.SyncDir(l.opts.Dir); err != nil {
		seg.release()
		return diskErr("sync dir", l.opts.Dir, err)
	}
	both := []*segment{segs[0], seg}
	l.ret.Lock()
	l.publishLocked(&snapshot{segs: both})
	l.ret.Unlock()
	l.mu.cur = seg
	l.wrote.Store(start)
	l.flushed.Store(start)
	// cutSegmentsLocked removes what follows its kept segment; here the
	// kept one is the new segment, and what goes is segment 0 (and the
	// allocator's segment 1).
	cut := []*segment{segs[0]}
	if !l.mu.allocIdle {
		if p := <-l.allocReady; p.seg != nil {
			cut = append(cut, p.seg)
		}
	}
	for _, s := range cut {
		if err := l.opts.FS.Rename(s.path, s.path+cutSuffix); err != nil {
			err = diskErr("rename", s.path, err)
			l.fence(err)
			return err
		}
		s.path += cutSuffix
	}
	l.ret.Lock()
	l.publishLocked(&snapshot{segs: []*segment{seg}})
	l.ret.Unlock()
	l.cut = append(l.cut, cut...)
	if err := l.opts.FS.SyncDir(l.opts.Dir); err != nil {
		err = diskErr("sync dir", l.opts.Dir, err)
		l.fence(err)
		return err
	}
	l.mu.allocIdle = false
	l.allocReq <- start + l.opts.SegmentSize
	return nil
}

// lockAll takes every lock of the log, as an operation that rewrites its
// tail or its segments must: ErrClosed (nothing held) for a closed log.
func (l *Log) lockAll() error {
	l.delMu.Lock()
	l.flushMu.Lock()
	l.mu.Lock()
	if l.mu.closed {
		l.unlockAll()
		return errs.ErrClosed
	}
	return nil
}

// unlockAll releases what lockAll took.
func (l *Log) unlockAll() {
	l.mu.Unlock()
	l.flushMu.Unlock()
	l.delMu.Unlock()
}
