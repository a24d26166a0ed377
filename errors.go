package mqlite

import (
	"errors"

	"github.com/mqlite/mqlite/internal/errs"
	"github.com/mqlite/mqlite/message"
)

// Sentinel errors. Every error the store returns matches one of these with
// errors.Is; the sub-packages export the same values.
var (
	// ErrClosed: the Store was closed.
	ErrClosed = errs.ErrClosed
	// ErrCorrupt: stored data failed a checksum or structural check; the
	// error is a *CorruptError naming the file and offset.
	ErrCorrupt = errs.ErrCorrupt
	// ErrNotFound: no message at that offset or ID.
	ErrNotFound = errs.ErrNotFound
	// ErrDiskFull: the disk has no room for a new segment.
	ErrDiskFull = errs.ErrDiskFull
	// ErrFenced: an earlier write or sync failed; the store refuses writes
	// until it is reopened (reads keep working).
	ErrFenced = errs.ErrFenced
	// ErrIO: a read, write or sync failed, or a mapped file faulted.
	ErrIO = errs.ErrIO
	// ErrFlushTimeout: FlushSync only; the message is stored but was not
	// flushed within Options.SyncFlushTimeout (RocketMQ's FLUSH_DISK_TIMEOUT).
	ErrFlushTimeout = errs.ErrFlushTimeout
	// ErrMessageTooLarge: the body exceeds Options.MaxMessageSize.
	ErrMessageTooLarge = errs.ErrMessageTooLarge
	// ErrInvalidArgument: a bad option, message or argument. The more
	// specific errors below match it too.
	ErrInvalidArgument = errs.ErrInvalidArgument
	// ErrLocked: another Store (in this or another process) has the directory.
	ErrLocked = errs.ErrLocked
	// ErrTopicNotFound: the topic does not exist (and auto-create is off).
	ErrTopicNotFound = errs.ErrTopicNotFound
	// ErrTopicExists: CreateTopic of a topic that already exists.
	ErrTopicExists = errs.ErrTopicExists
	// ErrFlowControl: the store or a handle refused a call under pressure.
	ErrFlowControl = errs.ErrFlowControl
	// ErrGroupNotFound: no such consumer group.
	ErrGroupNotFound = errs.ErrGroupNotFound
	// ErrGroupActive: ResetConsumerOffsets or SetConsumerOffset of a
	// group with live consumers (or consumers still shutting down); close
	// them first, or Seek them.
	ErrGroupActive = errs.ErrGroupActive
	// ErrReadOnly: a call that writes (a send, a producer or consumer, a
	// topic change, retention, a check-back round) on a Store opened with
	// Options.ReadOnly.
	ErrReadOnly = errs.ErrReadOnly
	// ErrOffsetOutOfRange: ReadQueue from an offset past the next one the
	// queue will assign (the next Put's QueueOffset), which no message
	// will ever fill: Kafka's OffsetOutOfRange, RocketMQ's
	// OFFSET_OVERFLOW_BADLY. Reading from exactly the next offset waits
	// for it (the long poll).
	ErrOffsetOutOfRange = errs.ErrOffsetOutOfRange

	// ErrReplica: a call that writes (a send, a topic change, a consumer
	// offset change) on a Store opened with Role Replica: it takes its
	// writes from its primary only, until Promote.
	ErrReplica = errors.New("mqlite: the store is a replica")
	// ErrReplicaTimeout: Replication Sync only; the message is stored
	// locally (and flushed as Flush says) but not enough in-sync replicas
	// acknowledged it within ReplicationOptions.Timeout (RocketMQ's
	// FLUSH_SLAVE_TIMEOUT).
	ErrReplicaTimeout = errors.New("mqlite: replica acknowledgement timeout")
	// ErrReplicaNotAvailable: Replication Sync only; the message is stored
	// locally but fewer than MinInSyncReplicas replicas were in sync when
	// it was sent, so it was not waited for (RocketMQ's
	// SLAVE_NOT_AVAILABLE).
	ErrReplicaNotAvailable = errors.New("mqlite: not enough in-sync replicas")
	// ErrReplicaDiverged: a replica's history is not a prefix of its
	// primary's up to an epoch both know, or it holds more of the
	// primary's current epoch than the primary does (ahead): it cannot be
	// repaired by cutting its tail, and nothing was changed.
	ErrReplicaDiverged = errors.New("mqlite: replica history diverged from the primary's")
	// ErrReplicaIdentity: a replica and a primary of different stores
	// (their store IDs differ), or with different segment sizes.
	ErrReplicaIdentity = errors.New("mqlite: replica and primary are different stores")

	ErrInvalidTopic    = message.ErrInvalidTopic
	ErrEmptyBody       = message.ErrEmptyBody
	ErrInvalidTags     = message.ErrInvalidTags
	ErrInvalidKey      = message.ErrInvalidKey
	ErrInvalidProperty = message.ErrInvalidProperty
	ErrInvalidDelay    = message.ErrInvalidDelay
	ErrBadID           = message.ErrBadID
)

// CorruptError locates damaged data; it matches ErrCorrupt.
type CorruptError = errs.CorruptError
