package mqlite

import (
	"context"
	"time"

	"github.com/mqlite/mqlite/flush"
)

// durability is what the flush mode decides, chosen once at Open: when a
// send returns, how far readers may see, and what wakes the dispatcher.
// FlushSync is syncDurability (a group commit that senders wait for),
// FlushAsync asyncDurability (a background flusher nobody waits for).
type durability interface {
	// kick starts making appended data durable and visible, without
	// waiting: for data appended with no sender waiting on it.
	kick()
	// await returns once data ending at end is as durable as the mode
	// promises before a send returns.
	await(ctx context.Context, end int64) error
	// confirmed is how far the dispatcher may index records.
	confirmed() int64
	// syncingSince reports when the sync in progress that senders wait
	// for began (ok == false when none is running or none is waited for).
	syncingSince() (since time.Time, ok bool)
	// afterWake runs in the dispatcher's loop when it wakes up, before
	// it dispatches.
	afterWake()
	// close runs a last flush and stops the service. Idempotent.
	close()
}

// newDurability starts the flush service of s's mode.
func newDurability(s *Store) durability {
	if s.opts.Flush == FlushSync {
		d := &syncDurability{s: s, uncommitted: s.opts.ReadUncommitted}
		d.gc = flush.NewGroupCommit(timedFlusher{s}, flush.GroupCommitOptions{Timeout: s.opts.SyncFlushTimeout, Clock: s.opts.Clock,
			OnFlush: func(int64) {
				if s.disp != nil { // nil in an Open that failed before the dispatcher existed
					s.disp.notify()
				}
			}})
		return d
	}
	return &asyncDurability{s: s, p: flush.NewPeriodic(timedFlusher{s}, flush.PeriodicOptions{Interval: s.opts.FlushInterval,
		LeastPages: s.opts.FlushLeastPages, ThoroughInterval: s.opts.FlushThoroughInterval,
		Clock: s.opts.Clock, Logger: s.opts.Logger})}
}

// syncDurability is FlushSync: a send returns after a group commit sync
// covering it, and readers see only flushed records unless
// ReadUncommitted.
type syncDurability struct {
	s           *Store
	gc          *flush.GroupCommit
	uncommitted bool // Options.ReadUncommitted: readers see records before their sync
}

func (d *syncDurability) kick() {
	if d.uncommitted {
		d.s.disp.notifySender()
	}
	d.gc.Kick()
}

func (d *syncDurability) await(ctx context.Context, end int64) error {
	if d.uncommitted {
		d.s.disp.notifySender()
	}
	// No Kick: registering starts the sync, or ends the group commit's
	// wait for the other senders to come back.
	return d.gc.Wait(ctx, end)
}

func (d *syncDurability) confirmed() int64 {
	if d.uncommitted {
		return d.s.log.WrotePosition()
	}
	return d.s.log.FlushedPosition()
}

func (d *syncDurability) syncingSince() (time.Time, bool) { return d.gc.SyncingSince() }

// afterWake yields: the group commit wakes the loop right after it
// released the senders of a sync. Readied last, the loop would run first
// on this P; let the senders append their next records and register for
// the next sync before it dispatches (gathers of 16 senders: p50 115 ->
// 95 µs in runtime traces of BenchmarkPut/sync/128B/g16).
func (d *syncDurability) afterWake() { d.s.disp.gosched() }

func (d *syncDurability) close() { d.gc.Close() }

// asyncDurability is FlushAsync: a send returns once its record is in the
// page cache; a periodic flusher syncs in the background.
type asyncDurability struct {
	s *Store
	p *flush.Periodic
}

// kick wakes only the dispatcher: the flusher runs on its interval, as
// RocketMQ's does by default (wakeFlushWhenPutMessage false), instead of
// syncing again after every few pages.
func (d *asyncDurability) kick() { d.s.disp.notifySender() }

func (d *asyncDurability) await(context.Context, int64) error {
	d.s.disp.notifySender()
	return nil
}

func (d *asyncDurability) confirmed() int64                { return d.s.log.WrotePosition() }
func (d *asyncDurability) syncingSince() (time.Time, bool) { return time.Time{}, false }
func (d *asyncDurability) afterWake()                      {}
func (d *asyncDurability) close()                          { d.p.Close() }
