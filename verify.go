package mqlite

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/mqlite/mqlite/commitlog"
	"github.com/mqlite/mqlite/consumequeue"
	"github.com/mqlite/mqlite/internal/errs"
	"github.com/mqlite/mqlite/message"
	"github.com/mqlite/mqlite/vfs"
)

const (
	// MaxVerifyProblems caps VerifyReport.Problems; further problems are
	// only counted (VerifyReport.Omitted).
	MaxVerifyProblems = 100
	// verifyProgressEvery is how many CommitLog bytes Verify scans between
	// two progress calls (and context checks).
	verifyProgressEvery = 4 << 20
)

// VerifyReport says what Verify checked and what it found.
type VerifyReport struct {
	Records int64 // CommitLog records with a valid frame and checksum
	Bytes   int64 // CommitLog bytes scanned: MinOffset to the write position at the start
	Queues  int   // ConsumeQueues checked
	Entries int64 // ConsumeQueue entries read
	// Problems describes the first MaxVerifyProblems problems found, each
	// naming the file or queue and the offset.
	Problems []string
	Omitted  int  // problems found beyond MaxVerifyProblems
	OK       bool // no problem found
}

// Verify checks the whole store while it runs (readers and writers go on):
//   - every CommitLog record from MinOffset to the write position: frame,
//     stored offset and CRC32-C, then the message payload's structure;
//   - for every dispatched record (half messages and rollbacks aside), that
//     its ConsumeQueue entry exists and points back at it (offset, size);
//   - every ConsumeQueue entry: checksum, and that it points at a valid
//     record of its topic, queue and queue offset, with the record's size.
//
// After a damaged record the scan resumes at the next valid record of its
// segment, or at the next segment. Problems name CommitLog offsets and
// queue positions. Damage is reported in the VerifyReport, never as an
// error: the error is for I/O failures, ctx, and ErrClosed. progress, if
// not nil, gets CommitLog bytes done and total at the start, every few
// MiB and at the end of the scan.
func (s *Store) Verify(ctx context.Context, progress func(done, total int64)) (VerifyReport, error) {
	if err := s.enter(ctx, "verify"); err != nil {
		return VerifyReport{}, err
	}
	if s.closed.Load() {
		return VerifyReport{}, errs.ErrClosed
	}
	v := &verifier{s: s, ctx: ctx, progress: progress, queues: map[string]map[int32]*queueCheck{}}
	// dispatched before wrote: every record below dispatched has entries.
	v.dispatched = s.disp.dispatched()
	v.from, v.to = s.log.MinOffset(), s.log.WrotePosition()
	err := v.scanLog()
	if err == nil {
		err = v.checkQueues()
	}
	v.rep.OK = err == nil && len(v.rep.Problems) == 0
	return v.rep, err
}

// verifier holds one Verify run.
type verifier struct {
	s          *Store
	ctx        context.Context
	progress   func(done, total int64)
	from, to   int64 // CommitLog range scanned
	dispatched int64 // records below are expected in the ConsumeQueue
	nextReport int64 // CommitLog offset of the next progress call
	queues     map[string]map[int32]*queueCheck
	rep        VerifyReport
}

// queueCheck counts the records that a queue's entries matched.
type queueCheck struct {
	q       *consumequeue.Queue // nil: the queue does not exist
	matched int64
}

func (v *verifier) problem(format string, args ...any) {
	if len(v.rep.Problems) < MaxVerifyProblems {
		v.rep.Problems = append(v.rep.Problems, fmt.Sprintf(format, args...))
	} else {
		v.rep.Omitted++
	}
}

func (v *verifier) report(done int64) {
	if v.progress != nil {
		v.progress(done, v.to-v.from)
	}
}

// scanLog walks the CommitLog, resuming after each damaged record.
func (v *verifier) scanLog() error {
	v.report(0)
	v.nextReport = v.from + verifyProgressEvery
	next := v.from
	for next < v.to {
		n, err := v.s.log.Scan(next, v.to, true, v.record)
		var ce *CorruptError
		switch {
		case err == nil:
			next = n
		case errors.As(err, &ce):
			resume, found := v.resync(n, ce)
			if found {
				v.problem("commitlog offset %d (%s at %d): %s; %d bytes up to the next valid record, at offset %d",
					n, ce.Path, ce.Offset, ce.Reason, resume-n, resume)
			} else {
				v.problem("commitlog offset %d (%s at %d): %s; no valid record in the %d bytes to the segment end",
					n, ce.Path, ce.Offset, ce.Reason, min(resume, v.to)-n)
			}
			next = resume
		case errors.Is(err, ErrNotFound) && n < v.s.log.MinOffset():
			next = v.s.log.MinOffset() // retention removed segments meanwhile
		default:
			return fmt.Errorf("mqlite: verify commitlog at offset %d: %w", n, err)
		}
	}
	v.rep.Bytes = v.to - v.from
	v.report(v.to - v.from)
	return nil
}

// record checks one record whose frame and checksum are valid.
func (v *verifier) record(r commitlog.Record) error {
	v.rep.Records++
	if end := r.Offset + int64(r.Size); end >= v.nextReport {
		v.nextReport = end + verifyProgressEvery
		v.report(end - v.from)
		if err := v.ctx.Err(); err != nil {
			return err
		}
	}
	if err := message.CheckPayload(r.Payload); err != nil {
		v.problem("commitlog offset %d: bad message payload: %v", r.Offset, err)
		return nil
	}
	if r.Offset >= v.dispatched {
		return nil
	}
	m := viewOf(r)
	switch m.SysFlag() & message.SysTxTypeMask {
	case message.SysTxPrepared, message.SysTxRollback:
		return nil // never dispatched
	}
	topic, qid, qoff := m.Topic(), m.QueueID(), m.QueueOffset()
	qc := v.queue(topic, qid)
	if qc.q == nil {
		v.problem("commitlog offset %d: message of %s/%d@%d has no ConsumeQueue", r.Offset, topic, qid, qoff)
		return nil
	}
	if qoff < qc.q.MinOffset() {
		return nil // the entry was removed by retention
	}
	e, err := qc.q.Get(qoff)
	switch {
	case errors.Is(err, ErrNotFound):
		v.problem("commitlog offset %d: message of %s/%d@%d has no ConsumeQueue entry (queue ends at %d)",
			r.Offset, topic, qid, qoff, qc.q.MaxOffset())
	case err != nil:
		// A damaged entry: checkQueues reports it.
	case e.Offset != r.Offset || int(e.Size) != r.Size:
		v.problem("consumequeue %s/%d@%d: points at commitlog offset %d (size %d), but the message stored at %d (size %d) claims this position",
			topic, qid, qoff, e.Offset, e.Size, r.Offset, r.Size)
	default:
		qc.matched++
	}
	return nil
}

// queue returns the check of (topic, id), looking the queue up once.
func (v *verifier) queue(topic []byte, id int32) *queueCheck {
	qs := v.queues[string(topic)] // no allocation for the lookup
	if qs == nil {
		qs = map[int32]*queueCheck{}
		v.queues[string(topic)] = qs
	}
	qc := qs[id]
	if qc == nil {
		qc = &queueCheck{}
		if id >= 0 {
			qc.q, _ = v.s.disp.cq.Queue(string(topic), int(id), false)
		}
		qs[id] = qc
	}
	return qc
}

// resync returns where to resume after the damaged record at bad: the
// next position of its segment that holds a valid record (found by its
// magic, then checked like any record: frame, stored offset, CRC), or
// the segment's end when there is none (found false). Unlike following
// the damaged frame's size, this works whichever byte flipped.
func (v *verifier) resync(bad int64, ce *CorruptError) (next int64, found bool) {
	segStart := bad - ce.Offset // the error locates bad inside its segment file
	segEnd := segStart + v.s.log.SegmentSize()
	end := min(segEnd, v.to)
	f, err := v.s.fs.OpenFile(ce.Path, os.O_RDONLY, 0)
	if err != nil {
		return segEnd, false
	}
	defer f.Close()
	var magic [4]byte
	binary.LittleEndian.PutUint32(magic[:], commitlog.MagicV1)
	noop := func(commitlog.Record) error { return nil }
	buf := make([]byte, 64<<10)
	// A window holds [pos, pos+n); a record starting at c has its magic at
	// c+4, so the window covers starts [pos, pos+n-8].
	for pos := bad + 1; end-pos >= 8; {
		n, err := f.ReadAt(buf[:min(int64(len(buf)), end-pos)], pos-segStart)
		if err != nil {
			return segEnd, false
		}
		for i := 4; ; {
			k := bytes.Index(buf[i:n], magic[:])
			if k < 0 {
				break
			}
			c := pos + int64(i+k) - 4
			if _, err := v.s.log.Scan(c, c+1, true, noop); err == nil {
				return c, true
			}
			i += k + 1
		}
		pos += int64(n) - 7
	}
	return segEnd, false
}

// checkQueues reads every entry of every queue. A queue with as many
// entries pointing into the scanned, dispatched range as records matched
// it in scanLog is consistent; the others are checked entry by entry.
func (v *verifier) checkQueues() error {
	var buf [256]consumequeue.Entry
	for _, id := range v.s.disp.cq.Queues() {
		q, err := v.s.disp.cq.Queue(id.Topic, id.ID, false)
		if err != nil {
			return fmt.Errorf("mqlite: verify consumequeue %s/%d: %w", id.Topic, id.ID, err)
		}
		v.rep.Queues++
		var inRange int64
		err = v.eachEntry(q, id, buf[:], true, func(_ int64, e consumequeue.Entry) {
			if e.Offset >= v.from && e.Offset < v.dispatched {
				inRange++
			}
		})
		if err != nil {
			return err
		}
		if qc := v.queue([]byte(id.Topic), int32(id.ID)); inRange == qc.matched {
			continue
		}
		if err := v.checkEntries(q, id, buf[:]); err != nil {
			return err
		}
	}
	return nil
}

// eachEntry calls fn for every readable entry of q. On the first pass
// over q it counts the entries and reports damaged ones as problems.
func (v *verifier) eachEntry(q *consumequeue.Queue, id consumequeue.QueueID, buf []consumequeue.Entry, first bool,
	fn func(int64, consumequeue.Entry)) error {
	for off := q.MinOffset(); off < q.MaxOffset(); {
		if err := v.ctx.Err(); err != nil {
			return err
		}
		n, err := q.Read(off, buf)
		if first {
			v.rep.Entries += int64(n)
		}
		for i, e := range buf[:n] {
			fn(off+int64(i), e)
		}
		off += int64(n)
		var ce *CorruptError
		switch {
		case err == nil:
		case errors.As(err, &ce):
			if first {
				v.rep.Entries++
				v.problem("consumequeue %s/%d@%d: damaged entry: %s (%s at %d)", id.Topic, id.ID, off, ce.Reason, ce.Path, ce.Offset)
			}
			off++
		case errors.Is(err, ErrNotFound):
			off = max(off, q.MinOffset()) // retention removed entries meanwhile
		default:
			return fmt.Errorf("mqlite: verify consumequeue %s/%d at %d: %w", id.Topic, id.ID, off, err)
		}
	}
	return nil
}

// checkEntries reads the record each entry of q points at and reports
// those that are not the message the entry claims (the second pass over
// q: damaged entries were reported by the first).
func (v *verifier) checkEntries(q *consumequeue.Queue, id consumequeue.QueueID, buf []consumequeue.Entry) error {
	var ioErr error
	err := v.eachEntry(q, id, buf, false, func(logical int64, e consumequeue.Entry) {
		if ioErr != nil || e.Offset < v.from || e.Offset >= v.dispatched || e.Offset < v.s.log.MinOffset() {
			return
		}
		where := fmt.Sprintf("consumequeue %s/%d@%d: points at commitlog offset %d", id.Topic, id.ID, logical, e.Offset)
		err := v.s.log.Read(e.Offset, func(r commitlog.Record) error {
			if err := message.CheckPayload(r.Payload); err != nil {
				v.problem("%s, whose payload is bad: %v", where, err)
				return nil
			}
			m := viewOf(r)
			if string(m.Topic()) != id.Topic || int(m.QueueID()) != id.ID || m.QueueOffset() != logical || r.Size != int(e.Size) {
				v.problem("%s (size %d), which holds %s/%d@%d (size %d)", where, e.Size, m.Topic(), m.QueueID(), m.QueueOffset(), r.Size)
			}
			return nil
		})
		switch {
		case err == nil:
		case errors.Is(err, ErrCorrupt), errors.Is(err, ErrNotFound):
			v.problem("%s: %v", where, err)
		default:
			ioErr = fmt.Errorf("mqlite: verify %s: %w", where, err)
		}
	})
	return errors.Join(err, ioErr)
}

// RebuildIndexes deletes the ConsumeQueue and IndexFile of the store in dir
// and rebuilds them from the CommitLog, as Open does for a missing index
// folder; it reports what that Open found. opts must be the options the
// store is used with (nil: the defaults). The store must not be open
// (ErrLocked). Consumer offsets stay valid: queue offsets are stored in
// the records, and a queue none of whose records is left (retention
// removed them) goes on from the entry count in the checkpoint.
//
// So a CommitLog whose oldest segments were removed by retention needs a
// checkpoint with queue counts (written by Close, and every second, since
// format version 2) that the CommitLog still covers: without one it
// refuses (ErrInvalidArgument), since such a queue would restart at 0
// under its consumers' committed offsets. Opening and closing the store
// writes one. Refused before anything is changed when the checkpoint has
// no counts; after the CommitLog's recovery when it lost records they
// count. If the Open that rebuilds fails after the deletion, the next
// Open rebuilds them.
func RebuildIndexes(dir string, opts *Options) (RecoveryReport, error) {
	if opts != nil && opts.ReadOnly {
		return RecoveryReport{}, fmt.Errorf("mqlite: rebuild indexes of %s: it writes the store: %w", dir, errs.ErrReadOnly)
	}
	if opts != nil && opts.InMemory {
		return RecoveryReport{}, fmt.Errorf("mqlite: rebuild indexes: an in-memory store has nothing to rebuild: %w", errs.ErrInvalidArgument)
	}
	fs := opts.fileSystem()
	names, err := fs.ReadDir(filepath.Join(dir, "commitlog"))
	if err != nil {
		return RecoveryReport{}, fmt.Errorf("mqlite: rebuild indexes: no CommitLog in %s: %w (%w)", dir, errs.ErrNotFound, err)
	}
	for _, name := range names {
		if len(name) == 20 && strings.Trim(name, "0123456789") == "" {
			if strings.Trim(name, "0") != "" && !checkpointCounts(fs, dir) {
				return RecoveryReport{}, fmt.Errorf("mqlite: rebuild indexes of %s: the CommitLog starts at segment %s (retention removed older ones) and the checkpoint does not count the queues' entries (open and close the store to write one), so emptied queues would restart at offset 0: %w",
					dir, name, errs.ErrInvalidArgument)
			}
			break // sorted: the first segment is the oldest
		}
	}
	s, err := openStore(fs, dir, opts, true)
	if err != nil {
		return RecoveryReport{}, fmt.Errorf("mqlite: rebuild indexes of %s: %w", dir, err)
	}
	rep := s.Recovery()
	return rep, s.Close()
}

// checkpointCounts reports whether the store in dir has a checkpoint with
// queue marks.
func checkpointCounts(fs vfs.FS, dir string) bool {
	path := filepath.Join(dir, checkpointName)
	b, err := vfs.ReadFile(fs, path)
	if err != nil {
		return false
	}
	cp, err := decodeCheckpoint(path, b)
	return err == nil && cp.marks != nil
}

// removeIndexes deletes the ConsumeQueue and the IndexFile for a rebuild,
// unless the CommitLog lost its start to retention and the checkpoint's
// marks cannot be trusted (see RebuildIndexes).
func (s *Store) removeIndexes(marksTrusted bool) error {
	if min := s.log.MinOffset(); min > 0 && !marksTrusted {
		return fmt.Errorf("mqlite: the CommitLog starts at %d (retention removed older segments) and holds less than the checkpoint counted, so emptied queues would restart at offset 0: %w",
			min, errs.ErrInvalidArgument)
	}
	for _, sub := range []string{"consumequeue", "index"} {
		if err := s.fs.RemoveAll(s.path(sub)); err != nil {
			return fmt.Errorf("mqlite: rebuild indexes: remove %s: %w (%w)", s.path(sub), errs.ErrIO, err)
		}
	}
	if err := s.fs.SyncDir(s.dir); err != nil {
		return fmt.Errorf("mqlite: rebuild indexes: sync %s: %w (%w)", s.dir, errs.ErrIO, err)
	}
	return nil
}
