package mqlite

import (
	"errors"
	"fmt"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"github.com/mqlite/mqlite/commitlog"
	"github.com/mqlite/mqlite/consumequeue"
	"github.com/mqlite/mqlite/indexfile"
	"github.com/mqlite/mqlite/internal/errs"
	"github.com/mqlite/mqlite/message"
	"github.com/mqlite/mqlite/topic"
)

// System topics with special routing (RocketMQ's names); see package
// topic for the full list.
const (
	ScheduleTopic = topic.Schedule
	HalfTopic     = topic.Half
	OpHalfTopic   = topic.OpHalf
)

// dispatcher tails the CommitLog and, for every record, appends its
// ConsumeQueue entry and IndexFile entries, then wakes readers waiting on
// that queue. It is the only writer of the ConsumeQueue and the IndexFile.
// In FlushSync mode it dispatches only flushed records (unless
// Options.ReadUncommitted), so nothing that could vanish on power loss is
// ever delivered.
type dispatcher struct {
	s           *Store
	cq          *consumequeue.Store
	idx         *indexfile.Index
	next        int64 // next CommitLog offset to dispatch; owned by the loop
	lastStoreMs int64 // newest store time seen; owned by the loop

	queues map[string][]*consumequeue.Queue // topic -> queue id -> queue (loop only)
	keyBuf []byte

	wake chan struct{}
	quit chan struct{}
	done chan struct{}

	mu struct {
		sync.Mutex
		dispatched int64               // published progress, for the checkpoint
		err        error               // a dispatch failure: the store is fenced
		waiters    map[waitKey]*waiter // one per position: repeated waits share it
	}
}

// waiter is a reader blocked until a queue has an entry at offset, or
// (q == nil) until everything below CommitLog offset offset is dispatched.
type waiter struct {
	q      *consumequeue.Queue
	offset int64
	ch     chan struct{}
}

type waitKey struct {
	q      *consumequeue.Queue
	offset int64
}

func (w *waiter) ready(dispatched int64) bool {
	if w.q == nil {
		return dispatched >= w.offset
	}
	return w.q.MaxOffset() > w.offset
}

func newDispatcher(s *Store, cq *consumequeue.Store, idx *indexfile.Index, from int64) *dispatcher {
	return &dispatcher{s: s, cq: cq, idx: idx, next: from, queues: map[string][]*consumequeue.Queue{},
		wake: make(chan struct{}, 1), quit: make(chan struct{}), done: make(chan struct{})}
}

// noSpace reports a full disk (or file size limit) behind err.
func noSpace(err error) bool {
	return errors.Is(err, errs.ErrDiskFull) || errors.Is(err, syscall.ENOSPC) ||
		errors.Is(err, syscall.EDQUOT) || errors.Is(err, syscall.EFBIG)
}

// confirmed is how far records may be dispatched.
func (d *dispatcher) confirmed() int64 {
	if d.s.opts.Flush == FlushSync && !d.s.opts.ReadUncommitted {
		return d.s.log.FlushedPosition()
	}
	return d.s.log.WrotePosition()
}

// notify wakes the loop; it never blocks.
func (d *dispatcher) notify() {
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

func (d *dispatcher) loop() {
	defer close(d.done)
	for {
		if err := d.catchUp(d.confirmed()); err != nil {
			if noSpace(err) {
				// The indexes cannot grow: readers wait, and dispatch
				// (idempotent) resumes from the failed record once there
				// is room.
				d.s.opts.Logger.Warn("mqlite: dispatch waits for disk space", "err", err)
				t := d.s.opts.Clock.NewTimer(time.Second)
				select {
				case <-t.C():
				case <-d.quit:
					t.Stop()
					return
				}
				continue
			}
			d.s.opts.Logger.Error("mqlite: dispatch stopped; the store is fenced", "err", err)
			d.fail(err)
			<-d.quit
			return
		}
		select {
		case <-d.wake:
		case <-d.quit:
			return
		}
	}
}

// catchUp dispatches every record below to and wakes the readers.
func (d *dispatcher) catchUp(to int64) error {
	if to <= d.next {
		return nil
	}
	next, err := d.s.log.Scan(d.next, to, false, d.dispatch)
	d.next = next
	d.mu.Lock()
	d.mu.dispatched = next
	for k, w := range d.mu.waiters {
		if w.ready(next) {
			close(w.ch)
			delete(d.mu.waiters, k)
		}
	}
	d.mu.Unlock()
	return err
}

func (d *dispatcher) fail(err error) {
	d.mu.Lock()
	d.mu.err = err
	for _, w := range d.mu.waiters {
		close(w.ch)
	}
	d.mu.waiters = nil
	d.mu.Unlock()
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

// dispatch builds the index entries of one record.
func (d *dispatcher) dispatch(r commitlog.Record) error {
	if err := checkPayload(r); err != nil {
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
	}
	if err := q.Append(v.QueueOffset(), e); err != nil {
		return fmt.Errorf("mqlite: dispatch record at %d: %w", r.Offset, err)
	}
	d.lastStoreMs = max(d.lastStoreMs, v.StoreMs())
	return d.indexKeys(v, r.Offset)
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

// indexKeys indexes topic#uniqkey and topic#key for each key.
func (d *dispatcher) indexKeys(v message.View, off int64) error {
	topic := v.Topic()
	put := func(key []byte) error {
		if len(key) == 0 {
			return nil
		}
		d.keyBuf = append(append(append(d.keyBuf[:0], topic...), '#'), key...)
		// Put only hashes the key; it does not keep it.
		return d.idx.Put(unsafe.String(unsafe.SliceData(d.keyBuf), len(d.keyBuf)), off, v.StoreMs())
	}
	if err := put(v.Prop(message.PropUniqKey)); err != nil {
		return err
	}
	keys := v.Prop(message.PropKeys)
	for len(keys) > 0 {
		i := 0
		for i < len(keys) && keys[i] != ' ' {
			i++
		}
		if err := put(keys[:i]); err != nil {
			return err
		}
		if i == len(keys) {
			break
		}
		keys = keys[i+1:]
	}
	return nil
}

// wait blocks until q has an entry at offset, ctx ends or the store closes.
// waitCh returns a channel closed once q has an entry at offset, or, for
// a nil q, once the CommitLog below offset is dispatched.
func (d *dispatcher) waitCh(q *consumequeue.Queue, offset int64) (<-chan struct{}, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.mu.err != nil {
		return nil, d.mu.err
	}
	w := &waiter{q: q, offset: offset, ch: make(chan struct{})}
	if w.ready(d.mu.dispatched) {
		close(w.ch)
		return w.ch, nil
	}
	k := waitKey{q, offset}
	if old, ok := d.mu.waiters[k]; ok {
		return old.ch, nil
	}
	if d.mu.waiters == nil {
		d.mu.waiters = map[waitKey]*waiter{}
	}
	d.mu.waiters[k] = w
	return w.ch, nil
}

func (d *dispatcher) dispatched() int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.mu.dispatched
}

func (d *dispatcher) failure() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.mu.err
}

// stop ends the loop after a last catch-up, and releases waiters.
func (d *dispatcher) stop() error {
	close(d.quit)
	<-d.done
	err := d.failure()
	if err == nil {
		err = d.catchUp(d.confirmed())
	}
	d.fail(errors.Join(err, errClosedDispatch))
	return err
}

var errClosedDispatch = fmt.Errorf("mqlite: store closing: %w", ErrClosed)
