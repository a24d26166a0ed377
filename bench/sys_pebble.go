package bench

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync/atomic"

	"github.com/cockroachdb/pebble"
)

// The Pebble adapter: a keyspace used as a queue, keys an 8-byte
// big-endian sequence taken from an atomic counter, values the bodies;
// the consumer iterates from its next key and is woken after each commit.
// Default options (4 MiB memtable, snappy blocks) except a silent logger.

type pebbleSystem struct{}

func (pebbleSystem) Name() string { return "pebble" }

func (pebbleSystem) Durability(p Params) string {
	call := "Set per message"
	if p.Batch > 1 {
		call = fmt.Sprintf("Batch of %d", p.Batch)
	}
	if p.Sync {
		return "pebble.Sync (WAL fsync before ack; concurrent commits share syncs); " + call
	}
	return "pebble.NoSync (WAL written, not synced); " + call
}

type quietLogger struct{}

func (quietLogger) Infof(string, ...any) {}
func (quietLogger) Fatalf(format string, args ...any) {
	panic(fmt.Sprintf(format, args...))
}

func (pebbleSystem) Open(p Params) (Queue, error) {
	db, err := pebble.Open(p.Dir, &pebble.Options{Logger: quietLogger{}})
	if err != nil {
		return nil, err
	}
	q := &pebbleQueue{db: db, wo: pebble.NoSync}
	if p.Sync {
		q.wo = pebble.Sync
	}
	// Resume the sequence after the last key (reopen for consume).
	it, err := db.NewIter(nil)
	if err != nil {
		db.Close()
		return nil, err
	}
	if it.Last() {
		q.seq.Store(binary.BigEndian.Uint64(it.Key()))
	}
	if err := it.Close(); err != nil {
		db.Close()
		return nil, err
	}
	return q, nil
}

type pebbleQueue struct {
	db  *pebble.DB
	wo  *pebble.WriteOptions
	seq atomic.Uint64 // last key handed out
	n   notifier
}

func (q *pebbleQueue) Send(_ int, bodies [][]byte) error {
	var err error
	if len(bodies) == 1 {
		err = q.db.Set(boltKey(q.seq.Add(1)), bodies[0], q.wo)
	} else {
		b := q.db.NewBatch()
		first := q.seq.Add(uint64(len(bodies))) - uint64(len(bodies)) + 1
		var k [8]byte
		for i, body := range bodies {
			binary.BigEndian.PutUint64(k[:], first+uint64(i))
			if err = b.Set(k[:], body, nil); err != nil {
				b.Close()
				return err
			}
		}
		err = b.Commit(q.wo)
		if cerr := b.Close(); err == nil {
			err = cerr
		}
	}
	if err == nil {
		q.n.fire()
	}
	return err
}

func (q *pebbleQueue) NewConsumer() (Consumer, error) { return &pebbleConsumer{q: q, next: 1}, nil }

func (q *pebbleQueue) Close() error { return q.db.Close() }

type pebbleConsumer struct {
	q    *pebbleQueue
	next uint64
}

func (c *pebbleConsumer) Next(ctx context.Context, dst [][]byte) ([][]byte, error) {
	for {
		wake := c.q.n.arm()
		n0 := len(dst)
		it, err := c.q.db.NewIter(&pebble.IterOptions{LowerBound: boltKey(c.next)})
		if err != nil {
			return dst, err
		}
		for ok := it.First(); ok && len(dst)-n0 < 1024; ok = it.Next() {
			dst = append(dst, append([]byte(nil), it.Value()...))
			c.next = binary.BigEndian.Uint64(it.Key()) + 1
		}
		if err := it.Close(); err != nil || len(dst) > n0 {
			return dst, err
		}
		if err := waitOr(ctx, wake); err != nil {
			return dst, err
		}
	}
}

func (c *pebbleConsumer) Close() error { return nil }
