package indexfile

import (
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/cespare/xxhash/v2"

	"github.com/mqlite/mqlite/internal/errs"
	"github.com/mqlite/mqlite/vfs"
)

// Index is a hash index from string keys to commitlog offsets over a
// directory of index files. Put, Flush, TruncateAfterPhys, DeleteBelowPhys
// and Close serialize on one mutex (one dispatcher goroutine normally calls
// Put); Query and EndPhyOffset take no lock and never block the writer.
type Index struct {
	opts   Options
	log    *slog.Logger
	files  atomic.Pointer[[]*file] // oldest first; replaced, never mutated
	closed atomic.Bool

	// mu serializes writers. It also guards the writer fields of every
	// file (usedSlots, flushed, dirty) and the header bytes in the mappings.
	// It is never held across the syncs of a Flush.
	mu struct {
		sync.Mutex
		fenced error // a failed sync; Put and Flush return it
		// redo: Open or a truncation left the index ending at a record
		// whose keys the caller re-dispatches (from EndPhyOffset,
		// inclusive); until a later record comes, Put skips the keys of
		// that record already indexed, so a reopen adds no entry.
		redo bool
	}
	// flushMu serializes Flush and Close; it is taken before mu.
	flushMu sync.Mutex
}

// Open opens (creating if needed) the index in opts.Dir and recovers it:
// see "Recovery" in the package documentation. Damaged files are deleted
// and logged, so EndPhyOffset reflects only trusted files. A file of
// another format version fails Open with an error matching ErrVersion.
func Open(opts Options) (*Index, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	if o.ReadOnly {
		return openReadOnly(o)
	}
	x := &Index{opts: o, log: o.Logger}
	cands, err := x.listFiles()
	if err != nil {
		return nil, err
	}

	var files []*file
	closeAll := func() {
		for _, f := range files {
			f.release()
		}
	}
	drop := -1 // cands[drop:] are deleted
	for i, c := range cands {
		f, repaired, err := openFile(o.FS, c.path, c.phys, x.log)
		if err == nil && len(files) > 0 && f.beginPhys < files[len(files)-1].endPhys.Load() {
			f.release()
			err = &CorruptError{Path: c.path, Reason: "indexfile: file begins before the previous file ends"}
		}
		if errors.Is(err, ErrCorrupt) {
			x.log.Error("indexfile: deleting a damaged index file and every newer one; re-dispatch from EndPhyOffset rebuilds them",
				"path", c.path, "err", err)
			drop = i
			break
		}
		if err != nil {
			closeAll()
			return nil, err
		}
		files = append(files, f)
		if repaired && i < len(cands)-1 {
			x.log.Error("indexfile: an older file was not flushed; deleting every newer file so that re-dispatch rebuilds them",
				"path", c.path)
			drop = i + 1
			break
		}
	}
	if drop >= 0 {
		if err := x.deleteFiles(cands[drop:]); err != nil {
			closeAll()
			return nil, err
		}
	}
	x.files.Store(&files)
	x.mu.redo = true
	return x, nil
}

// candidate is an index file found in the directory.
type candidate struct {
	path string
	phys int64
}

// listFiles creates the directory if needed and lists the index files in
// it (other names are not ours; a directory with an index
// file's name is ignored).
func (x *Index) listFiles() ([]candidate, error) {
	o := x.opts
	if err := o.FS.MkdirAll(o.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("mqlite/indexfile: create %s: %w", o.Dir, errs.Disk(err))
	}
	names, err := o.FS.ReadDir(o.Dir)
	if err != nil {
		return nil, fmt.Errorf("mqlite/indexfile: list %s: %w", o.Dir, errs.Disk(err))
	}
	var cands []candidate
	for _, name := range names {
		phys, ok := parseName(name)
		path := filepath.Join(o.Dir, name)
		if !ok {
			continue // not ours
		}
		if _, isDir, err := o.FS.Stat(path); err != nil {
			return nil, fmt.Errorf("mqlite/indexfile: stat %s: %w", path, errs.Disk(err))
		} else if isDir {
			x.log.Warn("indexfile: ignoring a directory with an index file name", "path", path)
			continue
		}
		cands = append(cands, candidate{path, phys})
	}
	return cands, nil
}

// deleteFiles deletes the index files of cands and syncs the directory.
func (x *Index) deleteFiles(cands []candidate) error {
	for _, c := range cands {
		if err := x.opts.FS.Remove(c.path); err != nil {
			return fmt.Errorf("mqlite/indexfile: delete %s: %w", c.path, errs.Disk(err))
		}
		x.log.Warn("indexfile: deleted index file", "path", c.path)
	}
	if err := x.opts.FS.SyncDir(x.opts.Dir); err != nil {
		return fmt.Errorf("mqlite/indexfile: sync %s: %w", x.opts.Dir, errs.Disk(err))
	}
	return nil
}

func (x *Index) snapshot() []*file { return *x.files.Load() }

// publish replaces the file list with a fresh copy of files.
func (x *Index) publish(files []*file) {
	c := slices.Clone(files)
	x.files.Store(&c)
}

// Put indexes key for the record at commitlog offset phys stored at
// storeTimeMs (Unix ms). Call it from one writer goroutine, in commitlog
// order; a record with several keys calls it once per key with the same
// phys. A phys below the newest file's end offset is skipped (it was
// indexed before: re-dispatch after recovery). When the newest file is
// full, it is synced (one sync per DefaultEntries entries, paid by the
// writer) and a new file named by phys is created. Put does not allocate
// except when it creates a file. PutHashed does the same for many keys.
func (x *Index) Put(key string, phys int64, storeTimeMs int64) error {
	if key == "" {
		return invalidf("put: empty key")
	}
	one := [1]Hashed{{Hash: keyHash(key), Phys: phys, StoreMs: storeTimeMs}}
	return x.PutHashed(one[:])
}

// Hashed is one key to index, hashed with KeyHash, for the record at
// commitlog offset Phys stored at StoreMs (Unix ms).
type Hashed struct {
	Hash    uint32
	Phys    int64
	StoreMs int64
}

// KeyHash is the hash the index stores for key (never 0).
func KeyHash(key []byte) uint32 { return foldHash(xxhash.Sum64(key)) }

// PutHashed indexes hs in order, as that many Puts would, under one lock
// hold. It first reads the slots of all of them, so that their cache
// misses overlap instead of coming one after another. A zero hash or an
// offset or time out of range fails the whole batch (ErrInvalidArgument)
// and indexes nothing; after a failed sync (ErrFenced) the keys before the
// failing one stay indexed.
func (x *Index) PutHashed(hs []Hashed) error {
	for _, h := range hs {
		switch {
		case h.Hash == 0:
			return invalidf("put: zero hash")
		case h.Phys < 0:
			return invalidf("put: negative commitlog offset %d", h.Phys)
		case h.StoreMs < 0 || h.StoreMs > maxStoreTime:
			return invalidf("put: store time %d ms is outside [0, 2^53]", h.StoreMs)
		}
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if err := x.writableLocked("put"); err != nil {
		return err
	}
	if x.mu.fenced != nil {
		return x.mu.fenced
	}
	files := x.snapshot()
	var f *file
	if len(files) > 0 {
		f = files[len(files)-1]
		if len(hs) > 1 {
			f.touchSlots(hs)
		}
	}
	for _, h := range hs {
		if f != nil && h.Phys < f.endPhys.Load() {
			continue
		}
		if x.mu.redo {
			if f != nil && h.Phys == f.endPhys.Load() && f.count.Load() > 1 && f.holdsLocked(h.Hash, h.Phys) {
				continue // the newest record again, re-dispatched after Open: this key is indexed
			}
			if f == nil || h.Phys > f.endPhys.Load() {
				x.mu.redo = false
			}
		}
		if f == nil || f.full() {
			if f != nil && f.beginPhys == h.Phys {
				x.log.Warn("indexfile: a file is full of keys of one commitlog offset; key not indexed (raise Options.Entries)",
					"path", f.path, "phys", h.Phys)
				continue
			}
			var err error
			if f, err = x.rollLocked(x.snapshot(), h.Phys, h.StoreMs); err != nil {
				return err
			}
		}
		if err := f.appendLocked(h.Hash, h.Phys, h.StoreMs); err != nil {
			return x.fenceLocked(err)
		}
	}
	return nil
}

// rollLocked flushes the full newest file (so that only the newest file
// can be dirty after a crash) and creates the next one.
func (x *Index) rollLocked(files []*file, phys, t int64) (*file, error) {
	if len(files) > 0 {
		if err := files[len(files)-1].sealLocked(); err != nil {
			return nil, x.fenceLocked(err)
		}
	}
	f, fatal, err := createFile(x.opts.FS, x.opts.Dir, phys, t, x.opts.Slots, x.opts.Entries, x.log)
	if err != nil {
		if fatal {
			return nil, x.fenceLocked(err)
		}
		return nil, err
	}
	x.publish(append(slices.Clip(files), f))
	return f, nil
}

func (x *Index) fenceLocked(err error) error {
	x.mu.fenced = fmt.Errorf("%w: %w", ErrFenced, err)
	return x.mu.fenced
}

// Query returns the commitlog offsets indexed under key whose store time
// lies in [fromMs, toMs] (at one-second resolution: see the package
// documentation), newest first, de-duplicated, at most max. It walks files
// newest to oldest, skipping those whose time range misses [fromMs, toMs].
// An offset is returned when its stored 32-bit hash equals the key's, so
// callers must check the key against the record itself. No hit is an empty
// result and a nil error. Safe for concurrent use with every method.
func (x *Index) Query(key string, fromMs, toMs int64, max int) ([]int64, error) {
	if key == "" {
		return nil, invalidf("query: empty key")
	}
	if max <= 0 {
		return nil, invalidf("query: max %d is not positive", max)
	}
	if fromMs > toMs {
		return nil, invalidf("query: from %d ms is after to %d ms", fromMs, toMs)
	}
	if x.closed.Load() {
		return nil, fmt.Errorf("mqlite/indexfile: query: %w", ErrClosed)
	}
	h := keyHash(key)
	rs := results{max: max}
	files := x.snapshot()
	for i := len(files) - 1; i >= 0 && (len(rs.out) < max); i-- {
		f := files[i]
		if f.beginTime > toMs || f.endTime.Load()+999 < fromMs {
			continue
		}
		if !f.tryAcquire() {
			continue // deleted or closed meanwhile
		}
		f.lookup(h, fromMs, toMs, &rs)
		if err := f.release(); err != nil {
			x.log.Error("indexfile: release", "err", err)
		}
	}
	if x.closed.Load() {
		return nil, fmt.Errorf("mqlite/indexfile: query: %w", ErrClosed)
	}
	return rs.out, nil
}

// EndPhyOffset reports how far the index is built: the commitlog offset of
// the newest indexed record (0 when there is no file). Re-dispatch after
// recovery starts at this offset, inclusive: Put skips offsets below it,
// and the keys of the record at it that are indexed already.
func (x *Index) EndPhyOffset() int64 {
	files := x.snapshot()
	if len(files) == 0 {
		return 0
	}
	return files[len(files)-1].endPhys.Load()
}

// writableLocked refuses op on a closed or read-only index.
func (x *Index) writableLocked(op string) error {
	if x.closed.Load() {
		return fmt.Errorf("mqlite/indexfile: %s: %w", op, ErrClosed)
	}
	if x.opts.ReadOnly {
		return x.refuse(op)
	}
	return nil
}

// TruncateAfterPhys removes everything at or past commitlog offset end (the
// commitlog lost its tail). It deletes, newest first, every file whose end
// offset is >= end: whole files starting at or past end, and also the file
// containing end, since an index file is not rewound in place. The caller
// then re-dispatches the commitlog from EndPhyOffset.
func (x *Index) TruncateAfterPhys(end int64) error {
	if end < 0 {
		return invalidf("truncate: negative commitlog offset %d", end)
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if err := x.writableLocked("truncate"); err != nil {
		return err
	}
	files := x.snapshot()
	k := len(files)
	for k > 0 && files[k-1].endPhys.Load() >= end {
		k--
	}
	for i := len(files) - 1; i >= k; i-- {
		if err := x.deleteLocked(files[i], files[:i]); err != nil {
			return err
		}
	}
	x.mu.redo = true
	return x.syncDirLocked(k < len(files))
}

// DeleteBelowPhys applies retention: it deletes, oldest first, the files
// whose end offset is below minPhys (all their entries point below the
// commitlog's first record), never the newest. It returns how many it
// deleted. Readers holding a deleted file finish with it; the last one
// unmaps it.
func (x *Index) DeleteBelowPhys(minPhys int64) (int, error) {
	if minPhys < 0 {
		return 0, invalidf("delete: negative commitlog offset %d", minPhys)
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.closed.Load() {
		return 0, fmt.Errorf("mqlite/indexfile: delete: %w", ErrClosed)
	}
	if x.opts.ReadOnly {
		return 0, x.refuse("delete")
	}
	files := x.snapshot()
	n := 0
	for n < len(files)-1 && files[n].endPhys.Load() < minPhys {
		if err := x.deleteLocked(files[n], files[n+1:]); err != nil {
			return n, errors.Join(err, x.syncDirLocked(n > 0))
		}
		n++
	}
	return n, x.syncDirLocked(n > 0)
}

// deleteLocked removes f from disk, then publishes rest as the file list
// and drops the list's reference to f. Where a mapped file cannot be
// removed (vfs.MustUnmapFirst: Windows), the file goes when the last
// reference unmaps it instead: at once if no reader holds f.
func (x *Index) deleteLocked(f *file, rest []*file) error {
	if vfs.MustUnmapFirst(x.opts.FS) {
		f.removeFS = x.opts.FS
		x.publish(rest)
		return f.release()
	}
	if err := x.opts.FS.Remove(f.path); err != nil {
		return fmt.Errorf("mqlite/indexfile: delete %s: %w", f.path, errs.Disk(err))
	}
	x.publish(rest)
	if err := f.release(); err != nil {
		x.log.Error("indexfile: release", "err", err)
	}
	return nil
}

func (x *Index) syncDirLocked(changed bool) error {
	if !changed {
		return nil
	}
	if err := x.opts.FS.SyncDir(x.opts.Dir); err != nil {
		return fmt.Errorf("mqlite/indexfile: sync %s: %w", x.opts.Dir, errs.Disk(err))
	}
	return nil
}

// Flush makes every entry put so far durable without holding up Put: for
// each file changed since the last Flush it syncs the slots and entries
// (Put goes on meanwhile), then records the synced entry count in the
// header, which stays marked dirty while the file takes entries, and syncs
// the header. After a crash Open trusts exactly the entries a Flush
// recorded. A failed sync fences the Index (ErrFenced).
func (x *Index) Flush() error {
	x.flushMu.Lock()
	defer x.flushMu.Unlock()
	type job struct {
		f *file
		h header // as of the sync: count and the fields that depend on it
	}
	var jobs []job
	x.mu.Lock()
	if x.closed.Load() {
		x.mu.Unlock()
		return fmt.Errorf("mqlite/indexfile: flush: %w", ErrClosed)
	}
	if x.opts.ReadOnly {
		x.mu.Unlock()
		return x.refuse("flush")
	}
	if err := x.mu.fenced; err != nil {
		x.mu.Unlock()
		return err
	}
	for _, f := range x.snapshot() {
		if f.dirty && f.count.Load() != f.flushed && f.tryAcquire() {
			jobs = append(jobs, job{f, f.header()})
		}
	}
	x.mu.Unlock()
	var err error
	for _, j := range jobs {
		if err == nil {
			err = x.flushFile(j.f, j.h)
		}
		if rerr := j.f.release(); rerr != nil {
			x.log.Error("indexfile: release", "err", rerr)
		}
	}
	return err
}

// flushFile syncs entries [1, h.count) of f and the slots, then writes h,
// with that count as the flushed count, as f's (dirty) header and syncs
// it. f is pinned.
func (x *Index) flushFile(f *file, h header) error {
	n := h.count
	fail := func(err error) error {
		x.mu.Lock()
		defer x.mu.Unlock()
		return x.fenceLocked(err)
	}
	if d, ok := f.m.(vfs.Dropper); ok {
		// Entries are appended and never rewritten: drop the pages of
		// those written since the last flush, below the one still being
		// filled, so that the sync has no entries of theirs to
		// write-protect one shootdown at a time (vfs.Dropper). The
		// slots are rewritten at random and stay mapped.
		from := f.usedSize(max(h.flushed, 1)) &^ (vfs.PageSize - 1)
		d.Drop(from, f.usedSize(n)-from)
	}
	if err := f.m.Sync(HeaderSize, f.usedSize(n)-HeaderSize); err != nil {
		return fail(fmt.Errorf("mqlite/indexfile: sync %s: %w", f.path, errs.Disk(err)))
	}
	x.mu.Lock()
	if !f.dirty || f.flushed >= n { // sealed meanwhile (full): it recorded more
		x.mu.Unlock()
		return nil
	}
	f.flushed = n
	h.flushed = n
	h.encode(f.b[:HeaderSize])
	x.mu.Unlock()
	if err := f.m.Sync(0, HeaderSize); err != nil {
		return fail(fmt.Errorf("mqlite/indexfile: sync header of %s: %w", f.path, errs.Disk(err)))
	}
	return nil
}

func (x *Index) flushLocked() error {
	if x.mu.fenced != nil {
		return x.mu.fenced
	}
	for _, f := range x.snapshot() {
		if err := f.sealLocked(); err != nil {
			return x.fenceLocked(err)
		}
	}
	return nil
}

// Close flushes (unless fenced) and releases every file; files still used
// by a running Query are unmapped when it finishes. Close is idempotent;
// afterwards every method returns ErrClosed and EndPhyOffset returns 0.
func (x *Index) Close() error {
	x.flushMu.Lock()
	defer x.flushMu.Unlock()
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.closed.Load() {
		return nil
	}
	var err error
	if x.mu.fenced == nil && !x.opts.ReadOnly {
		err = x.flushLocked()
	}
	x.closed.Store(true)
	files := x.snapshot()
	x.publish(nil)
	for _, f := range files {
		err = errors.Join(err, f.release())
	}
	return err
}
