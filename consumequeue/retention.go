package consumequeue

import (
	"errors"
	"fmt"

	"github.com/mqlite/mqlite/internal/errs"
	"github.com/mqlite/mqlite/vfs"
)

// TruncateAfterPhys drops every entry whose End() is past end, for recovery
// after the CommitLog was truncated to end: MaxOffset moves back to just
// after the last entry that still fits (MinOffset too, if it was beyond),
// the dropped bytes are zeroed and synced, and files left without entries
// are removed. Logical offsets are kept: the dispatcher re-appends from the
// new MaxOffset.
//
// It is meant to run before consumers start. Concurrent readers are safe:
// they wait while published bytes are rewritten.
//
// On a read-only queue it only hides those entries: MaxOffset moves back,
// no byte or file changes.
func (q *Queue) TruncateAfterPhys(end int64) error {
	q.maint.Lock()
	defer q.maint.Unlock()
	q.mu.Lock()
	defer q.mu.Unlock()
	if err := q.writableLocked("truncate"); err != nil {
		return err
	}
	if end < 0 {
		return fmt.Errorf("mqlite/consumequeue: truncate %s after %d: %w", q.dir, end, ErrInvalidArgument)
	}
	segs := q.snap.Load().segs
	if len(segs) == 0 {
		return nil
	}
	newMax, damaged := q.keptAfterPhys(segs, end)
	if newMax == q.max.Load() {
		return nil
	}
	if q.readOnly {
		q.lowerMaxLocked(segs, newMax, nil)
		return nil
	}
	if damaged {
		// A damaged entry went with the cut one: its record may lie below
		// end, so the queue needs re-dispatch from where it now ends.
		q.repaired.Store(true)
	}
	if err := q.truncateToLocked(segs, newMax); err != nil {
		return err
	}
	// Fewer files: the next Open's window reaches back into files this
	// one trusted.
	return q.checkBackLocked()
}

// truncateToLocked drops the entries from newMax (< MaxOffset) on: it
// zeroes and syncs their slots in the file holding newMax, and removes
// the files after it (and that file too if it is left empty and is not
// the first).
func (q *Queue) truncateToLocked(segs []*segment, newMax int64) error {
	first, oldMax := segs[0].start, q.max.Load()
	k := int((newMax - first) / q.perFile) // < len(segs): newMax < oldMax
	s := segs[k]
	lo := int(newMax-s.start) * EntrySize
	hi := int(min(oldMax, s.start+q.perFile)-s.start) * EntrySize
	q.lowerMaxLocked(segs, newMax, func() { clear(s.b[lo:hi]) })
	if err := s.m.Sync(lo, hi-lo); err != nil {
		q.mu.fenced = err
		return fmt.Errorf("mqlite/consumequeue: truncate: sync %s: %w: %w", s.path, ErrFenced, err)
	}
	// The zeroed, synced tail of s ends recovery there even if a removal
	// below does not survive a crash. A file left empty goes too, unless it
	// is the first: only the first file may be empty, so the last entry
	// (MaxPhysEnd) survives retention and reopening.
	if lo == 0 && k > 0 {
		k--
	}
	dropped := segs[k+1:]
	if len(dropped) == 0 {
		return nil
	}
	if !q.removeOnRelease(dropped) {
		for _, d := range dropped {
			if err := q.fs.Remove(d.path); err != nil && !errors.Is(err, vfs.ErrNotExist) {
				return fmt.Errorf("mqlite/consumequeue: truncate: remove %s: %w", d.path, errs.Disk(err))
			}
		}
	}
	q.retireLocked(dropped, append([]*segment(nil), segs[:k+1]...))
	return nil
}

// keptAfterPhys is the end (MaxOffset) a truncation after CommitLog
// offset end leaves: entries whose End is past end go, and damaged ones
// met on the way (damaged says there was one).
func (q *Queue) keptAfterPhys(segs []*segment, end int64) (newMax int64, damaged bool) {
	first := segs[0].start
	for newMax = q.max.Load(); newMax > first; newMax-- {
		e, ok := decodeEntry(q.slot(segs, newMax-1))
		if ok && (isFiller(e) || e.End() <= end) {
			break
		}
		damaged = damaged || !ok
	}
	return newMax, damaged
}

// lowerMaxLocked moves MaxOffset back to newMax (and MinOffset with it if
// needed) under an odd generation, so that readers retry; rewrite, if
// set, runs inside that window (the writer clears the dropped slots; a
// read-only queue only hides them).
func (q *Queue) lowerMaxLocked(segs []*segment, newMax int64, rewrite func()) {
	var physEnd int64
	if newMax > segs[0].start {
		if e, ok := decodeEntry(q.slot(segs, newMax-1)); ok && !isFiller(e) {
			physEnd = e.End()
		}
	}
	q.gen.Add(1) // odd: readers retry
	q.max.Store(newMax)
	if q.min.Load() > newMax {
		q.min.Store(newMax)
	}
	q.physEnd.Store(physEnd)
	if rewrite != nil {
		rewrite()
	}
	q.gen.Add(1)
}

// DeleteBelowPhys applies CommitLog retention: it removes the oldest data
// files all of whose entries point below minPhys (Offset < minPhys), never
// the last file, and moves MinOffset to the first entry with
// Offset >= minPhys (or to MaxOffset if there is none). It returns the
// number of files removed.
//
// MinOffset is not persisted: Open derives it from the first file, so call
// DeleteBelowPhys again after Open to re-apply retention inside that file.
// On a read-only queue it only moves MinOffset and removes nothing.
//
// Removed files stay mapped until every reader that may hold them is done
// (checked here, on each new file, by Flush and by Close), so readers never
// touch unmapped memory; a reader racing with the removal may get
// ErrNotFound.
func (q *Queue) DeleteBelowPhys(minPhys int64) (int, error) {
	q.maint.Lock()
	defer q.maint.Unlock()
	q.mu.Lock()
	defer q.mu.Unlock()
	if err := q.writableLocked("delete"); err != nil {
		return 0, err
	}
	segs := q.snap.Load().segs
	if len(segs) == 0 {
		return 0, nil
	}
	del := 0
	for del < len(segs)-1 {
		e, ok := decodeEntry(segs[del].b[q.fileSize-EntrySize:])
		if !ok || (!isFiller(e) && e.Offset >= minPhys) {
			break
		}
		del++
	}

	// Advance min before dropping files, so a reader that sees the new
	// snapshot also sees the new min.
	cur, end := q.min.Load(), q.max.Load()
	lo, hi := max(cur, segs[del].start), end
	for lo < hi { // first entry kept (keptBelow)
		mid := lo + (hi-lo)/2
		if q.keptBelow(segs, mid, hi, minPhys) {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	if lo > cur {
		q.min.Store(lo)
	}
	if del == 0 || q.readOnly {
		return 0, nil
	}
	var err error
	n := 0
	if q.removeOnRelease(segs[:del]) {
		n = del // removed as retireLocked unmaps them
	}
	for ; n < del; n++ {
		if rerr := q.fs.Remove(segs[n].path); rerr != nil && !errors.Is(rerr, vfs.ErrNotExist) {
			err = fmt.Errorf("mqlite/consumequeue: delete: remove %s: %w", segs[n].path, errs.Disk(rerr))
			break
		}
	}
	if n > 0 {
		q.retireLocked(segs[:n:n], append([]*segment(nil), segs[n:]...))
	}
	return n, err
}

// keptBelow reports whether retention at minPhys keeps the entry at
// logical (< end): a real entry with Offset >= minPhys. A damaged entry
// goes as the next valid one after it, before end, does, and stays if
// there is none: so the search over [MinOffset, end) has one answer
// whatever entries it probes (it depended on end, which recovery moves,
// and a damaged entry probed took every entry before it out of the
// queue). Fillers go.
func (q *Queue) keptBelow(segs []*segment, logical, end, minPhys int64) bool {
	for ; logical < end; logical++ {
		e, ok := decodeEntry(q.slot(segs, logical))
		if ok {
			return !isFiller(e) && e.Offset >= minPhys
		}
	}
	return true
}

// writableLocked reports why the queue refuses maintenance writes, if it does.
func (q *Queue) writableLocked(op string) error {
	if q.closed.Load() {
		return fmt.Errorf("mqlite/consumequeue: %s %s: %w", op, q.dir, ErrClosed)
	}
	if q.mu.fenced != nil {
		return fmt.Errorf("mqlite/consumequeue: %s %s: %w (after: %w)", op, q.dir, ErrFenced, q.mu.fenced)
	}
	return nil
}
