package mqlite

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"

	"github.com/mqlite/mqlite/consumequeue"
	"github.com/mqlite/mqlite/internal/errs"
	"github.com/mqlite/mqlite/vfs"
)

// The checkpoint file records how far the CommitLog is known durable, how
// far the derived indexes are built, and how many entries each queue held
// then, so recovery knows where to start and can tell a queue that lost
// files from one that never had them.
//
//	pos  size  field
//	  0     4  magic "MQCK"
//	  4     4  version (2)
//	  8     8  flushed: CommitLog durably flushed through here
//	 16     8  dispatched: ConsumeQueue and IndexFile built through here
//	 24     8  marksAt: the dispatched offset the marks were taken at
//	           (>= dispatched: Open lowers dispatched before it rebuilds)
//	 32     4  count of queue marks that follow
//	 36     4  reserved (0)
//	 40     …  queue marks, by topic then queue id, each:
//	              2  topic length, then the topic
//	              4  queue id
//	              8  entries: the queue's next offset at marksAt
//	  …     4  CRC32-C of every byte before it
//
// Version 1 (36 bytes: the first two offsets, 8 reserved bytes and the
// CRC over bytes [0, 32)) is read as a checkpoint without marks. It is
// replaced atomically (temp file, sync, rename, sync dir).
const (
	checkpointName    = "checkpoint"
	checkpointMagic   = 0x4B43514D // "MQCK" little-endian
	checkpointVersion = 2
	checkpointV1Size  = 36
	checkpointCountAt = 32
	checkpointHeader  = 40
)

type checkpoint struct {
	flushed    int64
	dispatched int64
	// marks holds each queue's entry count when dispatched was marksAt
	// (so every entry it counts points below marksAt); nil for a version
	// 1 file.
	marks   []queueMark
	marksAt int64
}

// queueMark is a queue's entry count (its next offset) in a checkpoint.
type queueMark struct {
	consumequeue.QueueID
	next int64
}

// same reports whether c and o record the same positions. The marks only
// move with dispatched, so they are not compared.
func (c checkpoint) same(o checkpoint) bool {
	return c.flushed == o.flushed && c.dispatched == o.dispatched
}

func (c checkpoint) encode() []byte {
	n := checkpointHeader + 4
	for _, m := range c.marks {
		n += 2 + len(m.Topic) + 4 + 8
	}
	b := make([]byte, checkpointHeader, n)
	le := binary.LittleEndian
	le.PutUint32(b[0:], checkpointMagic)
	le.PutUint32(b[4:], checkpointVersion)
	le.PutUint64(b[8:], uint64(c.flushed))
	le.PutUint64(b[16:], uint64(c.dispatched))
	le.PutUint64(b[24:], uint64(max(c.marksAt, c.dispatched))) // marks are taken at dispatched or before it was lowered
	le.PutUint32(b[checkpointCountAt:], uint32(len(c.marks)))
	for _, m := range c.marks {
		b = le.AppendUint16(b, uint16(len(m.Topic)))
		b = append(b, m.Topic...)
		b = le.AppendUint32(b, uint32(m.ID))
		b = le.AppendUint64(b, uint64(m.next))
	}
	return le.AppendUint32(b, crc32.Checksum(b, crcTable))
}

var crcTable = crc32.MakeTable(crc32.Castagnoli)

func decodeCheckpoint(path string, b []byte) (checkpoint, error) {
	le := binary.LittleEndian
	if len(b) < checkpointV1Size {
		return checkpoint{}, errs.Corrupt(path, 0, "checkpoint is %d bytes, want at least %d", len(b), checkpointV1Size)
	}
	if le.Uint32(b[0:]) != checkpointMagic {
		return checkpoint{}, errs.Corrupt(path, 0, "bad checkpoint magic")
	}
	v1 := le.Uint32(b[4:]) == 1 && len(b) == checkpointV1Size
	body := b[:len(b)-4]
	if v1 {
		body = b[:32]
	}
	if le.Uint32(b[len(b)-4:]) != crc32.Checksum(body, crcTable) {
		return checkpoint{}, errs.Corrupt(path, int64(len(b)-4), "checkpoint checksum mismatch")
	}
	switch v := le.Uint32(b[4:]); {
	case v1:
	case v == 1:
		return checkpoint{}, errs.Corrupt(path, 0, "version 1 checkpoint is %d bytes, want %d", len(b), checkpointV1Size)
	case v != checkpointVersion:
		return checkpoint{}, errs.Corrupt(path, 4, "checkpoint version %d, this build reads 1 and %d", v, checkpointVersion)
	case len(body) < checkpointHeader:
		return checkpoint{}, errs.Corrupt(path, 0, "checkpoint is %d bytes, want at least %d", len(b), checkpointHeader+4)
	}
	c := checkpoint{flushed: int64(le.Uint64(b[8:])), dispatched: int64(le.Uint64(b[16:]))}
	if c.flushed < 0 || c.dispatched < 0 {
		return checkpoint{}, errs.Corrupt(path, 8, "negative offsets in checkpoint")
	}
	if v1 {
		return c, nil
	}
	if c.marksAt = int64(le.Uint64(b[24:])); c.marksAt < c.dispatched {
		return checkpoint{}, errs.Corrupt(path, 24, "checkpoint marks taken at %d, below its dispatched offset %d", c.marksAt, c.dispatched)
	}
	marks, err := decodeMarks(path, body[checkpointHeader:], le.Uint32(b[checkpointCountAt:]))
	if err != nil {
		return checkpoint{}, err
	}
	c.marks = marks
	return c, nil
}

// decodeMarks decodes count queue marks filling p exactly, in the order
// encode writes them.
func decodeMarks(path string, p []byte, count uint32) ([]queueMark, error) {
	le := binary.LittleEndian
	const least = 2 + 1 + 4 + 8 // the smallest mark
	if uint64(count) > uint64(len(p)/least) {
		return nil, errs.Corrupt(path, checkpointCountAt, "checkpoint claims %d queue marks in %d bytes", count, len(p))
	}
	marks := make([]queueMark, 0, count)
	pos := checkpointHeader
	for range count {
		if len(p) < 2 {
			return nil, errs.Corrupt(path, int64(pos), "checkpoint queue mark cut short")
		}
		tl := int(le.Uint16(p))
		if len(p) < 2+tl+12 {
			return nil, errs.Corrupt(path, int64(pos), "checkpoint queue mark cut short")
		}
		m := queueMark{QueueID: consumequeue.QueueID{Topic: string(p[2 : 2+tl]), ID: int(le.Uint32(p[2+tl:]))}, next: int64(le.Uint64(p[6+tl:]))}
		if !validMark(m) || (len(marks) > 0 && compareQueueIDs(marks[len(marks)-1].QueueID, m.QueueID) >= 0) {
			return nil, errs.Corrupt(path, int64(pos), "checkpoint queue mark %s/%d at %d out of order or invalid", m.Topic, m.ID, m.next)
		}
		marks = append(marks, m)
		p, pos = p[2+tl+12:], pos+2+tl+12
	}
	if len(p) != 0 {
		return nil, errs.Corrupt(path, int64(pos), "%d bytes after the checkpoint's queue marks", len(p))
	}
	return marks, nil
}

// validMark reports whether a decoded mark names a queue the ConsumeQueue
// could hold.
func validMark(m queueMark) bool {
	return m.Topic != "" && len(m.Topic) <= consumequeue.MaxTopicLen && m.ID >= 0 && m.ID <= 1<<31-1 && m.next >= 0
}

// loadCheckpoint reads the checkpoint; a missing or damaged one is logged
// and treated as unknown (recovery then validates more of the log).
func (s *Store) loadCheckpoint() (checkpoint, bool) {
	path := s.path(checkpointName)
	b, err := vfs.ReadFile(s.fs, path)
	if err != nil {
		if errors.Is(err, vfs.ErrNotExist) {
			return checkpoint{}, false
		}
		// Even if the file turns out to be missing: the error is not.
		s.opts.Logger.Warn("mqlite: cannot read checkpoint; recovering without it", "err", err)
		return checkpoint{}, false
	}
	c, err := decodeCheckpoint(path, b)
	if err != nil {
		s.opts.Logger.Warn("mqlite: damaged checkpoint; recovering without it", "err", err)
		return checkpoint{}, false
	}
	return c, true
}

func (s *Store) writeCheckpoint(c checkpoint) error {
	if err := vfs.WriteFileAtomic(s.fs, s.dir, checkpointName, c.encode()); err != nil {
		return fmt.Errorf("mqlite: write checkpoint: %w (%w)", errs.ErrIO, err)
	}
	return nil
}
