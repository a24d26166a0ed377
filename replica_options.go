package mqlite

import (
	"fmt"
	"time"
)

// Role says whether a Store takes sends (a primary) or copies a primary's
// CommitLog (a replica).
type Role int

const (
	// Primary takes sends and serves replicas (ServeReplica). The default.
	Primary Role = iota
	// Replica refuses sends (ErrReplica), appends the bytes its primary
	// streams (ReplicateFrom), builds its own ConsumeQueue and IndexFile
	// from them and serves every read; Promote makes it a primary.
	Replica
)

// String returns the role's name.
func (r Role) String() string {
	switch r {
	case Primary:
		return "Primary"
	case Replica:
		return "Replica"
	}
	return fmt.Sprintf("Role(%d)", int(r))
}

// ReplicationMode says when a primary's send counts as replicated.
type ReplicationMode int

const (
	// ReplicationAsync acknowledges a send once it is stored locally (as
	// Flush says); replicas follow in the background. Failing over to a
	// replica may lose the sends it had not received yet (RocketMQ's
	// ASYNC_MASTER). The default.
	ReplicationAsync ReplicationMode = iota
	// ReplicationSync acknowledges a send once MinInSyncReplicas in-sync
	// replicas hold its bytes (written; flushed when the replica runs
	// FlushSync), waiting at most Timeout: then the send returns its
	// result with ErrReplicaTimeout, or at once with
	// ErrReplicaNotAvailable when too few replicas are in sync (RocketMQ's
	// SYNC_MASTER, FLUSH_SLAVE_TIMEOUT, SLAVE_NOT_AVAILABLE). Replica
	// acknowledgements are grouped: one covers every send below it.
	ReplicationSync
)

// String returns the mode's name.
func (m ReplicationMode) String() string {
	switch m {
	case ReplicationAsync:
		return "ReplicationAsync"
	case ReplicationSync:
		return "ReplicationSync"
	}
	return fmt.Sprintf("ReplicationMode(%d)", int(m))
}

// Defaults of ReplicationOptions.
const (
	DefaultReplicaTimeout   = 3 * time.Second // RocketMQ's slaveTimeout
	DefaultReplicaMaxGap    = 256 << 20       // RocketMQ's haMaxGapNotInSync
	DefaultReplicaHeartbeat = time.Second
	DefaultMetadataInterval = time.Second
	// DefaultReplicaChunk is the most CommitLog bytes a primary sends in
	// one chunk (a larger record goes whole); RocketMQ's
	// haTransferBatchSize is 32 KiB.
	DefaultReplicaChunk = 256 << 10
)

// ReplicationOptions configure replication. The zero value of each field
// means its default.
type ReplicationOptions struct {
	// Mode: ReplicationAsync (default) or ReplicationSync (primary only).
	Mode ReplicationMode
	// MinInSyncReplicas is how many in-sync replicas a ReplicationSync
	// send waits for; default 1.
	MinInSyncReplicas int
	// Timeout bounds a ReplicationSync send's wait; default 3 s.
	Timeout time.Duration
	// MaxGap: a replica whose acknowledged position is more than this many
	// bytes behind the primary's CommitLog end is not in sync; default
	// 256 MiB. Retention keeps the segments an attached in-sync replica
	// still needs, so it holds at most MaxGap more than it would (see
	// replication.go).
	MaxGap int64
	// Heartbeat is how often an idle primary sends an empty chunk, and an
	// idle replica acknowledges; default 1 s.
	Heartbeat time.Duration
	// MetadataInterval is how often a primary sends its topics, consumer
	// offsets and delay, timer and transaction progress to its replicas;
	// default 1 s. After Promote, consumers resume from what the replica
	// last received: at most this interval (plus the offset commit delay)
	// is delivered again.
	MetadataInterval time.Duration
	// ChunkSize is the most CommitLog bytes sent in one chunk (a larger
	// record goes whole); default DefaultReplicaChunk.
	ChunkSize int
}

// fill applies the defaults and returns the problems.
func (o *ReplicationOptions) fill(role Role, readOnly bool) []error {
	var problems []error
	if role != Primary && role != Replica {
		problems = append(problems, fmt.Errorf("unknown Role %d", int(role)))
	}
	if role == Replica && readOnly {
		problems = append(problems, fmt.Errorf("Role Replica with ReadOnly: a replica writes what its primary sends"))
	}
	if o.Mode != ReplicationAsync && o.Mode != ReplicationSync {
		problems = append(problems, fmt.Errorf("unknown Replication.Mode %d", int(o.Mode)))
	}
	for name, d := range map[string]*time.Duration{"Replication.Timeout": &o.Timeout, "Replication.Heartbeat": &o.Heartbeat,
		"Replication.MetadataInterval": &o.MetadataInterval} {
		if *d < 0 {
			problems = append(problems, fmt.Errorf("negative %s %s", name, *d))
		}
	}
	if o.MinInSyncReplicas < 0 || o.MaxGap < 0 || o.ChunkSize < 0 {
		problems = append(problems, fmt.Errorf("negative Replication.MinInSyncReplicas %d, MaxGap %d or ChunkSize %d",
			o.MinInSyncReplicas, o.MaxGap, o.ChunkSize))
	}
	if o.MinInSyncReplicas == 0 {
		o.MinInSyncReplicas = 1
	}
	if o.Timeout == 0 {
		o.Timeout = DefaultReplicaTimeout
	}
	if o.MaxGap == 0 {
		o.MaxGap = DefaultReplicaMaxGap
	}
	if o.Heartbeat == 0 {
		o.Heartbeat = DefaultReplicaHeartbeat
	}
	if o.MetadataInterval == 0 {
		o.MetadataInterval = DefaultMetadataInterval
	}
	if o.ChunkSize == 0 {
		o.ChunkSize = DefaultReplicaChunk
	}
	return problems
}
