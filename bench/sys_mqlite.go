package bench

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/mqlite/mqlite"
)

// The mqlite adapter: the only file that drives mqlite's send and read
// API (recovery.go opens stores for the crash test). Producer p sends to
// queue p; consumers read queue 0.

const mqliteTopic = "bench"

type mqliteSystem struct{}

func (mqliteSystem) Name() string { return "mqlite" }

func (mqliteSystem) Durability(p Params) string {
	seg := "1 GiB segments"
	if p.SegmentSize > 0 {
		seg = fmt.Sprintf("%d MiB segments", p.SegmentSize>>20)
	}
	call := "Put per message"
	if p.Batch > 1 {
		call = fmt.Sprintf("PutBatchInto of %d (results reused)", p.Batch)
	}
	if p.Sync && p.Reader == ReaderUncommitted {
		return fmt.Sprintf("FlushSync (group commit, fdatasync before ack; readers see records before their sync: ReadUncommitted); %s; %s", call, seg)
	}
	if p.Sync {
		return fmt.Sprintf("FlushSync (group commit, fdatasync before ack); %s; %s", call, seg)
	}
	if spreads(p.Reader) {
		call += fmt.Sprintf(", each to the next of %d queues", benchQueues)
	}
	return fmt.Sprintf("FlushAsync (mapped page cache; flush every 500 ms); %s; %s", call, seg)
}

// The file sizes the figures were measured with, set explicitly so that
// they stay comparable whatever mqlite's defaults are: until issue 35 its
// defaults were 1 GiB segments, 300,000-entry ConsumeQueue files and
// IndexFiles of 1<<20 slots and 4,000,000 entries (RocketMQ's sizes,
// except the IndexFile's); since then they are 32 MiB, 65,536 and
// 1<<16/1<<18, sized for a small embedded store.
const (
	benchSegmentSize  = 1 << 30 // when Params.SegmentSize is 0
	benchQueueEntries = 300_000
	benchIndexSlots   = 1 << 20
	benchIndexEntries = 4_000_000
)

// mqliteOptions are the options of every mqlite store the harness opens.
func mqliteOptions(mode mqlite.FlushMode, segmentSize int64) *mqlite.Options {
	if segmentSize == 0 {
		segmentSize = benchSegmentSize
	}
	return &mqlite.Options{Flush: mode, SegmentSize: segmentSize, ConsumeQueueEntries: benchQueueEntries,
		IndexSlots: benchIndexSlots, IndexEntries: benchIndexEntries}
}

func (mqliteSystem) Open(p Params) (Queue, error) {
	mode := mqlite.FlushAsync
	if p.Sync {
		mode = mqlite.FlushSync
	}
	o := mqliteOptions(mode, p.SegmentSize)
	o.ReadUncommitted = p.Reader == ReaderUncommitted
	return openMqlite(p, o)
}

// openMqlite opens the store of p with o.
func openMqlite(p Params, o *mqlite.Options) (Queue, error) {
	s, err := mqlite.Open(p.Dir, o)
	if err != nil {
		return nil, err
	}
	// One queue per producer; created up front so that a consumer can
	// wait on an empty queue.
	err = s.CreateTopic(mqliteTopic, mqlite.TopicConfig{Queues: max(p.Producers, benchQueues)})
	if err != nil && !errors.Is(err, mqlite.ErrTopicExists) {
		s.Close()
		return nil, err
	}
	q := &mqliteQueue{s: s, reader: p.Reader, queues: max(p.Producers, benchQueues), msgs: make([][]*mqlite.Message, max(p.Producers, 1)),
		results: make([][]mqlite.PutResult, max(p.Producers, 1))}
	for i := range q.msgs {
		q.msgs[i] = make([]*mqlite.Message, max(p.Batch, 1))
		for j := range q.msgs[i] {
			q.msgs[i][j] = &mqlite.Message{Topic: mqliteTopic}
		}
	}
	if p.Reader == ReaderDecodeFloor || p.Reader == ReaderDecodeFloorParallel { // untimed: Open comes before the clock starts
		if q.floor, err = loadDecodeFloor(s); err != nil {
			s.Close()
			return nil, err
		}
	}
	return q, nil
}

type mqliteQueue struct {
	s      *mqlite.Store
	floor  *decodeFloor        // the decode floors' records, loaded by Open
	reader string              // Params.Reader: what NewConsumer returns
	queues int                 // the topic's
	spread int                 // spreads: the queue of the next Send
	msgs   [][]*mqlite.Message // per producer, reused across sends
	// results are each producer's last batch results, passed back to
	// PutBatchInto, so that a batch allocates no results.
	results [][]mqlite.PutResult
}

// benchQueues is the number of queues of the harness's topic (at least:
// one per producer).
const benchQueues = 16

// spreads says whether a backlog for the reader is written as mqlite's
// Producer writes one by default: each send (a batch, in the backlog) to
// the next of the topic's queues, which a consumer group then reads on
// as many fetchers. The ReadQueue row and the decode floor read queue 0
// alone, so their backlog stays there.
func spreads(reader string) bool { return reader == ReaderPush || reader == ReaderPull }

// Send puts bodies into the producer's own queue, or for a consumer
// group's row (spreads) into the next queue.
func (q *mqliteQueue) Send(producer int, bodies [][]byte) error {
	ms := q.msgs[producer][:len(bodies)]
	for i, b := range bodies {
		ms[i].Body = b
	}
	queue := producer
	if spreads(q.reader) {
		queue, q.spread = q.spread, (q.spread+1)%q.queues
	}
	var err error
	if len(ms) == 1 {
		_, err = q.s.Put(context.Background(), ms[0], queue)
	} else {
		q.results[producer], err = q.s.PutBatchInto(context.Background(), ms, queue, q.results[producer])
	}
	return err
}

// Syncs counts CommitLog flushes (with FlushSync, one per group commit).
func (q *mqliteQueue) Syncs() int64 {
	st, err := q.s.Stats()
	if err != nil {
		return 0
	}
	return st.Throughput.Flushes
}

// NewConsumer reads with the reader of the queue's Params: ReadQueue of
// queue 0, or a push or pull consumer of the whole topic (its backlog
// spread over the queues) with default options but for starting at the
// first offset.
func (q *mqliteQueue) NewConsumer() (Consumer, error) {
	switch q.reader {
	case ReaderPush:
		return newMqlitePush(q.s)
	case ReaderPull:
		return newMqlitePull(q.s)
	case ReaderDecodeFloor, ReaderDecodeFloorParallel:
		if q.floor == nil {
			return nil, errors.New("decode floor: no records were loaded (empty queue 0)")
		}
		if q.reader == ReaderDecodeFloorParallel {
			return decodeFloorParallel{q.floor}, nil
		}
		return q.floor, nil
	}
	return &mqliteConsumer{s: q.s}, nil
}

func (q *mqliteQueue) Close() error { return q.s.Close() }

type mqliteConsumer struct {
	s    *mqlite.Store
	next int64
}

func (c *mqliteConsumer) Next(ctx context.Context, dst [][]byte) ([][]byte, error) {
	ms, err := c.s.ReadQueue(ctx, mqliteTopic, 0, c.next, 1024)
	for _, m := range ms {
		dst = append(dst, m.Body)
	}
	c.next += int64(len(ms))
	return dst, err
}

func (c *mqliteConsumer) Close() error { return nil }

// benchGroup is the consumer group of the push and pull rows.
const benchGroup = "bench"

// consumerOptions are the defaults, starting at the first offset (the
// default, the last offset, would skip the backlog).
func consumerOptions() mqlite.ConsumerOptions {
	return mqlite.ConsumerOptions{ConsumeFromWhere: mqlite.ConsumeFromFirstOffset}
}

// mqlitePull reads with a pull consumer, Poll of PullBatchSize (32).
type mqlitePull struct{ c *mqlite.PullConsumer }

func newMqlitePull(s *mqlite.Store) (Consumer, error) {
	c, err := s.NewPullConsumer(benchGroup, consumerOptions())
	if err != nil {
		return nil, err
	}
	if err := c.Subscribe(mqliteTopic, nil); err != nil {
		return nil, errors.Join(err, c.Close())
	}
	return &mqlitePull{c: c}, nil
}

func (c *mqlitePull) Next(ctx context.Context, dst [][]byte) ([][]byte, error) {
	ms, err := c.c.Poll(ctx, 32)
	for _, m := range ms {
		dst = append(dst, m.Body)
	}
	return dst, err
}

func (c *mqlitePull) Close() error { return c.c.Close() }

// mqlitePush reads with a push consumer whose handler counts the messages
// and their body bytes (a Counter: the consume row calls Count, not Next).
type mqlitePush struct {
	c           *mqlite.PushConsumer
	msgs, bytes atomic.Int64
	target      atomic.Int64  // Count's n; the handler closes reached at it
	reached     chan struct{} // closed once msgs reaches target
	once        sync.Once
	startErr    error
	// For Next: the bodies not yet taken, in arrival order (not queue
	// order: 20 handler goroutines), and a wake-up for a waiting Next.
	mu     sync.Mutex
	held   [][]byte
	arrive chan struct{}
}

func newMqlitePush(s *mqlite.Store) (Consumer, error) {
	c, err := s.NewPushConsumer(benchGroup, consumerOptions())
	if err != nil {
		return nil, err
	}
	if err := c.Subscribe(mqliteTopic, nil); err != nil {
		return nil, errors.Join(err, c.Close())
	}
	p := &mqlitePush{c: c, reached: make(chan struct{}), arrive: make(chan struct{}, 1)}
	p.target.Store(-1)
	return p, nil
}

// start starts the handler once: counting only (Count), or also keeping
// each body for Next.
func (c *mqlitePush) start(keep bool) error {
	c.once.Do(func() {
		c.startErr = c.c.Start(func(_ context.Context, ms []*mqlite.MessageExt) mqlite.ConsumeResult {
			var b int64
			for _, m := range ms {
				b += int64(len(m.Body))
			}
			if keep {
				c.mu.Lock()
				for _, m := range ms {
					c.held = append(c.held, m.Body)
				}
				c.mu.Unlock()
				select {
				case c.arrive <- struct{}{}:
				default:
				}
			}
			c.bytes.Add(b)
			n, t := c.msgs.Add(int64(len(ms))), c.target.Load()
			if t >= 0 && n >= t && n-int64(len(ms)) < t { // this call passed the target
				close(c.reached)
			}
			return mqlite.ConsumeSuccess
		})
	})
	return c.startErr
}

// Count starts the consumer and waits until n messages have arrived.
func (c *mqlitePush) Count(ctx context.Context, n int64) (msgs, bytes int64, err error) {
	c.target.Store(n)
	if err := c.start(false); err != nil {
		return 0, 0, err
	}
	select {
	case <-c.reached:
	case <-ctx.Done():
		err = ctx.Err()
	}
	return c.msgs.Load(), c.bytes.Load(), err
}

// Next returns the bodies that arrived since the last call, waiting for
// one (arrival order, not queue order).
func (c *mqlitePush) Next(ctx context.Context, dst [][]byte) ([][]byte, error) {
	if err := c.start(true); err != nil {
		return dst, err
	}
	for {
		c.mu.Lock()
		dst = append(dst, c.held...)
		clear(c.held)
		n := len(c.held)
		c.held = c.held[:0]
		c.mu.Unlock()
		if n > 0 {
			return dst, nil
		}
		select {
		case <-c.arrive:
		case <-ctx.Done():
			return dst, ctx.Err()
		}
	}
}

func (c *mqlitePush) Close() error { return c.c.Close() }
