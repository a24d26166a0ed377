// Command storage builds a tiny broker core on mqlite's storage packages
// alone, without the root package: records of its own format appended to
// a commitlog.Log, a consumequeue.Queue per topic pointing into it, and an
// indexfile.Index for lookups by key. It then reopens everything, as after
// a restart, rebuilds the queue entries the log holds beyond the queue's
// end (what a dispatcher does after a crash), and reads back by queue
// offset and by key.
//
//	go run ./examples/storage
package main

import (
	"encoding/binary"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/mqlite/mqlite/commitlog"
	"github.com/mqlite/mqlite/consumequeue"
	"github.com/mqlite/mqlite/indexfile"
)

// record is this broker's payload format: a key and a body, each behind a
// uint16 length. The commitlog owns the frame around it (size, magic,
// CRC32-C, the record's own offset).
type record struct{ key, body []byte }

func (r *record) PayloadSize() int { return 4 + len(r.key) + len(r.body) }

// EncodePayload writes the payload in place, in the mapped segment, under
// the log's append lock.
func (r *record) EncodePayload(dst []byte, phys int64) {
	binary.LittleEndian.PutUint16(dst, uint16(len(r.key)))
	n := 2 + copy(dst[2:], r.key)
	binary.LittleEndian.PutUint16(dst[n:], uint16(len(r.body)))
	copy(dst[n+2:], r.body)
}

func decode(p []byte) (key, body []byte) {
	k := int(binary.LittleEndian.Uint16(p))
	key = p[2 : 2+k]
	b := int(binary.LittleEndian.Uint16(p[2+k:]))
	return key, p[4+k : 4+k+b]
}

type broker struct {
	log *commitlog.Log
	cq  *consumequeue.Queue
	idx *indexfile.Index
}

func open(dir string) (*broker, error) {
	l, err := commitlog.Open(commitlog.Options{Dir: filepath.Join(dir, "commitlog"), SegmentSize: 1 << 20})
	if err != nil {
		return nil, err
	}
	rep := l.Report()
	fmt.Printf("commitlog: records end at %d (validated from %d, %d torn bytes dropped)\n", rep.End, rep.Start, rep.TruncatedBytes)
	cq, err := consumequeue.Open(consumequeue.Options{Dir: filepath.Join(dir, "queue", "orders", "0"), EntriesPerFile: 1024})
	if err != nil {
		l.Close()
		return nil, err
	}
	idx, err := indexfile.Open(indexfile.Options{Dir: filepath.Join(dir, "index"), Slots: 1024, Entries: 4096})
	if err != nil {
		cq.Close()
		l.Close()
		return nil, err
	}
	return &broker{l, cq, idx}, nil
}

// put appends a record to the log only, as a sender does; dispatch adds
// it to the queue and the index later.
func (b *broker) put(key, body string) (int64, error) {
	return b.log.Append(&record{[]byte(key), []byte(body)})
}

// dispatch brings the queue and the index up to the end of the log,
// from the end of what the queue holds: after a restart this finds the
// records a crash left out of them.
func (b *broker) dispatch() error {
	from := max(b.cq.MaxPhysEnd(), b.log.MinOffset())
	_, err := b.log.Scan(from, b.log.WrotePosition(), true, func(r commitlog.Record) error {
		key, _ := decode(r.Payload)
		if err := b.cq.Append(b.cq.MaxOffset(), consumequeue.Entry{Offset: r.Offset, Size: int32(r.Size)}); err != nil {
			return err
		}
		return b.idx.Put(string(key), r.Offset, time.Now().UnixMilli())
	})
	return err
}

func (b *broker) close() error {
	err := b.cq.Close()
	if e := b.idx.Close(); err == nil {
		err = e
	}
	if e := b.log.Close(); err == nil {
		err = e
	}
	return err
}

func main() {
	dir, err := os.MkdirTemp("", "mqlite-storage-")
	check(err)
	defer os.RemoveAll(dir)

	b, err := open(dir)
	check(err)
	for i := range 5 {
		off, err := b.put(fmt.Sprintf("order-%d", i), fmt.Sprintf("order %d created", i))
		check(err)
		fmt.Printf("appended order-%d at commitlog offset %d\n", i, off)
	}
	check(b.dispatch())
	// Two more records reach the log but not the queue: as if the process
	// stopped before its dispatcher ran.
	for _, k := range []string{"order-5", "order-6"} {
		_, err := b.put(k, k+" created")
		check(err)
	}
	_, err = b.log.Flush() // durable now (Close flushes too)
	check(err)
	check(b.close())

	b, err = open(dir)
	check(err)
	defer b.close()
	fmt.Printf("queue before dispatch: %d entries\n", b.cq.MaxOffset())
	check(b.dispatch())
	fmt.Printf("queue after dispatch:  %d entries\n", b.cq.MaxOffset())

	e, err := b.cq.Get(6)
	check(err)
	check(b.log.Read(e.Offset, func(r commitlog.Record) error {
		_, body := decode(r.Payload)
		fmt.Printf("queue offset 6 -> commitlog %d: %s\n", e.Offset, body)
		return nil
	}))
	offs, err := b.idx.Query("order-3", 0, time.Now().Add(time.Minute).UnixMilli(), 4)
	check(err)
	for _, off := range offs {
		check(b.log.Read(off, func(r commitlog.Record) error {
			key, body := decode(r.Payload)
			if string(key) == "order-3" { // hashes may collide: check the key
				fmt.Printf("key order-3 -> commitlog %d: %s\n", off, body)
			}
			return nil
		}))
	}
}

func check(err error) {
	if err != nil {
		log.Fatal(err)
	}
}
