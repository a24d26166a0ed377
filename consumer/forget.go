package consumer

import "fmt"

// ForgetTopic removes every group's committed offsets on topic (a deleted
// topic) and persists the change. It is idempotent: a store that crashed
// in the middle of deleting a topic calls it again at Open. A member still
// consuming the topic may commit again; the store stops serving the
// topic's queues first, so such a commit names offsets past its deletion.
func (mg *Manager) ForgetTopic(topic string) error {
	if mg.isClosed() {
		return ErrClosed
	}
	if mg.o.ReadOnly {
		return fmt.Errorf("mqlite/consumer: forget topic %s: %w", topic, ErrReadOnly)
	}
	mg.offsets.mu.Lock()
	n := 0
	for k := range mg.offsets.cells {
		if k.Topic == topic {
			delete(mg.offsets.cells, k)
			n++
		}
	}
	mg.offsets.mu.Unlock()
	if n == 0 {
		return nil
	}
	return mg.persistOffsets()
}
