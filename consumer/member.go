package consumer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mqlite/mqlite/clock"
	"github.com/mqlite/mqlite/message"
)

// subscription is one topic a member consumes and its filter.
type subscription struct {
	topic  string
	filter Filter // nil: every message
	retry  bool   // the group's retry topic, subscribed automatically
}

func (s *subscription) record() Subscription {
	if s.filter == nil {
		return Subscription{Topic: s.topic, Expression: "*"}
	}
	return Subscription{Topic: s.topic, FilterType: s.filter.Type(), Expression: s.filter.String()}
}

type memberKind uint8

const (
	kindPush memberKind = iota
	kindPull
)

type memberState uint8

const (
	memberIdle     memberState = iota // created, not started
	memberRunning                     // goroutines running, in the group
	memberStopping                    // Shutdown or Close in progress
	memberClosed
)

// member is one consumer inside a group: the queues it owns (a pq each),
// its control goroutine, and for push consumers the handler pool. The
// PushConsumer and PullConsumer handles wrap it.
//
// The control goroutine (loop) applies target changes and retries queues
// waiting for their lock; reconcile runs there or, for synchronous
// Subscribe/Assign, on the caller's goroutine, serialised by recMu.
type member struct {
	mg    *Manager
	st    Source
	clk   clock.Clock
	log   *slog.Logger
	group string
	o     Options
	kind  memberKind
	id    string // set by group.join (before the member is visible), then immutable
	idPub atomic.Pointer[string]
	g     *group // set before join, then immutable

	retrySub *subscription // the automatic retry subscription (clustering)

	// pool recycles consumed messages (Options.ReuseMessages), else nil.
	pool *message.Pool
	// readAheadUsed is how much of Options.ReadAheadBytes the queues'
	// read-ahead buffers were granted (see readAhead.grow).
	readAheadUsed atomic.Int64
	// polled is what the last Poll returned, released by the next one
	// (pull with pool; a copy: the caller may change its slice).
	polled struct {
		sync.Mutex
		msgs []*message.MessageExt
	}

	// ctx is the parent of every handler and SendBack context; Close
	// cancels it.
	ctx    context.Context
	cancel context.CancelFunc

	h     Handler    // push
	work  *workQueue // push
	delay *delayer   // push
	slots []runSlot  // push: the batch each worker is running
	// procs is GOMAXPROCS at Start (push); parallel is how many handler
	// calls can run at once: the fewer of Goroutines and procs.
	procs, parallel int
	// queues counts the member's queues (its group's retry queue aside),
	// set with the list; shortCalls says the last timed run of handler
	// calls (a worker's or a fetcher's) was short. See pq.inlineAllowed.
	queues     atomic.Int32
	shortCalls atomic.Bool
	// inlineCalls adds up the handler calls the fetchers ran, as each
	// fetcher stops (for tests).
	inlineCalls atomic.Int64

	workers  sync.WaitGroup
	fetchers sync.WaitGroup

	wake     chan struct{} // cap 1: reconcile
	stop     chan struct{} // closed: control loop drops every queue and exits
	loopDone chan struct{}
	ready    chan struct{} // pull, cap 1: a fetcher buffered messages
	closing  chan struct{} // closed when Shutdown or Close begins

	// startMu serialises start and shutdown; it comes first in the lock
	// order.
	startMu sync.Mutex
	recMu   sync.Mutex // serialises reconcile; held while writing mu.pqs
	// pauseMu serialises Pause, Resume and Unsubscribe, so the pause
	// state each applies to the queues is the latest. Taken before mu.
	pauseMu sync.Mutex

	mu struct {
		sync.Mutex
		state       memberState
		subs        map[string]*subscription
		manual      bool
		target      map[Queue]*subscription
		pqs         map[Queue]*pq        // pending or active queues
		list        []*pq                // pqs sorted by queue (Poll order)
		live        int                  // pqs not yet released, draining ones included
		allReleased chan struct{}        // closed when live drops to 0 (when non-nil)
		rr          int                  // pull: where the next Poll starts
		paused      map[string]*pauseSet // push: topic -> paused queues (Pause)
	}

	stats counters

	// seq is the member's creation order in its manager; stepMu is held
	// while Manager.Step works for the member (ManagerOptions.Stepped),
	// and teardown waits for it.
	seq    uint64
	stepMu sync.Mutex
}

func newMember(mg *Manager, group string, o Options, kind memberKind) *member {
	m := &member{mg: mg, st: mg.st, clk: mg.clk, log: mg.log.With("group", group), group: group, o: o, kind: kind,
		wake: make(chan struct{}, 1), stop: make(chan struct{}), loopDone: make(chan struct{}),
		ready: make(chan struct{}, 1), closing: make(chan struct{})}
	m.ctx, m.cancel = context.WithCancel(context.Background())
	m.seq = mg.memberSeq.Add(1)
	m.mu.subs = map[string]*subscription{}
	m.mu.pqs = map[Queue]*pq{}
	if o.Model == Clustering {
		m.retrySub = &subscription{topic: RetryTopic(group), retry: true}
	}
	if o.ReuseMessages {
		m.pool = new(message.Pool)
	}
	return m
}

// validateTopic checks that the store knows topic (op names the call in
// errors).
func (m *member) validateTopic(op, topic string) (int, error) {
	if topic == "" {
		return 0, fmt.Errorf("mqlite/consumer: %s: empty topic: %w", op, ErrInvalidArgument)
	}
	n, err := m.st.QueueCount(topic)
	if err != nil {
		return 0, fmt.Errorf("mqlite/consumer: %s: %w", op, err) // err names the topic
	}
	return n, nil
}

// validateSubscription checks a topic a consumer subscribes to: a topic
// the store does not know yet is fine (as producers create topics on
// their first send, start order does not matter); the group's rebalance
// gives out its queues once it exists. A name no topic can have is
// ErrInvalidArgument.
func (m *member) validateSubscription(topic string) error {
	_, err := m.validateTopic("subscribe", topic)
	if errors.Is(err, ErrTopicNotFound) {
		if verr := message.ValidateTopic(topic, message.MaxTopicLen); verr != nil {
			return fmt.Errorf("mqlite/consumer: subscribe: %w", verr)
		}
		return nil
	}
	return err
}

// publicID is the member's id for callers outside the member's locks.
func (m *member) publicID() string {
	if p := m.idPub.Load(); p != nil {
		return *p
	}
	return ""
}

// subscriptions returns the member's subscriptions (the retry one
// included), sorted by topic.
func (m *member) subscriptions() []*subscription {
	s := m.subsMap()
	out := slices.Collect(maps.Values(s))
	slices.SortFunc(out, func(a, b *subscription) int { return cmpString(a.topic, b.topic) })
	return out
}

// subsMap returns topic -> subscription, the retry topic included for
// clustering members that take part in rebalancing.
func (m *member) subsMap() map[string]*subscription {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := maps.Clone(m.mu.subs)
	if m.retrySub != nil && !m.mu.manual && len(out) > 0 {
		out[m.retrySub.topic] = m.retrySub
	}
	return out
}

func (m *member) isManual() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.mu.manual
}

// targetQueues returns the queues the member is meant to own, sorted.
func (m *member) targetQueues() []Queue {
	m.mu.Lock()
	out := slices.Collect(maps.Keys(m.mu.target))
	m.mu.Unlock()
	slices.SortFunc(out, Queue.compare)
	return out
}

// setTarget hands the member its queues (from rebalance or Assign).
func (m *member) setTarget(t map[Queue]*subscription) {
	m.mu.Lock()
	if m.mu.state != memberRunning {
		m.mu.Unlock()
		return
	}
	m.mu.target = t
	m.mu.Unlock()
	m.poke()
}

// poke asks the control goroutine to reconcile.
func (m *member) poke() {
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

// loop is the control goroutine.
func (m *member) loop() {
	defer close(m.loopDone)
	var tick <-chan time.Time
	if m.kind == kindPush {
		t := m.clk.NewTicker(max(m.o.ConsumeTimeout/4, time.Millisecond))
		defer t.Stop()
		tick = t.C()
	}
	for {
		select {
		case <-m.stop:
			m.dropAll()
			return
		case <-m.wake:
			if !m.mg.o.Stepped { // Step reconciles
				m.reconcile()
			}
		case <-tick:
			m.checkTimeouts()
		}
	}
}

// reconcile drops the queues no longer targeted and activates targeted
// queues whose lock it can take.
func (m *member) reconcile() {
	m.recMu.Lock()
	defer m.recMu.Unlock()
	m.mu.Lock()
	if m.mu.state != memberRunning {
		m.mu.Unlock()
		return
	}
	target := m.mu.target
	var drop []*pq
	for q, p := range m.mu.pqs {
		if s, ok := target[q]; !ok || s != p.sub {
			drop = append(drop, p)
			delete(m.mu.pqs, q)
		}
	}
	var pending []*pq
	for q, s := range target {
		p := m.mu.pqs[q]
		if p == nil {
			p = newPQ(m, q, s)
			p.mu.paused = m.pausedLocked(q) // not shared yet
			m.mu.pqs[q] = p
			m.mu.live++
		}
		pending = append(pending, p)
	}
	m.rebuildListLocked()
	m.mu.Unlock()
	// In queue order, not the maps': locks are taken and fetchers started
	// the same way every run (Options.Seed in the root package).
	byQueue := func(a, b *pq) int { return a.q.compare(b.q) }
	slices.SortFunc(drop, byQueue)
	slices.SortFunc(pending, byQueue)
	for _, p := range drop {
		p.drop()
	}
	now := m.clk.Now()
	for _, p := range pending {
		if p.isPending() {
			m.activate(p, now)
		}
	}
}

func (m *member) rebuildListLocked() {
	m.mu.list = slices.Collect(maps.Values(m.mu.pqs))
	slices.SortFunc(m.mu.list, func(a, b *pq) int { return a.q.compare(b.q) })
	n := 0
	for _, p := range m.mu.list {
		if !p.q.IsRetry() {
			n++
		}
	}
	m.queues.Store(int32(n))
}

// dropAll drops every queue (Shutdown and Close).
func (m *member) dropAll() {
	m.recMu.Lock()
	defer m.recMu.Unlock()
	m.mu.Lock()
	ps := m.mu.list
	m.mu.pqs = map[Queue]*pq{}
	m.mu.list = nil
	m.mu.target = nil
	m.queues.Store(0)
	m.mu.Unlock()
	for _, p := range ps {
		p.drop()
	}
}

// activate takes p's lock, finds its start offset and starts its fetcher.
// On failure p stays pending and is retried on the next reconcile (every
// rebalance tick at the latest).
func (m *member) activate(p *pq, now time.Time) {
	if !m.g.tryLock(p, now) {
		return
	}
	off, err := m.startOffset(p)
	if err != nil {
		m.g.unlockQuiet(p)
		m.log.Warn("mqlite/consumer: cannot start queue; retrying on the next rebalance", "queue", p.q.String(), "err", err)
		return
	}
	p.cell = m.mg.offsets.cell(p.key, off)
	p.cell.v.Store(off)
	if !p.activate(off) {
		m.g.unlockQuiet(p)
	}
}

// offsetKey is where the progress of q is kept.
func (m *member) offsetKey(q Queue) offsetKey {
	k := offsetKey{Group: m.group, Topic: q.Topic, Queue: q.ID}
	if m.o.Model == Broadcasting {
		k.Instance = m.id
	}
	return k
}

// startOffset is the committed offset of p's queue (capped at the queue's
// max); for a queue without one, the min offset when the queue was added
// to a topic the group consumes, else the ConsumeFromWhere position.
func (m *member) startOffset(p *pq) (int64, error) {
	t, q := p.q.Topic, p.q.ID
	maxOff, err := m.st.MaxOffset(t, q)
	if err != nil {
		return 0, err
	}
	if off, ok := m.mg.offsets.get(p.key); ok {
		if off > maxOff {
			m.log.Warn("mqlite/consumer: committed offset past the queue's end; starting at the end",
				"queue", p.q.String(), "committed", off, "max", maxOff)
			off = maxOff
		}
		return off, nil
	}
	switch {
	case p.sub.retry || m.o.ConsumeFromWhere == ConsumeFromFirstOffset:
		return m.st.MinOffset(t, q)
	case m.g.grownQueue(p.q):
		// The topic gained this queue while the group consumed it.
		// ConsumeFromWhere is for new groups; start at the queue's
		// beginning so that messages stored before this rebalance are
		// not skipped.
		return m.st.MinOffset(t, q)
	case m.o.ConsumeFromWhere == ConsumeFromTimestamp:
		return m.st.OffsetForTime(t, q, m.o.ConsumeTimestamp)
	}
	return maxOff, nil
}

// notifyReady wakes a Poll waiting for messages.
func (m *member) notifyReady() {
	select {
	case m.ready <- struct{}{}:
	default:
	}
}

// release hands finished messages back to the pool (ReuseMessages).
func (m *member) release(msgs []*message.MessageExt) {
	if m.pool == nil {
		return
	}
	for _, msg := range msgs {
		message.Release(msg)
	}
}

// swapPolled releases what the last Poll returned and remembers out.
func (m *member) swapPolled(out []*message.MessageExt) {
	m.polled.Lock()
	m.release(m.polled.msgs)
	clear(m.polled.msgs)
	m.polled.msgs = append(m.polled.msgs[:0], out...)
	m.polled.Unlock()
}

// sendBack hands msg to the store's retry path, with PropMaxReconsumeTimes.
func (m *member) sendBack(ctx context.Context, msg *message.MessageExt) error {
	props := maps.Clone(msg.Properties)
	if props == nil {
		props = map[string]string{}
	}
	props[PropMaxReconsumeTimes] = strconv.Itoa(m.o.MaxReconsumeTimes)
	msg.Properties = props
	if err := m.st.SendBack(ctx, m.group, msg); err != nil {
		m.stats.sendBackErrors.Add(1)
		return err
	}
	m.stats.sentBack.Add(1)
	if m.g != nil && !m.g.retryKnown.Load() {
		m.g.rebalance() // the store may have created the retry topic
	}
	return nil
}

// heldPQ is activePQ for a call from the user: ErrClosed (and the like)
// once the member stops (checkState).
func (m *member) heldPQ(topic string, queue int) (*pq, error) {
	if err := m.checkState(); err != nil {
		return nil, err
	}
	return m.activePQ(topic, queue)
}

// activePQ returns the active pq of q, or ErrNotFound.
func (m *member) activePQ(topic string, queue int) (*pq, error) {
	m.mu.Lock()
	p := m.mu.pqs[Queue{topic, queue}]
	m.mu.Unlock()
	if p == nil || !p.isActive() {
		return nil, fmt.Errorf("mqlite/consumer: queue %s is not assigned to this consumer: %w", Queue{topic, queue}, ErrNotFound)
	}
	return p, nil
}

// activeList returns the member's pqs in queue order.
func (m *member) activeList() []*pq {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.mu.list)
}

// checkState returns ErrClosed once the member is stopping or closed.
func (m *member) checkState() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.mu.state >= memberStopping {
		return ErrClosed
	}
	return nil
}
