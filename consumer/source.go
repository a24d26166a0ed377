package consumer

import (
	"context"
	"time"

	"github.com/mqlite/mqlite/message"
)

// Source is what consumers need from the message store, the source of
// their messages; the root package implements it.
type Source interface {
	// QueueCount is the number of queues of topic; errs.ErrTopicNotFound if unknown.
	QueueCount(topic string) (int, error)
	// MinOffset is the first offset still stored in the queue.
	MinOffset(topic string, queue int) (int64, error)
	// MaxOffset is one past the queue's newest visible message.
	MaxOffset(topic string, queue int) (int64, error)
	// OffsetForTime is the first offset stored at or after t (MaxOffset if none).
	OffsetForTime(topic string, queue int, t time.Time) (int64, error)
	// Pull blocks until the queue has an entry at offset from (or ctx ends -> ctx.Err(), or the store closes -> errs.ErrClosed),
	// then returns up to max messages at offsets >= from that pass f (nil f = all; f.MatchCode on the stored tags hash first, then f.Match),
	// and next = the offset after the last entry examined. All entries examined may be filtered out: then msgs is empty and next > from.
	// from below MinOffset -> errs.ErrNotFound (caller should move to MinOffset and report the skip).
	// A non-nil pool asks for messages decoded into it (message.Pool's Batch): the consumer releases each one
	// (message.Release) when done with it; a store may ignore pool and return ordinary messages.
	Pull(ctx context.Context, topic string, queue int, from int64, max int, f Filter, pool *message.Pool) (msgs []*message.MessageExt, next int64, err error)
	// SendBack hands a message the group failed to consume to the retry path (retry topic with a delay, or the DLQ past the
	// group's limit).
	SendBack(ctx context.Context, group string, m *message.MessageExt) error
}

// Store is the former name of Source.
//
// Deprecated: use Source.
type Store = Source

// Filter is implemented by filter.Expression (package github.com/mqlite/mqlite/filter).
type Filter interface {
	// MatchCode is the cheap pre-check on the stored tags hash; it may
	// accept too much, never too little.
	MatchCode(tagsCode uint32) bool
	// Match is the exact check on the message.
	Match(m *message.Message) bool
	// Type names the expression language ("TAG", "SQL92").
	Type() string
	// String is the expression's source text.
	String() string
}
