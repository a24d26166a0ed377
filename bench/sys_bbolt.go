package bench

import (
	"context"
	"encoding/binary"
	"fmt"
	"path/filepath"

	bolt "go.etcd.io/bbolt"
)

// The bbolt adapter: a queue as many build it, one bucket keyed by the
// bucket's own sequence (8-byte big-endian), a consumer that walks a
// cursor and is woken after each commit.

var boltBucket = []byte("queue")

type boltSystem struct{}

func (boltSystem) Name() string { return "bbolt" }

func (boltSystem) Durability(p Params) string {
	switch {
	case p.Batch > 1 && p.Sync:
		return fmt.Sprintf("%d messages per Update tx, fsync per tx", p.Batch)
	case p.Batch > 1:
		return fmt.Sprintf("NoSync, %d messages per Update tx", p.Batch)
	case p.Sync && p.Producers > 1:
		return fmt.Sprintf("db.Batch (MaxBatchSize %d, MaxBatchDelay 10 ms), fsync per batch", p.Producers)
	case p.Sync:
		return "one Update tx per message, fsync per tx"
	}
	return "NoSync, one Update tx per message"
}

func (boltSystem) Open(p Params) (Queue, error) {
	db, err := bolt.Open(filepath.Join(p.Dir, "queue.db"), 0o600, &bolt.Options{NoSync: !p.Sync})
	if err != nil {
		return nil, err
	}
	if p.Producers > 1 {
		db.MaxBatchSize = p.Producers
	}
	err = db.Update(func(tx *bolt.Tx) error {
		_, err := tx.CreateBucketIfNotExists(boltBucket)
		return err
	})
	if err != nil {
		db.Close()
		return nil, err
	}
	return &boltQueue{db: db, group: p.Sync && p.Producers > 1 && p.Batch <= 1}, nil
}

type boltQueue struct {
	db    *bolt.DB
	group bool // sync with concurrent producers: db.Batch
	n     notifier
}

func boltKey(seq uint64) []byte { return binary.BigEndian.AppendUint64(nil, seq) }

func (q *boltQueue) Send(_ int, bodies [][]byte) error {
	put := func(tx *bolt.Tx) error {
		b := tx.Bucket(boltBucket)
		for _, body := range bodies {
			seq, err := b.NextSequence()
			if err != nil {
				return err
			}
			if err := b.Put(boltKey(seq), body); err != nil {
				return err
			}
		}
		return nil
	}
	var err error
	if q.group {
		err = q.db.Batch(put)
	} else {
		err = q.db.Update(put)
	}
	if err == nil {
		q.n.fire()
	}
	return err
}

func (q *boltQueue) NewConsumer() (Consumer, error) { return &boltConsumer{q: q, next: 1}, nil }

func (q *boltQueue) Close() error { return q.db.Close() }

type boltConsumer struct {
	q    *boltQueue
	next uint64
}

func (c *boltConsumer) Next(ctx context.Context, dst [][]byte) ([][]byte, error) {
	for {
		wake := c.q.n.arm()
		n0 := len(dst)
		err := c.q.db.View(func(tx *bolt.Tx) error {
			cur := tx.Bucket(boltBucket).Cursor()
			for k, v := cur.Seek(boltKey(c.next)); k != nil && len(dst)-n0 < 1024; k, v = cur.Next() {
				dst = append(dst, append([]byte(nil), v...))
				c.next = binary.BigEndian.Uint64(k) + 1
			}
			return nil
		})
		if err != nil || len(dst) > n0 {
			return dst, err
		}
		if err := waitOr(ctx, wake); err != nil {
			return dst, err
		}
	}
}

func (c *boltConsumer) Close() error { return nil }
