package consumequeue

import (
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/mqlite/mqlite/internal/errs"
	"github.com/mqlite/mqlite/vfs"
)

// Queue is the consume queue of one (topic, queue id): a dense array of
// entries indexed by logical offset. One goroutine at a time may write
// (Append); any number may read (Get, Read, MinOffset, MaxOffset, MaxPhysEnd)
// concurrently with it, without locks. Maintenance calls (Flush,
// TruncateAfterPhys, DeleteBelowPhys, Close) may come from other goroutines.
//
// Lock order: maint, then mu. Readers take neither.
type Queue struct {
	fs vfs.FS
	// unmapFirst: fs cannot remove a mapped file (Windows,
	// vfs.StrictMapFS), so a dropped file is removed once its segment is
	// unmapped (removeOnRelease).
	unmapFirst bool
	dir        string
	perFile    int64 // entries per file
	fileSize   int   // perFile * EntrySize
	log        *slog.Logger

	// Published state, read without locks. Writers store entry bytes, then
	// the snapshot, then min, then max. Readers pin the snapshot first, then
	// load max and min: an entry below max is fully written, and a slot
	// missing from an older snapshot makes them retry.
	snap    atomic.Pointer[snapshot]
	min     atomic.Int64  // first readable logical offset
	max     atomic.Int64  // next logical offset to write
	physEnd atomic.Int64  // End() of the last entry, 0 if none
	gen     atomic.Uint64 // odd while published bytes are rewritten
	closed  atomic.Bool

	maint   sync.Mutex   // serialises Flush, TruncateAfterPhys, DeleteBelowPhys, Close
	syncBuf []dirtyRange // guarded by maint

	// readOnly is set at open (Options.ReadOnly): nothing is written, and
	// the mappings are read-only (readonly.go).
	readOnly bool
	// repaired is set by recovery (Open, and TruncateAfterPhys after
	// it): it dropped entries or brought a file to size (see Repaired).
	repaired atomic.Bool
	// scanned is the first logical offset of the files recovery checked
	// entry by entry (the files before it are trusted); checkBackLocked
	// moves it back. Guarded by mu once the queue is published.
	scanned int64

	mu struct {
		sync.Mutex
		fenced   error       // first failed sync; writes refused after it
		old      []*snapshot // superseded snapshots that may still have readers
		retired  []*segment  // dropped from the snapshot, mapped until no pinned snapshot holds them
		dirDirty bool        // files created or removed since the last SyncDir
		// lazy: the directory and meta file do not exist yet; the first
		// file created makes them (a queue that never gets an entry
		// leaves nothing on disk). For a read-only queue: meta not yet
		// checked.
		lazy bool
	}
}

// segment is one mapped data file. Its descriptor is closed once it is
// mapped (the mapping outlives it, and writes and syncs go through the
// mapping), so open queues hold no file descriptors.
type segment struct {
	start int64 // logical offset of its first slot
	path  string
	m     vfs.Mapping
	b     []byte // the mapping, len == fileSize

	dirtyLo, dirtyHi int // unsynced byte range; guarded by Queue.mu
	// removeOnRelease: retired with its file still there, to be removed
	// once unmapped (Queue.unmapFirst).
	removeOnRelease bool
}

type dirtyRange struct {
	seg    *segment
	lo, hi int
}

func (s *segment) markDirty(lo, hi int) {
	if s.dirtyHi == 0 {
		s.dirtyLo, s.dirtyHi = lo, hi
		return
	}
	s.dirtyLo, s.dirtyHi = min(s.dirtyLo, lo), max(s.dirtyHi, hi)
}

// Open opens the queue in opts.Dir, creating the directory and its meta file
// if missing, and recovers it (see the package documentation). Damaged data
// files are repaired by dropping everything from the first invalid entry on;
// a damaged meta file, or data files without one, is a *CorruptError, and a
// meta file of another version, or of another EntriesPerFile than a
// nonzero opts.EntriesPerFile, is ErrIncompatible.
func Open(opts Options) (*Queue, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	q := newQueue(o)
	if o.ReadOnly {
		return openReadOnly(q)
	}
	existed := vfs.Exists(q.fs, q.dir)
	if err := q.fs.MkdirAll(q.dir, 0o700); err != nil {
		return nil, fmt.Errorf("mqlite/consumequeue: open %s: %w", q.dir, errs.Disk(err))
	}
	perFile := o.EntriesPerFile
	if o.adopt {
		perFile = 0 // an existing queue keeps its own
	}
	hadMeta, err := q.loadMeta(perFile)
	if err != nil {
		return nil, err
	}
	// A directory with neither meta nor data file lost them: the meta
	// file is written with the directory, the first data file right
	// after it. Recovered as a meta file without data files is, so that
	// the Open after this one (which finds the meta file written now)
	// does not see a different queue.
	if err := q.recover(hadMeta || existed); err != nil {
		q.releaseAll()
		return nil, err
	}
	return q, nil
}

func newQueue(o Options) *Queue {
	q := &Queue{
		fs:         o.FS,
		unmapFirst: vfs.MustUnmapFirst(o.FS),
		dir:        o.Dir,
		perFile:    int64(o.EntriesPerFile),
		fileSize:   o.EntriesPerFile * EntrySize,
		log:        o.Logger.With("queue", o.Dir),
		readOnly:   o.ReadOnly,
	}
	q.snap.Store(&snapshot{})
	return q
}

// lazyQueue returns an empty queue whose directory does not exist yet:
// nothing is created before its first entry.
func lazyQueue(o Options) *Queue {
	q := newQueue(o)
	q.mu.lazy = true
	return q
}

func (q *Queue) isLazy() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.mu.lazy
}

// materializeLocked creates the directory and meta file of a lazy queue.
func (q *Queue) materializeLocked() error {
	if err := q.fs.MkdirAll(q.dir, 0o700); err != nil {
		return fmt.Errorf("mqlite/consumequeue: create %s: %w", q.dir, errs.Disk(err))
	}
	if err := vfs.WriteFileAtomic(q.fs, q.dir, metaName, encodeMeta(int(q.perFile))); err != nil {
		return fmt.Errorf("mqlite/consumequeue: write %s: %w", filepath.Join(q.dir, metaName), errs.Disk(err))
	}
	q.mu.lazy = false
	return nil
}

// Dir returns the queue's directory.
func (q *Queue) Dir() string { return q.dir }

// Locate names the data file that holds the entry at logical offset
// logical and the entry's byte offset in it, for errors that point at an
// entry: files are named by their first entry, so this needs no lookup.
func (q *Queue) Locate(logical int64) (path string, off int64) {
	start := logical - logical%q.perFile
	return filepath.Join(q.dir, fileName(start*EntrySize)), (logical - start) * EntrySize
}

// MinOffset returns the first logical offset that can be read.
func (q *Queue) MinOffset() int64 { return q.min.Load() }

// MaxOffset returns the next logical offset to be written (exclusive end);
// entries [MinOffset, MaxOffset) can be read. MaxOffset-MinOffset is the
// number of readable entries.
func (q *Queue) MaxOffset() int64 { return q.max.Load() }

// Repaired reports whether Open (or TruncateAfterPhys after it) repaired
// the queue: it dropped entries (a damaged or torn tail, a gap between
// files and the files after it, a damaged entry in a file the next Open
// would scan), brought a file of the wrong size to size, or found a meta
// file with no data file beside it. The dropped entries are
// derived data: re-dispatching the CommitLog from MaxPhysEnd restores
// them.
func (q *Queue) Repaired() bool { return q.repaired.Load() }

// MaxPhysEnd returns Offset+Size of the last entry (0 if the queue's files
// hold none, e.g. new or truncated to its start): how far the CommitLog has
// been dispatched into this queue. It survives retention and reopening.
func (q *Queue) MaxPhysEnd() int64 { return q.physEnd.Load() }

// Append stores e at logical offset logical. It is for the queue's single
// writer (the dispatcher):
//   - logical == MaxOffset(): appends.
//   - logical < MaxOffset(): a re-dispatched duplicate; nil if it equals the
//     stored entry, ErrConflict if it differs; a damaged stored entry is
//     rewritten with e. Slots that cannot be checked
//     (removed by retention, fillers, damaged below MinOffset) are ignored.
//   - logical > MaxOffset(): allowed only when the queue is empty
//     (MinOffset() == MaxOffset(), e.g. new, or emptied by retention): the
//     queue restarts in the file holding logical, the slots before it are
//     filled with filler entries, every other file is removed, and
//     MinOffset becomes logical. Otherwise ErrConflict.
//
// A new entry must not point backwards: e.Offset >= MaxPhysEnd(). The entry
// is visible to readers when Append returns; it is durable after Flush.
func (q *Queue) Append(logical int64, e Entry) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if err := q.appendableLocked(); err != nil {
		return err
	}
	return q.appendOneLocked(logical, e)
}

// AppendBatch is Append of es[i] at first+i, in order, under one lock
// hold; a run at the end of the queue is written in one go and published
// once, so readers see it whole. It returns how many entries it stored:
// on an error, those before the failing one.
func (q *Queue) AppendBatch(first int64, es []Entry) (int, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if err := q.appendableLocked(); err != nil {
		return 0, err
	}
	n := 0
	for n < len(es) {
		if first+int64(n) == q.max.Load() {
			k, err := q.appendRunLocked(first+int64(n), es[n:])
			n += k
			if err != nil {
				return n, err
			}
			continue
		}
		if err := q.appendOneLocked(first+int64(n), es[n]); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

// appendableLocked says why the queue takes no entries, if it does not.
func (q *Queue) appendableLocked() error {
	if q.readOnly && !q.closed.Load() {
		return fmt.Errorf("mqlite/consumequeue: append to %s: %w", q.dir, ErrReadOnly)
	}
	return q.writableLocked("append to")
}

// appendOneLocked is Append under the lock.
func (q *Queue) appendOneLocked(logical int64, e Entry) error {
	if err := checkEntry(e); err != nil {
		return fmt.Errorf("mqlite/consumequeue: append to %s at %d: %w", q.dir, logical, err)
	}
	if logical < 0 || logical > maxLogical {
		return fmt.Errorf("mqlite/consumequeue: append to %s: logical offset %d out of range: %w", q.dir, logical, ErrInvalidArgument)
	}
	end := q.max.Load()
	switch {
	case logical == end:
		return q.appendLocked(logical, e)
	case logical < end:
		return q.duplicateLocked(logical, e)
	case q.min.Load() != end:
		return fmt.Errorf("mqlite/consumequeue: append to %s at %d: past the end %d of a non-empty queue: %w", q.dir, logical, end, ErrConflict)
	default:
		return q.holeLocked(logical, e)
	}
}

// appendRunLocked writes es at logical == max onwards, publishing physEnd
// and max once after the last entry it wrote. It stops at the first entry
// that is invalid or points backwards, returning how many it wrote.
func (q *Queue) appendRunLocked(logical int64, es []Entry) (n int, err error) {
	physEnd := q.physEnd.Load()
	defer func() {
		if n > 0 {
			q.physEnd.Store(physEnd)
			q.max.Store(logical + int64(n))
		}
	}()
	var seg *segment
	for ; n < len(es); n++ {
		e, at := es[n], logical+int64(n)
		if err := checkEntry(e); err != nil {
			return n, fmt.Errorf("mqlite/consumequeue: append to %s at %d: %w", q.dir, at, err)
		}
		if at > maxLogical {
			return n, fmt.Errorf("mqlite/consumequeue: append to %s: logical offset %d out of range: %w", q.dir, at, ErrInvalidArgument)
		}
		if e.Offset < physEnd {
			return n, q.backwards(at, e)
		}
		if seg == nil || at >= seg.start+q.perFile {
			segs := q.snap.Load().segs
			if k := len(segs); k > 0 && at < segs[k-1].start+q.perFile {
				seg = segs[k-1]
			} else if seg, err = q.createLocked(at); err != nil {
				return n, err
			}
		}
		off := int(at-seg.start) * EntrySize
		putEntry(seg.b[off:off+EntrySize], e)
		seg.markDirty(off, off+EntrySize)
		physEnd = e.End()
	}
	return n, nil
}

// appendLocked writes e at logical == max.
func (q *Queue) appendLocked(logical int64, e Entry) error {
	if e.Offset < q.physEnd.Load() {
		return q.backwards(logical, e)
	}
	segs := q.snap.Load().segs
	var seg *segment
	if n := len(segs); n > 0 && logical < segs[n-1].start+q.perFile {
		seg = segs[n-1]
	} else {
		var err error
		if seg, err = q.createLocked(logical); err != nil {
			return err
		}
	}
	q.writeLocked(seg, logical, e)
	return nil
}

// writeLocked writes e at logical, the queue's end, into seg (the file
// holding it) and moves the end past it.
func (q *Queue) writeLocked(seg *segment, logical int64, e Entry) {
	off := int(logical-seg.start) * EntrySize
	putEntry(seg.b[off:off+EntrySize], e)
	seg.markDirty(off, off+EntrySize)
	q.physEnd.Store(e.End())
	q.max.Store(logical + 1)
}

// holeLocked writes e at logical > max into an empty queue (min == max): the
// queue restarts at logical (restartLocked) and e is its first entry.
func (q *Queue) holeLocked(logical int64, e Entry) error {
	if e.Offset < q.physEnd.Load() {
		return q.backwards(logical, e)
	}
	q.gen.Add(1) // odd: readers wait, and retry if they read before
	defer q.gen.Add(1)
	seg, err := q.restartLocked(logical)
	if err != nil {
		return err
	}
	q.writeLocked(seg, logical, e)
	return nil
}

// Restart moves an empty queue (MinOffset() == MaxOffset()) on to next:
// both become next, as if entries up to it had been appended and then
// removed by retention, and the next Append is at next. It is for an owner
// that knows the queue handed out offsets up to next whose entries are
// gone, files and records both (mqlite's Open uses it so that such a
// queue's offsets never go back). The queue restarts as Append does for a
// hole; it is durable after Flush. next == MaxOffset() changes nothing; a
// smaller next is ErrInvalidArgument, a queue holding entries ErrConflict.
func (q *Queue) Restart(next int64) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if err := q.appendableLocked(); err != nil {
		return err
	}
	switch max := q.max.Load(); {
	case next == max:
		return nil
	case next < max:
		return fmt.Errorf("mqlite/consumequeue: restart %s at %d, below its end %d: %w", q.dir, next, max, ErrInvalidArgument)
	case q.min.Load() != max:
		return fmt.Errorf("mqlite/consumequeue: restart %s at %d: it holds entries [%d, %d): %w", q.dir, next, q.min.Load(), max, ErrConflict)
	}
	q.gen.Add(1) // odd: readers wait, and retry if they read before
	defer q.gen.Add(1)
	_, err := q.restartLocked(next)
	return err
}

// ensureFile gives a queue with no data file its first one, at its end
// (Store.Rebuilt).
func (q *Queue) ensureFile() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if err := q.appendableLocked(); err != nil {
		return err
	}
	if len(q.snap.Load().segs) > 0 {
		return nil
	}
	q.gen.Add(1) // odd: readers wait, and retry if they read before
	defer q.gen.Add(1)
	_, err := q.restartLocked(q.max.Load())
	return err
}

// restartLocked empties the queue into a fresh file holding logical, whose
// earlier slots become fillers, and moves MinOffset and MaxOffset to
// logical; every old file is removed (they hold no live entry). Fillers
// thus only ever sit at the start of the first file. Published bytes are
// never rewritten: a reader from before the queue emptied keeps the old
// mapping. The caller holds the generation odd.
func (q *Queue) restartLocked(logical int64) (*segment, error) {
	if err := q.dropLocked(q.snap.Load().segs, nil); err != nil {
		return nil, err
	}
	seg, err := q.createLocked(logical - logical%q.perFile)
	if err != nil {
		return nil, err
	}
	off := int(logical-seg.start) * EntrySize
	for p := 0; p < off; p += EntrySize {
		copy(seg.b[p:p+EntrySize], fillerBytes[:])
	}
	if off > 0 {
		seg.markDirty(0, off)
	}
	q.min.Store(logical)
	q.max.Store(logical)
	return seg, nil
}

func (q *Queue) backwards(logical int64, e Entry) error {
	return fmt.Errorf("mqlite/consumequeue: append to %s at %d: offset %d points before the last entry's end %d: %w",
		q.dir, logical, e.Offset, q.physEnd.Load(), ErrConflict)
}

// duplicateLocked handles a re-dispatch of logical < max: it is compared
// with the stored entry if there is one; a slot retention removed, a filler,
// or a damaged slot below MinOffset cannot be checked and is ignored, and
// a damaged slot from MinOffset on is rewritten with e.
func (q *Queue) duplicateLocked(logical int64, e Entry) error {
	segs := q.snap.Load().segs
	b := q.slot(segs, logical)
	if b == nil {
		return nil
	}
	stored, ok := decodeEntry(b)
	switch {
	case ok && isFiller(stored), !ok && logical < q.min.Load():
		return nil
	case !ok:
		// A damaged slot in a file recovery trusted: the re-dispatched
		// entry is its record's (the CommitLog is the truth), so it is
		// rewritten, under an odd generation so that readers retry.
		q.log.Warn("consumequeue: damaged entry rewritten by re-dispatch", "queue", q.dir, "logical", logical)
		q.gen.Add(1)
		putEntry(b, e)
		q.gen.Add(1)
		seg := segs[(logical-segs[0].start)/q.perFile]
		off := int(logical-seg.start) * EntrySize
		seg.markDirty(off, off+EntrySize)
		return nil
	case stored == e:
		return nil
	}
	return fmt.Errorf("mqlite/consumequeue: append to %s at %d: %+v differs from stored %+v: %w", q.dir, logical, e, stored, ErrConflict)
}

// Flush makes every entry appended so far durable: it syncs the dirty range
// of each mapped file, then the directory if files were created or removed.
// A failed sync fences the queue: later writes return ErrFenced.
func (q *Queue) Flush() error {
	q.maint.Lock()
	defer q.maint.Unlock()
	if q.closed.Load() {
		return fmt.Errorf("mqlite/consumequeue: flush %s: %w", q.dir, ErrClosed)
	}
	if q.readOnly {
		return nil // nothing was written
	}
	return q.flushMaint()
}

// flushMaint syncs without holding mu across the syncs, so Append is not
// blocked by them. It pins the snapshot it syncs, like a reader, so that no
// segment is unmapped meanwhile (a hole fill may retire segments without
// maint). The caller holds maint.
func (q *Queue) flushMaint() error {
	q.mu.Lock()
	if err := q.mu.fenced; err != nil {
		q.mu.Unlock()
		return fmt.Errorf("mqlite/consumequeue: flush %s: %w (after: %w)", q.dir, ErrFenced, err)
	}
	snap := q.snap.Load() // current under mu, so pinning cannot race a publish
	snap.readers.Add(1)
	defer snap.readers.Add(-1)
	ranges := q.syncBuf[:0]
	for _, s := range snap.segs {
		if s.dirtyHi > 0 {
			ranges = append(ranges, dirtyRange{s, s.dirtyLo, s.dirtyHi})
			s.dirtyLo, s.dirtyHi = 0, 0
		}
	}
	dirDirty := q.mu.dirDirty
	q.mu.dirDirty = false
	q.releaseRetiredLocked()
	q.mu.Unlock()

	var err error
	for _, r := range ranges {
		if d, ok := r.seg.m.(vfs.Dropper); ok {
			// Entries are appended: the pages below the one holding hi
			// are complete, and dropping them spares the sync a
			// shootdown per page (vfs.Dropper).
			lo := r.lo &^ (vfs.PageSize - 1)
			d.Drop(lo, r.hi-lo)
		}
		if serr := r.seg.m.Sync(r.lo, r.hi-r.lo); serr != nil {
			err = fmt.Errorf("mqlite/consumequeue: sync %s: %w", r.seg.path, errs.Disk(serr))
			break
		}
	}
	if err == nil && dirDirty {
		if serr := q.fs.SyncDir(q.dir); serr != nil {
			err = fmt.Errorf("mqlite/consumequeue: sync %s: %w", q.dir, errs.Disk(serr))
		}
	}
	clear(ranges)
	q.syncBuf = ranges[:0]
	if err != nil {
		q.mu.Lock()
		q.mu.fenced = err
		q.mu.Unlock()
		return fmt.Errorf("%w: %w", ErrFenced, err)
	}
	return nil
}

// Close flushes (unless fenced), waits for in-flight readers, and unmaps and
// closes every file, including files DeleteBelowPhys dropped. It is
// idempotent; afterwards every other call returns ErrClosed.
func (q *Queue) Close() error {
	q.maint.Lock()
	defer q.maint.Unlock()
	q.mu.Lock()
	if q.closed.Load() {
		q.mu.Unlock()
		return nil
	}
	q.closed.Store(true)
	fenced := q.mu.fenced
	q.mu.Unlock()
	var err error
	if fenced == nil && !q.readOnly {
		err = q.flushMaint()
	}
	// Wait for readers: new ones see closed and leave without touching
	// the mappings.
	for !q.drained() {
		runtime.Gosched()
	}
	return errors.Join(err, q.releaseAll())
}

// drained reports whether no reader pins any snapshot.
func (q *Queue) drained() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.releaseRetiredLocked()
	return len(q.mu.old) == 0 && q.snap.Load().readers.Load() == 0
}

// releaseAll unmaps and closes every segment. No reader may be active.
func (q *Queue) releaseAll() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	var err error
	for _, s := range q.snap.Load().segs {
		err = errors.Join(err, s.release())
	}
	for _, s := range q.mu.retired {
		err = errors.Join(err, s.release())
		q.removeReleased(s)
	}
	q.snap.Store(&snapshot{})
	q.mu.retired, q.mu.old = nil, nil
	if err != nil {
		return fmt.Errorf("mqlite/consumequeue: close %s: %w", q.dir, errs.Disk(err))
	}
	return nil
}
