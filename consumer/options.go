package consumer

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/mqlite/mqlite/clock"
	"github.com/mqlite/mqlite/hook"
	"github.com/mqlite/mqlite/vfs"
)

// MessageModel says how a group shares messages.
type MessageModel uint8

const (
	// Clustering (the default) gives each message to one member: the
	// group's queues are divided among its live members.
	Clustering MessageModel = iota
	// Broadcasting gives every message to every member; each member keeps
	// its own progress, keyed by Options.InstanceName.
	Broadcasting
)

// String returns "Clustering" or "Broadcasting".
func (m MessageModel) String() string {
	switch m {
	case Clustering:
		return "Clustering"
	case Broadcasting:
		return "Broadcasting"
	}
	return fmt.Sprintf("MessageModel(%d)", uint8(m))
}

// AllocateStrategy divides a topic's queues among a clustering group's
// members. Every strategy sorts the queues (by id) and the member ids
// first, as RocketMQ does, so all members compute the same answer.
type AllocateStrategy uint8

const (
	// Averagely (the default) gives each member a contiguous block; the
	// first N mod C members get one queue more.
	Averagely AllocateStrategy = iota
	// AveragelyByCircle deals queues round robin: queue j goes to member
	// j mod C.
	AveragelyByCircle
	// ConsistentHash places each member on a hash ring (10 virtual nodes,
	// MD5) and gives each queue to the first node clockwise of its hash,
	// so a member joining or leaving moves only the queues next to it.
	ConsistentHash
)

// String returns the strategy's name.
func (s AllocateStrategy) String() string {
	switch s {
	case Averagely:
		return "Averagely"
	case AveragelyByCircle:
		return "AveragelyByCircle"
	case ConsistentHash:
		return "ConsistentHash"
	}
	return fmt.Sprintf("AllocateStrategy(%d)", uint8(s))
}

// ConsumeFromWhere says where a group with no committed offset for a
// queue starts. Once an offset is committed it is always used.
type ConsumeFromWhere uint8

const (
	// ConsumeFromLastOffset (the default) starts at the queue's max offset:
	// only messages stored from now on. Retry topics start at their min.
	ConsumeFromLastOffset ConsumeFromWhere = iota
	// ConsumeFromFirstOffset starts at the queue's min offset.
	ConsumeFromFirstOffset
	// ConsumeFromTimestamp starts at the first message stored at or after
	// Options.ConsumeTimestamp (Source.OffsetForTime).
	ConsumeFromTimestamp
)

// String returns the option's name.
func (w ConsumeFromWhere) String() string {
	switch w {
	case ConsumeFromLastOffset:
		return "LastOffset"
	case ConsumeFromFirstOffset:
		return "FirstOffset"
	case ConsumeFromTimestamp:
		return "Timestamp"
	}
	return fmt.Sprintf("ConsumeFromWhere(%d)", uint8(w))
}

// Defaults, as RocketMQ sets them, except DefaultQueueCacheCount.
const (
	DefaultConsumeBatchSize  = 1
	DefaultPullBatchSize     = 32
	DefaultGoroutines        = 20
	DefaultMaxReconsumeTimes = 16
	DefaultSuspendInterval   = time.Second
	DefaultConsumeTimeout    = 15 * time.Minute
	// DefaultQueueCacheCount is 128, not RocketMQ's 1000: its prefetch
	// covers a network round trip, while here a fetch is a function call,
	// and a deeper cache only adds live heap that every collection marks
	// (BenchmarkConsume, a backlog of 128 B messages: the collector spent
	// 188-271 ns a message with 1000 per queue, 158-205 with 128).
	DefaultQueueCacheCount   = 128
	DefaultQueueCacheBytes   = 100 << 20
	DefaultConsumeMaxSpan    = 2000
	DefaultPersistInterval   = 5 * time.Second
	DefaultRebalanceInterval = 20 * time.Second
	DefaultLockExpiry        = 60 * time.Second
	// DefaultConsumeTimestampAge is how far back ConsumeFromTimestamp
	// starts when Options.ConsumeTimestamp is zero.
	DefaultConsumeTimestampAge = 30 * time.Minute

	// MaxBatchSize bounds ConsumeBatchSize and PullBatchSize.
	MaxBatchSize = 1024
	// MaxGoroutines bounds Options.Goroutines.
	MaxGoroutines = 1000
	// MaxSuspendInterval bounds Options.SuspendInterval (RocketMQ clamps
	// its suspend time to 30 s too).
	MaxSuspendInterval = 30 * time.Second
	// DefaultInstanceName names a broadcasting member whose
	// Options.InstanceName is empty.
	DefaultInstanceName = "DEFAULT"
)

// Options configure one consumer (push or pull). The zero value of every
// field means its default. Options are copied and validated by
// NewPushConsumer / NewPullConsumer, which report every problem at once.
type Options struct {
	// Model is Clustering (default) or Broadcasting. All live members of a
	// group must agree.
	Model MessageModel
	// Strategy divides queues among clustering members (default
	// Averagely). All live members of a group must agree.
	Strategy AllocateStrategy
	// InstanceName identifies the member. Broadcasting keeps progress per
	// instance, so give it a stable name (default "DEFAULT"); clustering
	// members without a name get a generated one. Two live members of a
	// group may not share a name.
	InstanceName string
	// ConsumeFromWhere applies to queues with no committed offset.
	ConsumeFromWhere ConsumeFromWhere
	// ConsumeTimestamp is the start time for ConsumeFromTimestamp; zero
	// means 30 minutes before the consumer starts.
	ConsumeTimestamp time.Time
	// ConsumeBatchSize is the most messages handed to one handler call
	// (push; default 1, at most MaxBatchSize).
	ConsumeBatchSize int
	// PullBatchSize is the most messages fetched from the store at once
	// (default 32, at most MaxBatchSize).
	PullBatchSize int
	// Goroutines is the number of handler goroutines of a push consumer
	// (default 20, at most MaxGoroutines): at most this many handler
	// calls run at once. When the handler's calls have been short (under
	// 20 µs) and the consumer holds at least GOMAXPROCS queues, a queue's
	// fetcher runs the batches it fetched itself, in one of these places,
	// instead of handing them over; a call that blocks then holds up that
	// queue's fetching until it returns, and calls that turn long go back
	// to the goroutines. It does not matter under ManagerOptions.Stepped:
	// there Manager.Step calls the handler on its caller's goroutine, one
	// call at a time.
	Goroutines int
	// Orderly makes a push consumer deliver each queue's messages one
	// handler call at a time, in queue order, with the queue locked to
	// this member while assigned. Push consumers only.
	Orderly bool
	// AutoCommit makes a pull consumer commit everything returned by
	// earlier Polls at the start of each Poll, on rebalance and on
	// Close/Shutdown (the Kafka rule: process a batch before polling
	// again). Off by default: call Commit or CommitOffset.
	AutoCommit bool
	// MaxReconsumeTimes is how many times a failed message is consumed
	// again (default 16). Orderly: retried locally that many times, then
	// sent back (to the DLQ); broadcasting: retried locally, then dropped.
	// Clustering concurrent consumers send failures back at once and the
	// store's retry path applies the group's limit.
	MaxReconsumeTimes int
	// SuspendInterval is the pause before a failed message is consumed
	// again locally (default 1 s, at most 30 s), on the Manager's clock.
	SuspendInterval time.Duration
	// ConsumeTimeout bounds one handler call (default 15 min). A call that
	// two checks ConsumeTimeout apart find running (checks run every
	// ConsumeTimeout/4 on the clock, so this happens between ConsumeTimeout
	// and 1.5 ConsumeTimeout after it started) has its ctx cancelled and
	// counts as failed whatever the handler returns.
	ConsumeTimeout time.Duration
	// QueueCacheCount is the most messages fetched but not yet consumed
	// (push) or not yet polled (pull) per queue (default 128, four pull
	// batches). Fetching pauses at the limit until the handler catches up.
	QueueCacheCount int
	// QueueCacheBytes is the same limit in message bytes (default
	// 100 MiB). It may be passed by one pull batch.
	QueueCacheBytes int64
	// ConsumeMaxSpan pauses fetching for a concurrent push queue when the
	// oldest unconsumed message is this many offsets behind the newest
	// cached one (default 2000), so one slow message cannot make the
	// uncommitted range grow without bound.
	ConsumeMaxSpan int
	// ReadAheadBytes is the memory the consumer's read-ahead buffers may
	// take together (default DefaultReadAheadBytes, 8 MiB; -1 turns read-
	// ahead off). Each queue's fetcher copies raw records from the store
	// into its buffer, as many as fit, and decodes each into a MessageExt
	// only when the queue's cache (QueueCacheCount, QueueCacheBytes) takes
	// it. A buffer starts at 16 KiB and, once a fill runs out of room (a
	// backlog), grows to half of ReadAheadBytes or what is left of it; it
	// is allocated once and kept until the queue is released. So the
	// memory cost is up to ReadAheadBytes plus 16 KiB a queue. The buffers
	// hold no pointers, so the garbage collector does not scan them, and
	// their size raises the heap size at which the next collection starts:
	// draining a backlog collects several times less often. Messages never
	// share memory with them. Used when the Source implements
	// ReadAheadSource (a Store's does), and not with ReuseMessages.
	ReadAheadBytes int
	// ReuseMessages recycles the memory of consumed messages (see
	// message.Pool), so that consuming allocates close to nothing and
	// leaves the garbage collector nothing to do; on a 2-core machine that
	// makes a backlog drain about twice as fast. The price is a short life
	// for each message: a push handler's messages are valid only until
	// the call returns, a Poll's only until the next Poll of the consumer
	// (from any goroutine). That covers everything reachable from a
	// message, its Body and its strings (Topic, Tags, MsgID, keys and
	// properties) included: Clone what must live longer. Off by default.
	ReuseMessages bool
	// SkipDamaged moves a queue past a record the store cannot read (a
	// damaged one: ErrCorrupt naming its file and offset), counting it in
	// Stats.SkippedDamaged and logging it, instead of waiting there (the
	// default; QueueStats.FetchError shows why), which only a pull
	// consumer's Seek ends. The message is lost to the group: off by
	// default.
	SkipDamaged bool
	// Hooks intercept this consumer's deliveries (BeforeConsume,
	// AfterConsume; see package hook). A Store's consumers also run the
	// store's Options.Hooks.
	Hooks hook.Hooks
}

// String prints the options.
func (o Options) String() string {
	return fmt.Sprintf("consumer.Options{Model: %s, Strategy: %s, InstanceName: %q, ConsumeFromWhere: %s, ConsumeTimestamp: %s, "+
		"ConsumeBatchSize: %d, PullBatchSize: %d, Goroutines: %d, Orderly: %t, AutoCommit: %t, MaxReconsumeTimes: %d, "+
		"SuspendInterval: %s, ConsumeTimeout: %s, QueueCacheCount: %d, QueueCacheBytes: %d, ConsumeMaxSpan: %d, ReadAheadBytes: %d, ReuseMessages: %t, SkipDamaged: %t}",
		o.Model, o.Strategy, o.InstanceName, o.ConsumeFromWhere, o.ConsumeTimestamp.Format(time.RFC3339),
		o.ConsumeBatchSize, o.PullBatchSize, o.Goroutines, o.Orderly, o.AutoCommit, o.MaxReconsumeTimes,
		o.SuspendInterval, o.ConsumeTimeout, o.QueueCacheCount, o.QueueCacheBytes, o.ConsumeMaxSpan, o.ReadAheadBytes, o.ReuseMessages, o.SkipDamaged)
}

// withDefaults returns a copy with defaults applied, or every problem found.
func (o Options) withDefaults(now time.Time) (Options, error) {
	var problems []error
	bad := func(format string, args ...any) {
		problems = append(problems, fmt.Errorf("mqlite/consumer: options: "+format+": %w", append(args, ErrInvalidArgument)...))
	}
	if o.Model > Broadcasting {
		bad("unknown Model %d", o.Model)
	}
	if o.Strategy > ConsistentHash {
		bad("unknown Strategy %d", o.Strategy)
	}
	if o.ConsumeFromWhere > ConsumeFromTimestamp {
		bad("unknown ConsumeFromWhere %d", o.ConsumeFromWhere)
	}
	if o.InstanceName != "" {
		if err := validName(o.InstanceName); err != nil {
			bad("InstanceName %q: %v", o.InstanceName, err)
		}
	} else if o.Model == Broadcasting {
		o.InstanceName = DefaultInstanceName
	}
	if o.ConsumeFromWhere == ConsumeFromTimestamp && o.ConsumeTimestamp.IsZero() {
		o.ConsumeTimestamp = now.Add(-DefaultConsumeTimestampAge)
	}
	intOpt := func(name string, v *int, def, hi int) {
		switch {
		case *v == 0:
			*v = def
		case *v < 0 || *v > hi:
			bad("%s %d outside [1, %d]", name, *v, hi)
		}
	}
	intOpt("ConsumeBatchSize", &o.ConsumeBatchSize, DefaultConsumeBatchSize, MaxBatchSize)
	intOpt("PullBatchSize", &o.PullBatchSize, DefaultPullBatchSize, MaxBatchSize)
	intOpt("Goroutines", &o.Goroutines, DefaultGoroutines, MaxGoroutines)
	intOpt("MaxReconsumeTimes", &o.MaxReconsumeTimes, DefaultMaxReconsumeTimes, maxReconsumeTimes)
	intOpt("QueueCacheCount", &o.QueueCacheCount, DefaultQueueCacheCount, 1<<24)
	intOpt("ConsumeMaxSpan", &o.ConsumeMaxSpan, DefaultConsumeMaxSpan, 1<<30)
	switch {
	case o.ReadAheadBytes == 0:
		o.ReadAheadBytes = DefaultReadAheadBytes
	case o.ReadAheadBytes < -1 || o.ReadAheadBytes > maxReadAheadBytes:
		bad("ReadAheadBytes %d outside [1, %d] (-1: off)", o.ReadAheadBytes, maxReadAheadBytes)
	}
	switch {
	case o.QueueCacheBytes == 0:
		o.QueueCacheBytes = DefaultQueueCacheBytes
	case o.QueueCacheBytes < 0:
		bad("QueueCacheBytes %d is negative", o.QueueCacheBytes)
	}
	switch {
	case o.SuspendInterval == 0:
		o.SuspendInterval = DefaultSuspendInterval
	case o.SuspendInterval < 0 || o.SuspendInterval > MaxSuspendInterval:
		bad("SuspendInterval %s outside (0, %s]", o.SuspendInterval, MaxSuspendInterval)
	}
	switch {
	case o.ConsumeTimeout == 0:
		o.ConsumeTimeout = DefaultConsumeTimeout
	case o.ConsumeTimeout < 0:
		bad("ConsumeTimeout %s is negative", o.ConsumeTimeout)
	}
	return o, errors.Join(problems...)
}

// ManagerOptions configure a Manager. The zero value of every field but
// Dir means its default; the options are copied by NewManager.
type ManagerOptions struct {
	// FS is the file system of the config files; nil means vfs.OS.
	FS vfs.FS
	// Dir is the config directory (the store's config/). Required.
	Dir string
	// Clock drives persistence, rebalance ticks, suspends, lock expiry and
	// consume timeouts; nil means clock.Real.
	Clock clock.Clock
	// Logger receives warnings (skipped offsets, failed persists, handler
	// panics); nil discards.
	Logger *slog.Logger
	// PersistInterval is how often committed offsets are written (only
	// when they changed); default 5 s.
	PersistInterval time.Duration
	// RebalanceInterval is how often every group is rebalanced even
	// without a membership change, to pick up queue-count changes and a
	// retry topic that appeared; default 20 s.
	RebalanceInterval time.Duration
	// LockExpiry bounds how long a member that lost a queue in a
	// rebalance may keep its lock while its running handler calls finish
	// (the clean hand-off). Past it the new owner takes the queue over (on
	// the next rebalance tick) and the old member's commits for it are
	// ignored. Default 60 s, as RocketMQ's broker lock table. A lock held
	// by a member that still owns the queue never expires: members are in
	// the same process, and leave the group when they close.
	LockExpiry time.Duration
	// ReadOnly loads the groups and offsets for reading only (Groups,
	// Offsets, Lag), for a store opened read-only: nothing is written and
	// no consumer can be created (ErrReadOnly).
	ReadOnly bool
	// ParseFilter rebuilds a persisted subscription's filter from its type
	// and text (the root wires filter.Tag / filter.SQL). It is used when a
	// consumer starts without subscriptions of its own and its group has
	// persisted ones. Nil: only match-all subscriptions are restored.
	ParseFilter func(typ, expr string) (Filter, error)
	// Stepped is for deterministic tests: consumers start no goroutine
	// that fetches or runs handlers, and apply no rebalance on their
	// own; Manager.Step does all of it on its caller's goroutine, in a
	// fixed order (see Step). Consumers do nothing between Steps.
	Stepped bool
}

// String prints the options.
func (o ManagerOptions) String() string {
	fs := "vfs.OS"
	if o.FS != nil && o.FS != vfs.OS {
		fs = fmt.Sprintf("%T", o.FS)
	}
	return fmt.Sprintf("consumer.ManagerOptions{FS: %s, Dir: %q, PersistInterval: %s, RebalanceInterval: %s, LockExpiry: %s}",
		fs, o.Dir, o.PersistInterval, o.RebalanceInterval, o.LockExpiry)
}

func (o ManagerOptions) withDefaults() (ManagerOptions, error) {
	var problems []error
	bad := func(format string, args ...any) {
		problems = append(problems, fmt.Errorf("mqlite/consumer: manager options: "+format+": %w", append(args, ErrInvalidArgument)...))
	}
	if o.FS == nil {
		o.FS = vfs.OS
	}
	if o.Dir == "" {
		bad("Dir is empty")
	}
	if o.Clock == nil {
		o.Clock = clock.Real
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	dur := func(name string, v *time.Duration, def time.Duration) {
		switch {
		case *v == 0:
			*v = def
		case *v < 0:
			bad("%s %s is negative", name, *v)
		}
	}
	dur("PersistInterval", &o.PersistInterval, DefaultPersistInterval)
	dur("RebalanceInterval", &o.RebalanceInterval, DefaultRebalanceInterval)
	dur("LockExpiry", &o.LockExpiry, DefaultLockExpiry)
	return o, errors.Join(problems...)
}

// validName checks a group or instance name: 1..255 bytes of
// [A-Za-z0-9_-|%], RocketMQ's character set, so that "%RETRY%"+group is a
// valid topic.
func validName(s string) error {
	if s == "" {
		return errors.New("empty")
	}
	if len(s) > maxNameLen {
		return fmt.Errorf("%d bytes, the limit is %d", len(s), maxNameLen)
	}
	if i := strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' || r == '|' || r == '%')
	}); i >= 0 {
		return fmt.Errorf("character %q at %d (allowed: letters, digits, _ - | %%)", s[i], i)
	}
	return nil
}

// MaxGroupLen bounds the name of a new consumer group, as RocketMQ does
// (120 characters), and as the store's retry and transaction paths check
// it (topic.MaxGroupLen).
const MaxGroupLen = 120

// validGroup checks the name of a group a consumer joins. Records read
// back are checked with validName only: a group file may hold a longer
// name an earlier version accepted.
func validGroup(s string) error {
	if len(s) > MaxGroupLen {
		return fmt.Errorf("%d bytes, the limit is %d", len(s), MaxGroupLen)
	}
	return validName(s)
}

// maxReconsumeTimes bounds Options.MaxReconsumeTimes.
const maxReconsumeTimes = 1 << 20

// maxNameLen leaves room for the "%RETRY%" prefix in a 255-byte system topic.
const maxNameLen = 255 - len(RetryTopicPrefix)
