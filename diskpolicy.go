package mqlite

import (
	"fmt"
	"log/slog"
)

// DiskFullPolicy says what the store does when the volume holding it fills
// up: what happens to unconsumed messages younger than Options.Retention.
// No policy blocks sends until space frees: they fail fast with
// ErrDiskFull, and a caller that wants to wait retries (the store samples
// the volume every second).
type DiskFullPolicy int

const (
	// DiskFullReject, the default, never deletes a message before its
	// retention age because the disk is filling: once the volume is fuller
	// than Options.DiskMaxUsedRatio, sends fail with ErrDiskFull until
	// space frees (consumers and reads keep working). Expired segments
	// still go early above Options.CleanRatio.
	DiskFullReject DiskFullPolicy = iota
	// DiskFullDeleteOldest also deletes the oldest CommitLog segments,
	// expired or not, consumed or not, while the volume is fuller than
	// Options.ForceCleanRatio (RocketMQ's cleanFileForciblyEnable with
	// diskSpaceCleanForciblyRatio): a broker's choice, for a disk the
	// store owns. Every such deletion warns through Options.Logger (or
	// slog.Default when none is set), counts in Stats.Retention and calls
	// Options.StatsObserver.
	DiskFullDeleteOldest
)

// String returns the policy's name, as in "DiskFullReject".
func (p DiskFullPolicy) String() string {
	switch p {
	case DiskFullReject:
		return "DiskFullReject"
	case DiskFullDeleteOldest:
		return "DiskFullDeleteOldest"
	}
	return fmt.Sprintf("DiskFullPolicy(%d)", int(p))
}

// RetentionStats count what retention deleted before its time since Open.
type RetentionStats struct {
	// EarlySegments and EarlyBytes count the CommitLog segments (and
	// their bytes) deleted before they were older than Options.Retention:
	// by DiskFullDeleteOldest or Options.MaxStoreBytes. Their messages
	// may not all have been consumed.
	EarlySegments, EarlyBytes int64
}

// lossLogger is where warnings about deleted data go: the Options logger
// if the user set one, else slog.Default (a loss must never be silent).
func lossLogger(o *Options) *slog.Logger {
	if o != nil && o.Logger != nil {
		return o.Logger
	}
	return slog.Default()
}

// earlyDeleted records segments deleted before their retention age:
// a warning, the Stats counters and the stats hook.
func (s *Store) earlyDeleted(segments int, bytes, newMin int64, why string) {
	if segments == 0 {
		return
	}
	s.early.segments.Add(int64(segments))
	s.early.bytes.Add(bytes)
	s.lossLog.Warn("mqlite: deleted CommitLog segments before their retention age; unconsumed messages may be lost",
		"segments", segments, "bytes", bytes, "newMin", newMin, "reason", why,
		"retention", s.opts.Retention, "policy", s.opts.DiskFullPolicy)
	if s.opts.StatsObserver != nil {
		if st, err := s.Stats(); err == nil {
			s.opts.StatsObserver.ObserveStats(st)
		}
	}
}
