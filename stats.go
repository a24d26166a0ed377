package mqlite

import (
	"cmp"
	"errors"
	"fmt"
	"slices"

	"github.com/mqlite/mqlite/consumequeue"
	"github.com/mqlite/mqlite/internal/errs"
	"github.com/mqlite/mqlite/topic"
	"github.com/mqlite/mqlite/vfs"
)

// Stats is a point-in-time snapshot of a Store, for monitoring and the
// admin tool (cmd/mqlite), in the spirit of database/sql's DBStats. The
// parts are read one after another, not under one lock, so under load they
// may disagree by the messages stored meanwhile. New fields may be added.
type Stats struct {
	// CommitLog is where the CommitLog's write, flush and dispatch stand.
	CommitLog CommitLogStats
	// Topics are the registered topics, sorted by name, followed by the
	// topics that were deleted but still have stored messages.
	Topics []TopicStats
	// Groups are the consumer groups, live or persisted, sorted by name.
	Groups []GroupStats
	// PendingTransactions is the number of half messages not yet committed
	// or rolled back, as of the last check-back round.
	PendingTransactions int
	// Throughput has message rates, flush latencies and whether sends are
	// refused.
	Throughput ThroughputStats
	// Retention counts what retention deleted before its retention age.
	Retention RetentionStats
	// Requests counts request-reply traffic (see Store.Reply).
	Requests RequestStats
	// Disk is the use of the volume holding the store, as the disk-ratio
	// options see it.
	Disk DiskStats
	// Dedup describes the dedup window (Message.DedupID).
	Dedup DedupStats
	// Replication is the store's role, epoch and replication positions:
	// each attached replica's on a primary, its own and its primary's on
	// a replica.
	Replication ReplicationStats
	// HookPanics counts hook calls (Options, ProducerOptions and
	// ConsumerOptions Hooks) that panicked and were recovered.
	HookPanics int64
}

// DiskStats are the use of the volume holding the store, counted as df
// counts it: Used / Total is df's percentage (blocks reserved for root
// count neither as used nor as available). Known is false where the file
// system cannot tell (an in-memory store, or a platform without the probe);
// the other fields are then zero.
type DiskStats struct {
	Known bool
	// Used and Total are bytes: Total is Used plus what an unprivileged
	// writer can still use.
	Used, Total uint64
	// Ratio is Used / Total, what DiskMaxUsedRatio, CleanRatio and
	// ForceCleanRatio are compared with.
	Ratio float64
}

// CommitLogStats are the CommitLog's positions, as global byte offsets.
type CommitLogStats struct {
	// MinOffset is the first byte still stored (retention moves it).
	MinOffset int64
	// WrotePosition is the end of the last record written.
	WrotePosition int64
	// FlushedPosition is how far the CommitLog is durable.
	FlushedPosition int64
	// DispatchedPosition is how far records are in the ConsumeQueue and
	// the IndexFile, i.e. visible to readers.
	DispatchedPosition int64
	// DispatchLag is WrotePosition - DispatchedPosition: bytes written
	// that readers cannot see yet (with FlushSync, mostly unflushed ones).
	DispatchLag int64
}

// TopicStats describes one topic and its queues.
type TopicStats struct {
	// Name is the topic's name.
	Name string
	// System is true for the store's own topics (retry, DLQ, schedule, ...).
	System bool
	// Deleted is true for a topic no longer registered whose queues still
	// hold messages a reader can see (DeleteTopic hides them all; a
	// deletion by an earlier version did not); retention removes them.
	Deleted bool
	// Messages is the sum of the queues' Messages.
	Messages int64
	// Queues are the topic's queues by id; a registered queue that never
	// received a message has zero offsets.
	Queues []QueueStats
}

// QueueStats describes one ConsumeQueue.
type QueueStats struct {
	// ID is the queue id.
	ID int
	// MinOffset is the first logical offset still stored.
	MinOffset int64
	// MaxOffset is the next logical offset (one past the newest message
	// visible to readers).
	MaxOffset int64
	// Messages is MaxOffset - MinOffset.
	Messages int64
}

// GroupStats describes a consumer group's backlog.
type GroupStats struct {
	// Name is the group's name.
	Name string
	// Lag is the sum of the queues' Lag.
	Lag int64
	// Queues is the lag per queue, as ConsumerLag reports it.
	Queues []QueueLag
}

// Stats returns a snapshot of the store's positions, topics, queues and
// consumer groups. It creates nothing: queues that never received a
// message are reported empty. It fails only with ErrClosed or when a
// group's lag cannot be read.
func (s *Store) Stats() (Stats, error) {
	if s.closed.Load() {
		return Stats{}, errs.ErrClosed
	}
	var st Stats
	// Dispatched first: the other positions can only be at or past it.
	dispatched := s.disp.dispatched()
	wrote := s.log.WrotePosition()
	st.CommitLog = CommitLogStats{MinOffset: s.log.MinOffset(), WrotePosition: wrote,
		FlushedPosition: s.log.FlushedPosition(), DispatchedPosition: dispatched,
		DispatchLag: max(wrote-dispatched, 0)}
	st.Throughput = s.metrics.snapshot(s)
	st.Requests = s.replies.stats()
	st.Dedup = s.dedupStats()
	st.HookPanics = s.hooks.panics.Load()
	st.Replication = s.replicationStats()
	st.Retention = RetentionStats{EarlySegments: s.early.segments.Load(), EarlyBytes: s.early.bytes.Load()}
	if used, total, ok, err := vfs.Usage(s.fs, s.dir); err == nil && ok {
		st.Disk = DiskStats{Known: true, Used: used, Total: total, Ratio: float64(used) / float64(total)}
	}

	byTopic := map[string][]consumequeue.QueueID{}
	for _, id := range s.disp.cq.Queues() {
		byTopic[id.Topic] = append(byTopic[id.Topic], id)
	}
	for _, ti := range s.Topics() {
		ts := TopicStats{Name: ti.Name, System: ti.System || topic.IsSystem(ti.Name)}
		for id := range ti.Config.Queues {
			ts.Queues = append(ts.Queues, s.queueStats(ti.Name, id))
		}
		// Queues past the configured count cannot exist (counts never
		// shrink), but a hand-edited registry should not hide them.
		for _, id := range byTopic[ti.Name] {
			if id.ID >= ti.Config.Queues {
				ts.Queues = append(ts.Queues, s.queueStats(ti.Name, id.ID))
			}
		}
		delete(byTopic, ti.Name)
		st.Topics = append(st.Topics, ts.summed())
	}
	var deleted []TopicStats
	for name, ids := range byTopic {
		ts := TopicStats{Name: name, System: topic.IsSystem(name), Deleted: true}
		for _, id := range ids {
			ts.Queues = append(ts.Queues, s.queueStats(name, id.ID))
		}
		if ts = ts.summed(); ts.Messages > 0 {
			deleted = append(deleted, ts)
		}
	}
	slices.SortFunc(deleted, func(a, b TopicStats) int { return cmp.Compare(a.Name, b.Name) })
	st.Topics = append(st.Topics, deleted...)

	for _, g := range s.ConsumerGroups() {
		lag, err := s.ConsumerLag(g.Name)
		if errors.Is(err, ErrGroupNotFound) {
			continue // forgotten meanwhile
		}
		if err != nil {
			return st, fmt.Errorf("mqlite: stats of group %q: %w", g.Name, err)
		}
		gs := GroupStats{Name: g.Name, Queues: lag}
		for _, l := range lag {
			gs.Lag += l.Lag
		}
		st.Groups = append(st.Groups, gs)
	}
	st.PendingTransactions = s.PendingTransactions()
	return st, nil
}

// queueStats reads a queue's offsets without creating it.
func (s *Store) queueStats(name string, id int) QueueStats {
	qs := QueueStats{ID: id}
	if q, err := s.disp.cq.Queue(name, id, false); err == nil {
		qs.MinOffset, qs.MaxOffset = q.MinOffset(), q.MaxOffset()
		if lo, err := s.retainedMin(name, id, q); err == nil {
			qs.MinOffset = lo
		}
		qs.Messages = max(qs.MaxOffset-qs.MinOffset, 0)
	}
	return qs
}

// summed sorts the queues by id and fills Messages.
func (t TopicStats) summed() TopicStats {
	slices.SortFunc(t.Queues, func(a, b QueueStats) int { return cmp.Compare(a.ID, b.ID) })
	t.Messages = 0
	for _, q := range t.Queues {
		t.Messages += q.Messages
	}
	return t
}
