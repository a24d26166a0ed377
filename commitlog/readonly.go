package commitlog

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"

	"github.com/mqlite/mqlite/internal/errs"
	"github.com/mqlite/mqlite/internal/vfs"
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
	// torn one).
	i, pos, _, _ := l.scanFrom(segs, si, len(segs))
	end := segs[i].start + pos
	for _, s := range segs[i+1:] { // preallocated ahead, empty as of now
		s.release()
	}
	l.snap.Store(&snapshot{segs: segs[: i+1 : i+1]})
	l.mu.cur = segs[i]
	l.wrote.Store(end)
	l.flushed.Store(end)
	l.report = Report{Start: segs[si].start, End: end}
	return nil
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
