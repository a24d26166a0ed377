package mqlite

// Calls for code that serves consumers living outside this process (a
// network broker such as the nested module broker/): their groups' retry
// topics, their committed offsets, and filtered reads.

import (
	"context"

	"github.com/mqlite/mqlite/topic"
)

// EnsureRetryTopic creates group's retry topic (%RETRY%group, one queue)
// when it does not exist yet, as starting a clustering consumer of the
// group does. It is for code that serves consumers living elsewhere (a
// network broker), whose members subscribe to the retry topic before any
// message failed. A bad group name is ErrInvalidArgument; a read-only
// store is ErrReadOnly.
func (s *Store) EnsureRetryTopic(group string) error {
	if err := s.writable("ensure retry topic"); err != nil {
		return err
	}
	if err := topic.ValidateGroup(group); err != nil {
		return err
	}
	_, err := s.sysQueueCount(topic.RetryTopic(group), 1)
	return err
}

// CommitOffset records group's committed offset (the next offset to
// consume) on one queue, for consumers that live outside this process
// and track their own progress (a network broker's clients). Unlike
// SetConsumerOffset it does not refuse a group with live members and
// does not write at once: the offset is persisted with the others, every
// Options.OffsetPersistInterval and on Close. Bad names or a negative
// offset are ErrInvalidArgument.
func (s *Store) CommitOffset(group, topic string, queue int, offset int64) error {
	if err := s.writable("commit offset"); err != nil {
		return err
	}
	return s.consumers().CommitRemote(group, topic, queue, offset)
}

// CommittedOffset returns group's committed clustering offset on one
// queue, and false when the group has none there.
func (s *Store) CommittedOffset(group, topic string, queue int) (int64, bool, error) {
	return s.consumers().RemoteOffset(group, topic, queue)
}

// ReadQueueFiltered is ReadQueue through a subscription filter evaluated
// in the store, as the store's own consumers read: entries whose stored
// tags hash cannot match f are skipped without reading the CommitLog, the
// rest are decoded and checked exactly. It returns the matching messages
// and the offset to read from next, past every entry it examined (so a
// call may return no message and a next offset beyond from). It blocks
// as ReadQueue does while no entry is there yet. A nil f matches
// everything.
func (s *Store) ReadQueueFiltered(ctx context.Context, topic string, queue int, from int64, max int, f Filter) ([]*MessageExt, int64, error) {
	if err := s.enter(ctx, "read queue"); err != nil {
		return nil, from, err
	}
	return s.pull(ctx, topic, queue, from, max, f, nil)
}
