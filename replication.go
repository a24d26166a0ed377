package mqlite

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/mqlite/mqlite/internal/errs"
)

// Replication (RocketMQ's HA). A primary streams its CommitLog to replicas
// over streams the user supplies (ServeReplica on the primary,
// ReplicateFrom on the replica; package replication has TCP helpers): the
// root package has no network code. The replica appends the bytes at the
// offsets they had on the primary, so both logs are byte-identical up to
// the replica's end, and its own dispatcher builds its ConsumeQueue and
// IndexFile from them. It refuses writes (ErrReplica) and serves reads.
//
// Guarantees per mode (ReplicationOptions.Mode):
//
//   - ReplicationAsync: a send is acknowledged as without replication; a
//     replica lags by what it has not received yet (Replicas reports it),
//     and that tail is missing on it after a failover.
//   - ReplicationSync: a send that returns without error is held by
//     MinInSyncReplicas in-sync replicas (written to their page cache;
//     flushed if they run FlushSync) as well as locally: it survives the
//     primary's loss (kill -9, its disk) once a replica holding it is
//     promoted. ErrReplicaTimeout and ErrReplicaNotAvailable mean stored
//     locally, not known to be replicated (RocketMQ's FLUSH_SLAVE_TIMEOUT
//     and SLAVE_NOT_AVAILABLE).
//
// In sync: a connected replica whose acknowledged end is at most
// ReplicationOptions.MaxGap bytes behind the primary's CommitLog end.
// Retention on the primary never deletes a segment an attached in-sync
// replica has not acknowledged; since such a replica is at most MaxGap
// behind, retention keeps at most MaxGap (rounded up to segments) more
// than it would. A replica that falls further behind loses that hold: if
// retention then removes what it needs, its next ReplicateFrom fails with
// ErrNotFound and it must start again from an empty directory.
//
// Every primary term is an epoch (epoch.go). Promote ends replication on
// a replica and starts a new epoch at its CommitLog end. When a store
// that served an older epoch connects as a replica, the epochs find where
// the two logs part: its tail past that point is cut (with its queue and
// index entries; DivergenceReport says how many messages) before it
// follows. A replica whose history cannot be made a prefix of the
// primary's by such a cut is refused with ErrReplicaDiverged, one of
// another store with ErrReplicaIdentity; neither changes anything.
//
// Metadata (RocketMQ's SlaveSynchronize): every MetadataInterval the
// primary sends its topics and its config files (consumer groups and
// offsets, delay, timer and transaction progress). A replica registers
// the topics at once and keeps the files for Promote, which starts the
// delay scheduler, the timer and transaction services and the consumer
// groups from them: consumers resume where the primary last persisted
// their offsets (at-least-once; redelivery bounded by the persist
// interval plus MetadataInterval). Before Promote a replica's consumer
// groups are read-only (offsets as of its Open; new consumers fail with
// ErrReplica); read with Messages, ReadQueue, MessageByID and
// MessagesByKey.
//
// A new replica of a primary whose retention removed its first segments
// starts its CommitLog where the primary's now starts; a queue whose
// records all went before that is unknown to it (MaxOffset 0).
//
// Limits: no cascading (a replica does not serve replicas); a replica
// that crashed (power loss) with a torn tail should be re-synced from an
// empty directory if its Open reports corruption, since the frames it
// holds carry its primary's flush marks.

// replication is a Store's replication state.
type replication struct {
	s       *Store
	replica atomic.Bool // Role Replica, until Promote
	// live is the list of sessions serving replicas (copy on write):
	// senders kick them without a lock.
	live atomic.Pointer[[]*session]
	quit chan struct{} // closed by Close
	wg   sync.WaitGroup
	// stateMu serialises writes of the replication state file.
	stateMu sync.Mutex
	// promoteMu serialises Promote with itself and with Close's stop of
	// the services (stopServices); lock order: promoteMu, then mu.
	promoteMu sync.Mutex
	// retired are the read-only services Promote replaced (promoteMu):
	// calls that loaded them before the swap still use them, so Close,
	// not Promote, closes them.
	retired []*services
	// primaryEnd is the primary's CommitLog end as a replica last heard.
	primaryEnd atomic.Int64
	// syncAcked is the end MinInSyncReplicas in-sync replicas had
	// acknowledged at the last ack (-1: too few in sync): a sync send
	// below it returns without the lock (recomputed by ackArrived).
	syncAcked atomic.Int64
	// timers are the sync sends' timeout timers, stopped before they
	// fired, for the next sends to re-arm (replica_await.go).
	timers sync.Pool

	mu struct {
		sync.Mutex
		epochs   epochState
		found    bool // the epoch file exists
		sessions []*session
		nextID   int
		acked    chan struct{} // closed (and replaced) when an ack arrives
		follow   *follower     // the running ReplicateFrom
		// primaryAddr is the address of the last primary followed, if
		// its stream told it (ReplicationStats.PrimaryAddr).
		primaryAddr string
		closed      bool
		services    bool // the delay scheduler and the timer service run
		promoting   bool // a Promote runs: no ReplicateFrom may begin
		cut         DivergenceReport
	}
}

// initReplication sets up the state at Open: the role, the epochs.
func (s *Store) initReplication() error {
	r := &s.repl
	r.s = s
	r.quit = make(chan struct{})
	r.mu.acked = make(chan struct{})
	r.syncAcked.Store(-1)
	r.replica.Store(s.opts.Role == Replica)
	r.mu.services = s.opts.Role == Primary
	e, found, err := loadEpochs(s.fs, s.dir)
	if err != nil {
		return err
	}
	r.mu.epochs, r.mu.found = e, found
	return nil
}

// isReplica reports whether the store takes its writes from a primary.
func (r *replication) isReplica() bool { return r.replica.Load() }

// servicesRunning reports whether the delay scheduler and timer service
// were started (not on a replica before Promote).
func (r *replication) servicesRunning() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.mu.services
}

// close ends every session and ReplicateFrom and waits for them.
func (r *replication) close() {
	r.mu.Lock()
	if r.mu.closed || r.quit == nil {
		r.mu.Unlock()
		return
	}
	r.mu.closed = true
	close(r.quit)
	r.mu.Unlock()
	r.wg.Wait()
}

// start registers a goroutine owned by the replication state; false when
// the store is closing.
func (r *replication) start() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.mu.closed {
		return false
	}
	r.wg.Add(1)
	return true
}

// appended wakes the sessions to ship new bytes; one atomic load when no
// replica is attached.
func (r *replication) appended() {
	p := r.live.Load()
	if p == nil {
		return
	}
	for _, ss := range *p {
		select {
		case ss.kick <- struct{}{}:
		default:
		}
	}
}

// ackedLocked is the end that k in-sync replicas have acknowledged (-1 if
// fewer are in sync), and how many are.
func (r *replication) ackedLocked(k int) (int64, int) {
	end := r.s.log.WrotePosition()
	gap := r.s.opts.Replication.MaxGap
	var room [8]int64
	acks := room[:0]
	for _, ss := range r.mu.sessions {
		if a := ss.acked(); end-ss.written.Load() <= gap && ss.ready.Load() {
			acks = append(acks, a)
		}
	}
	if len(acks) < k {
		return -1, len(acks)
	}
	slices.Sort(acks)
	return acks[len(acks)-k], len(acks)
}

// await is ReplicationSync's wait for a send ending at end.
func (r *replication) await(ctx context.Context, end int64) error {
	o := &r.s.opts.Replication
	if o.Mode != ReplicationSync || r.replica.Load() || r.syncAcked.Load() >= end {
		return nil
	}
	r.mu.Lock()
	acked, n := r.ackedLocked(o.MinInSyncReplicas)
	ch := r.mu.acked
	r.mu.Unlock()
	if acked >= end {
		return nil
	}
	if n < o.MinInSyncReplicas {
		return fmt.Errorf("mqlite: %d replicas in sync, MinInSyncReplicas is %d: %w", n, o.MinInSyncReplicas, ErrReplicaNotAvailable)
	}
	t := r.waitTimer(o.Timeout)
	defer r.doneTimer(t)
	for {
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("mqlite: waiting for replicas: %w", ctx.Err())
		case <-t.C():
			return fmt.Errorf("mqlite: %d in-sync replicas did not acknowledge offset %d within %s: %w",
				o.MinInSyncReplicas, end, o.Timeout, ErrReplicaTimeout)
		case <-r.quit:
			return errs.ErrClosed
		}
		if r.syncAcked.Load() >= end {
			return nil
		}
		r.mu.Lock()
		acked, _ = r.ackedLocked(o.MinInSyncReplicas)
		ch = r.mu.acked
		r.mu.Unlock()
		if acked >= end {
			return nil
		}
	}
}

// ackArrived records what the in-sync replicas now hold (syncAcked) and
// wakes the senders waiting for replicas: one computation per ack, not
// one per waiting sender.
func (r *replication) ackArrived() {
	r.mu.Lock()
	acked, _ := r.ackedLocked(r.s.opts.Replication.MinInSyncReplicas)
	r.syncAcked.Store(acked)
	close(r.mu.acked)
	r.mu.acked = make(chan struct{})
	r.mu.Unlock()
}

// retentionFloor is the lowest offset an attached in-sync replica has not
// acknowledged (retention keeps the segment holding it), or -1.
func (r *replication) retentionFloor() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	end := r.s.log.WrotePosition()
	floor := int64(-1)
	for _, ss := range r.mu.sessions {
		w := ss.written.Load()
		if end-w > r.s.opts.Replication.MaxGap {
			continue
		}
		if floor < 0 || w < floor {
			floor = w
		}
	}
	return floor
}

// holdForReplicas lowers a retention cut so that no segment an attached
// in-sync replica still needs goes; -1 when nothing may go.
func (s *Store) holdForReplicas(cut int64) int64 {
	if cut < 0 {
		return cut
	}
	floor := s.repl.retentionFloor()
	if floor < 0 || floor >= cut {
		return cut
	}
	seg := s.log.SegmentSize()
	cut = floor - floor%seg // the segments wholly below the floor
	if cut <= s.log.MinOffset() {
		return -1
	}
	return cut
}

// ReplicaInfo describes a replica attached to a primary.
type ReplicaInfo struct {
	ID      int   // session number, in attach order
	Written int64 // end of its CommitLog, as acknowledged
	Flushed int64 // how far it is flushed, as acknowledged
	Lag     int64 // bytes the primary holds past Written
	InSync  bool  // within ReplicationOptions.MaxGap
	Acks    int64 // acknowledgements received (each covers every byte below Written)
}

// Replicas lists the replicas attached to this primary.
func (s *Store) Replicas() []ReplicaInfo {
	if s == nil {
		return nil
	}
	r := &s.repl
	r.mu.Lock()
	defer r.mu.Unlock()
	end := s.log.WrotePosition()
	out := make([]ReplicaInfo, 0, len(r.mu.sessions))
	for _, ss := range r.mu.sessions {
		w := ss.written.Load()
		out = append(out, ReplicaInfo{ID: ss.id, Written: w, Flushed: ss.flushed.Load(), Lag: end - w, Acks: ss.acks.Load(),
			InSync: ss.ready.Load() && end-w <= s.opts.Replication.MaxGap})
	}
	return out
}

// Role reports whether the store is a primary or a replica now.
func (s *Store) Role() Role {
	if s.repl.isReplica() {
		return Replica
	}
	return Primary
}

// Epochs returns the store's ID and its epoch history (see epoch.go);
// a store that never took part in replication has neither.
func (s *Store) Epochs() (StoreID, []Epoch) {
	r := &s.repl
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.mu.epochs.id, slices.Clone(r.mu.epochs.epochs)
}

// attach adds a session to the live list.
func (r *replication) attach(ss *session) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.mu.nextID++
	ss.id = r.mu.nextID
	r.mu.sessions = append(r.mu.sessions, ss)
	live := slices.Clone(r.mu.sessions)
	r.live.Store(&live)
}

// detach removes a session from the live list.
func (r *replication) detach(ss *session) {
	r.mu.Lock()
	r.mu.sessions = slices.DeleteFunc(r.mu.sessions, func(x *session) bool { return x == ss })
	live := slices.Clone(r.mu.sessions)
	if len(live) == 0 {
		r.live.Store(nil)
	} else {
		r.live.Store(&live)
	}
	r.mu.Unlock()
	r.ackArrived() // waiting senders recount the replicas in sync
	// Sends that left their dispatch to this session's sender
	// (shipsFirst) may not have been dispatched yet.
	r.s.disp.notify()
}

// WaitReplicated waits until n attached replicas (in sync or not) have
// acknowledged the CommitLog up to offset (written, or flushed for those
// that run FlushSync), or ctx ends. Use it on a primary before a planned
// failover (stop the sends, wait for the end, Promote a replica), or in
// tests. n below 1 counts as 1.
func (s *Store) WaitReplicated(ctx context.Context, offset int64, n int) error {
	if err := s.enter(ctx, "wait replicated"); err != nil {
		return err
	}
	r := &s.repl
	n = max(n, 1)
	for {
		if s.closed.Load() {
			return errs.ErrClosed
		}
		r.mu.Lock()
		count := 0
		for _, ss := range r.mu.sessions {
			if ss.acked() >= offset {
				count++
			}
		}
		ch := r.mu.acked
		r.mu.Unlock()
		if count >= n {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		case <-r.quit:
			return errs.ErrClosed
		}
	}
}
