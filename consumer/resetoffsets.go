package consumer

import (
	"fmt"
	"slices"
	"time"

	"github.com/mqlite/mqlite/message"
)

// ResetOffsets moves group's committed offset on every queue of topic to
// the queue's first message stored at or after t (its max offset if there
// is none, its min offset if t precedes them all), persists the offsets
// and returns the ones it set, sorted as Offsets sorts them. The group's
// next members start there.
//
// It is RocketMQ's resetOffsetByTime (forced: offsets move forward as well
// as back) and Kafka's consumer-group reset to a datetime, and like
// Kafka's it refuses a group that has members: ErrGroupActive while any
// member is live or still shutting down, since a member would overwrite
// the reset with its next commit. A running push consumer repositions
// with Seek or SeekToTime instead. In a broadcasting group, the offsets
// of every instance that has committed any are reset.
//
// ErrGroupNotFound for a group never seen, ErrTopicNotFound for a topic
// the store does not know, ErrInvalidArgument for bad names, ErrReadOnly
// on a read-only Manager. On any error no offset changed.
func (mg *Manager) ResetOffsets(group, topic string, t time.Time) ([]QueueOffset, error) {
	n, err := mg.checkReset(group, topic)
	if err != nil {
		return nil, err
	}
	offs := make([]int64, n)
	for q := range offs {
		if offs[q], err = mg.st.OffsetForTime(topic, q, t); err != nil {
			return nil, fmt.Errorf("mqlite/consumer: reset offsets of group %s on %s: %w", group, Queue{topic, q}, err)
		}
	}
	return mg.setOffsets(group, topic, n, func(q int) (int64, bool) { return offs[q], true })
}

// SetOffset sets group's committed offset on one queue of topic, as
// ResetOffsets does for all of them: offset must lie in the queue's [min,
// max] (ErrInvalidArgument, as for Seek), and the group must have no
// member (ErrGroupActive). In a broadcasting group it sets the offset of
// every instance that has committed any.
func (mg *Manager) SetOffset(group, topic string, queue int, offset int64) error {
	n, err := mg.checkReset(group, topic)
	if err != nil {
		return err
	}
	if queue < 0 || queue >= n {
		return fmt.Errorf("mqlite/consumer: set offset of group %s: topic %s has no queue %d (it has %d): %w", group, topic, queue, n, ErrInvalidArgument)
	}
	if err := checkPosition(mg.st, Queue{topic, queue}, offset); err != nil {
		return fmt.Errorf("mqlite/consumer: set offset of group %s: %w", group, err)
	}
	_, err = mg.setOffsets(group, topic, n, func(q int) (int64, bool) { return offset, q == queue })
	return err
}

// checkReset validates a reset's arguments and returns the topic's queue
// count.
func (mg *Manager) checkReset(group, topic string) (int, error) {
	if mg.o.ReadOnly {
		return 0, fmt.Errorf("mqlite/consumer: reset offsets: %w", ErrReadOnly)
	}
	if err := validName(group); err != nil {
		return 0, fmt.Errorf("mqlite/consumer: group name %q: %v: %w", group, err, ErrInvalidArgument)
	}
	if err := message.ValidateTopic(topic, message.MaxSysTopicLen); err != nil {
		return 0, fmt.Errorf("mqlite/consumer: reset offsets of group %s: %w", group, err)
	}
	if _, err := mg.Group(group); err != nil {
		return 0, err
	}
	n, err := mg.st.QueueCount(topic)
	if err != nil {
		return 0, fmt.Errorf("mqlite/consumer: reset offsets of group %s: topic %s: %w", group, topic, err)
	}
	return n, nil
}

// setOffsets stores offset(q) for every queue q < n of topic it accepts (each
// instance's, in a broadcasting group) and persists them, holding the
// group's lock so that no member joins in between; if the write fails,
// the old offsets are put back.
func (mg *Manager) setOffsets(group, topic string, n int, offset func(q int) (int64, bool)) ([]QueueOffset, error) {
	g, err := mg.lookup(group)
	if err != nil {
		return nil, err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if n := len(g.mu.members) + g.mu.stopping; n > 0 {
		return nil, fmt.Errorf("mqlite/consumer: reset offsets of group %s: %d members live or shutting down: %w", group, n, ErrGroupActive)
	}
	instances := []string{""}
	if g.mu.rec.Model == Broadcasting.String() {
		instances = nil
		for _, r := range mg.offsets.snapshot(group) {
			if len(instances) == 0 || instances[len(instances)-1] != r.Instance {
				instances = append(instances, r.Instance) // sorted by instance
			}
		}
	}
	type undo struct {
		k   offsetKey
		old int64
		had bool
	}
	var undos []undo
	var out []QueueOffset
	for _, inst := range instances {
		for q := range n {
			off, ok := offset(q)
			if !ok {
				continue
			}
			k := offsetKey{group, inst, topic, q}
			old, had := mg.offsets.get(k)
			undos = append(undos, undo{k, old, had})
			mg.offsets.cell(k, off).v.Store(off)
			out = append(out, QueueOffset{Queue: Queue{topic, q}, Instance: inst, Offset: off})
		}
	}
	if err := mg.persistOffsets(); err != nil {
		for _, u := range slices.Backward(undos) {
			mg.offsets.restore(u.k, u.old, u.had)
		}
		return nil, err
	}
	return out, nil
}
