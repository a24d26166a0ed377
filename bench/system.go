package bench

import (
	"context"
	"fmt"
	"slices"
	"time"
)

// Params say how a system opens its store for one job.
type Params struct {
	Dir       string // an empty (or, on reopen, the same) directory the system owns
	Sync      bool   // durable before the ack: fsync (or a group commit) per send
	Producers int    // goroutines that will call Send concurrently
	Batch     int    // messages per Send call
	// SegmentSize is mqlite's CommitLog segment size; 0 means 1 GiB
	// (benchSegmentSize, mqlite's default before issue 35). Other systems
	// ignore it.
	SegmentSize int64
	// Reader is what a consumer reads with, for systems that have more
	// than one way (mqlite: ReaderPush, ReaderPull, ReaderReadQueue); ""
	// means the system's only (or first) one.
	Reader string
}

// The readers of mqlite's consume rows: its push and pull consumers with
// default options (but for starting at the first offset), and the raw
// ReadQueue.
const (
	ReaderPush      = "push"
	ReaderPull      = "pull"
	ReaderReadQueue = "readqueue"
	// ReaderUncommitted is mqlite's second sync latency row: the store
	// opened with Options.ReadUncommitted, so that a reader sees a
	// record once written while the send still returns after its sync,
	// as Pebble's readers see a batch before its WAL sync ends.
	ReaderUncommitted = "read-uncommitted"
	// ReaderDecodeFloor is a probe, not a reader of the store: it decodes
	// raw records held in memory into one MessageExt each, as the API
	// hands them out, with no store and no consumer around it (see
	// decodeFloor): the cost every mqlite consume row pays at least.
	ReaderDecodeFloor = "decode-floor"
	// ReaderDecodeFloorParallel is the decode floor on GOMAXPROCS
	// goroutines (see decodeFloorParallel).
	ReaderDecodeFloorParallel = "decode-floor-parallel"
)

// Readers lists the readers a system's consume rows run with, one row
// each; nil for a system with one way to read.
func Readers(system string) []string {
	if system == "mqlite" {
		return []string{ReaderPush, ReaderPull, ReaderReadQueue, ReaderDecodeFloor, ReaderDecodeFloorParallel}
	}
	return nil
}

// System is one message store under test.
type System interface {
	// Name is the short name used in flags and tables.
	Name() string
	// Durability states, for the table, what an ack means under p.
	Durability(p Params) string
	// Open opens (or reopens) the store in p.Dir.
	Open(p Params) (Queue, error)
}

// Queue is an open store used as a queue. Send may be called by
// p.Producers goroutines at once, each with its own producer number.
type Queue interface {
	// Send stores bodies (one batch) and returns once the system
	// acknowledges them under the durability it was opened with. The
	// bodies must not be modified until Send returns.
	Send(producer int, bodies [][]byte) error
	// NewConsumer reads the queue from its first message (mqlite: queue
	// 0, the queue of producer 0).
	NewConsumer() (Consumer, error)
	// Close releases everything; it may flush.
	Close() error
}

// SyncCounter is implemented by queues that count their syncs (mqlite's
// CommitLog flushes): the produce rows then report messages per sync,
// which shows whether concurrent durable sends share them.
type SyncCounter interface {
	// Syncs is the number of syncs the queue made since it opened.
	Syncs() int64
}

// Pipeliner is implemented by queues whose natural async send returns
// before the ack arrives (JetStream's PublishAsync). The runner uses it for
// async, one-message sends; the queue records each ack's latency into h
// itself, from the time SendAsync was called.
type Pipeliner interface {
	// SendAsync sends body without waiting for its ack. body must stay
	// unmodified until Drain returns.
	SendAsync(producer int, body []byte, h *Hist) error
	// Drain waits until every message sent so far is acknowledged and
	// returns the first send error.
	Drain() error
}

// Counter is implemented by consumers that deliver through a callback
// (mqlite's push consumer): the consume row then counts what arrives
// instead of calling Next.
type Counter interface {
	// Count waits until n messages have arrived (or ctx ends, or
	// delivery fails) and returns the messages and body bytes counted.
	Count(ctx context.Context, n int64) (msgs, bytes int64, err error)
}

// Consumer reads a queue in order.
type Consumer interface {
	// Next appends the next available messages (at least one) to dst and
	// returns it, waiting until one is there or ctx ends. The appended
	// bodies belong to the caller.
	Next(ctx context.Context, dst [][]byte) ([][]byte, error)
	// Close stops the consumer.
	Close() error
}

// Systems lists every adapter, mqlite first (it is the baseline of the
// ratio column).
func Systems() []System {
	return []System{mqliteSystem{}, jetStreamSystem{}, boltSystem{}, walSystem{}, pebbleSystem{}}
}

// SystemNames lists the names of Systems in order.
func SystemNames() []string {
	var names []string
	for _, s := range Systems() {
		names = append(names, s.Name())
	}
	return names
}

// LookupSystem returns the system called name.
func LookupSystem(name string) (System, error) {
	for _, s := range Systems() {
		if s.Name() == name {
			return s, nil
		}
	}
	return nil, fmt.Errorf("bench: unknown system %q (have %v)", name, SystemNames())
}

// validSystems reports the names in list that are not systems.
func validSystems(list []string) error {
	names := SystemNames()
	for _, n := range list {
		if !slices.Contains(names, n) {
			return fmt.Errorf("bench: unknown system %q (have %v)", n, names)
		}
	}
	return nil
}

// waitOr waits for ch, ctx or a backstop timeout (a guard against a lost
// wake-up; never hit in a correct run) and returns ctx's error if it ended.
func waitOr(ctx context.Context, ch <-chan struct{}) error {
	t := time.NewTimer(100 * time.Millisecond)
	defer t.Stop()
	select {
	case <-ch:
	case <-t.C:
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}
