package txn

import (
	"context"
	"time"

	"github.com/mqlite/mqlite/message"
)

// Host is what transactions need from the message store that hosts the
// service; the root package implements it.
//
// The service relies on one ordering property of the store: records become
// readable in CommitLog order (the root's single dispatcher tails the log),
// so an op record being readable implies that the half message it names,
// stored before it, is readable too.
type Host interface {
	// Validate checks a user message as the producer path does (and refuses system topics).
	Validate(m *message.Message) error
	// QueueCount resolves a user topic's queue count, auto-creating it (autoQueues, 0 = store default) when the store allows.
	QueueCount(topic string, autoQueues int) (int, error)
	// Append stores m in queue of its topic (a user topic, or a system topic which it creates with 1 queue on first use),
	// without validation (m is built by you from a validated message; reserved properties allowed), and waits for durability
	// as the flush mode promises (ErrFlushTimeout: stored, not confirmed).
	Append(ctx context.Context, m *message.Message, queue int) (message.PutResult, error)
	// Read returns up to max messages of topic/queue from offset from without blocking (empty slice at the end; ErrTopicNotFound if the topic was never created;
	// from below the queue's minimum: errs.ErrNotFound).
	Read(topic string, queue int, from int64, max int) ([]*message.MessageExt, error)
	// MaxOffset is the queue offset one past the last message of topic/queue.
	MaxOffset(topic string, queue int) (int64, error)
	// ReadAt returns the message at a CommitLog offset.
	ReadAt(offset int64) (*message.MessageExt, error)
	// HasUniqKey reports whether topic holds a message with this unique key stored at or after since (index lookup).
	HasUniqKey(topic, uniqKey string, since time.Time) (bool, error)
}

// Store is the former name of Host.
//
// Deprecated: use Host.
type Store = Host
