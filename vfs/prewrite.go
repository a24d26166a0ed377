package vfs

import "os"

// Prewriter is implemented by the files that can write zeros over a range
// ahead of a writer and make them durable apart from the writer's syncs
// (OS, MemFS, and Faulty around either).
//
// A file system that reserves blocks lazily (fallocate on ext4 and XFS
// leaves "unwritten" extents) converts a block's extent at the first write
// into it and journals that change, which the next sync must commit: on a
// virtual disk a sync covering a new block costs about a second device
// flush. Writing real zeros over the range ahead of the writer and syncing
// them once moves that cost off the writer's path; a later sync of data
// written into the range then writes data only. (fallocate with
// FALLOC_FL_ZERO_RANGE does not do it: the range stays unwritten.)
//
// Prewriting is its own pair of operations so that a fault-injection
// test can tell it from the writer's writes and syncs (Faulty asks for
// OpPrewrite and OpPrewriteSync, not OpWrite or OpSync), and so that a
// Faulty power-loss image knows which zeros are durable.
type Prewriter interface {
	// Prewrite writes zeros over [off, off+n) of the file, as WriteAt
	// would; a file opened O_RDONLY refuses it.
	Prewrite(off, n int64) error
	// SyncPrewrite makes the file's contents durable as File.Sync does:
	// the zeros of the Prewrite calls before it, and whatever else was
	// written before the call. It is apart from Prewrite so that a
	// writer waiting for the zeros to be written (not to overwrite its
	// records with them) need not wait for their sync.
	SyncPrewrite() error
}

// zeroChunk is the most one write of Prewrite writes: the size of zeros.
const zeroChunk = 64 << 10

// zeros is what Prewrite writes; never written to.
var zeros [zeroChunk]byte

// writeZeros writes zeros over [off, off+n) of f, a chunk at a time.
func writeZeros(f interface {
	WriteAt([]byte, int64) (int, error)
}, off, n int64) error {
	for end := off + n; off < end; {
		c := min(end-off, zeroChunk)
		if _, err := f.WriteAt(zeros[:c], off); err != nil {
			return err
		}
		off += c
	}
	return nil
}

// Prewrite writes the zeros with pwrite.
func (o *osFile) Prewrite(off, n int64) error {
	if o.ro {
		return &os.PathError{Op: "prewrite", Path: o.f.Name(), Err: os.ErrPermission}
	}
	return writeZeros(o.f, off, n)
}

// SyncPrewrite is Sync (fdatasync on Linux).
func (o *osFile) SyncPrewrite() error { return o.Sync() }

// Prewrite writes the zeros.
func (h *memHandle) Prewrite(off, n int64) error {
	if h.ro {
		return h.badFD("prewrite")
	}
	return writeZeros(h, off, n)
}

// SyncPrewrite does nothing: a MemFS loses nothing.
func (h *memHandle) SyncPrewrite() error { return nil }

// Prewrite asks the Injector for OpPrewrite, then writes the zeros into
// the wrapped file (with its Prewrite if it has one) and remembers the
// range for SyncPrewrite.
func (h *faultyFile) Prewrite(off, n int64) error {
	if err := h.fs.check(OpPrewrite, h.name); err != nil {
		return err
	}
	var err error
	if p, ok := h.File.(Prewriter); ok {
		err = p.Prewrite(off, n)
	} else {
		err = writeZeros(h.File, off, n)
	}
	if err != nil {
		return err
	}
	h.fs.mu.Lock()
	h.n.prewritten = append(h.n.prewritten, [2]int64{off, n})
	h.fs.mu.Unlock()
	return nil
}

// SyncPrewrite asks the Injector for OpPrewriteSync, syncs the wrapped
// file, and then counts the ranges prewritten before the call durable
// with their bytes as they are at that moment: the zeros, and whatever the
// caller wrote into them since (a real sync makes the whole file durable;
// the image keeps less, which a recovery must cope with anyway).
func (h *faultyFile) SyncPrewrite() error {
	if err := h.fs.check(OpPrewriteSync, h.name); err != nil {
		return err
	}
	h.fs.mu.Lock()
	ranges := h.n.prewritten
	h.n.prewritten = nil
	h.fs.mu.Unlock()
	var err error
	if p, ok := h.File.(Prewriter); ok {
		err = p.SyncPrewrite()
	} else {
		err = h.File.Sync()
	}
	if err != nil {
		return err
	}
	for _, r := range ranges {
		// The range is read under the lock a Mapping.Sync copies under:
		// read before it, a record written and synced through the
		// mapping in between would be overwritten in the image by the
		// zeros read before it was written.
		h.fs.mu.Lock()
		live := liveRange(h.File, r[0], r[1])
		nd := h.n
		if end := r[0] + int64(len(live)); int64(len(nd.durable)) < end {
			nd.durable = append(nd.durable, make([]byte, end-int64(len(nd.durable)))...)
		}
		copy(nd.durable[r[0]:], live)
		h.fs.mu.Unlock()
	}
	return nil
}

// liveRange reads [off, off+n) of a file's current contents (less at its
// end), racing with writers through mappings where the file system allows
// it (see memHandle.snapshot).
func liveRange(h File, off, n int64) []byte {
	if s, ok := h.(interface{ snapshotRange(off, n int64) []byte }); ok {
		return s.snapshotRange(off, n)
	}
	b := make([]byte, n)
	k, _ := h.ReadAt(b, off)
	return b[:k]
}

// snapshotRange is snapshot for [off, off+n), cut at the file's end.
func (h *memHandle) snapshotRange(off, n int64) []byte {
	h.f.mu.RLock()
	defer h.f.mu.RUnlock()
	if off >= int64(len(h.f.data)) {
		return nil
	}
	src := h.f.data[off:min(off+n, int64(len(h.f.data)))]
	out := make([]byte, len(src))
	copyNoRace(out, src)
	return out
}
