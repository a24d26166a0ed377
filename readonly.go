package mqlite

import (
	"errors"
	"fmt"
	"path/filepath"

	"github.com/mqlite/mqlite/commitlog"
	"github.com/mqlite/mqlite/consumequeue"
	"github.com/mqlite/mqlite/indexfile"
	"github.com/mqlite/mqlite/internal/errs"
	"github.com/mqlite/mqlite/topic"
	"github.com/mqlite/mqlite/vfs"
)

// A read-only Store (Options.ReadOnly) is a view of a store directory as
// of Open, for tools and readers beside the process that owns it (or
// while no process does). It takes no lock and changes nothing: every file
// is opened through vfs.ReadOnly, so an attempted change fails with
// ErrReadOnly instead of reaching the disk. What it shows:
//
//   - the CommitLog up to the last valid record at Open (a record the
//     owner is writing at that moment ends it; damaged bytes with valid
//     records after them do not, see RecoveryReport.DamagedRanges):
//     ReadAt, MessageByID and View reach every such record;
//   - the ConsumeQueues and IndexFiles as the owner's dispatcher had built
//     them, limited to that CommitLog end: Messages, ReadQueue,
//     OffsetForTime, MessagesByKey, MinOffset and MaxOffset. Records the
//     owner had not dispatched yet (usually the last few milliseconds of
//     sends) are not in a queue: DispatchedPosition in Stats says where
//     the queues stop, and they become visible to a read-only Store opened
//     after the owner indexed them. The keys of the newest dispatched
//     record may be missing from MessagesByKey (the owner may have been
//     putting them at that moment);
//   - topics, consumer groups and committed offsets as last persisted by
//     the owner (every Options.OffsetPersistInterval), pending
//     transactions counted from the queues. Without a topic registry file
//     the topics are those of the queues on disk, in memory only (see
//     RecoveryReport.RestoredTopics).
//
// Messages stored after Open are not seen: reopen for a newer view.
// ReadQueue at the end of a queue waits until its context ends or the
// Store is closed, since nothing arrives. No StatsObserver is called.
//
// Caveat: a read-only Store opened while the owner is itself opening the
// directory (repairing a crash: zeroing a torn tail, dropping index files)
// may see the repair half done and fail with ErrCorrupt or ErrIO, at Open
// or on a read; open it again once the owner runs. Files the owner's
// retention removes stay readable through the mappings until Close.

// openReadOnly is Open for Options.ReadOnly.
func openReadOnly(fs vfs.FS, dir string, o Options, explicitSegment bool) (*Store, error) {
	s := &Store{opts: o, dir: filepath.Clean(dir), fs: vfs.ReadOnly(fs), readOnly: true, queues: map[string]*topicNext{}}
	s.explicitSegment = explicitSegment
	if err := s.openRO(); err != nil {
		if sv := s.svc.Load(); sv != nil && sv.txn != nil {
			sv.txn.Close()
		}
		s.release()
		return nil, err
	}
	return s, nil
}

func (s *Store) openRO() error {
	if _, isDir, err := s.fs.Stat(s.path("commitlog")); err != nil || !isDir {
		return fmt.Errorf("mqlite: open %s read-only: not a store (no commitlog directory): %w", s.dir, errs.ErrNotFound)
	}
	var err error
	if s.topics, err = topic.Open(s.fs, s.path(configDir), s.opts.Clock.Now); err != nil {
		return err
	}
	if err := s.loadFloors(); err != nil {
		return err
	}
	if err := s.adoptFormat(s.explicitSegment); err != nil {
		return err
	}
	clean := !vfs.Exists(s.fs, s.path(abortName))
	cp, cpOK := s.loadCheckpoint()
	s.log, err = commitlog.Open(commitlog.Options{Dir: s.path("commitlog"), FS: s.fs, SegmentSize: s.opts.SegmentSize,
		MaxRecordSize: s.opts.maxRecordSize(), Logger: s.opts.Logger, ReadOnly: true})
	if err != nil {
		return err
	}
	end := s.log.WrotePosition()
	s.recovery = RecoveryReport{CleanShutdown: clean, CheckpointFound: cpOK, CommitLogEnd: end, DamagedRanges: s.log.Report().Damaged}
	for _, r := range s.recovery.DamagedRanges {
		path, pos := s.log.Locate(r[0])
		s.opts.Logger.Warn("mqlite: read-only open found damaged CommitLog bytes between valid records; reading past them",
			"path", path, "pos", pos, "from", r[0], "to", r[1])
	}
	cq, err := consumequeue.OpenStore(consumequeue.Options{FS: s.fs, Dir: s.path("consumequeue"),
		EntriesPerFile: s.opts.ConsumeQueueEntries, Logger: s.opts.Logger, ReadOnly: true})
	if err != nil {
		return err
	}
	// The queues were read one after another while the owner kept
	// dispatching. The newest entry seen marks a point below which the
	// owner had dispatched every record before any queue is read again:
	// caught up to there, the queues agree with the CommitLog.
	if err := cq.TruncateAfterPhys(end); err != nil {
		cq.Close()
		return err
	}
	dispatched := min(cq.MaxPhysEnd(), end)
	if err := cq.CatchUp(dispatched); err != nil {
		cq.Close()
		return err
	}
	if _, err := cq.DeleteBelowPhys(s.log.MinOffset()); err != nil {
		cq.Close()
		return err
	}
	// Listed after that point, the IndexFiles hold the keys of every
	// record before the newest dispatched one (whose keys the owner may
	// be putting right now).
	idx, err := indexfile.Open(indexfile.Options{FS: s.fs, Dir: s.path("index"), Slots: s.opts.IndexSlots,
		Entries: s.opts.IndexEntries, Logger: s.opts.Logger, ReadOnly: true})
	if err != nil {
		cq.Close()
		return err
	}
	s.disp = newDispatcher(s, cq, idx, dispatched)
	s.disp.mu.dispatched = dispatched
	s.disp.published.Store(dispatched)
	if err := s.restoreTopics(cp.marks); err != nil {
		return err
	}
	sv := &services{}
	s.svc.Store(sv)
	if sv.txn, err = s.newTxnService(true); err != nil {
		return err
	}
	if err := sv.txn.Start(); err != nil {
		return err
	}
	if sv.consumers, err = s.newConsumers(true); err != nil {
		return err
	}
	return nil
}

// writable is the check of every call that writes: ErrClosed after Close,
// ErrReadOnly on a read-only Store.
func (s *Store) writable(op string) error {
	if s.closed.Load() {
		return errs.ErrClosed
	}
	if s.readOnly {
		return fmt.Errorf("mqlite: %s: %s is open read-only: %w", op, s.dir, errs.ErrReadOnly)
	}
	if s.repl.isReplica() {
		return fmt.Errorf("mqlite: %s: %s is a replica: %w", op, s.dir, ErrReplica)
	}
	return nil
}

// ReadOnly reports whether the Store was opened with Options.ReadOnly.
func (s *Store) ReadOnly() bool { return s.readOnly }

// closeReadOnly is Close for a read-only Store: nothing to flush, persist
// or remove; readers waiting for messages get ErrClosed.
func (s *Store) closeReadOnly() error {
	errList := []error{s.consumers().Close(), s.closeHandles(), s.txn().Close()}
	s.disp.fail(errClosedDispatch)
	errList = append(errList, s.release())
	return errors.Join(errList...)
}
