package consumequeue

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/mqlite/mqlite/internal/errs"
	"github.com/mqlite/mqlite/vfs"
)

// createLocked creates, preallocates and maps the data file starting at
// logical offset start, and publishes it in the snapshot.
func (q *Queue) createLocked(start int64) (*segment, error) {
	if q.mu.lazy {
		if err := q.materializeLocked(); err != nil {
			return nil, err
		}
	}
	path := filepath.Join(q.dir, fileName(start*EntrySize))
	f, err := q.fs.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("mqlite/consumequeue: create %s: %w", path, errs.Disk(err))
	}
	fail := func(err error) (*segment, error) {
		f.Close()
		q.fs.Remove(path)
		return nil, fmt.Errorf("mqlite/consumequeue: create %s: %w", path, errs.Disk(err))
	}
	if err := f.Allocate(int64(q.fileSize)); err != nil {
		return fail(err)
	}
	m, err := f.Map(q.fileSize)
	if err != nil {
		return fail(err)
	}
	seg := &segment{start: start, path: path, m: m, b: m.Bytes()}
	if len(seg.b) != q.fileSize {
		m.Unmap()
		return fail(fmt.Errorf("mapping has %d bytes, want %d", len(seg.b), q.fileSize))
	}
	if err := f.Close(); err != nil {
		m.Unmap()
		q.fs.Remove(path)
		return nil, fmt.Errorf("mqlite/consumequeue: create %s: %w", path, errs.Disk(err))
	}
	old := q.snap.Load().segs
	segs := make([]*segment, len(old), len(old)+1)
	copy(segs, old)
	q.publishLocked(append(segs, seg))
	q.mu.dirDirty = true
	return seg, nil
}

// dropLocked removes the files of dropped (they hold no live entry) and
// publishes keep as the snapshot. The removal is made durable first, so that
// a crash cannot bring the old files back in front of a restarted queue.
func (q *Queue) dropLocked(dropped, keep []*segment) error {
	if len(dropped) == 0 {
		return nil
	}
	if q.removeOnRelease(dropped) {
		q.retireLocked(dropped, append([]*segment(nil), keep...))
		if err := q.fs.SyncDir(q.dir); err != nil {
			q.mu.fenced = err
			return fmt.Errorf("mqlite/consumequeue: sync %s: %w: %w", q.dir, ErrFenced, err)
		}
		return nil
	}
	for _, s := range dropped {
		if err := q.fs.Remove(s.path); err != nil && !errors.Is(err, vfs.ErrNotExist) {
			return fmt.Errorf("mqlite/consumequeue: remove %s: %w", s.path, errs.Disk(err))
		}
	}
	if err := q.fs.SyncDir(q.dir); err != nil {
		q.mu.fenced = err
		return fmt.Errorf("mqlite/consumequeue: sync %s: %w: %w", q.dir, ErrFenced, err)
	}
	q.retireLocked(dropped, append([]*segment(nil), keep...))
	return nil
}

// publishLocked makes segs the snapshot new readers pin.
func (q *Queue) publishLocked(segs []*segment) {
	q.mu.old = append(q.mu.old, q.snap.Swap(&snapshot{segs: segs}))
	q.releaseRetiredLocked()
}

// retireLocked publishes next as the snapshot and keeps the dropped segments
// mapped until no pinned snapshot holds them. Their files must already be
// removed.
func (q *Queue) retireLocked(dropped, next []*segment) {
	q.mu.retired = append(q.mu.retired, dropped...)
	q.mu.dirDirty = true
	q.publishLocked(next)
}

// releaseRetiredLocked forgets superseded snapshots that have drained, and
// unmaps retired segments that no remaining one holds. A drained snapshot
// stays drained: readers never pin a snapshot that is no longer current.
func (q *Queue) releaseRetiredLocked() {
	live := q.mu.old[:0]
	for _, s := range q.mu.old {
		if s.readers.Load() != 0 {
			live = append(live, s)
		}
	}
	clear(q.mu.old[len(live):])
	q.mu.old = live
	kept := q.mu.retired[:0]
	for _, seg := range q.mu.retired {
		if q.pinnedLocked(seg) {
			kept = append(kept, seg)
			continue
		}
		if err := seg.release(); err != nil {
			q.log.Warn("consumequeue: release retired file", "file", seg.path, "err", err)
		}
		q.removeReleased(seg)
	}
	clear(q.mu.retired[len(kept):])
	q.mu.retired = kept
}

func (q *Queue) pinnedLocked(seg *segment) bool {
	for _, s := range q.mu.old {
		if slices.Contains(s.segs, seg) {
			return true
		}
	}
	return false
}

func (s *segment) release() error {
	var err error
	if s.m != nil {
		err = s.m.Unmap()
		s.m, s.b = nil, nil
	}
	return err
}

// removeOnRelease marks dropped to have their files removed once they are
// unmapped, where the file system cannot remove a mapped file
// (q.unmapFirst), and reports whether it did; elsewhere the caller removes
// the files first, as it always did.
func (q *Queue) removeOnRelease(dropped []*segment) bool {
	if !q.unmapFirst {
		return false
	}
	for _, s := range dropped {
		s.removeOnRelease = true
	}
	return true
}

// removeReleased removes the file of s, just unmapped, if it was marked
// for it. A failure is logged: the file holds no live entry, and the next
// Open's retention pass removes it.
func (q *Queue) removeReleased(s *segment) {
	if !s.removeOnRelease {
		return
	}
	s.removeOnRelease = false
	if err := q.fs.Remove(s.path); err != nil && !errors.Is(err, vfs.ErrNotExist) {
		q.log.Warn("consumequeue: remove released file", "file", s.path, "err", err)
	}
}
