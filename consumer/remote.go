package consumer

import (
	"fmt"

	"github.com/mqlite/mqlite/message"
)

// CommitRemote records group's committed offset on one queue for a
// member that lives outside this process (a network broker's client,
// which tracks its own progress and commits it): unlike SetOffset it
// neither checks for live members nor writes at once; the offset is
// persisted with the others (periodically and on Close). The group is
// created if unknown. ErrInvalidArgument for bad names or a negative
// offset, ErrReadOnly on a read-only Manager.
func (mg *Manager) CommitRemote(group, topic string, queue int, offset int64) error {
	if err := mg.checkRemote(group, topic, queue); err != nil {
		return err
	}
	if offset < 0 {
		return fmt.Errorf("mqlite/consumer: commit offset %d of group %s: %w", offset, group, ErrInvalidArgument)
	}
	if _, err := mg.groupFor(group); err != nil {
		return err
	}
	mg.offsets.cell(offsetKey{Group: group, Topic: topic, Queue: queue}, offset).v.Store(offset)
	return nil
}

// RemoteOffset returns group's committed offset on one queue (clustering
// progress), and false when it has none.
func (mg *Manager) RemoteOffset(group, topic string, queue int) (int64, bool, error) {
	if err := mg.checkRemote(group, topic, queue); err != nil {
		return 0, false, err
	}
	off, ok := mg.offsets.get(offsetKey{Group: group, Topic: topic, Queue: queue})
	return off, ok, nil
}

func (mg *Manager) checkRemote(group, topic string, queue int) error {
	if mg.o.ReadOnly {
		return fmt.Errorf("mqlite/consumer: commit offset: %w", ErrReadOnly)
	}
	if err := validName(group); err != nil {
		return fmt.Errorf("mqlite/consumer: group name %q: %v: %w", group, err, ErrInvalidArgument)
	}
	if err := message.ValidateTopic(topic, message.MaxSysTopicLen); err != nil {
		return fmt.Errorf("mqlite/consumer: commit offset of group %s: %w", group, err)
	}
	if queue < 0 {
		return fmt.Errorf("mqlite/consumer: commit offset of group %s: queue %d: %w", group, queue, ErrInvalidArgument)
	}
	return nil
}
