package mqlite

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/mqlite/mqlite/clock"
	"github.com/mqlite/mqlite/commitlog"
	"github.com/mqlite/mqlite/internal/errs"
	"github.com/mqlite/mqlite/message"
	"github.com/mqlite/mqlite/topic"
)

// MaxQueues bounds the queue count of a topic.
const MaxQueues = topic.MaxQueues

const uniqLen = message.UniqLen

// PutResult describes a stored message: where it went (CommitLog offset,
// size, queue and queue offset, store time), its ID (MsgID) and unique key
// (UniqKey).
type PutResult = message.PutResult

// putJob carries one message through the append lock. Jobs are pooled so
// that the hot path does not allocate.
type putJob struct {
	s       *Store
	m       *Message
	queue   int32
	nowMs   int64 // the clock when the put began: born time unless set, and the store time's floor
	bornMs  int64
	size    int
	meta    message.Meta
	route   message.Reroute
	routed  bool // stored under route.Topic
	uniq    [uniqLen]byte
	storeMs int64
	qoff    int64
}

func (j *putJob) PayloadSize() int { return j.size }

// topic is the topic the record is stored under.
func (j *putJob) topic() string {
	if j.routed {
		return j.route.Topic
	}
	return j.m.Topic
}

// EncodePayload runs inside the CommitLog append lock: it assigns the queue
// offset and the store time (the clock read when the put began, made
// monotone), then encodes in place.
func (j *putJob) EncodePayload(dst []byte, phys int64) {
	s := j.s
	next := s.nextOffsets(j.topic(), j.queue)
	j.qoff = next[j.queue]
	next[j.queue]++
	j.storeMs = max(j.nowMs, s.lastStoreMs)
	s.lastStoreMs = j.storeMs
	j.meta = message.Meta{QueueID: j.queue, QueueOffset: j.qoff, StoreMs: j.storeMs, BornMs: j.bornMs}
	if j.routed {
		j.meta.Reroute = &j.route
	}
	if j.m.UniqKey == "" {
		s.uniqSeq++
		putHex(j.uniq[20:32], s.uniqSeq)
		j.meta.Uniq = j.uniq[:]
	}
	message.Encode(dst, j.m, &j.meta)
}

// wallBase is a wall-clock reading with its monotonic one, from which
// nowMs derives the time with a monotonic read only (half the cost of
// time.Now here). The monitor takes a fresh one every tick, so a step of
// the wall clock shows within a tick.
type wallBase struct {
	at time.Time // with a monotonic reading
	ns int64     // at.UnixNano()
}

// resyncWall takes a new wallBase, for the real clock only (a test's fake
// clock is read directly).
func (s *Store) resyncWall() {
	if s.opts.Clock == clock.Real {
		now := time.Now()
		s.wallBase.Store(&wallBase{now, now.UnixNano()})
	}
}

// nowMs is the store clock in Unix milliseconds.
func (s *Store) nowMs() int64 {
	if b := s.wallBase.Load(); b != nil {
		return (b.ns + int64(time.Since(b.at))) / int64(time.Millisecond)
	}
	return s.opts.Clock.Now().UnixMilli()
}

// topicNext is one topic's next offset per queue id, under the name the
// store owns: the caller's topic string is never kept, since its bytes
// may change after the put (a consumed message of a recycling consumer,
// sent on).
type topicNext struct {
	name string
	next []int64
}

// nextOffsets returns the next-offset table of topic, long enough for
// queue (append lock). The last topic's table is kept at hand: a run of
// puts to one topic compares the name instead of hashing it.
func (s *Store) nextOffsets(topic string, queue int32) []int64 {
	e := s.lastNext
	if e == nil || topic != e.name {
		if e = s.queues[topic]; e == nil {
			e = &topicNext{name: strings.Clone(topic)}
			s.queues[e.name] = e
		}
		s.lastNext = e
	}
	if int(queue) >= len(e.next) {
		e.next = append(e.next, make([]int64, int(queue)+1-len(e.next))...)
	}
	return e.next
}

// assignedNext is the queue offset the next put to (topic, queue) gets:
// its next-offset table, read under the append lock. The ConsumeQueue's
// MaxOffset lags it by what the dispatcher has not dispatched yet.
func (s *Store) assignedNext(topic string, queue int) int64 {
	var next int64
	s.log.Locked(func() {
		if e := s.queues[topic]; e != nil && queue < len(e.next) {
			next = e.next[queue]
		}
	})
	return next
}

// putHex writes v as len(dst) upper-case hex digits, two at a time.
func putHex(dst []byte, v uint64) {
	i := len(dst)
	for ; i >= 2; i -= 2 {
		copy(dst[i-2:i], hexPairs[2*(v&0xFF):])
		v >>= 8
	}
	if i == 1 {
		dst[0] = hexPairs[2*(v&0xF)+1]
	}
}

var hexPairs = func() (t [512]byte) {
	const digits = "0123456789ABCDEF"
	for i := range 256 {
		t[2*i], t[2*i+1] = digits[i>>4], digits[i&0xF]
	}
	return t
}()

// putCheck says what a put's caller has checked already.
type putCheck struct {
	sys       bool // the store's own put: its system topics allowed (only those that exist)
	validated bool // m passed message.Validate
	resolved  bool // m's topic was resolved and queue is one of its queues (a producer picked it)

	claim *dedupClaim // m's DedupID, checked once m is stamped (dedup.go)
}

// newRoutedJob validates m (unless c says the caller did) and prepares a
// pooled job; a non-nil route stores m under route.Topic (queue is then
// that topic's).
func (s *Store) newRoutedJob(m *Message, queue int, c putCheck, route *message.Reroute) (*putJob, error) {
	nowMs := s.nowMs()
	if c.claim != nil {
		s.dedup.ids.prefetch(c.claim.h) // looked up after the validation (claim)
	}
	if err := s.checkPut(m, queue, c, route, nowMs); err != nil {
		return nil, err
	}
	j := s.jobs.Get().(*putJob)
	j.fill(m, queue, route, nowMs)
	return j, nil
}

// checkPut validates m (unless c says the caller did) and its queue, for
// a put beginning at nowMs.
func (s *Store) checkPut(m *Message, queue int, c putCheck, route *message.Reroute, nowMs int64) error {
	if !c.validated {
		if err := message.Validate(m, s.opts.MaxMessageSize, topicLimit(m), uniqLen, time.UnixMilli(nowMs)); err != nil {
			return err
		}
	}
	if route != nil {
		return s.checkSysQueue(route.Topic, queue)
	}
	if !c.resolved {
		return s.checkQueue(m, queue, c.sys)
	}
	return nil
}

// fill prepares j for checked message m, put to queue at nowMs.
func (j *putJob) fill(m *Message, queue int, route *message.Reroute, nowMs int64) {
	s := j.s
	j.m, j.queue = m, int32(queue)
	j.routed = route != nil
	if j.routed {
		j.route = *route
	}
	j.nowMs = nowMs
	j.bornMs = j.nowMs
	if !m.BornTimestamp.IsZero() {
		j.bornMs = m.BornTimestamp.UnixMilli()
	}
	if m.UniqKey == "" { // the sequence number is added under the append lock
		copy(j.uniq[0:8], s.uniqHex[:])
		putHex(j.uniq[8:20], uint64(j.bornMs))
	}
	if j.routed {
		j.size = message.PayloadSizeRouted(m, uniqLen, &j.route)
	} else {
		j.size = message.PayloadSize(m, uniqLen)
	}
}

func topicLimit(m *Message) int {
	if m != nil && len(m.Topic) > 0 && m.Topic[0] == '%' {
		return message.MaxSysTopicLen
	}
	return message.MaxTopicLen
}

func (s *Store) result(j *putJob, off int64) PutResult {
	if j.routed && j.route.RealTopic != "" {
		// A delayed message: the queue it will be delivered to, and no
		// queue offset yet (PutResult.Delayed).
		q, err := strconv.Atoi(j.route.RealQueue)
		if err == nil {
			r := message.NewPutResult(off, commitlog.FrameSize+j.size, q, -1, time.UnixMilli(j.storeMs), j.m.UniqKey, &j.uniq)
			r.Delayed = true
			return r
		}
	}
	return message.NewPutResult(off, commitlog.FrameSize+j.size, int(j.queue), j.qoff, time.UnixMilli(j.storeMs),
		j.m.UniqKey, &j.uniq)
}

// resultInto is result for a plain (not delayed) job, written into *dst.
func (s *Store) resultInto(dst *PutResult, j *putJob, off int64) {
	message.SetPutResult(dst, off, commitlog.FrameSize+j.size, int(j.queue), j.qoff, time.UnixMilli(j.storeMs),
		j.m.UniqKey, &j.uniq)
}

func (s *Store) releaseJob(j *putJob) {
	j.m = nil
	s.jobs.Put(j)
}

// Put stores m in the given queue of its topic and returns where it went.
// The topic is created on first use unless Options.DisableAutoCreateTopics
// (then ErrTopicNotFound); the queue must be below its queue count. With
// FlushSync Put returns only after a sync covering the message; if that
// takes longer than SyncFlushTimeout it returns the result together with
// ErrFlushTimeout (the message is stored, durability unconfirmed). A
// message that fails validation, or a ctx that is already done, stores
// nothing. m must not be modified until Put returns. Producers (see
// NewProducer) add queue selection, async sends and compression.
func (s *Store) Put(ctx context.Context, m *Message, queue int) (PutResult, error) {
	if s != nil && s.hooks.h.Sends() { // a nil Store gets its error from enter
		return s.putHooked(ctx, m, queue)
	}
	return s.put(ctx, m, queue)
}

// put is Put without the send hooks.
func (s *Store) put(ctx context.Context, m *Message, queue int) (PutResult, error) {
	if err := s.enter(ctx, "put"); err != nil {
		return PutResult{}, err
	}
	res, err := s.send(ctx, m, queue, false, false)
	if err != nil {
		return PutResult{}, err
	}
	return res, s.awaitDurable(ctx, res.End())
}

// append stores m without waiting for durability; sys allows the store's
// own topics.
// validated says the caller ran message.Validate on m.
func (s *Store) append(ctx context.Context, m *Message, queue int, sys, validated bool) (PutResult, error) {
	return s.appendChecked(ctx, m, queue, putCheck{sys: sys, validated: validated})
}

// appendChecked is append for a caller that checked what c says.
func (s *Store) appendChecked(ctx context.Context, m *Message, queue int, c putCheck) (PutResult, error) {
	if s.closed.Load() {
		return PutResult{}, errs.ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return PutResult{}, err
	}
	if err := s.admit(); err != nil {
		return PutResult{}, err
	}
	var route *message.Reroute
	if m != nil && (m.DelayLevel > 0 || !m.DeliverAt.IsZero()) {
		var r message.Reroute
		var routed bool
		var err error
		if m, queue, r, routed, err = s.delayed(m, queue, c); err != nil {
			return PutResult{}, err
		}
		if routed {
			route = &r
		}
		c.sys, c.validated = true, true
	}
	j, err := s.newRoutedJob(m, queue, c, route)
	if err != nil {
		return PutResult{}, err
	}
	if c.claim != nil {
		if res, dup, err := s.claim(ctx, c.claim, j.nowMs); dup || err != nil {
			s.releaseJob(j)
			return res, err
		}
	}
	off, err := s.log.Append(j)
	if err != nil {
		s.releaseJob(j)
		if c.claim != nil {
			s.settle(c.claim, PutResult{}, err)
		}
		return PutResult{}, err
	}
	res := s.result(j, off)
	if c.claim != nil {
		s.settle(c.claim, res, nil)
	}
	s.stored(j.m, j.topic(), res)
	s.releaseJob(j)
	s.metrics.puts.Add(1)
	if s.dedup != nil && m.DedupID != "" && c.claim == nil {
		if name := dedupTopic(m); name != "" {
			s.remember(name, m.DedupID, res.Offset, res.StoreTime.UnixMilli())
		}
	}
	return res, nil
}

// kick starts making appended data durable and visible, without waiting
// (durability.kick), and wakes the replicas' senders.
func (s *Store) kick() {
	s.repl.appended()
	s.dur.kick()
}

// awaitDurable applies the flush mode and the replication mode to data
// ending at end.
func (s *Store) awaitDurable(ctx context.Context, end int64) error {
	if s.repl.shipsFirst() {
		return s.awaitShipped(ctx, end) // replica_await.go
	}
	if err := s.awaitLocal(ctx, end); err != nil {
		return err
	}
	return s.repl.await(ctx, end) // ReplicationSync (replication.go)
}

// awaitLocal applies the flush mode to data ending at end.
func (s *Store) awaitLocal(ctx context.Context, end int64) error {
	s.repl.appended()
	return s.dur.await(ctx, end)
}

// PutBatch stores msgs in one queue as one contiguous append: readers see
// all of them or none, and with FlushSync they share one sync. If any
// message is invalid nothing is stored.
func (s *Store) PutBatch(ctx context.Context, msgs []*Message, queue int) ([]PutResult, error) {
	if s != nil && s.hooks.h.Sends() { // a nil Store gets its error from enter
		return s.putBatchHooked(ctx, msgs, queue)
	}
	return s.putBatch(ctx, msgs, queue)
}

// putBatch is PutBatch without the send hooks.
func (s *Store) putBatch(ctx context.Context, msgs []*Message, queue int) ([]PutResult, error) {
	if err := s.enter(ctx, "put batch"); err != nil {
		return nil, err
	}
	res, err := s.sendBatch(ctx, msgs, queue, false)
	if err != nil {
		return nil, err
	}
	return res, s.awaitDurable(ctx, res[len(res)-1].End())
}

func (s *Store) appendBatch(ctx context.Context, msgs []*Message, queue int, validated bool) ([]PutResult, error) {
	return s.appendBatchInto(ctx, msgs, queue, validated, nil)
}

// appendBatchInto is appendBatch writing the results into dst when it has
// room for them (PutBatchInto).
func (s *Store) appendBatchInto(ctx context.Context, msgs []*Message, queue int, validated bool, dst []PutResult) ([]PutResult, error) {
	if s.closed.Load() {
		return nil, errs.ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if len(msgs) == 0 {
		return nil, fmt.Errorf("mqlite: empty batch: %w", errs.ErrInvalidArgument)
	}
	if err := s.admit(); err != nil {
		return nil, err
	}
	b := s.getBatch(len(msgs))
	defer s.putBatchScratch(b)
	if err := s.prepareBatch(b, msgs, queue, validated); err != nil {
		return nil, err
	}
	first, _, err := s.log.AppendBatch(b.apps)
	if err != nil {
		return nil, err
	}
	res := resultsFor(dst, len(msgs))
	off := first
	for i := range b.jobs {
		j := &b.jobs[i]
		// Batched jobs are never routed; dst may hold a reused result.
		s.resultInto(&res[i], j, off)
		res[i].Delayed, res[i].Duplicate = false, false
		s.stored(j.m, j.topic(), res[i])
		off += int64(res[i].Size)
	}
	s.metrics.puts.Add(int64(len(res)))
	if s.dedup != nil {
		s.rememberBatch(msgs, res)
	}
	return res, nil
}
