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
	"github.com/mqlite/mqlite/internal/errs"
	"github.com/mqlite/mqlite/topic"
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

	log  *commitlog.Log
	disp *dispatcher
	dur  durability // the flush mode: group commit or periodic flusher

	stepMu sync.Mutex // Options.Stepped: one Settle at a time (settle_stepped.go)

	// queues holds each topic's next offset per queue id. It is read and
	// written only inside commitlog's append lock (EncodePayload) and
	// during Open, like the fields after it.
	queues      map[string]*topicNext
	lastNext    *topicNext // the entry of the last put's topic (nextOffsets)
	lastStoreMs int64
	topics      *topic.Registry
	svc         atomic.Pointer[services] // replica_services.go
	retry       retryPolicies
	guard       guard
	metrics     metrics
	hooks       storeHooks                             // Options.Hooks, wrapped to recover panics
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

	replies replyRouter  // request-reply: see reply.go
	retain  retainState  // per-topic retention, purge, delete: see retain.go
	dedup   *dedupWindow // Message.DedupID: see dedup.go; nil when off
	repl    replication  // replication.go

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
	s.hooks.init(s)
	s.explicitSegment = opts != nil && opts.SegmentSize != 0
	s.rebuild = rebuild
	if err := s.initReplication(); err != nil {
		return nil, err
	}
	if err := s.open(); err != nil {
		s.abortOpen()
		return nil, err
	}
	s.dedup = newDedupWindow(s.opts.DedupWindow, s.opts.DedupMaxIDs)
	s.rebuildDedup()
	go s.checkpointLoop()
	s.startGuard()
	if s.opts.Retention > 0 {
		s.retQuit, s.retDone = make(chan struct{}), make(chan struct{})
		go s.retentionLoop()
	}
	if s.repl.servicesRunning() { // not on a replica (replica_promote.go)
		s.sched().Start()
		s.timers().Start()
	}
	if err := s.txn().Start(); err != nil {
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
	if err := s.loadFloors(); err != nil {
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
		SmallSyncs: s.opts.Flush == FlushSync, RawThrough: s.opts.Role == Replica, RecoverFrom: -1, Trusted: trusted, CleanShutdown: clean && cpOK,
	})
	if err != nil {
		return err
	}
	s.dur = newDurability(s)
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
	sv := &services{}
	s.svc.Store(sv)
	if err := s.openDelays(sv); err != nil {
		return err
	}
	if sv.txn, err = s.newTxnService(s.repl.isReplica()); err != nil {
		return err
	}
	if sv.consumers, err = s.newConsumers(s.repl.isReplica()); err != nil {
		return err
	}
	// Before the first put: see ClampOffsets.
	if err := sv.consumers.ClampOffsets(); err != nil {
		return err
	}
	return s.finishDeletes()
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
		errList := s.stopServices() // replication, consumers, handles, transactions, delays
		s.stopGuard()
		if s.retQuit != nil {
			close(s.retQuit)
			<-s.retDone
		}
		close(s.cpQuit)
		<-s.cpDone
		s.dur.close()
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
	if s.dur != nil {
		s.dur.close()
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
