package consumer

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mqlite/mqlite/message"
)

// pqState is a queue's life cycle inside a member: pending (assigned,
// waiting for its lock or start offset) -> active (fetching, consuming) ->
// draining (no longer assigned; running handler calls finish) -> released
// (lock given back, final offset committed). pending may go straight to
// released.
type pqState uint8

const (
	pqPending pqState = iota
	pqActive
	pqDraining
	pqReleased
)

// pq is a member's state for one queue (RocketMQ's ProcessQueue): the fetch
// position, the messages fetched and not yet consumed (or polled), and what
// is needed to commit without passing a message still being processed.
type pq struct {
	m    *member
	q    Queue
	sub  *subscription
	key  offsetKey
	cell *offsetCell // set before the pq becomes active, then immutable

	// space (cap 1) is signalled whenever the cache shrinks; a fetcher
	// paused by flow control waits on it.
	space chan struct{}

	// tokens counts the pq's tokens on the work queue: the low 32 bits
	// those no worker claimed yet, the high 32 bits those a worker claimed
	// while finishing a batch (claim) and that are still on the queue.
	// Their sum is the number of the pq's tokens on the queue.
	tokens atomic.Uint64

	// revoked is set, under mu, when the queue's lock was taken over or
	// its offset reset: what the pq still consumes is not committed, so a
	// worker part way through a run stops there (it reads it between
	// calls, without the lock).
	revoked atomic.Bool

	mu struct {
		sync.Mutex
		state  pqState
		dropAt time.Time // when it started draining (lock expiry)
		cancel context.CancelFunc

		next  int64    // fetch position: the offset after the last entry examined
		gen   uint64   // bumped by Seek: results of older pulls are discarded
		msgs  msgQueue // fetched, not yet handed to a handler (push) or to Poll (pull)
		retry [][]*message.MessageExt

		track       tracker // concurrent push: offsets fetched and not yet acked
		cachedN     int     // messages fetched and not yet consumed / polled
		cachedBytes int64

		backlog   bool // the last pull returned all it asked for (see takeRunLocked)
		running   int  // batches taken for handler calls and not yet settled
		consuming bool // orderly: a task for this queue is queued, running or suspended
		attempts  int  // orderly: failures of the head batch

		delivered  int64 // pull: everything below was returned by Poll or filtered out
		pullCancel context.CancelFunc

		fetchErr error // the last Pull failure, until a Pull delivers or a Seek (QueueStats.FetchError)

		// paused (push, PushConsumer.Pause): no pull starts and no
		// batch is handed to a handler; the lock and offsets are kept.
		paused bool
	}

	inline inlineState // the fetcher running its own batches (inline.go)
}

const claimedToken = 1 << 32 // one token claimed by claim, in pq.tokens

// addTokens counts n new tokens of p (before they are put on the queue).
func (p *pq) addTokens(n int) { p.tokens.Add(uint64(n)) }

// claim claims up to k of p's tokens for a worker that goes on with p's
// next batches, and returns how many it claimed (as many as are not
// claimed yet, at most k). The tokens stay on the queue: popTokens drops
// them, and the earliest of p's tokens on the queue are the ones dropped,
// so p does not move ahead of other queues.
func (p *pq) claim(k int) int {
	for {
		t := p.tokens.Load()
		c := min(uint64(k), uint64(uint32(t)))
		if c == 0 {
			return 0
		}
		if p.tokens.CompareAndSwap(t, t-c+c*claimedToken) {
			return int(c)
		}
	}
}

// claimNext is claim(1).
func (p *pq) claimNext() bool { return p.claim(1) == 1 }

// popTokens accounts for n of p's tokens at the head of the queue: the
// claimed ones among them are dropped, and then one more is taken if any
// is left (take). used is how many of the n it accounted for.
func (p *pq) popTokens(n int) (used int, take bool) {
	for {
		t := p.tokens.Load()
		d := min(uint64(n), t/claimedToken)
		u, next := d, t-d*claimedToken
		if d < uint64(n) && uint32(next) > 0 {
			u, next = d+1, next-1
		}
		if u == 0 {
			return n, false // not counted; cannot happen
		}
		if p.tokens.CompareAndSwap(t, next) {
			return int(u), u > d
		}
	}
}

func newPQ(m *member, q Queue, s *subscription) *pq {
	return &pq{m: m, q: q, sub: s, key: m.offsetKey(q), space: make(chan struct{}, 1), inline: inlineState{slot: -1}}
}

func (p *pq) isPending() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mu.state == pqPending
}

func (p *pq) isActive() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mu.state == pqActive && !p.revoked.Load()
}

// activate starts fetching at off. False if the pq was dropped meanwhile.
func (p *pq) activate(off int64) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mu.state != pqPending {
		return false
	}
	ctx, cancel := context.WithCancel(context.Background())
	p.mu.state = pqActive
	p.mu.cancel = cancel
	p.mu.next = off
	p.mu.delivered = off
	if !p.m.mg.o.Stepped { // Step fetches
		p.m.fetchers.Add(1)
		go p.fetch(ctx)
	}
	return true
}

// drop stops fetching; the pq is released at once unless handler calls
// are running (the last one to finish releases it). A pull consumer with
// AutoCommit commits what Poll returned.
func (p *pq) drop() {
	p.mu.Lock()
	switch p.mu.state {
	case pqPending:
		p.mu.state = pqReleased
		p.mu.Unlock()
		p.m.pqReleased()
		return
	case pqActive:
	default:
		p.mu.Unlock()
		return
	}
	p.mu.state = pqDraining
	p.mu.dropAt = p.m.clk.Now()
	p.mu.cancel()
	if p.m.kind == kindPull && p.m.o.AutoCommit {
		p.storeLocked(p.mu.delivered)
	}
	rel := p.mu.running == 0
	p.mu.Unlock()
	if rel {
		p.release()
	}
}

// release commits the final position, gives the lock back and counts the
// pq as released. Idempotent.
func (p *pq) release() {
	p.mu.Lock()
	if p.mu.state == pqReleased {
		p.mu.Unlock()
		return
	}
	p.mu.state = pqReleased
	if p.m.kind == kindPush {
		p.commitLocked()
	}
	p.mu.msgs, p.mu.retry = msgQueue{}, nil
	p.mu.track = tracker{}
	p.mu.cachedN, p.mu.cachedBytes = 0, 0
	p.mu.Unlock()
	p.m.g.unlock(p)
	p.m.pqReleased()
}

// consumableLocked says handler calls may start on this queue.
func (p *pq) consumableLocked() bool { return p.mu.state == pqActive && !p.revoked.Load() }

// storeLocked stores off as the committed offset, unless the lock was
// taken over.
func (p *pq) storeLocked(off int64) {
	if p.cell != nil && !p.revoked.Load() {
		p.cell.v.Store(off)
	}
}

// commitLocked commits the push consumer's position: the lowest offset
// fetched and not yet consumed, or the fetch position when none is left.
func (p *pq) commitLocked() {
	off := p.mu.next
	if p.m.o.Orderly {
		if p.mu.msgs.len() > 0 {
			off = p.mu.msgs.front().QueueOffset
		}
	} else if f, ok := p.mu.track.front(); ok {
		off = f
	}
	p.storeLocked(off)
}

// uncacheLocked forgets msgs from the flow-control counters and wakes the
// fetcher.
func (p *pq) uncacheLocked(msgs []*message.MessageExt) {
	for _, msg := range msgs {
		p.uncacheOne(msg)
	}
	p.spaceLocked()
}

// uncacheOne forgets msg from the flow-control counters.
func (p *pq) uncacheOne(msg *message.MessageExt) {
	p.mu.cachedN--
	p.mu.cachedBytes -= msgBytes(msg)
}

// spaceLocked wakes a fetcher paused by flow control.
func (p *pq) spaceLocked() {
	select {
	case p.space <- struct{}{}:
	default:
	}
}

// msgBytes is what a cached message counts for QueueCacheBytes.
func msgBytes(m *message.MessageExt) int64 {
	if m.StoreSize > 0 {
		return int64(m.StoreSize)
	}
	return int64(len(m.Body))
}

// room is how many messages the next pull may fetch (0: flow control).
func (p *pq) roomLocked() int {
	o := &p.m.o
	if p.mu.cachedN >= o.QueueCacheCount || p.mu.cachedBytes >= o.QueueCacheBytes {
		return 0
	}
	if p.m.kind == kindPush && !o.Orderly {
		if span, ok := p.mu.track.span(); ok && span > int64(o.ConsumeMaxSpan) {
			return 0
		}
	}
	return min(o.PullBatchSize, o.QueueCacheCount-p.mu.cachedN)
}

// deliver adds a pull's result to the cache and hands it on: tokens on the
// work queue (push) or a wake-up of Poll (pull). full says the pull
// returned all it asked for, so the store likely holds more.
func (p *pq) deliver(gen uint64, msgs []*message.MessageExt, next int64, full bool) {
	m := p.m
	if p.sub.retry {
		for _, msg := range msgs {
			if t := msg.Properties[PropRetryTopic]; t != "" {
				msg.Topic = t
			}
		}
	}
	p.mu.Lock()
	if !p.consumableLocked() || p.mu.gen != gen {
		p.mu.Unlock()
		return
	}
	for _, msg := range msgs {
		p.mu.cachedN++
		p.mu.cachedBytes += msgBytes(msg)
		if m.kind == kindPush && !m.o.Orderly {
			p.mu.track.push(msg.QueueOffset)
		}
	}
	p.mu.msgs.add(msgs)
	if len(msgs) > 0 || next != p.mu.next {
		m.mg.activity.Add(1)
	}
	p.mu.next = next
	p.mu.backlog = full
	p.mu.fetchErr = nil
	m.stats.fetched.Add(int64(len(msgs)))
	tokens := 0
	switch {
	case m.kind == kindPull:
		if p.mu.msgs.len() == 0 {
			p.mu.delivered = next
		}
	case m.o.Orderly:
		if p.mu.msgs.len() == 0 {
			p.commitLocked()
		}
		if !p.mu.consuming && !p.mu.paused && p.mu.msgs.len() > 0 {
			p.mu.consuming = true
			tokens = 1
		}
	default:
		if len(msgs) == 0 {
			p.commitLocked()
		}
		if !p.mu.paused {
			tokens = (len(msgs) + m.o.ConsumeBatchSize - 1) / m.o.ConsumeBatchSize
		}
	}
	p.mu.Unlock()
	if m.kind == kindPull {
		if len(msgs) > 0 {
			m.notifyReady()
		}
		return
	}
	if tokens > 0 && p.inlineAllowed() {
		if left, ok := m.consumeInline(p, full); ok {
			tokens = left
		}
	} else {
		p.giveBackInline() // the workers take these
	}
	m.work.push(p, tokens)
}

// popLocked removes the first k cached messages (they were handed out).
func (p *pq) popLocked(k int) []*message.MessageExt { return p.mu.msgs.pop(k) }

// msgQueue is the FIFO of a pq's cached messages: the slices Pull
// returned, kept as they are, so that adding a pull copies nothing. The
// slices it hands out are the caller's: they are capped, and the queue
// moves past them and never writes into them.
type msgQueue struct {
	chunks [][]*message.MessageExt // none empty
	head   int                     // chunks[:head] are spent
	n      int
}

func (q *msgQueue) len() int { return q.n }

// add appends msgs.
func (q *msgQueue) add(msgs []*message.MessageExt) {
	if len(msgs) == 0 {
		return
	}
	if q.head > 0 && q.head == len(q.chunks) {
		clear(q.chunks)
		q.chunks, q.head = q.chunks[:0], 0
	}
	q.chunks = append(q.chunks, msgs)
	q.n += len(msgs)
}

// front is the first message; the queue must not be empty.
func (q *msgQueue) front() *message.MessageExt { return q.chunks[q.head][0] }

// peek returns the first k messages without removing them (k <= len); a
// copy when they span pulls.
func (q *msgQueue) peek(k int) []*message.MessageExt {
	if c := q.chunks[q.head]; k <= len(c) {
		return c[:k:k]
	}
	out := make([]*message.MessageExt, 0, k)
	for i := q.head; len(out) < k; i++ {
		c := q.chunks[i]
		out = append(out, c[:min(len(c), k-len(out))]...)
	}
	return out
}

// pop removes and returns the first k messages (k <= len).
func (q *msgQueue) pop(k int) []*message.MessageExt {
	out := q.peek(k)
	q.drop(k)
	return out
}

// drop removes the first k messages (k <= len).
func (q *msgQueue) drop(k int) {
	q.n -= k
	for k > 0 {
		c := q.chunks[q.head]
		if k < len(c) {
			q.chunks[q.head] = c[k:]
			break
		}
		k -= len(c)
		q.chunks[q.head] = nil
		q.head++
	}
	if q.head == len(q.chunks) {
		q.chunks, q.head = q.chunks[:0], 0
	} else if q.head > 64 && q.head > len(q.chunks)/2 {
		n := copy(q.chunks, q.chunks[q.head:])
		clear(q.chunks[n:])
		q.chunks, q.head = q.chunks[:n], 0
	}
}

// all calls fn for every cached message, in order.
func (q *msgQueue) all(fn func(*message.MessageExt)) {
	for _, c := range q.chunks[q.head:] {
		for _, m := range c {
			fn(m)
		}
	}
}

// tracker is the ordered set of offsets a concurrent push queue fetched
// and has not acked yet (RocketMQ's msgTreeMap), so a commit never passes
// a message still being processed. Offsets are pushed in increasing order;
// acks may come in any order.
type tracker struct {
	ents []trackEnt
	head int
	live int // entries not yet acked
}

type trackEnt struct {
	off  int64
	done bool
}

func (t *tracker) push(off int64) {
	t.ents = append(t.ents, trackEnt{off: off})
	t.live++
}

// ack marks off done and drops the done prefix.
func (t *tracker) ack(off int64) {
	e := t.ents[t.head:]
	lo := findOffset(e, off)
	if lo == len(e) || e[lo].off != off || e[lo].done {
		return
	}
	e[lo].done = true
	t.live--
	for t.head < len(t.ents) && t.ents[t.head].done {
		t.head++
	}
	switch {
	case t.head == len(t.ents):
		t.ents, t.head = t.ents[:0], 0
	case t.head > 1024 && t.head > len(t.ents)/2:
		n := copy(t.ents, t.ents[t.head:])
		t.ents, t.head = t.ents[:n], 0
	}
}

// findOffset is the index of the first entry of e at or after off. Without
// a filter the fetched offsets are dense, so off's entry is usually where
// its distance from the first one says; otherwise it is a binary search.
func findOffset(e []trackEnt, off int64) int {
	if len(e) == 0 {
		return 0
	}
	if d := off - e[0].off; d >= 0 && d < int64(len(e)) && e[d].off == off {
		return int(d)
	}
	lo, hi := 0, len(e)
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if e[mid].off < off {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo
}

// front is the lowest offset not acked.
func (t *tracker) front() (int64, bool) {
	if t.head == len(t.ents) {
		return 0, false
	}
	return t.ents[t.head].off, true
}

// span is the distance from the lowest unacked offset to the newest
// fetched one.
func (t *tracker) span() (int64, bool) {
	if t.head == len(t.ents) {
		return 0, false
	}
	return t.ents[len(t.ents)-1].off - t.ents[t.head].off, true
}
