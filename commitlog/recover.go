package commitlog

import (
	"bytes"
	"fmt"
	"hash/crc32"
	"path/filepath"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"

	"github.com/mqlite/mqlite/internal/errs"
	"github.com/mqlite/mqlite/vfs"
)

type kind int

const (
	kRecord kind = iota
	kBlank       // end-of-segment marker, or an exact fit
	kZero        // preallocated zeros: no record here
	kBad
)

// check classifies the bytes at pos of s. It never reads outside the
// segment and never trusts a length before bounding it.
func (l *Log) check(s *segment, pos int64, verifyCRC bool) (int64, kind, string) {
	return checkFrame(s.buf[pos:], l.opts.SegmentSize-pos, s.start+pos, verifyCRC)
}

// checkFrame is check of the frame at the start of b, which stands at
// offset off of the log, rest bytes before its segment's end: b holds at
// least the frame's header and, if its size is at most rest, all of it.
func checkFrame(b []byte, rest, off int64, verifyCRC bool) (int64, kind, string) {
	if rest == 0 {
		return 0, kBlank, ""
	}
	if rest < BlankSize {
		if isZero(b) {
			return 0, kZero, ""
		}
		return 0, kBad, "garbage in the last bytes of the segment"
	}
	size, magic := int64(le.Uint32(b[0:])), le.Uint32(b[4:])
	switch {
	case size == 0 && magic == 0:
		return 0, kZero, ""
	case magic == BlankMagic:
		if size != rest || le.Uint32(b[8:]) != crc32.Checksum(b[0:8], castagnoli) {
			return 0, kBad, "damaged end-of-segment marker"
		}
		return rest, kBlank, ""
	case magic != MagicV1:
		return 0, kBad, fmt.Sprintf("bad magic %#x", magic)
	// Not bounded by MaxRecordSize: a record written under a larger limit
	// (an earlier configuration) is still a record; the CRC decides.
	case size < FrameSize || size > rest:
		return 0, kBad, fmt.Sprintf("record size %d out of bounds", size)
	}
	rec := b[:size]
	// The offset first: it is cheaper, and it is what tells a recycled
	// segment's old records (recycle.go) from this life's.
	if p := int64(le.Uint64(rec[12:])); p != off {
		return 0, kBad, fmt.Sprintf("record stores offset %d", p)
	}
	if verifyCRC && le.Uint32(rec[8:]) != frameCRC(rec) {
		return 0, kBad, "checksum mismatch"
	}
	return size, kRecord, ""
}

// headerEnd is the end of the frame at pos of s if it is a header written
// in this life of the segment (magic, a size within the segment, its own
// offset), valid or torn; 0 otherwise. The old records of a recycled
// segment never qualify.
func (l *Log) headerEnd(s *segment, pos int64) int64 {
	rest := l.opts.SegmentSize - pos
	if rest < FrameSize {
		return 0
	}
	b := s.buf[pos:]
	size := int64(le.Uint32(b[0:]))
	if le.Uint32(b[4:]) != MagicV1 || size < FrameSize || size > rest || int64(le.Uint64(b[12:])) != s.start+pos {
		return 0
	}
	return pos + size
}

func isZero(b []byte) bool {
	for len(b) >= 8 {
		if le.Uint64(b) != 0 {
			return false
		}
		b = b[8:]
	}
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// segmentStart parses a segment file name: 20 decimal digits.
func segmentStart(name string) (int64, bool) {
	start, err := strconv.ParseInt(name, 10, 64)
	return start, len(name) == 20 && err == nil && start >= 0
}

// checkContiguous sorts starts and checks, segment by segment, that they
// are aligned to the segment size, follow each other without a gap and
// pass more (if not nil).
func (l *Log) checkContiguous(starts []int64, more func(i int, path string) error) error {
	sort.Slice(starts, func(i, j int) bool { return starts[i] < starts[j] })
	for i, st := range starts {
		path := filepath.Join(l.opts.Dir, segmentName(st))
		if st%l.opts.SegmentSize != 0 {
			return errs.Corrupt(path, 0, "segment start is not a multiple of the segment size %d", l.opts.SegmentSize)
		}
		if i > 0 && st != starts[i-1]+l.opts.SegmentSize {
			return errs.Corrupt(path, 0, "segments are not contiguous: previous starts at %d", starts[i-1])
		}
		if more != nil {
			if err := more(i, path); err != nil {
				return err
			}
		}
	}
	return nil
}

// listSegments lists the segments in order, removing leftover temporary
// files and checking that every sealed one has the full size.
func (l *Log) listSegments() ([]int64, error) {
	dir := l.opts.Dir
	names, err := l.opts.FS.ReadDir(dir)
	if err != nil {
		return nil, diskErr("list", dir, err)
	}
	var starts []int64
	for _, name := range names {
		path := filepath.Join(dir, name)
		if strings.HasSuffix(name, ".tmp") || isSpare(name) {
			l.opts.FS.Remove(path)
			continue
		}
		if name == readersName {
			continue
		}
		start, ok := segmentStart(name)
		if !ok {
			l.opts.Logger.Warn("mqlite/commitlog: ignoring unexpected file", "path", path)
			continue
		}
		if _, isDir, err := l.opts.FS.Stat(path); err != nil || isDir {
			return nil, errs.Corrupt(path, 0, "segment is not a regular file")
		}
		starts = append(starts, start)
	}
	sealedSize := func(i int, path string) error {
		if i == len(starts)-1 {
			return nil // the last segment may be short (recover completes it)
		}
		size, _, err := l.opts.FS.Stat(path)
		if err != nil {
			return diskErr("stat", path, err)
		}
		if size != l.opts.SegmentSize {
			return errs.Corrupt(path, 0, "sealed segment is %d bytes, want %d", size, l.opts.SegmentSize)
		}
		return nil
	}
	if err := l.checkContiguous(starts, sealedSize); err != nil {
		return nil, err
	}
	return starts, nil
}

// recover maps the segments and validates the tail; see the package comment.
func (l *Log) recover() error {
	starts, err := l.listSegments()
	if err != nil {
		return err
	}
	fresh := len(starts) == 0 // a new log: nothing to validate or repair
	if fresh {
		starts = []int64{0}
	}
	segs, err := l.openSegments(starts)
	if err != nil {
		return err
	}
	defer debug.SetPanicOnFault(guardFaults())
	i, pos, k, reason := l.validate(segs, l.firstToValidate(segs))
	end := segs[i].start + pos
	l.report.LostFlushed = max(0, l.opts.Trusted-end)
	zeroTail := fresh || k == kZero && l.opts.CleanShutdown
	var tail [][2]int64 // what may hold data after pos: the rest reads as zeros
	if !zeroTail {
		// Reading the rest of a 1 GiB segment would fault in a page for
		// every 4 KiB never written; the file system can tell which parts
		// were (vfs.DataRanges), and zeros hold no record.
		tail = vfs.DataRanges(l.opts.FS, segs[i].path, pos&^(vfs.PageSize-1), l.opts.SegmentSize)
	}
	if fresh {
		// The segment was just created: nothing to validate or repair.
		k = kZero
	}
	limit := int64(0) // nothing of this life's past pos that could pass for a record
	if !fresh && (k == kBad || !l.opts.CleanShutdown) {
		if limit, err = l.classifyTail(segs, i, pos, reason, tail); err != nil {
			return err
		}
	}
	if err := l.truncateAfter(segs, i, pos, limit, tail); err != nil {
		return err
	}
	l.report.End = end
	l.mu.cur = l.snap.Load().segs[i]
	l.wrote.Store(end)
	l.flushed.Store(segs[0].start)
	if _, err := l.Flush(); err != nil {
		return err
	}
	l.logRepairs(end, reason)
	return nil
}

// openSegments maps the segments that start at starts (the last one
// writable), publishes them, and syncs the directory.
func (l *Log) openSegments(starts []int64) ([]*segment, error) {
	segs := make([]*segment, 0, len(starts))
	for _, st := range starts {
		s, err := l.openSegment(st, len(segs) == len(starts)-1)
		if err != nil {
			for _, s := range segs {
				s.release()
			}
			return nil, err
		}
		segs = append(segs, s)
	}
	l.snap.Store(&snapshot{segs: segs})
	if err := l.opts.FS.SyncDir(l.opts.Dir); err != nil {
		return nil, diskErr("sync dir", l.opts.Dir, err)
	}
	return segs, nil
}

// firstToValidate is the segment validation starts at: the third-to-last,
// the one holding RecoverFrom when it is set, and after a crash no later
// than the one holding Trusted.
func (l *Log) firstToValidate(segs []*segment) int {
	si := max(0, len(segs)-3)
	if l.opts.RecoverFrom >= 0 {
		si = sort.Search(len(segs), func(i int) bool { return segs[i].start+l.opts.SegmentSize > l.opts.RecoverFrom })
		si = min(si, len(segs)-1)
	} else if !l.opts.CleanShutdown {
		// After a crash nothing past Trusted is known to be durable: a
		// page of an older, never-synced segment may be lost while later
		// ones survived, so validation starts no later than Trusted.
		t := sort.Search(len(segs), func(i int) bool { return segs[i].start+l.opts.SegmentSize > l.opts.Trusted })
		si = min(si, t, len(segs)-1)
	}
	return si
}

// validate scans the records from segment si to the log's end and returns
// where the valid records end (segment i, offset pos in it), what stopped
// the scan and why.
func (l *Log) validate(segs []*segment, si int) (i int, pos int64, k kind, reason string) {
	l.report.Start = segs[si].start
	i, pos, k, reason = l.scanFrom(segs, si, len(segs))
	// The next Open keeps segs[:i+1] and validates from the third-to-last
	// of those. When the log ends early (damage, lost segments), that is
	// before this window: validate back to it too, or a damaged record
	// there would pass now and fail the next Open. Segments that lead
	// into segs[si] unbroken leave what was found there as it is.
	for next := max(0, i-2); next < si; next = max(0, i-2) {
		l.report.Start = segs[next].start
		j, p, kj, r := l.scanFrom(segs, next, si)
		if j < si {
			i, pos, k, reason = j, p, kj, r
		}
		si = next
	}
	return i, pos, k, reason
}

// logRepairs logs what recovery cut and what it found lost.
func (l *Log) logRepairs(end int64, reason string) {
	if l.report.TruncatedBytes > 0 || l.report.RemovedSegments > 0 {
		l.opts.Logger.Warn("mqlite/commitlog: torn tail truncated", "end", end, "bytes", l.report.TruncatedBytes,
			"records", l.report.DroppedRecords, "segments", l.report.RemovedSegments, "reason", reason)
	}
	if l.report.LostFlushed > 0 {
		l.opts.Logger.Error("mqlite/commitlog: the log ends before what was flushed: durable records are lost",
			"end", end, "flushed", l.opts.Trusted, "lost", l.report.LostFlushed, "reason", reason)
	}
}

// scanFrom validates records from the start of segs[si] on, across
// end-of-segment markers, up to the first position holding no valid
// record: it returns that segment's index and position, and what is there.
// It stops at the start of segs[upto] (returning upto, 0 and kBlank) if it
// gets there.
func (l *Log) scanFrom(segs []*segment, si, upto int) (i int, pos int64, k kind, reason string) {
	return l.scanAt(segs, si, 0, upto)
}

// scanAt is scanFrom from position pos of segs[si], a record boundary.
func (l *Log) scanAt(segs []*segment, si int, pos int64, upto int) (i int, _ int64, k kind, reason string) {
	i = si
	for {
		var n int64
		n, k, reason = l.check(segs[i], pos, true)
		if k == kRecord {
			pos += n
			continue
		}
		if k == kBlank && i+1 < len(segs) {
			i, pos = i+1, 0
			if i == upto {
				return i, 0, kBlank, ""
			}
			continue
		}
		if k == kBlank {
			pos = l.opts.SegmentSize
		}
		return i, pos, k, reason
	}
}

// classifyTail decides whether the invalid bytes at (segs[i], pos) are a
// torn tail (nil) or proven damage (ErrCorrupt), counting what a
// truncation would discard. It returns the end of the last frame header of
// this life of segs[i] past pos (headerEnd), valid or torn: beyond it
// nothing can ever pass for a record of this segment.
func (l *Log) classifyTail(segs []*segment, i int, pos int64, reason string, tail [][2]int64) (int64, error) {
	x := segs[i].start + pos
	corrupt := func(at *segment, p int64, why string) error {
		return errs.Corrupt(segs[i].path, pos, "%s; a valid record at offset %d (%s) proves the data was durable", reason, at.start+p, why)
	}
	// A valid record after x is proof when it was written after x was
	// synced, or when the checkpoint says x was synced.
	prove := func(s *segment, p int64) error {
		synced := int64(le.Uint64(s.buf[p+20:]))
		l.report.DroppedRecords++
		if synced > x {
			return corrupt(s, p, fmt.Sprintf("written after a flush through %d", synced))
		}
		if l.opts.Trusted > x {
			return corrupt(s, p, fmt.Sprintf("the checkpoint says the log was flushed through %d", l.opts.Trusted))
		}
		return nil
	}
	s := segs[i]
	var magic [4]byte
	le.PutUint32(magic[:], MagicV1)
	limit := l.headerEnd(s, pos)
	p := pos + 1
	for _, r := range tail {
		p = max(p, r[0])
		for p+BlankSize <= r[1] {
			j := bytes.Index(s.buf[p+4:r[1]], magic[:])
			if j < 0 {
				break
			}
			cand := p + int64(j)
			limit = max(limit, l.headerEnd(s, cand))
			if n, k, _ := l.check(s, cand, true); k == kRecord {
				if err := prove(s, cand); err != nil {
					return 0, err
				}
				p = cand + n
				continue
			}
			p = cand + 1
		}
	}
	for _, s := range segs[i+1:] {
		for p := int64(0); ; {
			n, k, _ := l.check(s, p, true)
			if k != kRecord {
				break
			}
			if err := prove(s, p); err != nil {
				return 0, err
			}
			p += n
		}
	}
	return limit, nil
}

// truncateAfter zeroes segs[i] from pos to the end of its page or to limit
// if that is further (only pages that hold data, in the tail ranges that
// may; none when the rest is known to be zeros) and deletes later
// segments, durably. Past limit nothing can pass for a record of this
// segment (classifyTail), so nothing there needs zeroing: a recycled
// segment's old records are left alone.
func (l *Log) truncateAfter(segs []*segment, i int, pos, limit int64, tail [][2]int64) error {
	s := segs[i]
	limit = max(limit, min((pos/vfs.PageSize+1)*vfs.PageSize, l.opts.SegmentSize))
	lo, hi := int64(-1), int64(-1)
	for _, r := range tail {
		for p := max(pos, r[0]); p < min(r[1], limit); {
			e := min((p/vfs.PageSize+1)*vfs.PageSize, r[1], limit)
			if !isZero(s.buf[p:e]) {
				if lo < 0 {
					lo = p
				}
				hi = e
				clear(s.buf[p:e])
			}
			p = e
		}
	}
	if lo >= 0 {
		l.report.TruncatedBytes += hi - lo
		if err := s.m.Sync(int(lo), int(hi-lo)); err != nil {
			return diskErr("sync", s.path, err)
		}
	}
	if i+1 == len(segs) {
		return nil
	}
	// Last first: an interrupted removal (a crash, an error) must leave a
	// contiguous run of segments, or the next Open would find a gap.
	for j := len(segs) - 1; j > i; j-- {
		s := segs[j]
		s.release()
		if err := l.opts.FS.Remove(s.path); err != nil {
			return diskErr("remove", s.path, err)
		}
		l.report.RemovedSegments++
	}
	l.snap.Store(&snapshot{segs: segs[: i+1 : i+1]})
	if err := l.opts.FS.SyncDir(l.opts.Dir); err != nil {
		return diskErr("sync dir", l.opts.Dir, err)
	}
	return nil
}
