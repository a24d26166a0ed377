package commitlog

import (
	"errors"
	"fmt"
	"slices"
	"sync/atomic"

	"github.com/mqlite/mqlite/internal/errs"
	"github.com/mqlite/mqlite/vfs"
)

// Retention: readers pin an immutable snapshot of the segment list; a
// segment dropped from the list is retired (its file removed, its mapping
// kept) and unmapped once no pinned snapshot holds it. The design is the
// consume queue's (consumequeue/read.go), with the unmapping moved out of
// every lock so that neither Append nor DeleteBefore waits for a munmap.

// snapshot is an immutable list of mapped segments with the number of
// readers pinning it. Readers only pin the current snapshot, so a
// superseded one drains and stays drained.
type snapshot struct {
	segs    []*segment // contiguous, ascending; the last is the write segment
	readers atomic.Int64
	closed  bool // published by Close: segs are being unmapped, do not touch them
}

// at returns the segment holding off, or nil. Segments are contiguous, so
// no search is needed.
func (s *snapshot) at(off, size int64) *segment {
	if len(s.segs) == 0 || off < s.segs[0].start {
		return nil
	}
	i := (off - s.segs[0].start) / size
	if i >= int64(len(s.segs)) {
		return nil
	}
	return s.segs[i]
}

// pin pins the current snapshot; release it with unpin. Load the write
// position before pinning: the snapshot then holds every segment below it,
// since rollLocked publishes a segment before writing into it.
func (l *Log) pin() *snapshot {
	for {
		s := l.snap.Load()
		s.readers.Add(1)
		if l.snap.Load() == s {
			return s
		}
		l.unpin(s) // superseded meanwhile: its segments may go (maybe by us)
	}
}

// unpin releases a pin. The last reader of a superseded snapshot unmaps the
// retired segments it was the last to hold.
func (l *Log) unpin(s *snapshot) {
	if s.readers.Add(-1) == 0 && l.pending.Load() != 0 && l.snap.Load() != s {
		if err := l.release(l.reap()); err != nil {
			l.opts.Logger.Warn("mqlite/commitlog: release retired segment", "err", err)
		}
	}
}

// reap collects the retired segments no pinned snapshot holds; the caller
// passes them to release.
func (l *Log) reap() []*segment {
	l.ret.Lock()
	defer l.ret.Unlock()
	return l.collectLocked()
}

// publishLocked makes next the snapshot new readers pin, keeping the
// superseded one while readers hold it.
func (l *Log) publishLocked(next *snapshot) {
	if prev := l.snap.Swap(next); prev != nil && prev.readers.Load() != 0 {
		l.ret.old = append(l.ret.old, prev)
	}
}

// retireLocked publishes next, which lacks dropped, and keeps dropped mapped
// until no pinned snapshot holds them. It returns the segments that can be
// unmapped now; pass them to release after unlocking.
func (l *Log) retireLocked(dropped []*segment, next *snapshot) []*segment {
	l.publishLocked(next)
	l.ret.retired = append(l.ret.retired, dropped...)
	return l.collectLocked()
}

// collectLocked forgets superseded snapshots that have drained and takes
// the retired segments that no remaining one holds, counting them as being
// released until release is done with them.
func (l *Log) collectLocked() []*segment {
	// Raised before the reader counts are read: a reader that leaves after
	// we read its count then sees it and reaps what we had to keep.
	l.pending.Store(int64(len(l.ret.retired)))
	live := l.ret.old[:0]
	for _, s := range l.ret.old {
		if s.readers.Load() != 0 {
			live = append(live, s)
		}
	}
	clear(l.ret.old[len(live):])
	l.ret.old = live
	var free []*segment
	kept := l.ret.retired[:0]
	for _, seg := range l.ret.retired {
		if l.pinnedLocked(seg) {
			kept = append(kept, seg)
		} else {
			free = append(free, seg)
		}
	}
	clear(l.ret.retired[len(kept):])
	l.ret.retired = kept
	l.ret.releasing += len(free)
	l.pending.Store(int64(len(kept)))
	return free
}

func (l *Log) pinnedLocked(seg *segment) bool {
	for _, s := range l.ret.old {
		if slices.Contains(s.segs, seg) {
			return true
		}
	}
	return false
}

// release unmaps and closes segments collectLocked handed out, outside every
// lock, and wakes Close. It returns the first error.
func (l *Log) release(free []*segment) error {
	if len(free) == 0 {
		return nil
	}
	var err error
	for _, s := range free {
		if rerr := s.release(); err == nil && rerr != nil {
			err = fmt.Errorf("mqlite/commitlog: unmap %s: %w (%w)", s.path, errs.ErrIO, rerr)
		}
		if s.dropOnRelease {
			if derr := l.dropReleased(s); err == nil {
				err = derr
			}
		}
		if s.spare != "" {
			l.spareReleased(s.spare)
		}
	}
	l.ret.Lock()
	l.ret.releasing -= len(free)
	l.ret.done.Broadcast()
	l.ret.Unlock()
	return err
}

// retireAll is Close's part: it publishes a closed snapshot, waits until no
// reader holds a segment, and unmaps every segment, retired ones included.
func (l *Log) retireAll() error {
	l.ret.Lock()
	cur := l.snap.Load()
	free := l.retireLocked(cur.segs, &snapshot{segs: cur.segs, closed: true})
	var err error
	for {
		if len(free) > 0 {
			l.ret.Unlock()
			if rerr := l.release(free); err == nil {
				err = rerr
			}
			l.ret.Lock()
		}
		if len(l.ret.retired) == 0 && l.ret.releasing == 0 {
			break
		}
		if free = l.collectLocked(); len(free) == 0 {
			l.ret.done.Wait() // a reader leaves, or another goroutine finishes releasing
		}
	}
	l.ret.Unlock()
	return err
}

// DeleteReport says what DeleteBefore removed.
type DeleteReport struct {
	Segments int   // segment files removed
	Bytes    int64 // their size on disk
	NewMin   int64 // MinOffset afterwards
}

// SegmentInfo describes one segment file, for a retention policy.
type SegmentInfo struct {
	Start  int64  // global offset of its first byte
	Size   int64  // file size (every segment is preallocated to SegmentSize)
	Path   string // the file
	Sealed bool   // not the write segment: DeleteBefore may remove it
}

// Segments lists the segments, oldest first; the last is the write segment.
func (l *Log) Segments() []SegmentInfo {
	segs := l.snap.Load().segs
	out := make([]SegmentInfo, len(segs))
	for i, s := range segs {
		out[i] = SegmentInfo{Start: s.start, Size: l.opts.SegmentSize, Path: s.path, Sealed: i < len(segs)-1}
	}
	return out
}

// DeleteBefore removes, oldest first, every segment that ends at or below
// offset (clamped to the write position), never the write segment, and
// moves MinOffset to the first segment kept. Each removal is made durable
// (remove, then sync the directory) before the next, so an interruption
// leaves a contiguous run of segments. Reads below MinOffset then fail with
// ErrNotFound; a reader still inside a removed segment (a Read callback, a
// Scan) keeps its mapping until it returns.
//
// It never takes the append lock: Append and Read proceed meanwhile. A
// failed remove stops it with an ErrIO (what was removed before stays
// removed, see the report); a failed directory sync fences the log. It
// returns ErrInvalidArgument for a negative offset and ErrClosed after
// Close.
func (l *Log) DeleteBefore(offset int64) (DeleteReport, error) {
	l.delMu.Lock()
	defer l.delMu.Unlock()
	rep := DeleteReport{NewMin: l.MinOffset()}
	switch {
	case offset < 0:
		return rep, fmt.Errorf("mqlite/commitlog: delete before %d: %w", offset, errs.ErrInvalidArgument)
	case l.snap.Load().closed:
		return rep, errs.ErrClosed
	}
	if err := l.Fenced(); err != nil {
		return rep, err
	}
	offset = min(offset, l.wrote.Load())
	for {
		// Only DeleteBefore and Close (both under delMu) drop segments, and
		// the write segment is always the last: segs[0] stays ours.
		segs := l.snap.Load().segs
		if len(segs) < 2 || segs[0].start+l.opts.SegmentSize > offset {
			return rep, nil
		}
		s := segs[0]
		if l.unmapFirst {
			if done, err := l.deleteUnmapFirst(s, segs[1].start, &rep); err != nil || !done {
				return rep, err
			}
			continue
		}
		if err := l.dropFile(s); err != nil {
			return rep, err
		}
		serr := l.opts.FS.SyncDir(l.opts.Dir)
		free := l.dropOldest(s)
		rep.Segments++
		rep.Bytes += l.opts.SegmentSize
		rep.NewMin = segs[1].start
		if err := l.release(free); err != nil {
			l.opts.Logger.Warn("mqlite/commitlog: release retired segment", "err", err)
		}
		if serr != nil {
			// After a failed directory sync the removal may be lost while a
			// later one survives: a gap Open would reject. Stop writing.
			l.fence(diskErr("sync dir", l.opts.Dir, serr))
			return rep, l.Fenced()
		}
		l.opts.Logger.Info("mqlite/commitlog: segment deleted", "path", s.path, "min", rep.NewMin)
	}
}

// dropFile removes s's file for DeleteBefore, or renames it to a spare
// (recycle.go).
func (l *Log) dropFile(s *segment) error {
	if l.keepSpare(s.path) {
		spare := s.path + spareSuffix
		err := l.opts.FS.Rename(s.path, spare)
		if err == nil {
			s.spare = spare
			return nil
		}
		l.cancelSpare()
		l.opts.Logger.Warn("mqlite/commitlog: keeping the segment to recycle failed; removing it", "path", s.path, "err", err)
	}
	if err := l.opts.FS.Remove(s.path); err != nil && !errors.Is(err, vfs.ErrNotExist) {
		return diskErr("remove", s.path, err)
	}
	return nil
}

// dropOldest retires s, the first segment, from the current snapshot (not
// the one DeleteBefore looked at: Append may have added a segment since).
func (l *Log) dropOldest(s *segment) []*segment {
	l.ret.Lock()
	defer l.ret.Unlock()
	segs := l.snap.Load().segs
	if segs[0] != s {
		panic("mqlite/commitlog: segment list changed under DeleteBefore")
	}
	return l.retireLocked([]*segment{s}, &snapshot{segs: slices.Clone(segs[1:])})
}

// removedErr is the error for a read below MinOffset.
func removedErr(off, min int64) error {
	return fmt.Errorf("mqlite/commitlog: offset %d was removed (the log starts at %d): %w", off, min, errs.ErrNotFound)
}
