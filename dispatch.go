package mqlite

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/mqlite/mqlite/consumequeue"
	"github.com/mqlite/mqlite/indexfile"
	"github.com/mqlite/mqlite/internal/errs"
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
// that queue. It is the only writer of the ConsumeQueue and the IndexFile:
// its loop goroutine, or a sender that holds run while the loop sleeps
// (dispatch_inline.go).
// In FlushSync mode it dispatches only flushed records (unless
// Options.ReadUncommitted), so nothing that could vanish on power loss is
// ever delivered.
type dispatcher struct {
	s   *Store
	cq  *consumequeue.Store
	idx *indexfile.Index
	// run is held by whoever dispatches: the loop while it catches up, or
	// a sender that found the loop asleep (dispatch_inline.go). It guards the
	// fields up to batch.
	run         sync.Mutex
	next        int64 // next CommitLog offset to dispatch
	lastStoreMs int64 // newest store time seen
	// verify makes catchUp check each record's CRC: set while Open
	// re-dispatches records read back from disk, which may be damaged
	// below the checkpoint (recovery validated only what follows it).
	// Records this process appended are trusted.
	verify   bool
	inline   inlineWindow
	stopped  bool   // stop ran: the files may be closing, nobody dispatches any more
	woke     bool   // the last catchUp woke a reader
	wokeMark uint64 // ran when it did (see yield)
	onYield  func() // test hook: a sender yields to the readers it woke
	chunked  int64  // records dispatched from received chunks (dispatch_chunk.go)

	queues map[string][]*consumequeue.Queue // topic -> queue id -> queue
	batch  batch                            // records scanned, not yet applied (dispatch_record.go)

	ran     atomic.Uint64 // woken readers that have run: each adds one once it has its channel
	gosched func()        // runtime.Gosched; tests count the calls (set them under run)

	wake     chan struct{}
	sleeping atomic.Bool // the loop is (about to be) parked on wake
	// scheduled (cap 1) gets a token once a catch-up that appended to the
	// schedule topic has published it: the delay scheduler's wake-up.
	// toSchedule is set while a catch-up has such entries (under run).
	scheduled  chan struct{}
	toSchedule bool
	published  atomic.Int64 // mu.dispatched, for readers that need no waiter
	onPublish  func(int64)  // tests: called with each new dispatched position, under mu
	quit       chan struct{}
	done       chan struct{}

	// fenced is set when a dispatch failure stopped the loop: the error,
	// wrapped in ErrFenced. The send path (admit) refuses writes with it,
	// since nothing appended from then on would reach a queue before the
	// store is reopened.
	fenced atomic.Pointer[error]

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
	refs   int // callers of waitCh waiting on it that did not leave (d.mu)
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
		batch: batch{failedAt: -1}, wake: make(chan struct{}, 1), scheduled: make(chan struct{}, 1), quit: make(chan struct{}), done: make(chan struct{}),
		gosched: runtime.Gosched}
}

// noSpace reports a full disk (or file size limit) behind err.
func noSpace(err error) bool {
	return errors.Is(err, errs.ErrDiskFull) || errors.Is(err, syscall.ENOSPC) ||
		errors.Is(err, syscall.EDQUOT) || errors.Is(err, syscall.EFBIG)
}

// confirmed is how far records may be dispatched.
func (d *dispatcher) confirmed() int64 { return d.s.dur.confirmed() }

// notify wakes the loop if it sleeps; it never blocks. A sender that
// finds the loop awake pays one atomic load: the loop looks for new
// records after announcing that it sleeps, and the sender's record is
// published (an atomic store) before it looks at the flag, so one of the
// two always sees the other.
func (d *dispatcher) notify() {
	if !d.sleeping.Load() {
		return
	}
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

func (d *dispatcher) loop() {
	defer close(d.done)
	for {
		d.run.Lock()
		err := d.catchUp(d.confirmed())
		if err != nil {
			d.run.Unlock()
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
			err = fmt.Errorf("mqlite: dispatch stopped: %w: %w", errs.ErrFenced, err)
			d.fenced.Store(&err)
			d.fail(err)
			<-d.quit
			return
		}
		d.sleeping.Store(true)
		pending := d.confirmed() > d.next
		// As a sender does (dispatch_inline.go): a woken reader would
		// otherwise wait in this goroutine's run queue until the loop
		// sleeps, which a burst of sends keeps it from. Only while the
		// put rate is low (yieldMaxPerMs).
		d.inlineAllowed() // brings the rate window up to date
		woke, mark := d.woke && d.inline.yield, d.wokeMark
		d.run.Unlock()
		if woke {
			d.yield(mark)
		}
		if pending {
			d.sleeping.Store(false)
			continue
		}
		select {
		case <-d.wake:
		case <-d.quit:
			return
		}
		d.s.dur.afterWake()
		d.sleeping.Store(false)
	}
}

// catchUp dispatches every record below to and wakes the readers. The
// caller holds run (or owns the dispatcher alone, at Open).
func (d *dispatcher) catchUp(to int64) error {
	if to <= d.next {
		return nil
	}
	next, err := d.s.log.Scan(d.next, to, d.verify, d.dispatch)
	return d.publish(next, err)
}

// publish ends a catch-up that scanned up to next (err: how it ended):
// it applies the batch, moves next and the published progress to the
// first record not applied, wakes the readers that can go, and signals
// the delay scheduler. The caller holds run.
func (d *dispatcher) publish(next int64, err error) error {
	if ferr := d.apply(); err == nil {
		err = ferr
	}
	if d.batch.failedAt >= 0 {
		next = min(next, d.batch.failedAt) // resume at the first record not applied
		d.batch.failedAt = -1
	}
	d.next = next
	d.mu.Lock()
	d.mu.dispatched = next
	d.published.Store(next)
	if d.onPublish != nil {
		d.onPublish(next)
	}
	d.woke = false
	if len(d.mu.waiters) > 0 { // ranging over a map that once held many costs even when empty
		d.wokeMark = d.ran.Load()
		for k, w := range d.mu.waiters {
			if w.ready(next) {
				close(w.ch)
				delete(d.mu.waiters, k)
				d.woke = true
			}
		}
	}
	d.mu.Unlock()
	if d.toSchedule {
		d.toSchedule = false
		select {
		case d.scheduled <- struct{}{}:
		default:
		}
	}
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

// wait blocks until q has an entry at offset, ctx ends or the store closes.
// waitCh returns a channel closed once q has an entry at offset, or, for
// a nil q, once the CommitLog below offset is dispatched.
func (d *dispatcher) waitCh(q *consumequeue.Queue, offset int64) (<-chan struct{}, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.mu.err != nil {
		return nil, d.mu.err
	}
	k := waitKey{q, offset}
	if old, ok := d.mu.waiters[k]; ok {
		old.refs++
		return old.ch, nil
	}
	w := &waiter{q: q, offset: offset, ch: make(chan struct{}), refs: 1}
	if w.ready(d.mu.dispatched) {
		close(w.ch)
		return w.ch, nil
	}
	if d.mu.waiters == nil {
		d.mu.waiters = map[waitKey]*waiter{}
	}
	d.mu.waiters[k] = w
	return w.ch, nil
}

// leave is for a caller of waitCh(q, offset) that stops waiting before the
// channel is closed (its context ended): the last one to leave removes the
// waiter, so that readers giving up on a position the queue never reaches
// (a far offset, a queue nobody sends to) leave nothing behind, and each
// publish ranges over live waiters only.
func (d *dispatcher) leave(q *consumequeue.Queue, offset int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	k := waitKey{q, offset}
	if w, ok := d.mu.waiters[k]; ok {
		if w.refs--; w.refs <= 0 {
			delete(d.mu.waiters, k)
		}
	}
}

func (d *dispatcher) dispatched() int64 { return d.published.Load() }

func (d *dispatcher) failure() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.mu.err
}

// stop ends the loop after a last catch-up, and releases waiters.
func (d *dispatcher) stop() error {
	close(d.quit)
	<-d.done
	d.run.Lock() // a sender may be dispatching
	d.stopped = true
	err := d.failure()
	if err == nil {
		err = d.catchUp(d.confirmed())
	}
	d.run.Unlock()
	d.fail(errors.Join(err, errClosedDispatch))
	return err
}

var errClosedDispatch = fmt.Errorf("mqlite: store closing: %w", ErrClosed)
