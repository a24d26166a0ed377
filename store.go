package mqlite

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/mqlite/mqlite/commitlog"
	"github.com/mqlite/mqlite/consumequeue"
	"github.com/mqlite/mqlite/consumer"
	"github.com/mqlite/mqlite/flush"
	"github.com/mqlite/mqlite/indexfile"
	"github.com/mqlite/mqlite/internal/errs"
	"github.com/mqlite/mqlite/topic"
	"github.com/mqlite/mqlite/txn"
	"github.com/mqlite/mqlite/vfs"
)

const (
	lockName  = "lock"
	abortName = "abort"  // present while a Store has the directory open
	configDir = "config" // topics, groups, offsets, schedule progress
)

// Store is an open message store: one directory, one owner. All methods
// are safe for concurrent use.
type Store struct {
	opts Options
	dir  string
	fs   vfs.FS
	lock io.Closer

	log         *commitlog.Log
	disp        *dispatcher
	groupCommit *flush.GroupCommit // FlushSync
	periodic    *flush.Periodic    // FlushAsync

	// queues holds each topic's next offset per queue id. It is read and
	// written only inside commitlog's append lock (EncodePayload) and
	// during Open, like the fields after it.
	queues      map[string]*topicNext
	lastNext    *topicNext // the entry of the last put's topic (nextOffsets)
	lastStoreMs int64
	topics      *topic.Registry
	sched       *scheduler
	timers      *timers
	txn         *txn.Service
	retry       retryPolicies
	consumers   *consumer.Manager
	guard       guard
	metrics     metrics
	lossLog     *slog.Logger                           // warnings about deleted data: Options.Logger or slog.Default
	early       struct{ segments, bytes atomic.Int64 } // RetentionStats

	// builtDirs are the index directories (ConsumeQueue, IndexFile) this
	// Open created: a failed Open removes them, or the next Open would
	// take their partial content for indexes built up to the checkpoint.
	builtDirs []string
	rebuild   bool // Open deletes the indexes first (RebuildIndexes)

	explicitSegment bool       // Options.SegmentSize was set, not defaulted
	retMu           sync.Mutex // one retention pass at a time
	retQuit         chan struct{}
	retDone         chan struct{}

	replies replyRouter // request-reply: see reply.go
	repl    replication // replication.go

	handles struct { // producers and consumers, closed by Close
		sync.Mutex
		set map[handle]struct{}
	}

	uniqPrefix uint32
	uniqHex    [8]byte // uniqPrefix in hex: the start of every generated unique key
	uniqSeq    uint64  // append lock: the last generated key's sequence number
	// seedBase derives every seed (seed.go): 0 without Options.Seed.
	seedBase int64
	// producerSeq counts producers made, for their seeds.
	producerSeq atomic.Uint64
	wallBase    atomic.Pointer[wallBase]
	jobs        sync.Pool

	readOnly    bool // Options.ReadOnly: see readonly.go
	dispRunning bool // the dispatcher loop was started (for abortOpen)
	recovery    RecoveryReport
	closed      atomic.Bool
	closeOnce   sync.Once
	closeErr    error
	cpQuit      chan struct{}
	cpDone      chan struct{}
}

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

// Open opens (creating if needed) the store in dir. A nil opts means the
// defaults. A second Open of the same directory, from this or another
// process, fails with ErrLocked. With Options.ReadOnly it opens an
// existing store for reading only, beside the process that owns it or
// while none does: no lock, no change to any file (see Options.ReadOnly).
// An empty dir is ErrInvalidArgument (it never means the current
// directory), also in memory. The store runs on Options.FS when it is
// set.
func Open(dir string, opts *Options) (*Store, error) {
	return openFS(opts.fileSystem(), dir, opts)
}

// openFS is Open on a given file seam, for tests.
func openFS(fs vfs.FS, dir string, opts *Options) (*Store, error) {
	return openStore(fs, dir, opts, false)
}

// openStore is openFS; rebuild deletes the ConsumeQueue and the IndexFile
// once the CommitLog is recovered (RebuildIndexes).
func openStore(fs vfs.FS, dir string, opts *Options, rebuild bool) (*Store, error) {
	if dir == "" {
		return nil, fmt.Errorf("mqlite: open: empty directory name (use \".\" for the current directory): %w", errs.ErrInvalidArgument)
	}
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	if o.ReadOnly {
		return openReadOnly(fs, dir, o, opts != nil && opts.SegmentSize != 0)
	}
	fs = vfs.WithModes(fs, o.FileMode)
	s := &Store{opts: o, dir: filepath.Clean(dir), fs: fs, queues: map[string]*topicNext{}, lossLog: lossLogger(opts),
		uniqPrefix: rand.Uint32(), cpQuit: make(chan struct{}), cpDone: make(chan struct{})}
	putHex(s.uniqHex[:], uint64(s.uniqPrefix))
	s.resyncWall()
	s.jobs.New = func() any { return &putJob{s: s} }
	s.explicitSegment = opts != nil && opts.SegmentSize != 0
	s.rebuild = rebuild
	if err := s.initReplication(); err != nil {
		return nil, err
	}
	if err := s.open(); err != nil {
		s.abortOpen()
		return nil, err
	}
	go s.checkpointLoop()
	s.startGuard()
	if s.opts.Retention > 0 {
		s.retQuit, s.retDone = make(chan struct{}), make(chan struct{})
		go s.retentionLoop()
	}
	if s.repl.servicesRunning() { // not on a replica (replica_promote.go)
		s.sched.start()
		s.timers.start()
	}
	if err := s.txn.Start(); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

func (s *Store) path(name string) string { return filepath.Join(s.dir, name) }

func (s *Store) open() error {
	if err := s.fs.MkdirAll(s.dir, 0o700); err != nil {
		return fmt.Errorf("mqlite: create %s: %w (%w)", s.dir, errs.ErrIO, err)
	}
	lk, err := s.fs.Lock(s.path(lockName))
	if err != nil {
		if errors.Is(err, vfs.ErrLocked) {
			return fmt.Errorf("mqlite: open %s: %w", s.dir, errs.ErrLocked)
		}
		return fmt.Errorf("mqlite: lock %s: %w (%w)", s.dir, errs.ErrIO, err)
	}
	s.lock = lk
	if s.topics, err = topic.Open(s.fs, s.path(configDir), s.opts.Clock.Now); err != nil {
		return err
	}
	if err := s.adoptFormat(s.explicitSegment); err != nil {
		return err
	}
	if err := s.checkConfig(); err != nil {
		return err
	}
	clean := !vfs.Exists(s.fs, s.path(abortName))
	cp, cpOK := s.loadCheckpoint()
	if err := s.markOpen(); err != nil {
		return err
	}
	trusted := int64(0)
	if cpOK {
		trusted = cp.flushed
	}
	s.log, err = commitlog.Open(commitlog.Options{
		Dir: s.path("commitlog"), FS: s.fs, SegmentSize: s.opts.SegmentSize,
		MaxRecordSize: s.opts.maxRecordSize(), NoWarm: s.opts.NoWarm, NoRecycle: s.opts.NoRecycle || s.opts.InMemory, Logger: s.opts.Logger,
		SmallSyncs: s.opts.Flush == FlushSync, RecoverFrom: -1, Trusted: trusted, CleanShutdown: clean && cpOK,
	})
	if err != nil {
		return err
	}
	rep := s.log.Report()
	s.seedAt(rep.End)
	s.recovery = RecoveryReport{CleanShutdown: clean, CheckpointFound: cpOK, CommitLogEnd: rep.End,
		TruncatedBytes: rep.TruncatedBytes, DroppedRecords: rep.DroppedRecords, LostFlushedBytes: rep.LostFlushed}
	if err := s.openIndexes(cp, cpOK); err != nil {
		return err
	}
	if err := s.restoreTopics(cp.marks); err != nil {
		return err
	}
	switch s.opts.Flush {
	case FlushSync:
		s.groupCommit = flush.NewGroupCommit(timedFlusher{s}, flush.GroupCommitOptions{Timeout: s.opts.SyncFlushTimeout, Clock: s.opts.Clock,
			OnFlush: func(int64) { s.disp.notify() }})
	case FlushAsync:
		s.periodic = flush.NewPeriodic(timedFlusher{s}, flush.PeriodicOptions{Interval: s.opts.FlushInterval,
			LeastPages: s.opts.FlushLeastPages, ThoroughInterval: s.opts.FlushThoroughInterval,
			Clock: s.opts.Clock, Logger: s.opts.Logger})
	}
	if s.sched, err = newScheduler(s); err != nil {
		return err
	}
	if s.timers, err = newTimers(s); err != nil {
		return err
	}
	if s.txn, err = s.newTxnService(); err != nil {
		return err
	}
	if s.consumers, err = s.newConsumers(); err != nil {
		return err
	}
	// Before the first put: see ClampOffsets.
	if err := s.consumers.ClampOffsets(); err != nil {
		return err
	}
	return nil
}

// markOpen creates the abort marker durably: until Close removes it, a
// reopen knows the store did not shut down cleanly.
func (s *Store) markOpen() error {
	f, err := s.fs.OpenFile(s.path(abortName), os.O_CREATE|os.O_RDWR, 0o600)
	if err == nil {
		err = f.Close()
	}
	if err == nil {
		err = s.fs.SyncDir(s.dir)
	}
	if err != nil {
		return fmt.Errorf("mqlite: create abort marker: %w (%w)", errs.ErrIO, err)
	}
	return nil
}

// openIndexes opens the ConsumeQueue and the IndexFile, drops entries past
// the recovered CommitLog end, re-dispatches what they miss (see
// dispatchStart), rebuilds each queue's next offset from the ConsumeQueue,
// and starts the dispatcher.
func (s *Store) openIndexes(cp checkpoint, cpOK bool) error {
	cqDir, idxDir := s.path("consumequeue"), s.path("index")
	end := s.log.WrotePosition()
	var marks []queueMark // the checkpoint's queue marks, if they can be held against the queues
	if marksTrusted(cp, cpOK, end) {
		marks = cp.marks
	} else if cpOK && len(cp.marks) > 0 {
		// The CommitLog lost records the marks count. Once it has grown
		// past marksAt again (puts after this Open, a crash before the
		// next checkpoint), the next Open would trust them, and move a
		// queue whose lost records were never rebuilt on to a count it
		// no longer has: they go now.
		cp.marks, cp.marksAt = nil, 0
		if err := s.writeCheckpoint(cp); err != nil {
			return err
		}
	}
	if s.rebuild {
		if err := s.removeIndexes(marks != nil); err != nil {
			return err
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
		return err
	}
	idx, err := indexfile.Open(indexfile.Options{FS: s.fs, Dir: idxDir, Slots: s.opts.IndexSlots,
		Entries: s.opts.IndexEntries, Logger: s.opts.Logger})
	if err != nil {
		cq.Close()
		return err
	}
	s.disp = newDispatcher(s, cq, idx, 0)
	if err := errors.Join(cq.TruncateAfterPhys(end), idx.TruncateAfterPhys(end)); err != nil {
		return err
	}
	// Queue minimums are not stored: re-apply retention inside the first
	// files before re-dispatching, or a minimum would move back to entries
	// whose records are gone, and a queue whose unsynced tail entries
	// pointed into a removed segment would see its next record as a gap
	// in a non-empty queue (ErrConflict) instead of as a restart.
	if _, err := cq.DeleteBelowPhys(s.log.MinOffset()); err != nil {
		return err
	}
	start := s.log.MinOffset()
	// Without the topic registry, the topics are restored from the queues
	// on disk (restoreTopics): every queue the CommitLog has records of
	// must be there, one whose directory went with the registry too.
	if cpOK && cqExisted && idxExisted && s.topics.Found() {
		start = min(max(cp.dispatched, start), idx.EndPhyOffset(), end)
	}
	if e, ok := cq.RepairedPhysEnd(); ok {
		// Recovery dropped entries of a queue (damage in its files): they
		// are rebuilt from where that queue now ends, which may be far
		// below the checkpoint if no later record belongs to it.
		start = min(start, max(e, s.log.MinOffset()))
	}
	if q, ok := s.queueBelowMarks(cq, marks, true); ok && start > s.log.MinOffset() {
		// Checked before re-dispatching: the records after the checkpoint
		// would restart an emptied queue at their own offsets and hide
		// it. A repaired queue is checked after.
		s.opts.Logger.Warn("mqlite: a ConsumeQueue holds fewer entries than the checkpoint counted; re-dispatching the whole CommitLog", "queue", q)
		start = s.log.MinOffset()
	}
	s.disp.next = max(start, s.log.MinOffset())
	s.disp.verify = true
	if err := s.lowerDispatched(cp, cpOK, s.disp.next); err != nil {
		return err
	}
	err = s.disp.catchUp(end)
	redo := false
	switch {
	case err == nil && start > s.log.MinOffset():
		// A queue that holds fewer entries than the checkpoint counted
		// (a repaired one) or than a group committed on it lost some
		// below the checkpoint (its directory or a file gone): rebuild
		// everything, or its next puts would take queue offsets its
		// records already have and the commit would be cut to its end.
		if q, ok := s.queueBelowMarks(cq, marks, false); ok {
			s.opts.Logger.Warn("mqlite: a ConsumeQueue holds fewer entries than the checkpoint counted; re-dispatching the whole CommitLog", "queue", q)
			redo = true
		} else if q, ok := s.queueBehindCommits(cq); ok {
			s.opts.Logger.Warn("mqlite: a ConsumeQueue holds less than was committed on it; re-dispatching the whole CommitLog", "queue", q)
			redo = true
		}
	case errors.Is(err, consumequeue.ErrConflict):
		// A queue lost entries below the checkpoint (damaged file): rebuild
		// everything; re-dispatch is idempotent. A conflict again means a
		// queue holds entries of other records (an ErrCorrupt locating it):
		// Open fails, and RebuildIndexes rebuilds the queues.
		s.opts.Logger.Warn("mqlite: a ConsumeQueue lost entries; re-dispatching the whole CommitLog", "err", err)
		redo = true
	case errors.Is(err, errs.ErrCorrupt) && start > s.log.MinOffset():
		// The checkpoint's dispatched offset is not where a record starts
		// (recovery validated the records, not the checkpoint): treat it
		// as unknown, as a damaged checkpoint. Real damage fails again.
		s.opts.Logger.Warn("mqlite: the checkpoint's dispatched offset is not a record; re-dispatching the whole CommitLog",
			"dispatched", cp.dispatched, "err", err)
		redo = true
	}
	if redo {
		start = s.log.MinOffset()
		s.disp.next = start
		if err := s.lowerDispatched(cp, cpOK, start); err != nil {
			return err
		}
		err = s.disp.catchUp(end)
	}
	if err != nil {
		return err
	}
	s.disp.verify = false
	s.recovery.Redispatched = end - start
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

// Recovery reports what Open found and repaired.
func (s *Store) Recovery() RecoveryReport { return s.recovery }

// Dir returns the store's directory.
func (s *Store) Dir() string { return s.dir }

func (s *Store) checkpointLoop() {
	defer close(s.cpDone)
	t := s.opts.Clock.NewTicker(s.opts.CheckpointInterval)
	defer t.Stop()
	var last checkpoint
	for {
		select {
		case <-t.C():
			cp, err := s.currentCheckpoint()
			if err != nil {
				s.opts.Logger.Error("mqlite: flush indexes", "err", err)
				continue
			}
			if !cp.same(last) {
				if err := s.writeCheckpoint(cp); err != nil {
					s.opts.Logger.Error("mqlite: checkpoint", "err", err)
					continue
				}
				last = cp
			}
		case <-s.cpQuit:
			return
		}
	}
}

// currentCheckpoint flushes the indexes and returns a checkpoint saying
// how far they are built (captured before the flush) and how far the
// CommitLog is durable.
func (s *Store) currentCheckpoint() (checkpoint, error) {
	marks, dispatched := s.marksAndDispatched()
	if err := errors.Join(s.disp.cq.Flush(), s.disp.idx.Flush()); err != nil {
		return checkpoint{}, err
	}
	return checkpoint{flushed: s.log.FlushedPosition(), dispatched: dispatched, marks: marks, marksAt: dispatched}, nil
}

// Close flushes everything, writes the checkpoint, removes the abort
// marker and releases the directory. It is idempotent; afterwards every
// call returns ErrClosed. A store fenced by a failed sync closes without
// the checkpoint and the marker, so that the next Open recovers as after a
// crash, and Close returns the fencing error (ErrFenced, wrapping the
// failure): what was not acknowledged may be lost. Close of a nil *Store
// returns ErrInvalidArgument.
func (s *Store) Close() error {
	if s == nil {
		return errs.NilReceiver("mqlite.Store")
	}
	s.closeOnce.Do(func() {
		s.handles.Lock()
		s.closed.Store(true) // under the lock: no handle is added after
		s.handles.Unlock()
		if s.readOnly {
			s.closeErr = s.closeReadOnly()
			return
		}
		s.repl.close()
		cErr := s.consumers.Close()
		hErr := s.closeHandles()
		txErr := s.txn.Close()
		var schedErr error
		if s.repl.servicesRunning() {
			s.timers.stop()
			schedErr = s.sched.stop()
		}
		s.stopGuard()
		if s.retQuit != nil {
			close(s.retQuit)
			<-s.retDone
		}
		close(s.cpQuit)
		<-s.cpDone
		errList := []error{cErr, hErr, txErr, schedErr}
		if s.groupCommit != nil {
			s.groupCommit.Close()
		}
		if s.periodic != nil {
			s.periodic.Close()
		}
		errList = append(errList, s.disp.stop())
		cp, cpErr := s.currentCheckpoint()
		errList = append(errList, cpErr)
		fenced := s.log.Fenced()
		errList = append(errList, fenced, s.log.Close())
		if fenced == nil && cpErr == nil {
			cp.flushed = s.log.FlushedPosition()
			errList = append(errList, s.writeCheckpoint(cp))
			if err := s.fs.Remove(s.path(abortName)); err != nil {
				errList = append(errList, fmt.Errorf("mqlite: remove abort marker: %w (%w)", errs.ErrIO, err))
			} else if err := s.fs.SyncDir(s.dir); err != nil {
				errList = append(errList, fmt.Errorf("mqlite: sync %s: %w (%w)", s.dir, errs.ErrIO, err))
			}
		}
		errList = append(errList, s.release())
		s.closeErr = errors.Join(errList...)
	})
	return s.closeErr
}

// abortOpen undoes a failed open: it stops the goroutines open started
// (the dispatcher, the flusher), then releases the files.
func (s *Store) abortOpen() {
	if s.dispRunning {
		close(s.disp.quit)
		<-s.disp.done
	}
	if s.groupCommit != nil {
		s.groupCommit.Close()
	}
	if s.periodic != nil {
		s.periodic.Close()
	}
	s.release()
	// Indexes this Open began to build from nothing: gone, so that the
	// next Open builds them from nothing too (and meets what failed this
	// one) instead of trusting a part.
	for _, dir := range s.builtDirs {
		if err := s.fs.RemoveAll(dir); err != nil {
			s.opts.Logger.Warn("mqlite: failed open: cannot remove the index directory it created", "dir", dir, "err", err)
		}
	}
	if len(s.builtDirs) > 0 {
		if err := s.fs.SyncDir(s.dir); err != nil {
			s.opts.Logger.Warn("mqlite: failed open: sync", "dir", s.dir, "err", err)
		}
	}
}

// release frees what open acquired, for Close and failed opens.
func (s *Store) release() error {
	var err error
	if s.disp != nil {
		err = errors.Join(s.disp.cq.Close(), s.disp.idx.Close())
	}
	if s.log != nil {
		err = errors.Join(err, s.log.Close())
	}
	if s.lock != nil {
		if lerr := s.lock.Close(); err == nil {
			err = lerr
		}
		s.lock = nil
	}
	return err
}
