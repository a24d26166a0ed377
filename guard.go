package mqlite

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/mqlite/mqlite/internal/errs"
	"github.com/mqlite/mqlite/vfs"
)

// guard is the store-side protection of the write path: sends fail fast
// with ErrDiskFull while the volume is fuller than Options.DiskMaxUsedRatio,
// and with ErrFlowControl while the append path or a FlushSync sync has
// been stuck longer than Options.FlowControlThreshold (RocketMQ's
// page-cache-busy check) or the dispatcher is more than
// Options.MaxDispatchLag behind, instead of queueing without bound. One
// monitor goroutine samples them (ticking on the store's clock, measuring
// stalls on the wall clock); the send path only reads three flags and pays nothing
// for the sampling (the monitor asks the CommitLog whether its append lock
// is held, and watches the write position).
type guard struct {
	diskFull atomic.Bool
	busy     atomic.Bool
	lagging  atomic.Int64 // the dispatch lag past Options.MaxDispatchLag when sampled, else 0

	quit chan struct{}
	done chan struct{}
}

// admit is the send path's check: a read-only store, a dispatcher stopped
// by a failure (ErrFenced, as after a failed sync), a full disk, a stalled
// write path.
func (s *Store) admit() error {
	if s.readOnly {
		return fmt.Errorf("mqlite: send: %s is open read-only: %w", s.dir, errs.ErrReadOnly)
	}
	if s.repl.isReplica() {
		return fmt.Errorf("mqlite: send: %s is a replica: %w", s.dir, ErrReplica)
	}
	if err := s.disp.fenced.Load(); err != nil {
		return *err
	}
	if s.guard.diskFull.Load() {
		return fmt.Errorf("mqlite: volume use above %.0f%%: %w", 100*s.opts.DiskMaxUsedRatio, errs.ErrDiskFull)
	}
	if s.guard.busy.Load() {
		return fmt.Errorf("mqlite: the write path has been stalled for more than %s: %w", s.opts.FlowControlThreshold, errs.ErrFlowControl)
	}
	if lag := s.guard.lagging.Load(); lag > 0 {
		return fmt.Errorf("mqlite: the dispatcher is %d bytes behind the CommitLog, more than MaxDispatchLag %d: %w",
			lag, s.opts.MaxDispatchLag, errs.ErrFlowControl)
	}
	return nil
}

func (s *Store) startGuard() {
	s.guard.quit, s.guard.done = make(chan struct{}), make(chan struct{})
	s.checkDisk()
	go s.monitor()
}

func (s *Store) stopGuard() {
	if s.guard.quit != nil {
		close(s.guard.quit)
		<-s.guard.done
	}
}

func (s *Store) monitor() {
	defer close(s.guard.done)
	tick := time.Second
	if t := s.opts.FlowControlThreshold; t > 0 {
		tick = min(tick, max(t/4, time.Millisecond))
	}
	t := s.opts.Clock.NewTicker(tick)
	defer t.Stop()
	var last int64
	var stuckSince time.Time
	nextDisk := s.opts.Clock.Now().Add(time.Second)
	nextStats := s.opts.Clock.Now().Add(s.opts.StatsInterval)
	for {
		select {
		case <-s.guard.quit:
			return
		case <-t.C():
		}
		s.resyncWall()
		now := s.opts.Clock.Now()
		if !now.Before(nextDisk) {
			s.checkDisk()
			s.metrics.sample(now)
			nextDisk = now.Add(time.Second)
		}
		if s.opts.StatsObserver != nil && !now.Before(nextStats) {
			if st, err := s.Stats(); err == nil {
				s.opts.StatsObserver.ObserveStats(st)
			}
			nextStats = now.Add(s.opts.StatsInterval)
		}
		s.checkDispatchLag()
		if s.opts.FlowControlThreshold < 0 {
			continue
		}
		// Stalls are physical: measure them on the wall clock, so a test's
		// fake clock jumping ahead is not taken for a stuck disk.
		wall := time.Now()
		busy := false
		if n := s.log.WrotePosition(); n == last && s.log.Appending() {
			if stuckSince.IsZero() {
				stuckSince = wall
			}
			busy = wall.Sub(stuckSince) >= s.opts.FlowControlThreshold
		} else {
			last, stuckSince = n, time.Time{}
		}
		if since, ok := s.dur.syncingSince(); ok && wall.Sub(since) >= s.opts.FlowControlThreshold {
			busy = true
		}
		if busy != s.guard.busy.Load() {
			s.guard.busy.Store(busy)
			s.opts.Logger.Warn("mqlite: flow control", "on", busy)
		}
	}
}

// checkDispatchLag samples how far the dispatcher is behind, against
// Options.MaxDispatchLag.
func (s *Store) checkDispatchLag() {
	if s.opts.MaxDispatchLag <= 0 {
		return
	}
	lag := max(s.log.WrotePosition()-s.disp.dispatched(), 0)
	if lag <= s.opts.MaxDispatchLag {
		lag = 0
	}
	if was := s.guard.lagging.Swap(lag); (was > 0) != (lag > 0) {
		s.opts.Logger.Warn("mqlite: flow control: dispatch lag", "on", lag > 0, "lag", lag, "max", s.opts.MaxDispatchLag)
	}
}

// checkDisk samples the volume's use.
func (s *Store) checkDisk() {
	if s.opts.DiskMaxUsedRatio >= 1 {
		return
	}
	used, total, ok, err := vfs.Usage(s.fs, s.dir)
	if err != nil || !ok {
		return
	}
	full := float64(used) > s.opts.DiskMaxUsedRatio*float64(total)
	if full != s.guard.diskFull.Load() {
		s.guard.diskFull.Store(full)
		s.opts.Logger.Warn("mqlite: disk use limit", "full", full, "used", used, "total", total)
	}
}
