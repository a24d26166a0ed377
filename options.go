package mqlite

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"time"

	"github.com/mqlite/mqlite/clock"
	"github.com/mqlite/mqlite/commitlog"
	"github.com/mqlite/mqlite/delay"
	"github.com/mqlite/mqlite/internal/errs"
	"github.com/mqlite/mqlite/message"
	"github.com/mqlite/mqlite/topic"
	"github.com/mqlite/mqlite/vfs"
)

// FlushMode says when a message counts as stored.
type FlushMode int

const (
	// FlushAsync acknowledges once the message is in the mapped page cache;
	// a background flusher syncs every FlushInterval once FlushLeastPages
	// are dirty, and everything every FlushThoroughInterval.
	// kill -9 loses nothing; power loss may lose the last flush interval.
	FlushAsync FlushMode = iota
	// FlushSync acknowledges only after a sync covering the message (group
	// commit: concurrent senders share syncs). A nil error survives power loss.
	FlushSync
)

// String returns the mode's name, as in "FlushSync".
func (m FlushMode) String() string {
	switch m {
	case FlushAsync:
		return "FlushAsync"
	case FlushSync:
		return "FlushSync"
	}
	return fmt.Sprintf("FlushMode(%d)", int(m))
}

// Options configure a Store. A nil *Options, and the zero value of each
// field, mean the defaults given.
type Options struct {
	Flush FlushMode // default FlushAsync (RocketMQ's default)
	// InMemory keeps everything in memory (no files; dir is only a name).
	// Semantics are otherwise the same; for tests. It is a shorthand for
	// FS set to a fresh vfs.NewMem() (with smaller default file sizes),
	// and cannot be combined with FS (ErrInvalidArgument).
	InMemory bool
	// FS is the file system the store runs on; nil means the operating
	// system's (vfs.OS). Give it a vfs.NewMem() to keep a store in memory
	// across Close and Open, or a vfs.NewFaulty wrapper to test how your
	// code meets failing syncs, full disks and power loss (see package vfs
	// for the contract an FS keeps). ReadOnly and FileMode apply on top of
	// it; the default file sizes are those of a store on disk. Setting
	// both FS and InMemory is ErrInvalidArgument.
	FS vfs.FS
	// ReadOnly opens an existing store for reading only, beside the
	// process that owns it (or while none does), as bbolt's and Pebble's
	// read-only modes do, but without any lock: it takes no lock, creates,
	// writes, truncates and repairs nothing, maps every file read-only, and
	// runs no background goroutine. It is a view as of Open: the CommitLog
	// up to its last valid record, and the queues and key index as far as
	// the owner had built them (messages the owner had not dispatched yet
	// are readable by ID but not in their queue). Every call that writes
	// (sends, producers, consumers, topic changes, CleanExpired,
	// CheckTransactions, SendBack, Redrive) fails with ErrReadOnly;
	// queries, Stats, Verify, consumer groups and lag (as last persisted)
	// work. The segment size is read from the store. A missing store is
	// ErrNotFound.
	ReadOnly bool

	// SegmentSize is the CommitLog segment size; default
	// DefaultSegmentSize, 32 MiB (64 MiB in memory), so that a small
	// store stays small: the log keeps the next segment preallocated, so
	// an open store holds two. RocketMQ's mappedFileSizeCommitLog is
	// 1 GiB (commitlog.DefaultSegmentSize): larger segments roll less
	// often, for heavy write loads. An existing store keeps the size it
	// was created with.
	SegmentSize    int64
	MaxMessageSize int // body limit; default 4 MiB

	SyncFlushTimeout      time.Duration // FlushSync wait limit; default 5 s
	FlushInterval         time.Duration // FlushAsync period; default 500 ms
	FlushLeastPages       int           // FlushAsync: a periodic flush waits for this many dirty pages; default 4
	FlushThoroughInterval time.Duration // FlushAsync flush-everything period; default 10 s
	CheckpointInterval    time.Duration // default 1 s

	// NoWarm skips pre-faulting the CommitLog ahead of the write position.
	NoWarm bool
	// NoRecycle makes retention remove every CommitLog segment it drops.
	// By default it keeps up to two, renamed, to become next segments: their
	// pages are likely still in memory, so the log need not fault in and
	// zero new ones (commitlog/recycle.go). Retention short of disk space,
	// or under MaxStoreBytes, keeps none, and an InMemory store never
	// recycles: a spare would hold a segment of memory.
	NoRecycle bool

	// ReadUncommitted lets readers see FlushSync messages before their
	// sync completes. By default (as RocketMQ 5.3.2 does) they see only
	// flushed messages, so nothing delivered can vanish on power loss.
	ReadUncommitted bool

	// DisableAutoCreateTopics makes a send to an unknown topic fail with
	// ErrTopicNotFound. By default (as RocketMQ's broker) the topic is
	// created on first send with DefaultTopicQueues queues.
	DisableAutoCreateTopics bool
	DefaultTopicQueues      int // queues of an auto-created topic; default 4

	// DelayLevels are the delays of message delay levels 1..n; default
	// DefaultDelayLevels (RocketMQ's 18, 1s to 2h). At most 64.
	DelayLevels []time.Duration

	// DiskMaxUsedRatio: while the volume holding the store is fuller
	// than this, sends fail fast with ErrDiskFull (reads keep working).
	// Default 0.90 (RocketMQ's diskSpaceWarningLevelRatio, above which
	// its broker rejects writes); 1 turns the check off.
	DiskMaxUsedRatio float64
	// DiskFullPolicy says whether a filling disk may delete unconsumed
	// messages younger than Retention: by default (DiskFullReject) never;
	// sends fail at DiskMaxUsedRatio instead. DiskFullDeleteOldest opts
	// in to deleting the oldest segments above ForceCleanRatio, with a
	// warning and a count in Stats.Retention.
	DiskFullPolicy DiskFullPolicy
	// FlowControlThreshold: while the append path or a FlushSync sync has
	// been stuck longer than this, sends fail fast with ErrFlowControl.
	// Default 1 s (RocketMQ's osPageCacheBusyTimeOutMills); negative
	// turns it off.
	FlowControlThreshold time.Duration
	// MaxDispatchLag: while the CommitLog is more than this many bytes
	// ahead of what the dispatcher has made visible in the ConsumeQueue
	// (Stats' DispatchLag), sends fail fast with ErrFlowControl, so that
	// a stalled dispatcher (a slow disk under the queues and index)
	// shows at the producers instead of starving the consumers
	// silently. Checked with the flow-control threshold's period (a
	// quarter of it), so the lag may pass it by what arrives in that
	// time. Default 0: no bound (as RocketMQ, which only reports it).
	MaxDispatchLag int64

	// Retention: sealed CommitLog segments older than Retention (default
	// 72 h, RocketMQ's fileReservedTime) are deleted at DeleteHour (1-23,
	// or 24 for midnight, in the clock's location; default 4, RocketMQ's
	// deleteWhen), and at any time once the volume is fuller than
	// CleanRatio (default 0.75, RocketMQ's diskMaxUsedSpaceRatio).
	// Segments not yet expired are deleted only when asked: above
	// ForceCleanRatio (default 0.85, RocketMQ's
	// diskSpaceCleanForciblyRatio) with DiskFullPolicy
	// DiskFullDeleteOldest, or past MaxStoreBytes of CommitLog (default
	// 0: no cap); each such deletion warns and counts in
	// Stats.Retention. Negative Retention keeps everything (no retention
	// at all).
	Retention       time.Duration
	DeleteHour      int
	CleanRatio      float64
	ForceCleanRatio float64
	MaxStoreBytes   int64

	// DedupWindow is how long a message's DedupID is remembered
	// (Message.DedupID: a send of an ID stored in its topic within the
	// window stores nothing and returns the first send's result); default
	// DefaultDedupWindow, 2 min, as JetStream's duplicate window;
	// negative turns deduplication off. DedupMaxIDs bounds the IDs
	// remembered; default DefaultDedupMaxIDs; past it the oldest are
	// forgotten early (Stats().Dedup.Evicted). Memory: 40 to 64 bytes a
	// remembered ID, 48 when the count is a power of two (the default,
	// 262,144 IDs: 12 MiB; 1 M IDs: 48 MiB): a 16-byte ring entry and
	// a 16-byte table slot, with 1.5 to 3 slots an ID.
	DedupWindow time.Duration
	DedupMaxIDs int

	// StatsObserver, if set, receives Store.Stats every StatsInterval
	// (default 10 s) for export.
	StatsObserver StatsObserver
	StatsInterval time.Duration

	// OffsetPersistInterval is how often consumer groups' committed
	// offsets are written to config/ (they are also written on Close);
	// default 5 s, as RocketMQ's. Shorter means fewer redeliveries after a
	// crash.
	OffsetPersistInterval time.Duration

	// Transaction check-back (see package txn); zero values mean
	// RocketMQ's defaults: every 60 s, for half messages older than 6 s,
	// at most 15 checks, then discarded (or parked in
	// TRANS_CHECK_MAX_TIME_TOPIC with TxParkAfterMax).
	TxCheckInterval time.Duration
	TxTimeout       time.Duration
	TxMaxChecks     int
	TxParkAfterMax  bool

	// ConsumeQueueEntries is the number of 20-byte entries per
	// ConsumeQueue file of a new queue; default 65,536
	// (consumequeue.DefaultEntriesPerFile), 1.25 MiB per queue that holds
	// a message (RocketMQ's mappedFileSizeConsumeQueue is 300,000
	// entries, 5.7 MiB). With the default, an existing queue keeps the
	// value it was created with; a nonzero value must match it.
	ConsumeQueueEntries int
	// IndexSlots and IndexEntries size each new IndexFile (the key
	// index): hash slots of 4 bytes and entries of 20. Defaults
	// DefaultIndexSlots and DefaultIndexEntries, a 5.3 MiB file (1<<14
	// and 1<<16 in memory); RocketMQ's maxHashSlotNum and maxIndexNum are
	// 5,000,000 and 20,000,000 (a 400 MiB file). Existing files keep
	// their size.
	IndexSlots   int
	IndexEntries int

	// FileMode is the permission of every file the store creates
	// (segments, queues, index, checkpoint, config files); directories get
	// the search bit where it grants read (0600 gives 0700, 0640 gives
	// 0750). Default 0600, owner-only, as a store of messages may hold
	// personal data; widen it to share the store with a group. The
	// process umask still applies, and existing files keep their mode.
	// The owner must keep read and write.
	FileMode os.FileMode

	Clock clock.Clock // default clock.Real
	// Seed, when not 0, makes every random choice the store and its
	// producers make draw from it instead of at random: the prefix of
	// generated unique keys, each producer's round-robin start per topic
	// and generated transaction IDs. With a clock.Fake as Clock,
	// InMemory, and the work of each step finished with Settle after
	// each Advance, the same script run twice gives the same message IDs,
	// unique keys, queue choices, offsets, delivery order, retry timing
	// and dead letters. Still up to the Go scheduler (see "Deterministic
	// runs" in the package documentation for the rules a script keeps
	// to): push consumers with more than one handler goroutine, messages
	// reaching several queues of one push consumer in one step, background
	// writes falling due together (two retries, a retry and a delayed
	// message), periodic transaction check-backs, SendAsync callbacks and
	// concurrent sends, and what the real clock measures (flow control).
	// Stepped lifts the first four. The CommitLog's end at Open is mixed
	// in, so a reopened store does not repeat its previous run's keys;
	// two stores with the same seed and history generate the same unique
	// keys: use it for tests, never for stores whose messages meet. 0 (the
	// default): random, as RocketMQ.
	Seed int64
	// Stepped, for tests and harnesses only, runs the store's background
	// work on Settle's goroutine instead of its own, in a fixed order, so
	// that with Seed and a clock.Fake the same script gives the same
	// history whatever the Go scheduler does: push consumers start no
	// fetch or handler goroutines (ConsumerOptions.Goroutines does not
	// matter: one handler call at a time), the delay levels and the timer
	// service deliver only from Settle, and transaction check-back rounds
	// run only from Settle (once TxCheckInterval has passed on the clock
	// since the last) and CheckTransactions. Between Settles consumers do
	// nothing: a pull consumer's Poll returns what the last Settle
	// fetched, and a blocking Poll waits for the next Settle. See Settle
	// for the order and "Deterministic runs" in the package documentation
	// for what remains scheduler-dependent. It needs Clock to be a
	// *clock.Fake (ErrInvalidArgument otherwise).
	Stepped bool
	// Role makes the store a primary (the default) or a replica of one;
	// Replication configures both sides. See replication.go.
	Role        Role
	Replication ReplicationOptions
	// Logger receives routine logs; nil discards them. Warnings about
	// deleted data (DiskFullDeleteOldest, MaxStoreBytes) go to
	// slog.Default when it is nil, so that no loss is silent.
	Logger *slog.Logger
	// Hooks intercept the store's message events (see package hook):
	// every send, stored record, retry, death, re-drive and transaction
	// decision, and every delivery of every consumer (before the
	// consumer's own ConsumerOptions.Hooks). A hook that panics is
	// recovered, logged and counted in Stats.HookPanics. Unset: no cost.
	Hooks Hooks
	// MessageTrace records each message's life (sent, stored, delivered
	// to a group's member, consumed or failed, retried, dead-lettered,
	// re-driven, transaction decided) in the system topic TraceTopic,
	// for Store.Trace and `mqlite trace`. Each step is one more small
	// record in the CommitLog (a send and a consumption: four); the
	// records age out with retention like any topic's. Off by default.
	MessageTrace bool
}

// Default sizes of a store's files, chosen so that a small store takes
// well under 100 MB of disk (see Options.SegmentSize and IndexSlots).
const (
	DefaultSegmentSize  = 32 << 20
	DefaultIndexSlots   = 1 << 16
	DefaultIndexEntries = 1 << 18
)

const defaultMemSegment = 64 << 20

// withDefaults copies o, fills defaults and validates everything at once.
func (o *Options) withDefaults() (Options, error) {
	var c Options
	if o != nil {
		c = *o
	}
	var problems []error
	if c.FS != nil && c.InMemory {
		problems = append(problems, errors.New("FS with InMemory: InMemory is a fresh in-memory FS, set one or the other"))
	}
	if c.ReadOnly && c.InMemory {
		problems = append(problems, errors.New("ReadOnly with InMemory: a new in-memory store has nothing to read"))
	}
	if c.Flush != FlushAsync && c.Flush != FlushSync {
		problems = append(problems, fmt.Errorf("unknown Flush mode %d", int(c.Flush)))
	}
	if c.SegmentSize == 0 {
		c.SegmentSize = DefaultSegmentSize
		if c.InMemory {
			c.SegmentSize = defaultMemSegment
		}
	}
	if c.SegmentSize < commitlog.MinSegmentSize {
		problems = append(problems, fmt.Errorf("SegmentSize %d below %d", c.SegmentSize, commitlog.MinSegmentSize))
	}
	if c.MaxMessageSize == 0 {
		c.MaxMessageSize = message.DefaultMaxBody
	}
	if c.MaxMessageSize < 0 {
		problems = append(problems, fmt.Errorf("negative MaxMessageSize %d", c.MaxMessageSize))
	}
	for name, d := range map[string]*time.Duration{"SyncFlushTimeout": &c.SyncFlushTimeout, "FlushInterval": &c.FlushInterval,
		"FlushThoroughInterval": &c.FlushThoroughInterval, "CheckpointInterval": &c.CheckpointInterval} {
		if *d < 0 {
			problems = append(problems, fmt.Errorf("negative %s %s", name, *d))
		}
	}
	if c.SyncFlushTimeout == 0 {
		c.SyncFlushTimeout = 5 * time.Second
	}
	if c.InMemory && c.IndexSlots == 0 && c.IndexEntries == 0 {
		c.IndexSlots, c.IndexEntries = 1<<14, 1<<16
	}
	if c.IndexSlots == 0 {
		c.IndexSlots = DefaultIndexSlots
	}
	if c.IndexEntries == 0 {
		c.IndexEntries = DefaultIndexEntries
	}
	if c.InMemory && c.ConsumeQueueEntries == 0 {
		c.ConsumeQueueEntries = 1 << 14
	}
	if c.DelayLevels == nil {
		c.DelayLevels = DefaultDelayLevels
	}
	c.DelayLevels = slices.Clone(c.DelayLevels)
	if len(c.DelayLevels) == 0 || len(c.DelayLevels) > delay.MaxLevels {
		problems = append(problems, fmt.Errorf("%d DelayLevels, want 1..%d", len(c.DelayLevels), delay.MaxLevels))
	}
	for i, d := range c.DelayLevels {
		if d <= 0 {
			problems = append(problems, fmt.Errorf("DelayLevels[%d] = %s, want > 0", i, d))
		}
	}
	if c.DiskMaxUsedRatio == 0 {
		c.DiskMaxUsedRatio = DefaultDiskMaxUsedRatio
	}
	if c.DiskFullPolicy != DiskFullReject && c.DiskFullPolicy != DiskFullDeleteOldest {
		problems = append(problems, fmt.Errorf("unknown DiskFullPolicy %d", int(c.DiskFullPolicy)))
	}
	if c.DiskMaxUsedRatio < 0 || c.DiskMaxUsedRatio > 1 {
		problems = append(problems, fmt.Errorf("DiskMaxUsedRatio %g outside (0, 1]", c.DiskMaxUsedRatio))
	}
	if c.FlowControlThreshold == 0 {
		c.FlowControlThreshold = time.Second
	}
	if c.DedupWindow == 0 {
		c.DedupWindow = DefaultDedupWindow
	}
	if c.DedupMaxIDs == 0 {
		c.DedupMaxIDs = DefaultDedupMaxIDs
	}
	if c.DedupMaxIDs < 0 {
		problems = append(problems, fmt.Errorf("negative DedupMaxIDs %d", c.DedupMaxIDs))
	}
	if c.StatsInterval == 0 {
		c.StatsInterval = 10 * time.Second
	}
	if c.StatsInterval < 0 {
		problems = append(problems, fmt.Errorf("negative StatsInterval %s", c.StatsInterval))
	}
	if c.Retention == 0 {
		c.Retention = DefaultRetention
	}
	switch c.DeleteHour {
	case 0:
		c.DeleteHour = DefaultDeleteHour
	case 24:
		c.DeleteHour = 0
	}
	if c.DeleteHour < 0 || c.DeleteHour > 23 {
		problems = append(problems, fmt.Errorf("DeleteHour %d outside 1..24", c.DeleteHour))
	}
	if c.CleanRatio == 0 {
		c.CleanRatio = DefaultCleanRatio
	}
	if c.ForceCleanRatio == 0 {
		c.ForceCleanRatio = DefaultForceCleanRatio
	}
	if c.CleanRatio < 0 || c.CleanRatio > 1 || c.ForceCleanRatio < 0 || c.ForceCleanRatio > 1 {
		problems = append(problems, fmt.Errorf("CleanRatio %g or ForceCleanRatio %g outside (0, 1]", c.CleanRatio, c.ForceCleanRatio))
	}
	if c.MaxStoreBytes < 0 {
		problems = append(problems, fmt.Errorf("negative MaxStoreBytes %d", c.MaxStoreBytes))
	}
	if c.MaxDispatchLag < 0 {
		problems = append(problems, fmt.Errorf("negative MaxDispatchLag %d", c.MaxDispatchLag))
	}
	if c.DefaultTopicQueues == 0 {
		c.DefaultTopicQueues = topic.DefaultQueues
	}
	if c.DefaultTopicQueues < 0 || c.DefaultTopicQueues > topic.MaxQueues {
		problems = append(problems, fmt.Errorf("DefaultTopicQueues %d outside 1..%d", c.DefaultTopicQueues, topic.MaxQueues))
	}
	if c.CheckpointInterval == 0 {
		c.CheckpointInterval = time.Second
	}
	if c.FileMode == 0 {
		c.FileMode = vfs.DefaultFileMode
	}
	if c.FileMode&^os.ModePerm != 0 || c.FileMode&0o600 != 0o600 {
		problems = append(problems, fmt.Errorf("FileMode %v: want permission bits only, with owner read and write", c.FileMode))
	}
	problems = append(problems, c.Replication.fill(c.Role, c.ReadOnly)...)
	if _, fake := c.Clock.(*clock.Fake); c.Stepped && !fake {
		problems = append(problems, fmt.Errorf("option Stepped needs a *clock.Fake as Clock (got %T): on a running clock nothing would step the work due", c.Clock))
	}
	if c.Clock == nil {
		c.Clock = clock.Real
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if len(problems) > 0 {
		return c, fmt.Errorf("mqlite: bad options: %w: %w", errs.ErrInvalidArgument, errors.Join(problems...))
	}
	return c, nil
}

// fileSystem is the file seam Open runs on: Options.FS, a fresh MemFS for
// InMemory, else the OS. (FS with InMemory is refused by withDefaults.)
func (o *Options) fileSystem() vfs.FS {
	switch {
	case o == nil:
		return vfs.OS
	case o.FS != nil:
		return o.FS
	case o.InMemory:
		return vfs.NewMem()
	}
	return vfs.OS
}

// maxRecordSize is the CommitLog record limit implied by the body limit.
func (o *Options) maxRecordSize() int {
	return int(min(int64(o.MaxMessageSize)+64<<10+commitlog.FrameSize, o.SegmentSize-commitlog.BlankSize))
}
