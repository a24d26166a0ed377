// Package producer owns the sending side of a store: the Producer handle
// with its send modes (sync, async with a callback, oneway, batch), queue
// selection (round robin, by sharding key, custom), and body compression.
// A Producer talks to the store through the Sink interface, which the
// root package implements: a send is one call into the store's write
// path (which resolves the topic once). A store that implements only the
// step-by-step Appender interface is driven call by call. The checks and
// transforms a send applies (CheckSize, CheckBatch, Compress) and the
// queue Picker are exported for the Sink to use.
package producer

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cespare/xxhash/v2"

	"github.com/mqlite/mqlite/hook"
	"github.com/mqlite/mqlite/internal/errs"
	"github.com/mqlite/mqlite/message"
)

// Appender is what a Producer needs from the message store, step by step:
// validate, resolve the topic, append, wait for durability. A store that
// is also a Sink gets whole sends instead.
type Appender interface {
	// Validate checks m against every rule of the store (topic name,
	// body, tags, keys, properties, delay) without storing it.
	Validate(m *message.Message) error
	// QueueCount resolves the queue count of a topic a user sends to,
	// creating the topic with autoQueues queues (0: the store's default)
	// when the store allows it, else ErrTopicNotFound.
	QueueCount(topic string, autoQueues int) (int, error)
	// Append stores m, which passed Validate, in queue without waiting
	// for durability.
	Append(m *message.Message, queue int) (message.PutResult, error)
	// AppendBatch stores msgs in queue as one contiguous append (all or
	// nothing).
	AppendBatch(msgs []*message.Message, queue int) ([]message.PutResult, error)
	// AwaitDurable waits until the data ending at end satisfies the
	// store's flush mode (FlushSync: synced, or ErrFlushTimeout).
	AwaitDurable(ctx context.Context, end int64) error
	// Kick starts making the data ending at end durable without waiting.
	Kick(end int64)
}

// Store is the former name of Appender.
//
// Deprecated: use Appender.
type Store = Appender

// Seeder is an optional interface of an Appender: one opened with a seed
// (mqlite's Options.Seed) returns a non-zero Seed for each new Producer,
// whose round robin then starts from it instead of at random, so that a
// test run can be repeated exactly. New calls Seed once.
type Seeder interface {
	Seed() uint64
}

// Selector picks the queue of a message among queues queues. It must
// return a value in [0, queues) and be safe for concurrent use.
type Selector func(m *message.Message, queues int) int

// Options configure a Producer. Zero values mean the defaults given.
type Options struct {
	// Selector picks queues. nil: a message with a ShardingKey goes to
	// the queue its key hashes to (same key, same queue, across restarts
	// while the queue count stays); others round robin.
	Selector Selector
	// AutoCreateQueues is the queue count of a topic created by a first
	// send (when the store auto-creates topics); 0: the store's default.
	AutoCreateQueues int
	// MaxMessageSize limits bodies (before compression); 0: the store's
	// limit. It can only be lower than the store's.
	MaxMessageSize int
	// CompressOver compresses bodies of at least this many bytes with
	// zlib (stdlib compress/zlib); 0: off (RocketMQ uses 4096). Batches
	// are never compressed. Readers get the original body back.
	CompressOver int
	// CompressLevel is the zlib level; default 5, as RocketMQ.
	CompressLevel int
	// MaxInFlight bounds async sends accepted but not yet called back
	// and RequestAsync requests not yet answered, together; SendAsync
	// and RequestAsync block (bounded by their ctx) while the bound is
	// reached. Default 10,000.
	MaxInFlight int
	// RequestTimeout is how long Request and RequestAsync wait for a
	// reply, on the store's clock (Options.Clock); 0: 3 s
	// (DefaultRequestTimeout). A ctx deadline also ends the wait.
	RequestTimeout time.Duration
	// RetryTimesWhenSendFailed is how many times a send is tried again
	// after a transient failure (RocketMQ's name): ErrFlowControl, which
	// stored nothing, is retried after RetryBackoff by every send method;
	// ErrFlushTimeout (Status FlushDiskTimeout) of Send and SendBatch,
	// whose message is stored, is retried by waiting for that message's
	// sync again, never by storing it twice. 0: DefaultRetryTimes (2);
	// negative: no retries. Every other error returns at once.
	RetryTimesWhenSendFailed int
	// RetryBackoff is the wait before the first retry, on the store's
	// clock, doubling with each retry up to 8 times; 0: 100 ms
	// (DefaultRetryBackoff). A ctx that ends stops the retries.
	RetryBackoff time.Duration
	// Hooks intercept this producer's sends (BeforeSend, AfterSend; see
	// package hook). A Store's producers also run the store's Options.Hooks.
	Hooks hook.Hooks
	// Group names the producer, as RocketMQ's producer group does: it
	// is hook.SendEvent.Producer in AfterSend and the group of a message
	// trace's "sent" step. Optional; if set, a valid topic name (at most
	// message.MaxTopicLen bytes).
	Group string
}

// SendStatus is the outcome of a send that stored its message.
type SendStatus int

const (
	// SendOK: stored, and durable as the store's flush mode promises.
	SendOK SendStatus = iota
	// FlushDiskTimeout: stored, but the sync (FlushSync) did not complete
	// within the store's SyncFlushTimeout; the send also returns
	// ErrFlushTimeout. The message will still be delivered.
	FlushDiskTimeout
)

// String returns the status as RocketMQ spells it, as in "SEND_OK".
func (s SendStatus) String() string {
	switch s {
	case SendOK:
		return "SEND_OK"
	case FlushDiskTimeout:
		return "FLUSH_DISK_TIMEOUT"
	}
	return fmt.Sprintf("SendStatus(%d)", int(s))
}

// SendResult describes a stored message: status, topic, and where it
// went (CommitLog offset, queue, queue offset, store time), with MsgID()
// and UniqKey() from the embedded PutResult.
type SendResult struct {
	Status SendStatus
	Topic  string
	message.PutResult
	// TransactionID is set by transactional sends.
	TransactionID string
}

// Producer sends messages to a store. It is safe for concurrent use.
type Producer struct {
	st     Appender
	sink   Sink // st itself when it is a Sink, else st step by step
	opts   Options
	picker Picker

	async asyncState
	req   requestState

	retried atomic.Int64 // sends tried again (Retried)
}

// New returns a Producer over st. Options are checked here.
func New(st Appender, opts Options) (*Producer, error) {
	var problems []error
	if opts.MaxMessageSize < 0 {
		problems = append(problems, fmt.Errorf("negative MaxMessageSize %d", opts.MaxMessageSize))
	}
	if opts.CompressOver < 0 {
		problems = append(problems, fmt.Errorf("negative CompressOver %d", opts.CompressOver))
	}
	if opts.CompressLevel == 0 {
		opts.CompressLevel = 5
	}
	if opts.CompressLevel < 1 || opts.CompressLevel > 9 {
		problems = append(problems, fmt.Errorf("CompressLevel %d outside 1..9", opts.CompressLevel))
	}
	if opts.AutoCreateQueues < 0 {
		problems = append(problems, fmt.Errorf("negative AutoCreateQueues %d", opts.AutoCreateQueues))
	}
	if opts.MaxInFlight == 0 {
		opts.MaxInFlight = 10000
	}
	if opts.MaxInFlight < 0 {
		problems = append(problems, fmt.Errorf("negative MaxInFlight %d", opts.MaxInFlight))
	}
	if opts.RequestTimeout < 0 {
		problems = append(problems, fmt.Errorf("negative RequestTimeout %s", opts.RequestTimeout))
	}
	if opts.Group != "" {
		if err := message.ValidateTopic(opts.Group, message.MaxTopicLen); err != nil {
			problems = append(problems, fmt.Errorf("producer group %q: %w", opts.Group, err))
		}
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("mqlite/producer: bad options: %w: %w", errs.ErrInvalidArgument, errors.Join(problems...))
	}
	if after, name := opts.Hooks.AfterSend, opts.Group; after != nil && name != "" {
		opts.Hooks.AfterSend = func(ctx context.Context, e hook.SendEvent) {
			e.Producer = name
			after(ctx, e)
		}
	}
	p := &Producer{st: st, sink: stepSink{st}, opts: opts, picker: Picker{Selector: opts.Selector}}
	if sk, ok := st.(Sink); ok {
		p.sink = sk
	}
	if sd, ok := st.(Seeder); ok {
		p.picker.Seed = sd.Seed()
	}
	p.async.init(p)
	return p, nil
}

// Send stores m and, with FlushSync, waits until it is durable. A message
// that fails validation, an unknown topic (auto-create off), a closed
// producer or a ctx already done store nothing. If the sync times out the
// result has Status FlushDiskTimeout and the error is ErrFlushTimeout: the
// message is stored. m must not be modified until Send returns.
func (p *Producer) Send(ctx context.Context, m *message.Message) (SendResult, error) {
	if p == nil {
		return SendResult{}, errs.NilReceiver("producer.Producer")
	}
	if err := errs.CheckContext(ctx, "mqlite/producer: send"); err != nil {
		return SendResult{}, err
	}
	return p.store(ctx, m, WaitDurable)
}

// SendOneway stores m and returns without waiting for durability (the
// store is asked to make it durable). Errors are those of storing it.
func (p *Producer) SendOneway(m *message.Message) error {
	if p == nil {
		return errs.NilReceiver("producer.Producer")
	}
	_, err := p.store(context.Background(), m, WaitKick)
	return err
}

// finish maps the durability outcome onto the result.
func finish(res SendResult, err error) (SendResult, error) {
	if errors.Is(err, errs.ErrFlushTimeout) {
		res.Status = FlushDiskTimeout
	}
	return res, err
}

// storeMsg sends m through the sink, doing what w says about durability
// (store runs the hooks around it). A message not stored returns a zero
// result; one stored with a durability error (ErrFlushTimeout: Status
// FlushDiskTimeout) returns its result with the error.
func (p *Producer) storeMsg(ctx context.Context, m *message.Message, w Wait) (SendResult, error) {
	if p.async.closed.Load() {
		return SendResult{}, fmt.Errorf("mqlite/producer: send: %w", errs.ErrClosed)
	}
	if err := ctx.Err(); err != nil {
		return SendResult{}, err
	}
	r, err := p.sink.Send(ctx, m, &p.opts, &p.picker, w)
	for attempt := 1; ; attempt++ {
		again, redo := p.retry(ctx, attempt, r, err)
		if !again {
			break
		}
		if redo {
			r, err = p.sink.Send(ctx, m, &p.opts, &p.picker, w)
		} else {
			err = p.st.AwaitDurable(ctx, r.End())
		}
	}
	if !stored(r) {
		return SendResult{}, err
	}
	return finish(SendResult{Topic: m.Topic, PutResult: r}, err)
}

// stored reports whether r names a stored record (every record has a size).
func stored(r message.PutResult) bool { return r.Size > 0 }

// Picker chooses a message's queue as a Producer does: the Selector if
// set, else the queue its ShardingKey hashes to, else round robin per
// topic from a random start (as RocketMQ), or from a start derived from
// Seed and the topic name when Seed is not 0. Safe for concurrent use;
// the zero value is ready.
type Picker struct {
	Selector Selector
	// Seed, when not 0, fixes each topic's round-robin start (a hash of
	// Seed and the topic name), for repeatable test runs.
	Seed uint64
	rr   sync.Map // topic -> *atomic.Uint32
}

// Pick returns m's queue among n, or ErrInvalidArgument if the Selector
// chose one outside [0, n).
func (p *Picker) Pick(m *message.Message, n int) (int, error) {
	var q int
	switch {
	case p.Selector != nil:
		q = p.Selector(m, n)
	case m.ShardingKey != "":
		q = ShardingQueue(m.ShardingKey, n)
	default:
		c, ok := p.rr.Load(m.Topic)
		if !ok {
			v := new(atomic.Uint32)
			v.Store(p.start(m.Topic))
			c, _ = p.rr.LoadOrStore(m.Topic, v)
		}
		q = int(c.(*atomic.Uint32).Add(1) % uint32(n))
	}
	if q < 0 || q >= n {
		return 0, fmt.Errorf("mqlite/producer: selector chose queue %d of %d for topic %q: %w", q, n, m.Topic, errs.ErrInvalidArgument)
	}
	return q, nil
}

// start is the round-robin start of topic: random, or from Seed.
func (p *Picker) start(topic string) uint32 {
	if p.Seed == 0 {
		return rand.Uint32()
	}
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], p.Seed)
	d := xxhash.New()
	d.Write(b[:])
	d.WriteString(topic)
	return uint32(d.Sum64())
}

// ShardingQueue is the queue a sharding key maps to among n queues: a
// 64-bit xxhash of the key modulo n, the same in every process.
func ShardingQueue(key string, n int) int {
	return int(xxhash.Sum64String(key) % uint64(n))
}
