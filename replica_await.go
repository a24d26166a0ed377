package mqlite

import (
	"context"
	"time"

	"github.com/mqlite/mqlite/clock"
)

// The order of work on a ReplicationSync primary. A send there waits at
// least one round trip to a replica, and its bytes reach the socket only
// once the session's sender runs, which yields first so that every send
// woken by the same ack appends before it (one chunk, one ack for all).
// Whatever those sends do between their append and their wait delays the
// chunk of all of them: with FlushAsync that was the caller-runs dispatch
// (dispatch_inline.go), ~1 µs a send, 16 of them in a row before each
// chunk. So while a replica is attached the sends leave their dispatch to
// the senders, which run it after writing a chunk, while it travels
// (stream): the records are indexed during the round trip, in one batch.
// A sender can be stuck in a write to a replica that stopped reading, so
// each send also makes sure of its records once its wait ends (a no-op
// when the sender did it), as a send without a replica does: it indexes
// them itself or wakes the indexer, so readers on the primary never wait
// for a replica longer than ReplicationOptions.Timeout.

// shipsFirst reports whether a send's records are dispatched by the
// replicas' senders after they ship them, instead of by the send: a
// ReplicationSync primary with FlushAsync and a replica attached.
func (r *replication) shipsFirst() bool {
	s := r.s
	return s.opts.Replication.Mode == ReplicationSync && s.opts.Flush == FlushAsync &&
		r.live.Load() != nil && !r.replica.Load()
}

// awaitShipped is awaitDurable when shipsFirst: wake the senders, wait for
// the replicas, then make sure of the dispatch (FlushAsync's part of
// awaitLocal), which the senders normally ran while the chunk travelled.
func (s *Store) awaitShipped(ctx context.Context, end int64) error {
	s.repl.appended()
	err := s.repl.await(ctx, end)
	if s.disp.dispatched() < end {
		// Not yet: 16 sends woken by one ack would otherwise contend
		// for the dispatcher, and wake its loop, for nothing.
		s.disp.notifySender()
	}
	return err
}

// waitTimer is a timer firing after d for a sync send's wait: one a
// previous send stopped before it fired, re-armed, or a new one. Creating
// and dropping a timer per send cost ~0.5 µs of CPU each, 16 of them in a
// row before each chunk of BenchmarkReplicationProcSync16.
func (r *replication) waitTimer(d time.Duration) clock.Timer {
	if t, ok := r.timers.Get().(clock.Timer); ok {
		t.Reset(d)
		return t
	}
	return r.s.opts.Clock.NewTimer(d)
}

// doneTimer stops t and keeps it for another send if it had not fired
// (a fired timer may still hold its value in its channel: dropped).
func (r *replication) doneTimer(t clock.Timer) {
	if t.Stop() {
		r.timers.Put(t)
	}
}
