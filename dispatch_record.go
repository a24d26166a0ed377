package mqlite

import (
	"fmt"

	"github.com/mqlite/mqlite/commitlog"
	"github.com/mqlite/mqlite/consumequeue"
	"github.com/mqlite/mqlite/indexfile"
	"github.com/mqlite/mqlite/message"
	"github.com/mqlite/mqlite/topic"
)

// The dispatcher's per-record work. Scanning a record only parses it into
// the batch: its ConsumeQueue entry and the hashes of its keys. Every
// batchRecords records, and at the end of each catch-up, the batch is
// applied: the ConsumeQueue entries in order, then all the keys in one
// IndexFile call, whose slot reads then overlap instead of missing the
// cache one after another. Readers see nothing of a batch before the
// dispatcher publishes its progress, after the catch-up.

const batchRecords = 64

type batch struct {
	runs     []*queueRun // queues with entries in this batch, in order of first entry
	records  int
	keys     []indexfile.Hashed
	keyBuf   []byte
	failedAt int64 // CommitLog offset of the first record an apply failed on, or -1
}

// queueRun is one queue and the entries the batch holds for it, at
// consecutive queue offsets from first.
type queueRun struct {
	q       *consumequeue.Queue
	first   int64
	entries []consumequeue.Entry
}

// queue returns the run of (topic, id), opening the queue on first use.
func (d *dispatcher) queue(topic []byte, id int32) (*queueRun, error) {
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
	qs[id] = &queueRun{q: q}
	d.queues[t] = qs
	return qs[id], nil
}

// dispatch adds one record to the batch, applying the batch when full.
func (d *dispatcher) dispatch(r commitlog.Record) error {
	if err := checkPayload(r); err != nil {
		return err
	}
	v := viewOf(r)
	switch v.SysFlag() & message.SysTxTypeMask {
	case message.SysTxPrepared, message.SysTxRollback:
		return nil // half messages and rollbacks are not consumable
	}
	run, err := d.queue(v.Topic(), v.QueueID())
	if err != nil {
		return err
	}
	e := consumequeue.Entry{Offset: r.Offset, Size: int32(r.Size), TagsCode: v.TagsCode()}
	if t := string(v.Topic()); t == topic.Schedule || t == topic.Timer {
		e.TagsCode = deliverSeconds(v)
	}
	if qoff := v.QueueOffset(); len(run.entries) == 0 {
		run.first = qoff
		d.batch.runs = append(d.batch.runs, run)
	} else if qoff != run.first+int64(len(run.entries)) {
		// Not the next offset of this queue (the queue itself will say
		// whether that is wrong): apply what is held first.
		if err := d.apply(); err != nil {
			return err
		}
		run.first = qoff
		d.batch.runs = append(d.batch.runs, run)
	}
	run.entries = append(run.entries, e)
	d.batch.records++
	d.lastStoreMs = max(d.lastStoreMs, v.StoreMs())
	d.hashKeys(v, r.Offset)
	if d.batch.records >= batchRecords {
		return d.apply()
	}
	return nil
}

// apply writes the batch into the ConsumeQueue, one AppendBatch per
// queue, then the IndexFile. On an error it records where re-dispatch
// must resume, the oldest record not applied (dispatch is idempotent: the
// ConsumeQueue accepts an identical entry again, the IndexFile skips
// offsets it has), and drops the batch.
func (d *dispatcher) apply() error {
	b := &d.batch
	defer func() {
		for _, run := range b.runs {
			run.entries = run.entries[:0]
		}
		b.runs, b.keys, b.records = b.runs[:0], b.keys[:0], 0
	}()
	for i, run := range b.runs {
		n, err := run.q.AppendBatch(run.first, run.entries)
		if err != nil {
			b.failedAt = run.entries[n].Offset
			for _, later := range b.runs[i+1:] {
				b.failedAt = min(b.failedAt, later.entries[0].Offset)
			}
			return fmt.Errorf("mqlite: dispatch record at %d: %w", run.entries[n].Offset, err)
		}
	}
	if len(b.keys) == 0 {
		return nil
	}
	if err := d.idx.PutHashed(b.keys); err != nil {
		b.failedAt = b.keys[0].Phys
		for _, run := range b.runs {
			b.failedAt = min(b.failedAt, run.entries[0].Offset)
		}
		return fmt.Errorf("mqlite: index records from %d: %w", b.failedAt, err)
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
	add(v.Prop(message.PropUniqKey))
	keys := v.Prop(message.PropKeys)
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
