package commitlog

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"

	"github.com/mqlite/mqlite/internal/errs"
	"github.com/mqlite/mqlite/vfs"
)

// errShort marks a segment file shorter than the segment size: one the
// owner is allocating (or whose allocation a crash interrupted).
var errShort = errors.New("segment shorter than the segment size")

// openReadOnly opens the log for reading only (Options.ReadOnly): it maps
// the segments read-only and finds the end without changing anything; see
// "Read-only open" in the package comment.
func openReadOnly(opts Options) (*Log, error) {
	l := &Log{
		opts:       opts,
		allocReq:   make(chan int64, 1),
		allocReady: make(chan prepared, 1),
		quit:       make(chan struct{}),
		allocDone:  make(chan struct{}),
	}
	close(l.allocDone) // no allocator
	l.ret.done.L = &l.ret.Mutex
	l.snap.Store(&snapshot{})
	// Every write path checks Fenced first, so none touches the
	// read-only mappings.
	ro := fmt.Errorf("mqlite/commitlog: %s is open read-only: %w", opts.Dir, errs.ErrReadOnly)
	l.fenced.Store(&ro)
	if err := l.recoverReadOnly(); err != nil {
		l.releaseAll()
		return nil, err
	}
	return l, nil
}

// recoverReadOnly maps the segments and finds the end of the valid records.
func (l *Log) recoverReadOnly() (err error) {
	starts, err := l.listReadOnly()
	if err != nil {
		return err
	}
	segs := make([]*segment, 0, len(starts))
	for i, st := range starts {
		s, err := l.mapReadOnly(st)
		switch {
		case err == nil:
			segs = append(segs, s)
			continue
		case errors.Is(err, errShort) && i == len(starts)-1:
			// Being allocated: nothing is written in it yet.
		case errors.Is(err, vfs.ErrNotExist) && len(segs) == 0:
			continue // removed by the owner's retention since the listing
		case errors.Is(err, errShort):
			err = errs.Corrupt(filepath.Join(l.opts.Dir, segmentName(st)), 0, "sealed segment shorter than %d bytes", l.opts.SegmentSize)
		}
		if err != nil && !errors.Is(err, errShort) {
			for _, s := range segs {
				s.release()
			}
			return err
		}
		break
	}
	l.snap.Store(&snapshot{segs: segs})
	if len(segs) == 0 {
		return nil
	}
	defer debug.SetPanicOnFault(guardFaults())
	defer l.catchFault(&err)
	// Start at the last segment that begins with a record: the owner
	// writes into a segment only after sealing the one before it.
	si := 0
	for i := len(segs) - 1; i > 0; i-- {
		if _, k, _ := l.check(segs[i], 0, true); k == kRecord {
			si = i
			break
		}
	}
	// It ends at zeros, or at a record the owner is writing now (or a
	// torn one). Damage with valid records after it is not the end: the
	// view reads past it (readPastDamage).
	i, pos, k, _ := l.scanFrom(segs, si, len(segs))
	i, pos, k = l.readPastDamage(segs, i, pos, k)
	end := segs[i].start + pos
	if k == kBad {
		l.report.Torn = [2]int64{end, segs[i].start + l.tornEnd(segs[i], pos)}
	}
	for _, s := range segs[i+1:] { // preallocated ahead, empty as of now
		s.release()
	}
	l.snap.Store(&snapshot{segs: segs[: i+1 : i+1]})
	l.mu.cur = segs[i]
	l.wrote.Store(end)
	l.flushed.Store(end)
	l.report.Start, l.report.End = segs[si].start, end
	return nil
}

// readPastDamage goes on from where scanFrom stopped (segs[i], pos, what
// is there): while that is invalid bytes followed by a valid record of
// this life of the same segment, it records the bytes in between in
// Report.Damaged and scans on from that record. Invalid bytes followed by
// nothing valid are where the log ends (the owner writing, a torn tail).
// A reader sharing the owner's page cache might see a record the owner is
// writing before the ones after it: the bytes are checked again once a
// valid record is found after them.
func (l *Log) readPastDamage(segs []*segment, i int, pos int64, k kind) (int, int64, kind) {
	for k == kBad {
		s := segs[i]
		next, ok := l.nextRecord(s, pos)
		if !ok {
			break
		}
		if _, again, _ := l.check(s, pos, true); again == kRecord {
			next = pos // complete now: the owner was writing it
		} else {
			l.report.Damaged = append(l.report.Damaged, [2]int64{s.start + pos, s.start + next})
		}
		i, pos, k, _ = l.scanAt(segs, i, next, len(segs))
	}
	return i, pos, k
}

// tornEnd is the end of the invalid bytes at pos of s, which no valid
// record follows: the end its frame header claims if that is plausible
// (headerEnd), else the first run of 64 zero bytes.
func (l *Log) tornEnd(s *segment, pos int64) int64 {
	if e := l.headerEnd(s, pos); e > 0 {
		return e
	}
	for p := pos; p < l.opts.SegmentSize; p += 64 {
		e := min(p+64, l.opts.SegmentSize)
		if isZero(s.buf[p:e]) {
			return max(p, pos+1)
		}
	}
	return l.opts.SegmentSize
}

// nextRecord is the position of the first valid record of this life of s
// after pos, if there is one. It reads only the parts of the file that
// hold data (vfs.DataRanges).
func (l *Log) nextRecord(s *segment, pos int64) (int64, bool) {
	var magic [4]byte
	le.PutUint32(magic[:], MagicV1)
	p := pos + 1
	for _, r := range vfs.DataRanges(l.opts.FS, s.path, pos&^(vfs.PageSize-1), l.opts.SegmentSize) {
		p = max(p, r[0])
		for p+FrameSize <= r[1] {
			j := bytes.Index(s.buf[p+4:r[1]], magic[:])
			if j < 0 {
				break
			}
			cand := p + int64(j)
			if _, k, _ := l.check(s, cand, true); k == kRecord {
				return cand, true
			}
			p = cand + 1
		}
	}
	return 0, false
}

// listReadOnly lists the segment files like listSegments, without
// removing anything and without checking sizes (mapReadOnly does).
func (l *Log) listReadOnly() ([]int64, error) {
	names, err := l.opts.FS.ReadDir(l.opts.Dir)
	if err != nil {
		return nil, diskErr("list", l.opts.Dir, err)
	}
	var starts []int64
	for _, name := range names {
		if start, ok := segmentStart(name); ok {
			starts = append(starts, start)
		}
	}
	if err := l.checkContiguous(starts, nil); err != nil {
		return nil, err
	}
	return starts, nil
}

// mapReadOnly maps a whole segment read-only. A file shorter than the
// segment size is errShort, a missing one wraps vfs.ErrNotExist.
func (l *Log) mapReadOnly(start int64) (_ *segment, err error) {
	path := filepath.Join(l.opts.Dir, segmentName(start))
	// The shared lock first, held while the file is mapped: the owner
	// recycles a removed segment only if it can lock the file
	// exclusively, and the lock is on the file whatever its name.
	lock, err := l.opts.FS.LockShared(path)
	switch {
	case errors.Is(err, vfs.ErrNotExist):
		return nil, err
	case errors.Is(err, vfs.ErrLocked):
		// Only the owner locks a segment file exclusively, and only once
		// it is a spare: this name was removed after it was listed.
		return nil, fmt.Errorf("mqlite/commitlog: %s is being recycled: %w", path, vfs.ErrNotExist)
	case err != nil:
		l.opts.Logger.Warn("mqlite/commitlog: cannot lock a segment shared; the owner may recycle it under this reader", "path", path, "err", err)
		lock = nil
	}
	defer func() {
		if err != nil && lock != nil {
			lock.Close()
		}
	}()
	f, err := l.opts.FS.OpenFile(path, os.O_RDONLY, 0)
	if errors.Is(err, vfs.ErrNotExist) {
		return nil, err
	}
	if err != nil {
		return nil, diskErr("open", path, err)
	}
	defer f.Close()
	size, err := f.Size()
	switch {
	case err != nil:
		return nil, diskErr("stat", path, err)
	case size < l.opts.SegmentSize:
		return nil, errShort
	case size > l.opts.SegmentSize:
		return nil, errs.Corrupt(path, 0, "segment is %d bytes, longer than the segment size %d", size, l.opts.SegmentSize)
	}
	m, err := f.Map(int(l.opts.SegmentSize))
	if err != nil {
		return nil, diskErr("map", path, err)
	}
	return &segment{start: start, path: path, m: m, buf: m.Bytes(), lock: lock}, nil
}
