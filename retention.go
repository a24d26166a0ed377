package mqlite

import (
	"errors"
	"time"

	"github.com/mqlite/mqlite/internal/errs"
	"github.com/mqlite/mqlite/vfs"
)

// Retention and disk-limit defaults, as RocketMQ's (fileReservedTime 72 h,
// deleteWhen "04", cleanResourceInterval 10 s, diskMaxUsedSpaceRatio 75%,
// diskSpaceCleanForciblyRatio 85%, diskSpaceWarningLevelRatio 90%).
const (
	DefaultRetention        = 72 * time.Hour
	DefaultDeleteHour       = 4
	DefaultCleanRatio       = 0.75
	DefaultForceCleanRatio  = 0.85
	DefaultDiskMaxUsedRatio = 0.90
	retentionCheckInterval  = 10 * time.Second
	maxSegmentsPerCleanTick = 10
)

// RetentionReport says what a retention pass removed.
type RetentionReport struct {
	Segments  int   // CommitLog segments deleted
	Bytes     int64 // their size
	NewMin    int64 // the CommitLog's first offset afterwards
	QueueFile int   // ConsumeQueue files deleted
	IndexFile int   // IndexFiles deleted
}

// retentionLoop runs a pass every 10 s of the store's clock.
func (s *Store) retentionLoop() {
	defer close(s.retDone)
	t := s.opts.Clock.NewTicker(retentionCheckInterval)
	defer t.Stop()
	for {
		select {
		case <-s.retQuit:
			return
		case <-t.C():
			if _, err := s.applyRetention(false); err != nil && !errors.Is(err, errs.ErrClosed) {
				s.opts.Logger.Warn("mqlite: retention pass failed", "err", err)
			}
		}
	}
}

// CleanExpired runs a retention pass now, as at the configured hour:
// sealed CommitLog segments older than Options.Retention go (and any
// needed to meet the disk ratios and Options.MaxStoreBytes), with the
// ConsumeQueue and IndexFile files wholly below the new minimum. Readers
// of a removed segment finish first; consumers behind the new minimum
// continue from it and count the skip.
func (s *Store) CleanExpired() (RetentionReport, error) {
	if err := s.writable("clean expired"); err != nil {
		return RetentionReport{}, err
	}
	return s.applyRetention(true)
}

// applyRetention decides which old segments go and deletes them, oldest
// first. now says the deletion hour has come (or a caller asked).
func (s *Store) applyRetention(now bool) (RetentionReport, error) {
	s.retMu.Lock()
	defer s.retMu.Unlock()
	if !now {
		now = s.opts.Clock.Now().Hour() == s.opts.DeleteHour
	}
	ratio := s.diskRatio()
	// Only DiskFullDeleteOldest deletes unexpired segments for space.
	force := s.opts.DiskFullPolicy == DiskFullDeleteOldest && ratio > s.opts.ForceCleanRatio
	spaceShort := ratio > s.opts.CleanRatio
	cut, early, earlyBytes, rep, err := s.pickSegments(now, force, spaceShort)
	cut = s.holdForReplicas(cut) // replication.go
	pickedSegs, pickedBytes := rep.Segments, rep.Bytes
	rep.NewMin = s.log.MinOffset()
	if err != nil || cut < 0 {
		return rep, err
	}
	// The queue entries of the records about to go must be durable first:
	// after a power loss they are all that remembers those queue offsets
	// (re-dispatch cannot rebuild them), and a queue whose records all
	// went would start again at offset 0, handing out offsets consumers
	// had already committed.
	if err := s.disp.cq.Flush(); err != nil {
		return rep, err
	}
	// Queue minimums move first, so a reader never finds an entry whose
	// record is gone without also finding the queue's new minimum.
	if rep.QueueFile, err = s.disp.cq.DeleteBelowPhys(cut); err != nil {
		return rep, err
	}
	dr, err := s.log.DeleteBefore(cut)
	if force || spaceShort || s.opts.MaxStoreBytes > 0 {
		s.log.DropSpare() // the space is wanted (or capped): keep no spare file
	}
	rep.Segments, rep.Bytes, rep.NewMin = dr.Segments, dr.Bytes, dr.NewMin
	if dr.Segments > 0 {
		why := "MaxStoreBytes"
		if force {
			why = "DiskFullDeleteOldest: volume use above ForceCleanRatio"
		}
		// DeleteBefore removes the oldest first, and the picked
		// segments are expired ones followed by early ones: whatever it
		// removed past the expired ones was early.
		s.earlyDeleted(max(dr.Segments-(pickedSegs-early), 0), max(dr.Bytes-(pickedBytes-earlyBytes), 0), dr.NewMin, why)
	}
	if err != nil {
		return rep, err
	}
	if rep.IndexFile, err = s.disp.idx.DeleteBelowPhys(dr.NewMin); err != nil {
		return rep, err
	}
	s.opts.Logger.Info("mqlite: retention", "segments", rep.Segments, "bytes", rep.Bytes, "min", rep.NewMin,
		"queueFiles", rep.QueueFile, "indexFiles", rep.IndexFile, "forced", force)
	return rep, nil
}

// pickSegments chooses the sealed segments to delete, oldest first, and
// returns the CommitLog offset below which they lie (-1: none) and how
// many of them (and bytes) are not expired yet.
func (s *Store) pickSegments(now, force, spaceShort bool) (cut int64, early int, earlyBytes int64, rep RetentionReport, err error) {
	clk := s.opts.Clock.Now()
	segs := s.log.Segments()
	var total int64
	for _, sg := range segs {
		total += sg.Size
	}
	safe := s.disp.dispatched() // never delete what is not indexed yet
	freed := s.freedBelow()     // every queue's retained start is past it
	cut = -1
	for i := 0; i+1 < len(segs) && rep.Segments < maxSegmentsPerCleanTick; i++ {
		sg := segs[i]
		end := sg.Start + sg.Size
		if end > safe {
			break
		}
		overCap := s.opts.MaxStoreBytes > 0 && total > s.opts.MaxStoreBytes
		expired := false
		// The next segment holds no record yet (after a crash lost its
		// first): no seal time, so not known to be expired.
		if segs[i+1].Start < s.log.WrotePosition() {
			sealed, err := s.sealTime(segs[i+1].Start)
			switch {
			case err == nil:
				expired = s.opts.Retention > 0 && clk.Sub(sealed) > s.opts.Retention
			case !force && !overCap:
				return cut, early, earlyBytes, rep, err
			} // forced or capped: an unreadable seal time counts as early
		}
		released := end <= freed
		if !force && !overCap && !released && (!expired || !(now || spaceShort)) {
			break
		}
		if !expired && !released {
			early++
			earlyBytes += sg.Size
		}
		cut = end
		total -= sg.Size
		rep.Segments++
		rep.Bytes += sg.Size
	}
	return cut, early, earlyBytes, rep, nil
}

// sealTime is when the segment before the one starting at next was sealed:
// the store time of next's first record.
func (s *Store) sealTime(next int64) (time.Time, error) {
	m, err := s.ReadAt(next)
	if err != nil {
		return time.Time{}, err
	}
	return m.StoreTimestamp, nil
}

// diskRatio is the volume's use, 0 when unknown.
func (s *Store) diskRatio() float64 {
	used, total, ok, err := vfs.Usage(s.fs, s.dir)
	if err != nil || !ok {
		return 0
	}
	return float64(used) / float64(total)
}
