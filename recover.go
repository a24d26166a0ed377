package mqlite

// Open's recovery of the derived indexes: the ConsumeQueue and the
// IndexFile are held against the recovered CommitLog and the checkpoint,
// and rebuilt from the log where they miss records.

import (
	"errors"
	"path/filepath"

	"github.com/mqlite/mqlite/consumequeue"
	"github.com/mqlite/mqlite/consumer"
	"github.com/mqlite/mqlite/indexfile"
	"github.com/mqlite/mqlite/internal/errs"
	"github.com/mqlite/mqlite/topic"
	"github.com/mqlite/mqlite/vfs"
)

// RecoveryReport says what Open found and repaired.
type RecoveryReport struct {
	CleanShutdown   bool  // the previous owner closed the store
	CheckpointFound bool  // a valid checkpoint was read
	CommitLogEnd    int64 // end of the last valid record
	TruncatedBytes  int64 // torn-tail bytes discarded
	DroppedRecords  int   // valid-looking records discarded after a torn tail (never acknowledged by FlushSync)
	// LostFlushedBytes is how far the checkpoint's flushed offset is past
	// CommitLogEnd: CommitLog bytes that had been flushed, and so
	// acknowledged, and are gone (a damaged, cut or zeroed tail, or a
	// missing last segment). Nonzero means acknowledged messages are lost.
	LostFlushedBytes int64
	Redispatched     int64 // CommitLog bytes re-dispatched into the ConsumeQueue and IndexFile
	// RestoredTopics names the topics registered again because the topic
	// registry's file (config/topics.json) was missing while the
	// ConsumeQueue held queues: each with as many queues as are on disk.
	// A topic deleted with DeleteTopic whose queues still hold messages is
	// among them.
	RestoredTopics []string
	// DamagedRanges, for a read-only Store only, lists the CommitLog
	// ranges [from, to) of damaged bytes that Open found between valid
	// records of the last segments and read past: the view goes on to the
	// true end, the records there read as ErrCorrupt, and Verify reports
	// them. (A writable Open refuses such a store with ErrCorrupt, or
	// truncates a torn tail.)
	DamagedRanges [][2]int64
}

// Recovery reports what Open found and repaired.
func (s *Store) Recovery() RecoveryReport { return s.recovery }

// openIndexes opens the ConsumeQueue and the IndexFile against the
// recovered CommitLog and starts the dispatcher, in five steps:
//
//  1. trustedMarks: the checkpoint's queue marks, if they can be held
//     against the queues (dropped from the checkpoint if not);
//  2. openDerived: open both indexes (removed first by RebuildIndexes),
//     drop their entries past the CommitLog's end and below its start;
//  3. redispatchStart: where re-dispatch starts (the checkpoint, lowered
//     for a repaired queue or one below its mark);
//  4. redispatch: catch up to the CommitLog's end, again from its start
//     when a queue turns out to have lost entries (fullRedispatch);
//  5. startDispatch: hold the queues to their marks, rebuild each queue's
//     next offset, and start the dispatcher's loop.
func (s *Store) openIndexes(cp checkpoint, cpOK bool) error {
	end := s.log.WrotePosition()
	marks, err := s.trustedMarks(&cp, cpOK, end)
	if err != nil {
		return err
	}
	fresh, err := s.openDerived(marks, end)
	if err != nil {
		return err
	}
	start := s.redispatchStart(cp, cpOK, marks, fresh)
	if start, err = s.redispatch(cp, cpOK, marks, start, end); err != nil {
		return err
	}
	s.recovery.Redispatched = end - start
	return s.startDispatch(marks)
}

// trustedMarks returns the checkpoint's queue marks if they can be held
// against the queues (nil if not). Marks that count records the CommitLog
// lost are removed from the checkpoint on disk: once the log has grown
// past marksAt again (puts after this Open, a crash before the next
// checkpoint), the next Open would trust them, and move a queue whose
// lost records were never rebuilt on to a count it no longer has.
func (s *Store) trustedMarks(cp *checkpoint, cpOK bool, end int64) ([]queueMark, error) {
	if marksTrusted(*cp, cpOK, end) {
		return cp.marks, nil
	}
	if cpOK && len(cp.marks) > 0 {
		cp.marks, cp.marksAt = nil, 0
		if err := s.writeCheckpoint(*cp); err != nil {
			return nil, err
		}
	}
	return nil, nil
}

// openDerived opens the ConsumeQueue and the IndexFile (removing them
// first for RebuildIndexes), creates the dispatcher on them, and drops
// their entries past the CommitLog's end. It reports whether both
// directories existed before.
func (s *Store) openDerived(marks []queueMark, end int64) (existed bool, err error) {
	cqDir, idxDir := s.path("consumequeue"), s.path("index")
	if s.rebuild {
		if err := s.removeIndexes(marks != nil); err != nil {
			return false, err
		}
	}
	cqExisted, idxExisted := vfs.Exists(s.fs, cqDir), vfs.Exists(s.fs, idxDir)
	for dir, existed := range map[string]bool{cqDir: cqExisted, idxDir: idxExisted} {
		if !existed {
			s.builtDirs = append(s.builtDirs, dir)
		}
	}
	cq, err := consumequeue.OpenStore(consumequeue.Options{FS: s.fs, Dir: cqDir,
		EntriesPerFile: s.opts.ConsumeQueueEntries, Logger: s.opts.Logger})
	if err != nil {
		return false, err
	}
	idx, err := indexfile.Open(indexfile.Options{FS: s.fs, Dir: idxDir, Slots: s.opts.IndexSlots,
		Entries: s.opts.IndexEntries, Logger: s.opts.Logger})
	if err != nil {
		cq.Close()
		return false, err
	}
	s.disp = newDispatcher(s, cq, idx, 0)
	if err := errors.Join(cq.TruncateAfterPhys(end), idx.TruncateAfterPhys(end)); err != nil {
		return false, err
	}
	// Queue minimums are not stored: re-apply retention inside the first
	// files before re-dispatching, or a minimum would move back to entries
	// whose records are gone, and a queue whose unsynced tail entries
	// pointed into a removed segment would see its next record as a gap
	// in a non-empty queue (ErrConflict) instead of as a restart.
	if _, err := cq.DeleteBelowPhys(s.log.MinOffset()); err != nil {
		return false, err
	}
	return cqExisted && idxExisted, nil
}

// redispatchStart is where re-dispatch starts: the checkpoint's dispatched
// offset when the indexes and the topic registry were all there, lowered
// to where a repaired queue now ends, and the CommitLog's start when a
// queue holds fewer entries than its mark.
func (s *Store) redispatchStart(cp checkpoint, cpOK bool, marks []queueMark, existed bool) int64 {
	cq, first := s.disp.cq, s.log.MinOffset()
	start := first
	// Without the topic registry, the topics are restored from the queues
	// on disk (restoreTopics): every queue the CommitLog has records of
	// must be there, one whose directory went with the registry too.
	if cpOK && existed && s.topics.Found() {
		start = min(max(cp.dispatched, start), s.disp.idx.EndPhyOffset(), s.log.WrotePosition())
	}
	if e, ok := cq.RepairedPhysEnd(); ok {
		// Recovery dropped entries of a queue (damage in its files): they
		// are rebuilt from where that queue now ends, which may be far
		// below the checkpoint if no later record belongs to it.
		start = min(start, max(e, first))
	}
	if q, ok := s.queueBelowMarks(cq, marks, true); ok && start > first {
		// Checked before re-dispatching: the records after the checkpoint
		// would restart an emptied queue at their own offsets and hide
		// it. A repaired queue is checked after.
		s.opts.Logger.Warn("mqlite: a ConsumeQueue holds fewer entries than the checkpoint counted; re-dispatching the whole CommitLog", "queue", q)
		start = first
	}
	return start
}

// redispatch re-dispatches the CommitLog from start to end, and again
// from its start when fullRedispatch says a queue lost entries; it
// returns where the re-dispatch that held started.
func (s *Store) redispatch(cp checkpoint, cpOK bool, marks []queueMark, start, end int64) (int64, error) {
	s.disp.next = max(start, s.log.MinOffset())
	s.disp.verify = true
	if err := s.lowerDispatched(cp, cpOK, s.disp.next); err != nil {
		return 0, err
	}
	err := s.disp.catchUp(end)
	if s.fullRedispatch(err, cp, marks, start) {
		start = s.log.MinOffset()
		s.disp.next = start
		if err := s.lowerDispatched(cp, cpOK, start); err != nil {
			return 0, err
		}
		err = s.disp.catchUp(end)
	}
	if err != nil {
		return 0, err
	}
	s.disp.verify = false
	return start, nil
}

// fullRedispatch reports whether the catch-up from start, which ended with
// err, must be redone from the CommitLog's start (re-dispatch is
// idempotent), and logs why.
func (s *Store) fullRedispatch(err error, cp checkpoint, marks []queueMark, start int64) bool {
	cq, partial := s.disp.cq, start > s.log.MinOffset()
	switch {
	case err == nil && partial:
		// A queue that holds fewer entries than the checkpoint counted
		// (a repaired one) or than a group committed on it lost some
		// below the checkpoint (its directory or a file gone): rebuild
		// everything, or its next puts would take queue offsets its
		// records already have and the commit would be cut to its end.
		if q, ok := s.queueBelowMarks(cq, marks, false); ok {
			s.opts.Logger.Warn("mqlite: a ConsumeQueue holds fewer entries than the checkpoint counted; re-dispatching the whole CommitLog", "queue", q)
			return true
		}
		if q, ok := s.queueBehindCommits(cq); ok {
			s.opts.Logger.Warn("mqlite: a ConsumeQueue holds less than was committed on it; re-dispatching the whole CommitLog", "queue", q)
			return true
		}
	case errors.Is(err, consumequeue.ErrConflict):
		// A queue lost entries below the checkpoint (damaged file). A
		// conflict again means a queue holds entries of other records (an
		// ErrCorrupt locating it): Open fails, and RebuildIndexes rebuilds
		// the queues.
		s.opts.Logger.Warn("mqlite: a ConsumeQueue lost entries; re-dispatching the whole CommitLog", "err", err)
		return true
	case errors.Is(err, errs.ErrCorrupt) && partial:
		// The checkpoint's dispatched offset is not where a record starts
		// (recovery validated the records, not the checkpoint): treat it
		// as unknown, as a damaged checkpoint. Real damage fails again.
		s.opts.Logger.Warn("mqlite: the checkpoint's dispatched offset is not a record; re-dispatching the whole CommitLog",
			"dispatched", cp.dispatched, "err", err)
		return true
	}
	return false
}

// startDispatch holds the queues to their marks, rebuilds each queue's
// next offset from the ConsumeQueue, and starts the dispatcher's loop.
func (s *Store) startDispatch(marks []queueMark) error {
	cq := s.disp.cq
	if err := s.keepMarkedOffsets(cq, marks); err != nil {
		return err
	}
	if err := cq.Rebuilt(); err != nil {
		return err
	}
	for _, id := range cq.Queues() {
		q, err := cq.Queue(id.Topic, id.ID, false)
		if err != nil {
			return err
		}
		s.nextOffsets(id.Topic, int32(id.ID))[id.ID] = q.MaxOffset()
	}
	s.lastStoreMs = s.disp.lastStoreMs
	s.dispRunning = true
	go s.disp.loop()
	return nil
}

// queueBehindCommits names a queue whose end lies below an offset a
// consumer group committed on it, if there is one. An unreadable offsets
// file is left to the consumers' Open, which reports it. After the full
// re-dispatch this triggers, ClampOffsets lowers what is still past a
// queue's end (records a crash lost), so the next Open does not repeat it.
func (s *Store) queueBehindCommits(cq *consumequeue.Store) (string, bool) {
	committed, err := consumer.CommittedOffsets(consumer.ManagerOptions{FS: s.fs, Dir: s.path(configDir)})
	if err != nil {
		return "", false
	}
	for q, off := range committed {
		if cfg, err := s.topics.Get(q.Topic); err != nil || q.ID >= cfg.Queues {
			continue // a deleted topic or queue: its offsets are kept as they are (ClampOffsets)
		}
		maxOff := int64(0) // a queue with no directory
		if qq, err := cq.Queue(q.Topic, q.ID, false); err == nil {
			maxOff = qq.MaxOffset()
		} else if !errors.Is(err, errs.ErrNotFound) {
			return "", false
		}
		if off > maxOff {
			return q.String(), true
		}
	}
	return "", false
}

// lowerDispatched moves the checkpoint's dispatched offset back to from,
// where Open's re-dispatch starts, before it runs: recovery may have
// dropped queue entries below the checkpoint (damage), and if this Open
// fails or crashes before re-dispatch has rebuilt them, the next one must
// re-dispatch from there too, not trust the queues up to the old
// checkpoint. The flushed offset stays, so CommitLog recovery is not
// changed. Without a valid checkpoint the next Open re-dispatches
// everything anyway.
func (s *Store) lowerDispatched(cp checkpoint, cpOK bool, from int64) error {
	if !cpOK || from >= cp.dispatched {
		return nil
	}
	// The marks stay, with the offset they were taken at: the queues are
	// held against them until re-dispatch has rebuilt them.
	return s.writeCheckpoint(checkpoint{flushed: cp.flushed, dispatched: from, marks: cp.marks, marksAt: cp.marksAt})
}

// restoreTopics registers the topics of a store whose topic registry file
// is missing but whose ConsumeQueue is not (the file was lost): each with
// as many queues as its directory shows, so that no stored message is
// stranded in a queue no topic has, and sends and subscriptions keep
// working with auto-creation off. A read-only store registers them in
// memory only.
func (s *Store) restoreTopics(marks []queueMark) error {
	if s.topics.Found() {
		return nil
	}
	counts := map[string]int{}
	for _, id := range s.disp.cq.Queues() {
		counts[id.Topic] = max(counts[id.Topic], id.ID+1)
	}
	// The checkpoint's marks name every queue it saw, even when they
	// cannot be held against the queues (the CommitLog lost records):
	// a queue whose directory is gone keeps its place in its topic.
	for _, m := range marks {
		if m.ID < MaxQueues {
			counts[m.Topic] = max(counts[m.Topic], m.ID+1)
		}
	}
	if len(counts) == 0 {
		return nil // a new store
	}
	added, err := s.topics.Restore(counts, !s.readOnly)
	if err != nil {
		return err
	}
	if len(added) > 0 {
		s.recovery.RestoredTopics = added
		s.opts.Logger.Warn("mqlite: the topic registry file is missing; topics restored from the ConsumeQueue",
			"file", filepath.Join(s.path(configDir), topic.File), "topics", added)
	}
	return nil
}
