package mqlite

import "github.com/mqlite/mqlite/topic"

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
