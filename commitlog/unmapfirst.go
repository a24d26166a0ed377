package commitlog

// Where a mapped file cannot be removed or renamed (Windows; vfs.StrictMapFS
// in the tests), DeleteBefore reverses its first two steps (doc.go): it
// retires the oldest segment from the snapshot first, so that no new reader
// finds it, and removes (or renames to a spare) its file once the segment is
// unmapped, then syncs the directory: at once if no reader holds the
// segment, else when the last one leaves. Until then DeleteBefore goes no
// further, so files still go oldest first and a crash leaves a contiguous
// run. Elsewhere the order of doc.go is kept.

// deleteUnmapFirst is DeleteBefore's step for s, the oldest segment, whose
// successor starts at next. It reports whether s's file is gone (and
// DeleteBefore may go on to the next segment).
func (l *Log) deleteUnmapFirst(s *segment, next int64, rep *DeleteReport) (bool, error) {
	if l.dropping.Load() > 0 {
		return false, nil // an earlier segment's file is still to go
	}
	s.dropOnRelease = true
	l.dropping.Add(1)
	free := l.dropOldest(s)
	rep.Segments++
	rep.Bytes += l.opts.SegmentSize
	rep.NewMin = next
	if err := l.release(free); err != nil {
		return false, err
	}
	if err := l.Fenced(); err != nil {
		return false, err
	}
	if l.dropping.Load() > 0 {
		return false, nil // a reader holds s: its release drops the file
	}
	l.opts.Logger.Info("mqlite/commitlog: segment deleted", "path", s.path, "min", next)
	return true, nil
}

// dropReleased removes or renames to a spare the file of s, a segment
// deleteUnmapFirst retired, now unmapped, and syncs the directory; a
// failed sync fences the log, as in DeleteBefore.
func (l *Log) dropReleased(s *segment) error {
	s.dropOnRelease = false
	defer l.dropping.Add(-1)
	if err := l.dropFile(s); err != nil {
		return err
	}
	if err := l.opts.FS.SyncDir(l.opts.Dir); err != nil {
		l.fence(diskErr("sync dir", l.opts.Dir, err))
		return l.Fenced()
	}
	return nil
}
