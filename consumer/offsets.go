package consumer

import (
	"cmp"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/mqlite/mqlite/message"
)

// offsetKey names one committed offset. Instance is empty for clustering
// groups (the group owns the progress) and the member's InstanceName for
// broadcasting ones (each member owns its own).
type offsetKey struct {
	Group    string
	Instance string
	Topic    string
	Queue    int
}

// offsetCell holds one committed offset: the next offset the group will
// consume from the queue. Consumers store into it directly (lock-free) while
// they own the queue; the persister reads it.
type offsetCell struct{ v atomic.Int64 }

// offsetTable is every committed offset of a Manager. Its mutex guards the
// map only; cells are atomics. It is a leaf in the lock order.
type offsetTable struct {
	mu    sync.Mutex
	cells map[offsetKey]*offsetCell
}

func newOffsetTable() *offsetTable { return &offsetTable{cells: map[offsetKey]*offsetCell{}} }

// get returns the committed offset of k, if any.
func (t *offsetTable) get(k offsetKey) (int64, bool) {
	t.mu.Lock()
	c := t.cells[k]
	t.mu.Unlock()
	if c == nil {
		return 0, false
	}
	return c.v.Load(), true
}

// cell returns k's cell, creating it with value init if it does not exist.
func (t *offsetTable) cell(k offsetKey, init int64) *offsetCell {
	t.mu.Lock()
	defer t.mu.Unlock()
	c := t.cells[k]
	if c == nil {
		c = &offsetCell{}
		c.v.Store(init)
		t.cells[k] = c
	}
	return c
}

// restore puts k back as it was: value old if it had one, else absent.
func (t *offsetTable) restore(k offsetKey, old int64, had bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !had {
		delete(t.cells, k)
		return
	}
	if c := t.cells[k]; c != nil {
		c.v.Store(old)
	}
}

// offsetRecord is one committed offset as persisted and reported.
type offsetRecord struct {
	Group    string `json:"group"`
	Instance string `json:"instance,omitempty"`
	Topic    string `json:"topic"`
	Queue    int    `json:"queue"`
	Offset   int64  `json:"offset"`
}

func (r offsetRecord) key() offsetKey { return offsetKey{r.Group, r.Instance, r.Topic, r.Queue} }

// check validates a record read from OffsetsFile: names as consumers and
// the store allow them, a queue id and an offset in range. (A queue or a
// topic the store no longer has is fine: topics can be deleted.)
func (r offsetRecord) check() error {
	if err := validName(r.Group); err != nil {
		return fmt.Errorf("group: %v", err)
	}
	if r.Instance != "" {
		if err := validName(r.Instance); err != nil {
			return fmt.Errorf("instance: %v", err)
		}
	}
	if err := message.ValidateTopic(r.Topic, message.MaxSysTopicLen); err != nil {
		return fmt.Errorf("topic: %v", err)
	}
	if r.Queue < 0 || r.Queue >= maxQueues {
		return fmt.Errorf("queue %d outside [0, %d)", r.Queue, maxQueues)
	}
	if r.Offset < 0 {
		return fmt.Errorf("negative offset %d", r.Offset)
	}
	return nil
}

// maxQueues is the store's limit on a topic's queue count (topic.MaxQueues).
const maxQueues = 1 << 14

// offsetsBody is the JSON body of OffsetsFile.
type offsetsBody struct {
	Offsets []offsetRecord `json:"offsets"`
}

// snapshot returns every offset (of group, or all when group is ""),
// sorted by group, instance, topic, queue.
func (t *offsetTable) snapshot(group string) []offsetRecord {
	t.mu.Lock()
	out := make([]offsetRecord, 0, len(t.cells))
	for k, c := range t.cells {
		if group != "" && k.Group != group {
			continue
		}
		out = append(out, offsetRecord{k.Group, k.Instance, k.Topic, k.Queue, c.v.Load()})
	}
	t.mu.Unlock()
	slices.SortFunc(out, func(a, b offsetRecord) int {
		return cmp.Or(cmp.Compare(a.Group, b.Group), cmp.Compare(a.Instance, b.Instance),
			cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Queue, b.Queue))
	})
	return out
}

// load replaces the table's contents with recs.
func (t *offsetTable) load(recs []offsetRecord) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, r := range recs {
		c := &offsetCell{}
		c.v.Store(r.Offset)
		t.cells[r.key()] = c
	}
}
