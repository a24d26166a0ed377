package txn

import (
	"context"
	"errors"
	"fmt"
	"github.com/mqlite/mqlite/internal/splitmix"
	"maps"
	"math/rand/v2"
	"runtime/debug"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mqlite/mqlite/internal/errs"
	"github.com/mqlite/mqlite/message"
	"github.com/mqlite/mqlite/producer"
	"github.com/mqlite/mqlite/topic"
)

// ProducerOptions configure a Producer. Zero values mean the defaults given.
type ProducerOptions struct {
	// Group is the producer group; its checker answers the check-backs of
	// the group's messages, also after a restart. Default DefaultGroup.
	Group string
	// Selector picks the real queue, as producer.Options.Selector: nil
	// means by sharding key when the message has one, else round robin.
	Selector producer.Selector
	// AutoCreateQueues is the queue count of a topic created by a first
	// send (when the store auto-creates topics); 0: the store's default.
	AutoCreateQueues int
}

// Producer sends transactional messages. It is safe for concurrent use.
type Producer struct {
	svc        *Service
	st         Host
	opts       ProducerOptions
	unregister func()
	picker     producer.Picker
	closed     atomic.Bool
	ids        *idSource
}

// NewProducer returns a Producer whose group's check-backs checker
// answers; checker is required (RocketMQ's checkLocalTransaction).
func NewProducer(svc *Service, checker Checker, opts ProducerOptions) (*Producer, error) {
	if svc == nil {
		return nil, fmt.Errorf("mqlite/txn: nil service: %w", ErrInvalidArgument)
	}
	if svc.opts.ReadOnly {
		return nil, fmt.Errorf("mqlite/txn: new producer: %w", ErrReadOnly)
	}
	if opts.Group == "" {
		opts.Group = DefaultGroup
	}
	if opts.AutoCreateQueues < 0 {
		return nil, fmt.Errorf("mqlite/txn: negative AutoCreateQueues %d: %w", opts.AutoCreateQueues, ErrInvalidArgument)
	}
	unregister, err := svc.Register(opts.Group, checker)
	if err != nil {
		return nil, err
	}
	p := &Producer{svc: svc, st: svc.st, opts: opts, unregister: unregister, picker: producer.Picker{Selector: opts.Selector}}
	if seed := svc.opts.Seed; seed != 0 {
		n := svc.producers.Add(1)
		p.picker.Seed = mix(seed, 2*n)
		p.ids = &idSource{rng: newSeededRand(mix(seed, 2*n+1), n)}
	}
	return p, nil
}

// Close unregisters the producer's checker; sends in progress finish.
// Close is idempotent; afterwards SendInTransaction returns ErrClosed.
func (p *Producer) Close() error {
	if p == nil {
		return errs.NilReceiver("txn.Producer")
	}
	if p.closed.CompareAndSwap(false, true) {
		p.unregister()
	}
	return nil
}

// SendInTransaction sends msg in a transaction: it stores a half message
// (invisible to consumers), runs localTx, and records its outcome.
// CommitMessage stores msg in its topic (with SysTxCommit and the same
// unique key) and the result describes it; RollbackMessage discards it;
// Unknown leaves it to the check-back service, and the result then
// describes the half message. TransactionID is msg's UniqKey, generated
// when empty. Bad input (nil or invalid message, a delayed message, a
// malformed PropCheckImmunity, a property this package sets, nil localTx),
// a closed producer or service and a ctx already done store nothing.
//
// A localTx that panics or returns an undefined state counts as Unknown
// and the error matches ErrLocalTx. A half message stored but not
// confirmed durable in time (ErrFlushTimeout, Status FlushDiskTimeout) is
// rolled back without running localTx, as RocketMQ does. A half message
// whose store failed otherwise may still be stored (the failure may come
// after the write); the check-back then settles it, and its checker finds
// no local transaction. A commit stored but not confirmed durable in time
// returns ErrFlushTimeout with Status FlushDiskTimeout: it will be
// delivered. A commit or rollback that could not be recorded is left to
// the check-back and reported. msg must not be modified until
// SendInTransaction returns.
func (p *Producer) SendInTransaction(ctx context.Context, msg *message.Message, localTx LocalTx) (producer.SendResult, error) {
	queue, err := p.check(ctx, msg, localTx)
	if err != nil {
		return producer.SendResult{}, err
	}
	uniq := msg.UniqKey
	if uniq == "" {
		uniq = p.ids.newUniq()
	}
	born := msg.BornTimestamp
	if born.IsZero() {
		born = p.svc.opts.Clock.Now()
	}
	if err := p.svc.claim(uniq); err != nil {
		return producer.SendResult{}, err
	}
	hr, err := p.st.Append(ctx, p.half(msg, uniq, queue, born), 0)
	res := producer.SendResult{Topic: msg.Topic, PutResult: hr, TransactionID: uniq}
	if errors.Is(err, ErrFlushTimeout) {
		// Stored but not confirmed: roll back without running the
		// local transaction, as RocketMQ does.
		res.Status = producer.FlushDiskTimeout
		if oerr := p.svc.writeOp(context.WithoutCancel(ctx), hr.QueueOffset, RollbackMessage.String()); oerr != nil {
			p.svc.settle(uniq, hr.QueueOffset, settleNone)
			return res, fmt.Errorf("mqlite/txn: half message of %s: %w; rollback not recorded: %w", uniq, err, oerr)
		}
		p.svc.settle(uniq, hr.QueueOffset, settleDone)
		return res, fmt.Errorf("mqlite/txn: half message of %s: %w; rolled back", uniq, err)
	}
	if err != nil {
		p.svc.settle(uniq, -1, settleNone)
		return producer.SendResult{}, fmt.Errorf("mqlite/txn: store half message: %w", err)
	}
	if hr.Duplicate {
		// msg.DedupID was committed already: nothing was stored, and
		// the local transaction does not run again.
		p.svc.settle(uniq, -1, settleNone)
		return producer.SendResult{Topic: msg.Topic, PutResult: hr, TransactionID: hr.UniqKey()}, nil
	}

	m := *msg
	m.UniqKey = uniq
	state, lerr := p.runLocal(ctx, localTx, &m)
	// The outcome is decided: record it even if ctx ends now.
	wctx := context.WithoutCancel(ctx)
	switch state {
	case CommitMessage:
		real := p.real(msg, uniq, born, hr.Offset)
		rr, err := p.st.Append(wctx, real, queue)
		var ferr error
		if errors.Is(err, ErrFlushTimeout) {
			res.Status, ferr = producer.FlushDiskTimeout, err
		} else if err != nil {
			p.svc.settle(uniq, hr.QueueOffset, settleNone)
			return res, fmt.Errorf("mqlite/txn: commit %s: %w; left for check-back", uniq, err)
		}
		res.PutResult = rr
		if err := p.svc.writeOp(wctx, hr.QueueOffset, state.String()); err != nil {
			p.svc.log.Warn("mqlite/txn: committed, op record not written; the service writes it", "transaction", uniq, "err", err)
			p.svc.settle(uniq, hr.QueueOffset, settleOrphan)
			return res, ferr
		}
		p.svc.settle(uniq, hr.QueueOffset, settleDone)
		return res, ferr
	case RollbackMessage:
		if err := p.svc.writeOp(wctx, hr.QueueOffset, state.String()); err != nil {
			p.svc.settle(uniq, hr.QueueOffset, settleNone)
			return res, fmt.Errorf("mqlite/txn: rollback %s not recorded: %w; left for check-back", uniq, err)
		}
		p.svc.settle(uniq, hr.QueueOffset, settleDone)
		return res, nil
	}
	p.svc.settle(uniq, hr.QueueOffset, settleNone)
	return res, lerr
}

// check refuses bad input and picks the real queue.
func (p *Producer) check(ctx context.Context, msg *message.Message, localTx LocalTx) (int, error) {
	if p == nil {
		return 0, errs.NilReceiver("txn.Producer")
	}
	if err := errs.CheckContext(ctx, "mqlite/txn: send in transaction"); err != nil {
		return 0, err
	}
	if p.closed.Load() || p.svc.isClosed() {
		return 0, fmt.Errorf("mqlite/txn: send: %w", ErrClosed)
	}
	if msg == nil {
		return 0, fmt.Errorf("mqlite/txn: %w", message.ErrNilMessage)
	}
	if localTx == nil {
		return 0, fmt.Errorf("mqlite/txn: nil local transaction: %w", ErrInvalidArgument)
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if topic.IsSystem(msg.Topic) {
		return 0, fmt.Errorf("mqlite/txn: %w: %q is reserved for the store", message.ErrInvalidTopic, msg.Topic)
	}
	if err := p.st.Validate(msg); err != nil {
		return 0, err
	}
	if msg.DelayLevel > 0 || !msg.DeliverAt.IsZero() {
		return 0, fmt.Errorf("mqlite/txn: %w: transactional messages cannot be delayed", message.ErrInvalidDelay)
	}
	for _, name := range []string{PropTranMsg, PropProducerGroup, PropCheckTimes, PropTxState} {
		if _, set := msg.Properties[name]; set {
			return 0, fmt.Errorf("mqlite/txn: %w: %q is set by the store", message.ErrInvalidProperty, name)
		}
	}
	if _, set := msg.Properties[PropCheckImmunity]; set {
		if _, ok := immunity(msg.Properties); !ok {
			return 0, fmt.Errorf("mqlite/txn: %w: %s=%q, want whole seconds up to %d", message.ErrInvalidProperty,
				PropCheckImmunity, msg.Properties[PropCheckImmunity], int64(maxImmunity/time.Second))
		}
	}
	return p.pick(msg)
}

// pick resolves the topic and selects the real queue, as package
// producer does.
func (p *Producer) pick(m *message.Message) (int, error) {
	n, err := p.st.QueueCount(m.Topic, p.opts.AutoCreateQueues)
	if err != nil {
		return 0, err
	}
	return p.picker.Pick(m, n)
}

// half is the half message of msg: stored in topic.Half queue 0, with the
// real topic and queue, the group and the transaction marker as
// properties, and no transaction type bits (so it is indexed there).
func (p *Producer) half(msg *message.Message, uniq string, queue int, born time.Time) *message.Message {
	h := *msg
	h.Topic = topic.Half
	h.UniqKey = uniq
	h.BornTimestamp = born
	h.SysFlag = msg.SysFlag &^ message.SysTxTypeMask
	h.PreparedTxOffset = 0
	h.Properties = make(map[string]string, len(msg.Properties)+4)
	maps.Copy(h.Properties, msg.Properties)
	h.Properties[message.PropRealTopic] = msg.Topic
	h.Properties[message.PropRealQueueID] = strconv.Itoa(queue)
	h.Properties[PropProducerGroup] = p.opts.Group
	h.Properties[PropTranMsg] = "true"
	return &h
}

// real is the committed message: msg with its unique key, SysTxCommit and
// the half message's CommitLog offset.
func (p *Producer) real(msg *message.Message, uniq string, born time.Time, halfOffset int64) *message.Message {
	m := *msg
	m.UniqKey = uniq
	m.BornTimestamp = born
	m.SysFlag = msg.SysFlag&^message.SysTxTypeMask | message.SysTxCommit
	m.PreparedTxOffset = halfOffset
	return &m
}

// runLocal runs localTx; a panic or an undefined state is Unknown with an
// error matching ErrLocalTx.
func (p *Producer) runLocal(ctx context.Context, localTx LocalTx, m *message.Message) (state TxState, err error) {
	defer func() {
		if r := recover(); r != nil {
			p.svc.log.Error("mqlite/txn: local transaction panicked; outcome left to check-back",
				"transaction", m.UniqKey, "panic", r, "stack", string(debug.Stack()))
			state, err = Unknown, fmt.Errorf("%w: transaction %s: panic: %v", ErrLocalTx, m.UniqKey, r)
		}
	}()
	state = localTx(ctx, m)
	if !state.valid() {
		p.svc.log.Error("mqlite/txn: local transaction returned an undefined state; outcome left to check-back",
			"transaction", m.UniqKey, "state", state)
		return Unknown, fmt.Errorf("%w: transaction %s: undefined state %v", ErrLocalTx, m.UniqKey, state)
	}
	return state, nil
}

// idSource generates transaction IDs: at random, or from a seeded
// generator (ServiceOptions.Seed). A nil *idSource is the random one.
type idSource struct {
	mu  sync.Mutex
	rng *rand.Rand
}

// newSeededRand is a PCG generator with seed and stream s.
func newSeededRand(seed, s uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, s)) }

// newUniq returns a unique key of message.UniqLen upper-case hex digits.
func (s *idSource) newUniq() string {
	const hex = "0123456789ABCDEF"
	var b [message.UniqLen]byte
	if s != nil {
		s.mu.Lock()
		defer s.mu.Unlock()
	}
	for i := 0; i < len(b); i += 16 {
		var u uint64
		if s != nil {
			u = s.rng.Uint64()
		} else {
			u = rand.Uint64()
		}
		for j := i + 15; j >= i; j-- {
			b[j] = hex[u&0xF]
			u >>= 4
		}
	}
	return string(b[:])
}

// mix derives a non-zero value from seed and n (a SplitMix64 step), so
// that each producer's streams are unrelated.
func mix(seed, n uint64) uint64 {
	return max(splitmix.Mix(seed+n*splitmix.Gamma), 1)
}
