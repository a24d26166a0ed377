package consumer

import (
	"context"
	"fmt"
	"runtime"
	"runtime/debug"
	"sync/atomic"
	"time"

	"github.com/mqlite/mqlite/internal/errs"
	"github.com/mqlite/mqlite/message"
)

// ConsumeResult is what a Handler reports for its batch.
type ConsumeResult uint8

const (
	// ConsumeSuccess: the batch was consumed; its offsets may be committed.
	ConsumeSuccess ConsumeResult = iota
	// ReconsumeLater: the batch failed. Concurrent clustering consumers
	// send every message of it back to the store's retry path; orderly
	// consumers suspend the queue and retry locally (RocketMQ's
	// SUSPEND_CURRENT_QUEUE_A_MOMENT); broadcasting consumers retry locally.
	ReconsumeLater
)

// String returns "ConsumeSuccess" or "ReconsumeLater".
func (r ConsumeResult) String() string {
	switch r {
	case ConsumeSuccess:
		return "ConsumeSuccess"
	case ReconsumeLater:
		return "ReconsumeLater"
	}
	return fmt.Sprintf("ConsumeResult(%d)", uint8(r))
}

// Handler consumes a batch of at most ConsumeBatchSize messages, all of
// one queue and in queue order. ctx is cancelled when the consume timeout
// passes or the consumer is closed; it serves the call only (later calls
// on the same handler goroutine may get the same ctx, so it is not
// cancelled when the call returns). A panic counts as ReconsumeLater; any
// result other than ConsumeSuccess counts as ReconsumeLater. The messages
// stay valid after the call and may be kept (the store may decode
// messages into shared memory blocks, mqlite's of 14 KiB, so keeping one
// keeps its blocks alive); a batch retried locally is handed over again as
// the same values.
type Handler func(ctx context.Context, msgs []*message.MessageExt) ConsumeResult

// PushConsumer calls a handler for the messages of the queues the group
// gives it, from a bounded pool of goroutines. Create it with
// Manager.NewPushConsumer, Subscribe, then Start. It is safe for
// concurrent use.
type PushConsumer struct{ m *member }

// NewPushConsumer returns a push consumer of group. The group name is
// 1..248 bytes of letters, digits, '_', '-', '|' and '%'.
func (mg *Manager) NewPushConsumer(group string, o Options) (*PushConsumer, error) {
	m, err := mg.newConsumer(group, o, kindPush)
	if err != nil {
		return nil, err
	}
	return &PushConsumer{m: m}, nil
}

func (mg *Manager) newConsumer(group string, o Options, kind memberKind) (*member, error) {
	if mg.o.ReadOnly {
		return nil, fmt.Errorf("mqlite/consumer: new consumer of group %q: %w", group, ErrReadOnly)
	}
	if err := validGroup(group); err != nil {
		return nil, fmt.Errorf("mqlite/consumer: group name %q: %v: %w", group, err, ErrInvalidArgument)
	}
	o, err := o.withDefaults(mg.clk.Now())
	if err != nil {
		return nil, err
	}
	if kind == kindPull && o.Orderly {
		return nil, fmt.Errorf("mqlite/consumer: options: Orderly applies to push consumers (a pull consumer's Poll is in queue order already): %w", ErrInvalidArgument)
	}
	if mg.isClosed() {
		return nil, ErrClosed
	}
	return newMember(mg, group, o, kind), nil
}

// Group returns the consumer's group name.
func (c *PushConsumer) Group() string {
	if c == nil {
		return ""
	}
	return c.m.group
}

// ID returns the member's id in its group (InstanceName, or a generated
// name); empty before Start.
func (c *PushConsumer) ID() string {
	if c == nil {
		return ""
	}
	return c.m.publicID()
}

// Subscribe adds topic with filter f (nil: every message); call it before
// Start. A topic the store does not know yet is fine: its queues are
// given out once it is created (by CreateTopic or a producer's first
// send), so consumers and producers may start in any order.
// ErrInvalidArgument for an empty or illegal topic name or after Start.
// Subscribing a topic again replaces its filter.
func (c *PushConsumer) Subscribe(topic string, f Filter) error {
	if c == nil {
		return errs.NilReceiver("consumer.PushConsumer")
	}
	return c.m.subscribeBeforeStart(topic, f)
}

func (m *member) subscribeBeforeStart(topic string, f Filter) error {
	if err := m.checkState(); err != nil {
		return err
	}
	if err := m.validateSubscription(topic); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	switch m.mu.state {
	case memberIdle:
	case memberRunning:
		return fmt.Errorf("mqlite/consumer: Subscribe after Start: %w", ErrInvalidArgument)
	default:
		return ErrClosed
	}
	m.mu.subs[topic] = &subscription{topic: topic, filter: f}
	return nil
}

// Start joins the group and starts consuming with h. Without Subscribe
// calls it restores the group's persisted subscriptions (through
// ManagerOptions.ParseFilter for filtered ones). Errors: ErrInvalidArgument
// (nil handler, no subscription, started twice, model or strategy
// different from the group's live members, InstanceName taken), ErrClosed.
func (c *PushConsumer) Start(h Handler) error {
	if c == nil {
		return errs.NilReceiver("consumer.PushConsumer")
	}
	m := c.m
	if h == nil {
		return fmt.Errorf("mqlite/consumer: nil handler: %w", ErrInvalidArgument)
	}
	if err := m.checkState(); err != nil {
		return err
	}
	if err := m.restoreSubscriptions(); err != nil {
		return err
	}
	err := m.start(func() {
		m.h = h
		m.work = newWorkQueue(m.o.Goroutines)
		m.delay = newDelayer(m.clk, m.mg.o.Stepped)
		if m.mg.o.Stepped { // Step runs the handler: one slot, no worker
			m.work.stepped = true
			m.parallel = 1
			m.slots = []runSlot{{}}
			m.slots[0].parent, m.slots[0].release = context.WithCancel(m.ctx)
			return
		}
		// The workers' slots, then those of fetchers running their own
		// queue's batches (workQueue.borrow).
		m.slots = make([]runSlot, 2*m.o.Goroutines)
		m.procs = runtime.GOMAXPROCS(0)
		m.parallel = min(m.o.Goroutines, m.procs)
		for i := range m.slots {
			// A per-worker parent keeps the per-batch contexts from
			// contending on m.ctx's child registry.
			m.slots[i].parent, m.slots[i].release = context.WithCancel(m.ctx)
		}
		for i := range m.o.Goroutines {
			m.workers.Add(1)
			go m.worker(i)
		}
	})
	if err != nil {
		return err
	}
	m.g.rebalance()
	m.reconcile()
	return nil
}

// restoreSubscriptions gives a member without subscriptions those its
// group persisted.
func (m *member) restoreSubscriptions() error {
	m.mu.Lock()
	n := len(m.mu.subs)
	m.mu.Unlock()
	if n > 0 {
		return nil
	}
	var recs []Subscription
	if g, err := m.mg.lookup(m.group); err == nil {
		g.mu.Lock()
		skip := g.mu.rec.unsubscribedBy(m.o.InstanceName)
		for _, s := range g.mu.rec.Subscriptions {
			if !skip[s.Topic] { // this instance unsubscribed from it
				recs = append(recs, s)
			}
		}
		g.mu.Unlock()
	}
	if len(recs) == 0 {
		return fmt.Errorf("mqlite/consumer: group %s: no subscription: %w", m.group, ErrInvalidArgument)
	}
	subs := map[string]*subscription{}
	for _, r := range recs {
		s := &subscription{topic: r.Topic}
		if r.FilterType != "" {
			if m.mg.o.ParseFilter == nil {
				return fmt.Errorf("mqlite/consumer: group %s: persisted %s filter %q on %s needs ManagerOptions.ParseFilter: %w",
					m.group, r.FilterType, r.Expression, r.Topic, ErrInvalidArgument)
			}
			f, err := m.mg.o.ParseFilter(r.FilterType, r.Expression)
			if err != nil {
				return fmt.Errorf("mqlite/consumer: group %s: persisted filter on %s: %w", m.group, r.Topic, err)
			}
			s.filter = f
		}
		subs[r.Topic] = s
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.mu.subs) == 0 {
		m.mu.subs = subs
	}
	return nil
}

// Shutdown stops gracefully: no more fetching, running handler calls
// finish, with the batches their goroutines took along with them (see the
// package doc; messages fetched and not taken are left for the next owner),
// their offsets are committed, the queues are handed over and offsets are
// persisted. When ctx ends first, the handlers' contexts are cancelled and
// Shutdown returns ctx.Err() once they returned. Idempotent.
func (c *PushConsumer) Shutdown(ctx context.Context) error {
	if c == nil {
		return errs.NilReceiver("consumer.PushConsumer")
	}
	if ctx == nil {
		ctx = context.Background()
	}
	return c.m.shutdown(ctx)
}

// Close stops at once: the running handlers' contexts are cancelled and
// Close waits for those calls to return (a handler must honour its ctx);
// what they consumed successfully is committed, the rest is delivered
// again later. Idempotent; afterwards every call returns ErrClosed.
func (c *PushConsumer) Close() error {
	if c == nil {
		return errs.NilReceiver("consumer.PushConsumer")
	}
	return c.m.close()
}

// Assignment returns the queues currently assigned to this consumer. A
// clustering group's retry queue (%RETRY%group) is among them (see
// Queue.IsRetry).
func (c *PushConsumer) Assignment() []Queue {
	if c == nil {
		return nil
	}
	return c.m.targetQueues()
}

// Stats returns counters and per-queue cache figures.
func (c *PushConsumer) Stats() Stats {
	if c == nil {
		return Stats{}
	}
	return c.m.statsSnapshot()
}

// runSlot is worker i's handler call in progress, for the consume
// timeout check, and the worker's counters. The worker touches only
// atomics per call; the check (on the control goroutine) decides from two
// observations of the same running call, ConsumeTimeout apart on the
// clock, so a call costs no clock read and no lock.
type runSlot struct {
	parent  context.Context // the worker's context, a child of member.ctx
	release context.CancelFunc

	// seq is odd while a call runs, and every call has a value of its
	// own. The worker ends call s with CompareAndSwap(s, s+1), or, between
	// two calls of a run, ends it and starts the next with
	// CompareAndSwap(s, s+2) (callRun); the check cancels it with
	// CompareAndSwap(s, s+1), so exactly one of them ends it.
	seq atomic.Uint64
	// ctx is the handler context of the worker's calls: one is reused
	// until the check cancels it, so a call costs no context of its own.
	// The worker writes ctx and cancel only between calls, after a
	// timeout; the check reads cancel after seeing the call start.
	ctx    context.Context
	cancel context.CancelFunc

	// The check's memory of the running call: its seq and when it was
	// first seen. Control goroutine only.
	seenSeq uint64
	seenAt  time.Time

	// longCalls: the worker's last timed run took runCallMax or more a
	// call, so it takes batches one at a time (see takeRunLocked); runs
	// counts its runs, of which it times one in runTimeEvery while calls
	// are short, and every one while they are long. Worker only.
	longCalls bool
	runs      uint32

	_ [64]byte // keep the next worker's slot off this cache line
}

// worker is one of the push consumer's handler goroutines.
func (m *member) worker(slot int) {
	defer m.workers.Done()
	finished := false
	for {
		p, ok := m.work.pop(finished)
		if !ok {
			return
		}
		// pop counted the worker busy (workQueue.mu.busy) until it
		// comes back.
		if m.o.Orderly {
			m.consumeOrderly(p, slot)
		} else {
			m.consumeConcurrent(p, slot)
		}
		finished = true
	}
}

// call runs the handler on batch with the consume timeout, recovering a
// panic. Anything but ConsumeSuccess, and any call that timed out, counts
// as ReconsumeLater.
func (m *member) call(slot int, batch []*message.MessageExt) ConsumeResult {
	res := m.callUncounted(slot, batch)
	if res == ConsumeSuccess {
		m.stats.addConsumed(slot, int64(len(batch)))
	}
	return res
}

// callUncounted is call without counting consumed messages (failed ones
// are counted): a run counts its consumed messages once, at its end.
func (m *member) callUncounted(slot int, batch []*message.MessageExt) ConsumeResult {
	rs := &m.slots[slot]
	s := rs.begin()
	res := m.invoke(rs.ctx, batch)
	if !rs.seq.CompareAndSwap(s, s+1) {
		res = m.timedOut(rs)
	}
	if res != ConsumeSuccess {
		m.stats.failed.Add(int64(len(batch)))
	}
	return res
}

// begin starts a call on rs: a fresh handler context if the last one was
// cancelled (written before the call shows as running, so that the check
// reads the new cancel), then seq odd. It returns the call's seq.
func (rs *runSlot) begin() uint64 {
	if rs.ctx == nil {
		rs.ctx, rs.cancel = context.WithCancel(rs.parent)
	}
	return rs.seq.Add(1)
}

// timedOut records that the check ended the call on rs and cancelled its
// context (the next call gets a new one); the call counts as failed.
func (m *member) timedOut(rs *runSlot) ConsumeResult {
	rs.ctx, rs.cancel = nil, nil
	m.stats.timeouts.Add(1)
	return ReconsumeLater
}

func (m *member) invoke(ctx context.Context, batch []*message.MessageExt) (res ConsumeResult) {
	defer func() {
		if v := recover(); v != nil {
			m.stats.panics.Add(1)
			m.log.Error("mqlite/consumer: handler panicked; the batch counts as failed", "panic", v, "stack", string(debug.Stack()))
			res = ReconsumeLater
		}
	}()
	if res = m.handle(ctx, batch); res != ConsumeSuccess {
		res = ReconsumeLater
	}
	return res
}

// checkTimeouts cancels handler calls running longer than ConsumeTimeout:
// a call is timed out once two checks at least ConsumeTimeout apart saw it
// running, so between ConsumeTimeout and ConsumeTimeout plus two check
// intervals after it started.
func (m *member) checkTimeouts() {
	now := m.clk.Now()
	for i := range m.slots {
		rs := &m.slots[i]
		s := rs.seq.Load()
		switch {
		case s&1 == 0: // idle
			rs.seenSeq = 0
		case s != rs.seenSeq: // a call not seen before
			rs.seenSeq, rs.seenAt = s, now
		case now.Sub(rs.seenAt) >= m.o.ConsumeTimeout:
			cancel := rs.cancel // before the swap: the worker replaces it only after
			if rs.seq.CompareAndSwap(s, s+1) {
				m.log.Warn("mqlite/consumer: consume timeout; cancelling the handler", "after", now.Sub(rs.seenAt))
				cancel()
			}
			rs.seenSeq = 0
		}
	}
}

// concurrentBatchesPerTask is how many batches of one queue a worker
// consumes in a row, taking the next ones as it finishes the last (one lock
// instead of a trip through the work queue), before it goes back to the
// work queue, so that busy queues share the pool fairly.
const concurrentBatchesPerTask = 32

// concurrentRunMax bounds a run: the batches a worker takes from a queue
// under one lock and consumes one handler call after another before it
// settles them under the next lock. With small batches the lock, the
// commit and the wake-up of the fetcher cost more than the handler call,
// so a run shares them (with batches of 1, 6% more messages a second in
// BenchmarkConsume, 23% with ReuseMessages). See takeRunLocked for when a
// run is longer than one batch.
const concurrentRunMax = 8

// runCallMax is the time a call may take, on average over a run, for the
// worker to go on taking runs. Next to calls that long, what a run saves
// (about 0.1 µs a batch) is noise, and a long call holds back the rest of
// its run. Timing costs two clock reads, about as much as the run saves
// with batches of 1, so while its calls are short a worker times one run
// in runTimeEvery: a handler that turns slow takes at most that many
// runs to be seen.
const (
	runCallMax   = 20 * time.Microsecond
	runTimeEvery = 8
)

// consumeConcurrent takes a run of p's batches (local redeliveries first)
// and consumes them, then, while p has batches announced and not yet
// taken, more runs, up to concurrentBatchesPerTask batches in all.
func (m *member) consumeConcurrent(p *pq, slot int) {
	if m.ctx.Err() != nil { // closing: the tokens left start nothing
		return
	}
	rs := &m.slots[slot]
	var run [concurrentRunMax][]*message.MessageExt
	var res [concurrentRunMax]ConsumeResult
	p.mu.Lock()
	n := m.takeRunLocked(p, run[:], false, !rs.longCalls)
	p.mu.Unlock()
	for done := 0; n > 0; {
		timed := rs.longCalls || rs.runs%runTimeEvery == 0
		rs.runs++
		called, long := m.callRun(p, slot, run[:n], res[:], timed)
		if timed {
			rs.longCalls = long
		}
		done += n
		n = m.finishRun(p, run[:n], res[:called], run[:min(concurrentRunMax, concurrentBatchesPerTask-done)], !rs.longCalls)
	}
}

// callRun calls the handler for each batch of run in turn, with its
// results in res, and counts what it consumed; it returns how many calls
// it made. The rest of a run is consumed even when the queue is dropped
// meanwhile (it counts as running, and leaving it would hold the commit
// below messages other workers consumed), but not once the consumer
// closes or the queue is revoked: then nothing it consumes is committed.
// A timed run also reports whether its calls took runCallMax or more on
// average (long), and records it for the fetchers (noteCalls).
func (m *member) callRun(p *pq, slot int, run [][]*message.MessageExt, res []ConsumeResult, timed bool) (called int, long bool) {
	if len(run) == 0 {
		return 0, false
	}
	var t0 time.Time
	if timed {
		t0 = m.clk.Now()
	}
	rs := &m.slots[slot]
	s := rs.begin()
	for ; called < len(run); called++ {
		if called > 0 {
			if p.revoked.Load() || m.ctx.Err() != nil {
				break
			}
			// One swap ends the last call and starts this one: seq stays
			// odd between them, but every call has a value of its own, so
			// the check never takes two calls for one running long.
			if rs.seq.CompareAndSwap(s, s+2) {
				s += 2
			} else {
				res[called-1] = m.timedOut(rs)
				s = rs.begin()
			}
		}
		res[called] = m.invoke(rs.ctx, run[called])
	}
	if !rs.seq.CompareAndSwap(s, s+1) {
		res[called-1] = m.timedOut(rs)
	}
	consumed, failed := 0, 0
	for i, r := range res[:called] {
		if r == ConsumeSuccess {
			consumed += len(run[i])
		} else {
			failed += len(run[i])
		}
	}
	m.stats.addConsumed(slot, int64(consumed))
	if failed > 0 {
		m.stats.failed.Add(int64(failed))
	}
	if timed {
		long = m.clk.Now().Sub(t0) >= time.Duration(called)*runCallMax
		m.noteCalls(!long)
	}
	return called, long
}

// takeRunLocked fills run with p's next batches, claiming a token for
// each (the first one's token is the caller's: it was popped, or claimed
// when claim is true), and returns how many it took. A run takes more
// than one batch only when runs is true (the worker's calls have been
// short), the queue has a backlog (its last pull was full) and it caches
// a batch for every handler call that can run at once besides (parallel:
// the fewer of Goroutines and GOMAXPROCS; with short calls more
// goroutines than processors add no parallelism): then the batches a run
// holds would wait in the cache anyway. A call
// that turns out long holds back the rest of its run (when the backlog
// ends just then, up to concurrentRunMax-1 batches wait for it while
// goroutines idle), and then its worker takes batches one at a time until
// its calls are short again.
func (m *member) takeRunLocked(p *pq, run [][]*message.MessageExt, claim, runs bool) int {
	if len(run) == 0 || !p.consumableLocked() || p.mu.paused || (claim && !p.claimNext()) {
		return 0
	}
	if run[0] = m.takeLocked(p); run[0] == nil {
		return 0
	}
	n, more := 1, 0
	if bs, spare := m.o.ConsumeBatchSize, p.mu.msgs.len()-m.parallel*m.o.ConsumeBatchSize; runs && p.mu.backlog && spare >= 0 {
		more = p.claim(min(len(run)-1, spare/bs+1))
	}
	for ; n <= more; n++ {
		if run[n] = m.takeLocked(p); run[n] == nil {
			break
		}
	}
	return n
}

// takeLocked takes p's next batch (a local redelivery first) for a
// handler call, or returns nil.
func (m *member) takeLocked(p *pq) []*message.MessageExt {
	if !p.consumableLocked() || p.mu.paused {
		return nil
	}
	var batch []*message.MessageExt
	if len(p.mu.retry) > 0 {
		batch = p.mu.retry[0]
		p.mu.retry[0] = nil
		p.mu.retry = p.mu.retry[1:]
	} else {
		k := min(m.o.ConsumeBatchSize, p.mu.msgs.len())
		if k == 0 {
			return nil
		}
		batch = p.popLocked(k)
	}
	p.mu.running++
	return batch
}

// finishRun settles a run whose first len(res) batches were consumed with
// those results (the rest were not started: they stay unacked): it acks
// what was consumed or sent back, schedules a local redelivery of the
// rest, commits, and releases a drained queue. Under the same lock it
// takes p's next run (of one batch unless runs) into next when one is
// announced on the work queue, and returns its length. next may share
// run's array.
func (m *member) finishRun(p *pq, run [][]*message.MessageExt, res []ConsumeResult, next [][]*message.MessageExt, runs bool) int {
	var acks, failed [concurrentRunMax][]*message.MessageExt
	for i, r := range res {
		acks[i], failed[i] = m.settle(p, run[i], r)
	}
	p.mu.Lock()
	p.mu.running -= len(run)
	acked := false
	for _, batch := range acks[:len(res)] {
		for _, msg := range batch {
			p.mu.track.ack(msg.QueueOffset)
			p.uncacheOne(msg)
			acked = true
		}
	}
	if acked {
		p.spaceLocked()
		p.commitLocked()
	}
	rel := p.mu.state == pqDraining && p.mu.running == 0
	n := 0
	if !rel && m.ctx.Err() == nil {
		n = m.takeRunLocked(p, next, true, runs)
	}
	p.mu.Unlock()
	for i := range res {
		m.release(acks[i])
		if f := failed[i]; len(f) > 0 && !rel {
			m.delay.after(m.o.SuspendInterval, func() { p.redeliver(f) })
		}
	}
	if rel {
		p.release()
	}
	return n
}

// settle sorts a consumed batch by its result into the messages to ack
// (consumed, dropped after too many attempts, or sent back to the retry
// path) and those to redeliver locally.
func (m *member) settle(p *pq, batch []*message.MessageExt, res ConsumeResult) (acks, failed []*message.MessageExt) {
	switch {
	case res == ConsumeSuccess:
		return batch, nil
	case m.ctx.Err() != nil: // closing: leave it for the next owner
		return nil, nil
	case m.o.Model == Broadcasting: // no shared retry topic: retry here
		for _, msg := range batch {
			if int(msg.ReconsumeTimes) >= m.o.MaxReconsumeTimes {
				m.stats.dropped.Add(1)
				m.log.Warn("mqlite/consumer: broadcast message failed too often; dropped",
					"queue", p.q.String(), "offset", msg.QueueOffset, "id", msg.MsgID)
				acks = append(acks, msg)
				continue
			}
			msg.ReconsumeTimes++
			failed = append(failed, msg)
		}
	default:
		for _, msg := range batch {
			if err := m.sendBack(m.ctx, msg); err != nil {
				m.log.Warn("mqlite/consumer: send back failed; redelivering locally", "queue", p.q.String(), "offset", msg.QueueOffset, "err", err)
				msg.ReconsumeTimes++
				failed = append(failed, msg)
				continue
			}
			acks = append(acks, msg)
		}
	}
	return acks, failed
}

// redeliver queues a failed batch for another local attempt.
func (p *pq) redeliver(batch []*message.MessageExt) {
	p.mu.Lock()
	if !p.consumableLocked() {
		p.mu.Unlock()
		return
	}
	p.mu.retry = append(p.mu.retry, batch)
	paused := p.mu.paused // Resume announces it
	p.mu.Unlock()
	p.m.stats.redelivered.Add(int64(len(batch)))
	if !paused {
		p.m.work.push(p, 1)
	}
}
