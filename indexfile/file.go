package indexfile

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"unsafe"

	"github.com/mqlite/mqlite/internal/errs"
	"github.com/mqlite/mqlite/vfs"
)

// file is one mapped index file. The immutable fields are set before the
// file is published; the atomics are what readers see; the writer fields
// are guarded by Index.mu.
type file struct {
	path      string
	log       *slog.Logger
	m         vfs.Mapping
	b         []byte // m.Bytes()
	slots     uint32
	entries   uint32
	beginPhys int64
	beginTime int64
	// removeFS, once set (deleteLocked, where the file system cannot
	// remove a mapped file: vfs.MustUnmapFirst), removes the file when
	// the last reference unmaps it.
	removeFS vfs.FS

	// Published to readers. The writer stores an entry, then count, then
	// the slot; a reader loads the slot, then count, so a slot it sees
	// always names an entry below the count it sees.
	count   atomic.Uint32 // next entry number; entries [1, count) exist
	endPhys atomic.Int64  // offset of the newest entry (beginPhys if none)
	endTime atomic.Int64  // newest store time (ms)
	refs    atomic.Int32  // 1 for the Index's list, +1 per reader

	// Writer state (Index.mu).
	usedSlots uint32
	flushed   uint32 // count as of the last Flush
	dirty     bool   // the header on disk says dirty
	sink      uint32 // touchSlots' result, kept so the loads are not dropped
}

// entry returns the bytes of entry n, 1 <= n <= f.entries.
func (f *file) entry(n uint32) []byte {
	off := HeaderSize + int(f.slots)*SlotSize + int(n-1)*EntrySize
	return f.b[off : off+EntrySize]
}

// usedSize is the length of the header, slots and the entries below count.
func (f *file) usedSize(count uint32) int {
	return HeaderSize + int(f.slots)*SlotSize + int(count-1)*EntrySize
}

func (f *file) full() bool { return f.count.Load() > f.entries }

func (f *file) header() header {
	var flags uint16
	if f.dirty {
		flags = flagDirty
	}
	return header{
		version:   FormatVersion,
		flags:     flags,
		slots:     f.slots,
		entries:   f.entries,
		beginTime: f.beginTime,
		endTime:   f.endTime.Load(),
		beginPhys: f.beginPhys,
		endPhys:   f.endPhys.Load(),
		usedSlots: f.usedSlots,
		count:     f.count.Load(),
		flushed:   f.flushed,
	}
}

// writeHeader rewrites the header in the mapping (the durable copy; readers
// use the atomics).
func (f *file) writeHeader() {
	h := f.header()
	h.encode(f.b[:HeaderSize])
}

func aligned(b []byte) bool { return uintptr(unsafe.Pointer(unsafe.SliceData(b)))%8 == 0 }

// createFile makes, preallocates and maps a new file whose first entry
// will be (phys, t). The header is written dirty and synced with the file
// length and the directory entry, so a crash leaves either no file, a file
// of the wrong size (deleted at Open), or a valid empty one. fatal reports
// a failed sync, after which the Index fences itself.
func createFile(fsys vfs.FS, dir string, phys, t int64, slots, entries int, log *slog.Logger) (_ *file, fatal bool, err error) {
	path := filepath.Join(dir, fileName(phys))
	size := FileSize(slots, entries)
	fh, err := fsys.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, false, fmt.Errorf("mqlite/indexfile: create %s: %w", path, errs.Disk(err))
	}
	var m vfs.Mapping
	fail := func(e error, isFatal bool) (*file, bool, error) {
		if m != nil {
			m.Unmap()
		}
		fh.Close()
		fsys.Remove(path)
		return nil, isFatal, fmt.Errorf("mqlite/indexfile: create %s: %w", path, errs.Disk(e))
	}
	if err := fh.Allocate(size); err != nil {
		return fail(err, false)
	}
	if m, err = fh.Map(int(size)); err != nil {
		return fail(err, false)
	}
	if !aligned(m.Bytes()) {
		return fail(errors.New("mapping is not 8-byte aligned"), false)
	}
	f := &file{
		path: path, log: log, m: m, b: m.Bytes(),
		slots: uint32(slots), entries: uint32(entries),
		beginPhys: phys, beginTime: t,
		flushed: 1, dirty: true,
	}
	f.count.Store(1)
	f.endPhys.Store(phys)
	f.endTime.Store(t)
	f.refs.Store(1)
	f.writeHeader()
	if err := m.Sync(0, HeaderSize); err != nil {
		return fail(err, true)
	}
	if err := fh.Sync(); err != nil {
		return fail(err, true)
	}
	if err := fh.Close(); err != nil {
		m.Unmap()
		fsys.Remove(path)
		return nil, true, fmt.Errorf("mqlite/indexfile: create %s: %w", path, errs.Disk(err))
	}
	if err := fsys.SyncDir(dir); err != nil {
		m.Unmap()
		fsys.Remove(path)
		return nil, true, fmt.Errorf("mqlite/indexfile: create %s: %w", path, errs.Disk(err))
	}
	return f, false, nil
}

// openFile validates and maps an existing file named by name (its begin
// offset). Damage is a *CorruptError (the caller deletes the file); a
// format version other than ours wraps ErrVersion; anything else is an I/O
// error. repaired reports that the file was dirty and was rolled back to
// its last flushed state.
func openFile(fsys vfs.FS, path string, name int64, log *slog.Logger) (_ *file, repaired bool, err error) {
	fh, err := fsys.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, false, fmt.Errorf("mqlite/indexfile: open %s: %w", path, errs.Disk(err))
	}
	defer func() {
		if cerr := fh.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("mqlite/indexfile: close %s: %w", path, errs.Disk(cerr))
		}
	}()
	size, err := fh.Size()
	if err != nil {
		return nil, false, fmt.Errorf("mqlite/indexfile: open %s: %w", path, errs.Disk(err))
	}
	if size < HeaderSize {
		return nil, false, errs.Corrupt(path, 0, "indexfile: file of %d bytes is shorter than its %d-byte header", size, HeaderSize)
	}
	var hb [HeaderSize]byte
	if _, err := fh.ReadAt(hb[:], 0); err != nil {
		return nil, false, fmt.Errorf("mqlite/indexfile: read header of %s: %w", path, errs.Disk(err))
	}
	h, reason := decodeHeader(hb[:])
	if reason == reasonVersion {
		return nil, false, fmt.Errorf("mqlite/indexfile: %s has format version %d, this build reads %d: %w", path, h.version, FormatVersion, ErrVersion)
	}
	if reason == "" {
		reason = h.check(size, name)
	}
	if reason != "" {
		return nil, false, errs.Corrupt(path, 0, "indexfile: %s", reason)
	}
	m, err := fh.Map(int(size))
	if err != nil {
		return nil, false, fmt.Errorf("mqlite/indexfile: map %s: %w", path, errs.Disk(err))
	}
	if !aligned(m.Bytes()) {
		m.Unmap()
		return nil, false, fmt.Errorf("mqlite/indexfile: map %s: mapping is not 8-byte aligned", path)
	}
	f := &file{
		path: path, log: log, m: m, b: m.Bytes(),
		slots: h.slots, entries: h.entries,
		beginPhys: h.beginPhys, beginTime: h.beginTime,
		usedSlots: h.usedSlots, flushed: h.flushed, dirty: h.flags&flagDirty != 0,
	}
	f.count.Store(h.count)
	f.endPhys.Store(h.endPhys)
	f.endTime.Store(h.endTime)
	f.refs.Store(1)
	if f.dirty {
		if err := f.repair(h); err != nil {
			m.Unmap()
			return nil, false, fmt.Errorf("mqlite/indexfile: repair %s: %w", path, errs.Disk(err))
		}
		return f, true, nil
	}
	return f, false, nil
}

// repair rolls a dirty file back to its last flushed state: only entries
// [1, flushed) were synced, so the slot table is rebuilt from them (relinking
// each chain around entries that fail their checksum) and the header is
// rewritten clean. Entries at or past flushed are ignored; they will be
// overwritten before any count covers them. A crash during repair leaves
// the header dirty, so repair runs again.
func (f *file) repair(h header) error {
	clear(f.b[HeaderSize : HeaderSize+int(f.slots)*SlotSize])
	var used, bad uint32
	endPhys, maxSecs := f.beginPhys, int64(-1)
	for n := uint32(1); n < h.flushed; n++ {
		eb := f.entry(n)
		e, ok := readEntry(eb)
		if !ok || e.phys < endPhys {
			bad++
			continue
		}
		bk := e.hash % f.slots
		head := loadSlot(f.b, bk)
		if head == 0 {
			used++
		}
		if e.prev != head {
			e.prev = head
			putEntry(eb, e)
		}
		storeSlot(f.b, bk, n)
		endPhys = e.phys
		maxSecs = max(maxSecs, int64(e.secs))
	}
	endTime := f.beginTime
	if maxSecs >= 0 {
		// The true time lies within the recorded second and never above
		// the header's end time (the header on disk is at least as new as
		// the flush that made these entries durable).
		endTime = min(f.beginTime+maxSecs*1000+999, max(h.endTime, f.beginTime))
	}
	f.log.Warn("indexfile: rolled back a file that was not flushed before a crash",
		"path", f.path, "entries", h.flushed-1, "droppedUnflushed", h.count-h.flushed, "damaged", bad)
	f.count.Store(h.flushed)
	f.endPhys.Store(endPhys)
	f.endTime.Store(endTime)
	f.usedSlots = used
	f.flushed = h.flushed
	if err := f.m.Sync(HeaderSize, f.usedSize(h.flushed)-HeaderSize); err != nil {
		return err
	}
	f.dirty = false
	f.writeHeader()
	return f.m.Sync(0, HeaderSize)
}

// appendLocked appends an entry (Index.mu held; the file is not full). The
// first change to a file that is clean on disk marks its header dirty and
// syncs it, so a crash can never leave a clean header over unsynced slots;
// the header then stays dirty until the file is sealed or closed, and is
// not rewritten per entry (readers use the atomics, Flush records
// progress). An error is a failed sync; the caller fences.
func (f *file) appendLocked(hash uint32, phys, t int64) error {
	if !f.dirty {
		f.dirty = true
		f.writeHeader()
		if err := f.m.Sync(0, HeaderSize); err != nil {
			return fmt.Errorf("mqlite/indexfile: sync header of %s: %w", f.path, errs.Disk(err))
		}
	}
	n := f.count.Load()
	bk := f.bucket(hash)
	prev := loadSlot(f.b, bk)
	if prev >= n { // damaged slot: start a new chain
		prev = 0
	}
	if prev == 0 && f.usedSlots < f.slots {
		f.usedSlots++
	}
	putEntry(f.entry(n), entry{hash: hash, phys: phys, secs: secsSince(f.beginTime, t), prev: prev})
	if t > f.endTime.Load() {
		f.endTime.Store(t)
	}
	f.endPhys.Store(phys)
	f.count.Store(n + 1)
	storeSlot(f.b, bk, n)
	return nil
}

// sealLocked syncs the slots and entries, then writes and syncs a clean
// header (Index.mu held), for a file that takes no more entries: full, or
// at Close. An error is a failed sync; the caller fences.
func (f *file) sealLocked() error {
	if !f.dirty {
		return nil
	}
	n := f.count.Load()
	if err := f.m.Sync(HeaderSize, f.usedSize(n)-HeaderSize); err != nil {
		return fmt.Errorf("mqlite/indexfile: sync %s: %w", f.path, errs.Disk(err))
	}
	f.flushed = n
	f.dirty = false
	f.writeHeader()
	if err := f.m.Sync(0, HeaderSize); err != nil {
		return fmt.Errorf("mqlite/indexfile: sync header of %s: %w", f.path, errs.Disk(err))
	}
	return nil
}

// touchSlots reads the slot of each of hs, discarding the values, so that
// the cache misses of a batch overlap (the loads are independent) before
// appendLocked reads them again one by one.
func (f *file) touchSlots(hs []Hashed) {
	var sink uint32
	for _, h := range hs {
		sink |= loadSlot(f.b, f.bucket(h.Hash))
	}
	f.sink = sink
}

// bucket is hash % slots, with a mask when slots is a power of two.
func (f *file) bucket(hash uint32) uint32 {
	if f.slots&(f.slots-1) == 0 {
		return hash & (f.slots - 1)
	}
	return hash % f.slots
}

// lookup walks the chain of hash's bucket, newest first, adding to rs the
// offsets whose entry has this hash and whose recorded second overlaps
// [from, to]. It stops at the end of the chain, at an invalid link (a
// checksum mismatch, an entry of another bucket, a previous number not
// below the current one), at an entry older than from, or when rs is full.
// Safe for concurrent use with appendLocked.
func (f *file) lookup(hash uint32, from, to int64, rs *results) {
	bk := hash % f.slots
	cur := loadSlot(f.b, bk)
	c := f.count.Load()
	for cur != 0 && cur < c {
		e, ok := readEntry(f.entry(cur))
		if !ok || e.hash%f.slots != bk {
			return
		}
		t0 := f.beginTime + int64(e.secs)*1000
		if t0+999 < from {
			return
		}
		if e.hash == hash && t0 <= to && rs.add(e.phys) {
			return
		}
		if e.prev >= cur {
			return
		}
		cur = e.prev
	}
}

// holdsLocked reports whether the chain of hash's bucket has an entry for
// hash at commitlog offset phys, looking only at the entries at phys or
// later (the newest, at the front of the chain). Index.mu held.
func (f *file) holdsLocked(hash uint32, phys int64) bool {
	cur := loadSlot(f.b, f.bucket(hash))
	c := f.count.Load()
	for cur != 0 && cur < c {
		e, ok := readEntry(f.entry(cur))
		if !ok || e.phys < phys {
			return false
		}
		if e.hash == hash && e.phys == phys {
			return true
		}
		if e.prev >= cur {
			return false
		}
		cur = e.prev
	}
	return false
}

// tryAcquire takes a reader reference; false means the file is already
// released (deleted or closed).
func (f *file) tryAcquire() bool {
	for {
		r := f.refs.Load()
		if r <= 0 {
			return false
		}
		if f.refs.CompareAndSwap(r, r+1) {
			return true
		}
	}
}

// release drops a reference; the last one unmaps the file.
func (f *file) release() error {
	if f.refs.Add(-1) != 0 {
		return nil
	}
	if err := f.m.Unmap(); err != nil {
		return fmt.Errorf("mqlite/indexfile: unmap %s: %w", f.path, errs.Disk(err))
	}
	if f.removeFS != nil {
		if err := f.removeFS.Remove(f.path); err != nil && !errors.Is(err, vfs.ErrNotExist) {
			return fmt.Errorf("mqlite/indexfile: delete %s: %w", f.path, errs.Disk(err))
		}
	}
	return nil
}

// results collects de-duplicated offsets up to max. Offsets normally
// arrive in non-increasing order (entries are appended in commitlog order,
// chains run newest first, files are walked newest first), so a duplicate
// is the last offset added; once damaged data breaks that order, every
// offset is checked against all.
type results struct {
	out      []int64
	max      int
	unsorted bool
}

// add records phys unless already present; it reports whether rs is full.
func (rs *results) add(phys int64) bool {
	if n := len(rs.out); n > 0 {
		last := rs.out[n-1]
		if phys == last || (rs.unsorted || phys > last) && slices.Contains(rs.out, phys) {
			return false
		}
		rs.unsorted = rs.unsorted || phys > last
	}
	if rs.out == nil {
		rs.out = make([]int64, 0, min(rs.max, 16))
	}
	rs.out = append(rs.out, phys)
	return len(rs.out) >= rs.max
}
