package consumer

// This file is the stepped mode (ManagerOptions.Stepped): no consumer
// goroutine fetches or runs handlers; Step does both on its caller's
// goroutine, in an order fixed by the calls made, so that a test script
// gets the same history every run.

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/mqlite/mqlite/message"
)

// stepReconcileMax bounds the reconcile passes of one Step: a queue
// moving between members takes two (the old owner releases it, the new
// one takes it), so this leaves room for chains of hand-overs.
const stepReconcileMax = 8

// Step does, on the caller's goroutine, the work the consumers' goroutines
// do otherwise, once over every consumer: every group is rebalanced (in
// name order), then each live consumer, in creation order, applies its
// queue assignment, runs its local redeliveries and suspended orderly
// queues that are due on the clock, and, for each of its queues in
// (topic, queue ID) order, fetches what the store holds (as far as flow
// control allows) and, for a push consumer, calls the handler on the
// queue's batches in offset order, applying each result (ack, send-back
// to the retry path or the dead-letter queue, local redelivery) before
// the next call. Pull consumers' fetched messages wait for Poll.
//
// One round: the caller repeats Step (and its own work) until a round
// changes nothing (Activity). Only with ManagerOptions.Stepped
// (ErrInvalidArgument otherwise); ErrClosed once the manager is closed.
// Calls are serialised; a consumer closed meanwhile is left alone.
func (mg *Manager) Step(ctx context.Context) error {
	if !mg.o.Stepped {
		return fmt.Errorf("mqlite/consumer: Step needs ManagerOptions.Stepped: %w", ErrInvalidArgument)
	}
	if ctx == nil {
		ctx = context.Background()
	}
	mg.stepMu.Lock()
	defer mg.stepMu.Unlock()
	if mg.isClosed() {
		return ErrClosed
	}
	groups := mg.groupList()
	for _, g := range groups {
		g.rebalance()
	}
	members := mg.stepMembers(groups)
	mg.stepReconcile(members)
	for _, m := range members {
		if err := ctx.Err(); err != nil {
			return err
		}
		if mg.isClosed() {
			return ErrClosed
		}
		m.step(ctx)
	}
	return nil
}

// stepMembers returns the live members of groups in creation order.
func (mg *Manager) stepMembers(groups []*group) []*member {
	var out []*member
	for _, g := range groups {
		out = append(out, g.liveMembers()...)
	}
	slices.SortFunc(out, func(a, b *member) int {
		switch {
		case a.seq < b.seq:
			return -1
		case a.seq > b.seq:
			return 1
		}
		return 0
	})
	return out
}

// stepReconcile has every member apply its assignment, again while a pass
// changed some queue's state (a queue one member released is taken by
// another on the next pass). A change counts as activity.
func (mg *Manager) stepReconcile(members []*member) {
	last := stepFingerprint(members)
	for range stepReconcileMax {
		for _, m := range members {
			m.stepMu.Lock()
			m.reconcile() // does nothing once m stops
			m.stepMu.Unlock()
		}
		fp := stepFingerprint(members)
		if slices.Equal(fp, last) {
			return
		}
		mg.activity.Add(1)
		last = fp
	}
}

// stepState is one queue of one member and its state.
type stepState struct {
	seq   uint64
	q     Queue
	state pqState
}

// stepFingerprint lists every member's queues and their states.
func stepFingerprint(members []*member) []stepState {
	var out []stepState
	for _, m := range members {
		for _, p := range m.activeList() {
			p.mu.Lock()
			out = append(out, stepState{m.seq, p.q, p.mu.state})
			p.mu.Unlock()
		}
	}
	return out
}

// step is Step's work for one member.
func (m *member) step(ctx context.Context) {
	m.stepMu.Lock()
	defer m.stepMu.Unlock()
	if m.checkState() != nil {
		return
	}
	if m.delay != nil {
		m.delay.runDue()
	}
	list := m.activeList()
	for _, p := range list {
		if m.ctx.Err() != nil || ctx.Err() != nil {
			return
		}
		p.stepFetch()
		if m.kind == kindPush {
			m.stepConsume(p)
		}
	}
	if m.work != nil {
		m.work.forgetReady(list)
	}
}

// stepFetch pulls what the store holds for p, from its fetch position,
// while flow control allows. It never waits for a message: it pulls
// only below the queue's max offset.
func (p *pq) stepFetch() {
	m := p.m
	for {
		p.mu.Lock()
		ok := p.consumableLocked() && !p.mu.paused
		n, from, gen := p.roomLocked(), p.mu.next, p.mu.gen
		p.mu.Unlock()
		if !ok || n == 0 {
			return
		}
		end, err := m.st.MaxOffset(p.q.Topic, p.q.ID)
		if err != nil || from >= end {
			return
		}
		msgs, next, err := m.st.Pull(m.ctx, p.q.Topic, p.q.ID, from, n, p.sub.filter, m.pool)
		if m.ctx.Err() != nil {
			return
		}
		if err == nil && len(msgs) == 0 && next <= from {
			err = errors.New("store returned no message and no progress")
		}
		if !p.stepPulled(gen, from, msgs, next, err, len(msgs) == n) {
			return
		}
	}
}

// stepPulled applies one pull's result as the fetcher does, and reports
// whether to pull again. A failure is recorded (QueueStats.FetchError)
// and the pull is tried again by the next Step, not after a back-off.
func (p *pq) stepPulled(gen uint64, from int64, msgs []*message.MessageExt, next int64, err error, full bool) bool {
	m := p.m
	switch {
	case err == nil:
		p.deliver(gen, msgs, max(next, lastOffset(msgs)+1), full)
		return true
	case errors.Is(err, ErrClosed):
		return false
	case len(msgs) > 0:
		p.deliver(gen, msgs, max(next, lastOffset(msgs)+1), false)
		p.setFetchErr(err)
		return false
	case errors.Is(err, ErrNotFound):
		p.setFetchErr(err)
		return p.skipToMin(gen, from)
	case errors.Is(err, ErrCorrupt) && m.o.SkipDamaged && next >= from:
		p.setFetchErr(err)
		m.log.Warn("mqlite/consumer: skipping a damaged message", "queue", p.q.String(), "offset", next, "err", err)
		if p.skipTo(gen, from, next+1) {
			m.stats.skippedDamaged.Add(1)
		}
		return true
	default:
		p.setFetchErr(err)
		m.log.Warn("mqlite/consumer: pull failed", "queue", p.q.String(), "offset", from, "err", err)
		return false
	}
}

// stepConsume runs the handler on p's batches while p has work announced:
// local redeliveries first, then the cache in offset order; an orderly
// queue through consumeOrderly (it suspends itself on a failure).
func (m *member) stepConsume(p *pq) {
	for m.work.takeReady(p) {
		if m.ctx.Err() != nil {
			return
		}
		if m.o.Orderly {
			m.consumeOrderly(p, 0)
			m.mg.activity.Add(1)
			continue
		}
		for m.ctx.Err() == nil {
			p.mu.Lock()
			batch := m.takeLocked(p)
			p.mu.Unlock()
			if batch == nil {
				break
			}
			res := m.call(0, batch)
			m.mg.activity.Add(1)
			m.finishRun(p, [][]*message.MessageExt{batch}, []ConsumeResult{res}, nil, false)
		}
	}
}

// markReady records that p has work announced (stepped push).
func (w *workQueue) markReady(p *pq) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.mu.ready == nil {
		w.mu.ready = map[*pq]struct{}{}
	}
	w.mu.ready[p] = struct{}{}
}

// takeReady reports whether p had work announced, and forgets it.
func (w *workQueue) takeReady(p *pq) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	_, ok := w.mu.ready[p]
	delete(w.mu.ready, p)
	return ok
}

// forgetReady drops the announcements of queues not in list (released).
func (w *workQueue) forgetReady(list []*pq) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for p := range w.mu.ready {
		if !slices.Contains(list, p) {
			delete(w.mu.ready, p)
		}
	}
}

// runDue runs the items due at the clock's current time on the caller's
// goroutine, in due-time order (stepped push consumers).
func (d *delayer) runDue() {
	for {
		now := d.clk.Now()
		d.mu.Lock()
		if len(d.mu.items) == 0 || d.mu.items[0].at.After(now) {
			d.mu.Unlock()
			return
		}
		fn := heap.Pop(&d.mu.items).(delayItem).fn
		d.mu.Unlock()
		fn()
	}
}

// awaitUnlocked returns once mu is free: a stepped pass running under it
// has ended (a barrier, for Close).
func awaitUnlocked(mu *sync.Mutex) {
	mu.Lock()
	defer mu.Unlock()
}
