package bench

import (
	"context"
	"fmt"
	"sync"

	"github.com/tidwall/wal"
)

// The tidwall/wal adapter: a segmented log used as a queue. Indexes must
// be consecutive, so producers take a mutex to assign them; the consumer
// reads by index and is woken after each write.

type walSystem struct{}

func (walSystem) Name() string { return "wal" }

func (walSystem) Durability(p Params) string {
	call := "Write per message"
	if p.Batch > 1 {
		call = fmt.Sprintf("WriteBatch of %d", p.Batch)
	}
	if p.Sync {
		return "NoSync false (fsync per write, no group commit); " + call + "; 20 MB segments"
	}
	return "NoSync true; " + call + "; 20 MB segments"
}

func (walSystem) Open(p Params) (Queue, error) {
	opts := *wal.DefaultOptions
	opts.NoSync = !p.Sync
	l, err := wal.Open(p.Dir, &opts)
	if err != nil {
		return nil, err
	}
	last, err := l.LastIndex()
	if err != nil {
		l.Close()
		return nil, err
	}
	return &walQueue{l: l, last: last}, nil
}

type walQueue struct {
	mu    sync.Mutex // assigns indexes; wal.Log has its own lock too
	l     *wal.Log
	last  uint64
	batch wal.Batch
	n     notifier
}

func (q *walQueue) Send(_ int, bodies [][]byte) error {
	q.mu.Lock()
	var err error
	if len(bodies) == 1 {
		err = q.l.Write(q.last+1, bodies[0])
		if err == nil {
			q.last++
		}
	} else {
		q.batch.Clear()
		for i, b := range bodies {
			q.batch.Write(q.last+1+uint64(i), b)
		}
		err = q.l.WriteBatch(&q.batch)
		if err == nil {
			q.last += uint64(len(bodies))
		}
	}
	q.mu.Unlock()
	if err == nil {
		q.n.fire()
	}
	return err
}

func (q *walQueue) NewConsumer() (Consumer, error) {
	first, err := q.l.FirstIndex()
	if err != nil {
		return nil, err
	}
	return &walConsumer{q: q, next: max(first, 1)}, nil
}

func (q *walQueue) Close() error { return q.l.Close() }

type walConsumer struct {
	q    *walQueue
	next uint64
}

func (c *walConsumer) Next(ctx context.Context, dst [][]byte) ([][]byte, error) {
	for {
		wake := c.q.n.arm()
		last, err := c.q.l.LastIndex()
		if err != nil {
			return dst, err
		}
		if last >= c.next {
			for end := min(last, c.next+1023); c.next <= end; c.next++ {
				b, err := c.q.l.Read(c.next)
				if err != nil {
					return dst, err
				}
				dst = append(dst, b)
			}
			return dst, nil
		}
		if err := waitOr(ctx, wake); err != nil {
			return dst, err
		}
	}
}

func (c *walConsumer) Close() error { return nil }
