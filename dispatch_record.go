package mqlite

import (
	"errors"
	"fmt"

	"github.com/mqlite/mqlite/commitlog"
	"github.com/mqlite/mqlite/consumequeue"
	"github.com/mqlite/mqlite/indexfile"
	"github.com/mqlite/mqlite/internal/errs"
	"github.com/mqlite/mqlite/message"
	"github.com/mqlite/mqlite/topic"
)

// The dispatcher's per-record work. Scanning a record only parses it into
// the batch: its ConsumeQueue entry and the hashes of its keys. Every
// batchRecords records, and at the end of each catch-up, the batch is
// applied: first all the keys in one IndexFile call (whose slot reads then
// overlap instead of missing the cache one after another), then the
// ConsumeQueue entries in CommitLog order, a run of consecutive entries of
// one queue in one call. So a queue entry is never visible before its
// record's keys, and the newest entry over all queues marks a point below
// which every record is in its queue: what a read-only Store beside this
// process relies on. Readers in this process see nothing of a batch
// before the dispatcher publishes its progress, after the catch-up.

const batchRecords = 64

type batch struct {
	entries  []consumequeue.Entry // in CommitLog order
	targets  []target             // where entries[i] goes
	keys     []indexfile.Hashed
	keyBuf   []byte
	failedAt int64 // CommitLog offset of the first record an apply failed on, or -1
}

type target struct {
	q      *consumequeue.Queue
	offset int64 // queue offset
}

// queue returns the ConsumeQueue of (topic, id), creating it on first use.
func (d *dispatcher) queue(topic []byte, id int32) (*consumequeue.Queue, error) {
	qs := d.queues[string(topic)]
	if int(id) < len(qs) && qs[id] != nil {
		return qs[id], nil
	}
	t := string(topic)
	q, err := d.cq.Queue(t, int(id), true)
	if err != nil {
		return nil, err
	}
	for len(qs) <= int(id) {
		qs = append(qs, nil)
	}
	qs[id] = q
	d.queues[t] = qs
	return q, nil
}

// dispatch adds one record to the batch, applying the batch when full.
func (d *dispatcher) dispatch(r commitlog.Record) error {
	if err := d.s.checkPayload(r); err != nil {
		return err
	}
	v := viewOf(r)
	switch v.SysFlag() & message.SysTxTypeMask {
	case message.SysTxPrepared, message.SysTxRollback:
		return nil // half messages and rollbacks are not consumable
	}
	q, err := d.queue(v.Topic(), v.QueueID())
	if err != nil {
		return err
	}
	e := consumequeue.Entry{Offset: r.Offset, Size: int32(r.Size), TagsCode: v.TagsCode()}
	if t := string(v.Topic()); t == topic.Schedule || t == topic.Timer {
		e.TagsCode = deliverSeconds(v)
		d.toSchedule = d.toSchedule || t == topic.Schedule
	}
	d.batch.entries = append(d.batch.entries, e)
	d.batch.targets = append(d.batch.targets, target{q, v.QueueOffset()})
	d.lastStoreMs = max(d.lastStoreMs, v.StoreMs())
	d.hashKeys(v, r.Offset)
	if len(d.batch.entries) >= batchRecords {
		return d.apply()
	}
	return nil
}

// apply writes the batch: keys, then queue entries (see above). On an
// error it records where re-dispatch must resume, the first record not
// applied (dispatch is idempotent: the IndexFile skips offsets it has, the
// ConsumeQueue accepts an identical entry again), and drops the batch.
func (d *dispatcher) apply() error {
	b := &d.batch
	defer func() { b.entries, b.targets, b.keys = b.entries[:0], b.targets[:0], b.keys[:0] }()
	if len(b.entries) == 0 {
		return nil
	}
	if len(b.keys) > 0 {
		if err := d.idx.PutHashed(b.keys); err != nil {
			b.failedAt = b.entries[0].Offset
			return fmt.Errorf("mqlite: index records from %d: %w", b.failedAt, err)
		}
	}
	for i := 0; i < len(b.entries); {
		t, j := b.targets[i], i+1
		for j < len(b.entries) && b.targets[j].q == t.q && b.targets[j].offset == t.offset+int64(j-i) {
			j++
		}
		n, err := t.q.AppendBatch(t.offset, b.entries[i:j])
		if err != nil {
			b.failedAt = b.entries[i+n].Offset
			if errors.Is(err, consumequeue.ErrConflict) {
				// The queue holds entries that are not its records' (the
				// CommitLog is the truth): damage, located in the queue.
				logical := t.offset + int64(n)
				err = errors.Join(err, errs.Corrupt(t.q.Dir(), logical*consumequeue.EntrySize,
					"the queue disagrees with the CommitLog record at %d, which is its entry %d", b.failedAt, logical))
			}
			return fmt.Errorf("mqlite: dispatch record at %d: %w", b.failedAt, err)
		}
		i = j
	}
	return nil
}

// deliverSeconds is the tags code of schedule and timer messages: the
// deliver-at time in unix seconds, rounded up (so a timer is never early),
// else the store time. The timer service buckets entries by it without
// touching the CommitLog.
func deliverSeconds(v message.View) uint32 {
	if p := v.Prop(message.PropDeliverAt); p != nil {
		var ms int64
		for _, c := range p {
			ms = ms*10 + int64(c-'0')
		}
		return uint32((ms + 999) / 1000)
	}
	return uint32(v.StoreMs() / 1000)
}

// hashKeys adds topic#uniqkey and topic#key for each key to the batch.
func (d *dispatcher) hashKeys(v message.View, off int64) {
	b := &d.batch
	topic, ms := v.Topic(), v.StoreMs()
	add := func(key []byte) {
		if len(key) == 0 {
			return
		}
		b.keyBuf = append(append(append(b.keyBuf[:0], topic...), '#'), key...)
		b.keys = append(b.keys, indexfile.Hashed{Hash: indexfile.KeyHash(b.keyBuf), Phys: off, StoreMs: ms})
	}
	uniq, keys := v.KeyProps()
	add(uniq)
	for len(keys) > 0 {
		i := 0
		for i < len(keys) && keys[i] != ' ' {
			i++
		}
		add(keys[:i])
		if i == len(keys) {
			break
		}
		keys = keys[i+1:]
	}
}
