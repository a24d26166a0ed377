package bench

import (
	"context"
	"errors"
	"fmt"

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
		call = fmt.Sprintf("PutBatch of %d", p.Batch)
	}
	if p.Sync {
		return fmt.Sprintf("FlushSync (group commit, fdatasync before ack); %s; %s", call, seg)
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
	return openMqlite(p, mqliteOptions(mode, p.SegmentSize))
}

// openMqlite opens the store of p with o.
func openMqlite(p Params, o *mqlite.Options) (Queue, error) {
	s, err := mqlite.Open(p.Dir, o)
	if err != nil {
		return nil, err
	}
	// One queue per producer; created up front so that a consumer can
	// wait on an empty queue.
	err = s.CreateTopic(mqliteTopic, mqlite.TopicConfig{Queues: max(p.Producers, 16)})
	if err != nil && !errors.Is(err, mqlite.ErrTopicExists) {
		s.Close()
		return nil, err
	}
	q := &mqliteQueue{s: s, msgs: make([][]*mqlite.Message, max(p.Producers, 1))}
	for i := range q.msgs {
		q.msgs[i] = make([]*mqlite.Message, max(p.Batch, 1))
		for j := range q.msgs[i] {
			q.msgs[i][j] = &mqlite.Message{Topic: mqliteTopic}
		}
	}
	return q, nil
}

type mqliteQueue struct {
	s    *mqlite.Store
	msgs [][]*mqlite.Message // per producer, reused across sends
}

func (q *mqliteQueue) Send(producer int, bodies [][]byte) error {
	ms := q.msgs[producer][:len(bodies)]
	for i, b := range bodies {
		ms[i].Body = b
	}
	var err error
	if len(ms) == 1 {
		_, err = q.s.Put(context.Background(), ms[0], producer)
	} else {
		_, err = q.s.PutBatch(context.Background(), ms, producer)
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

func (q *mqliteQueue) NewConsumer() (Consumer, error) { return &mqliteConsumer{s: q.s}, nil }

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
