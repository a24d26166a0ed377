package commitlog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"log/slog"
	"math"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mqlite/mqlite/internal/errs"
	"github.com/mqlite/mqlite/vfs"
)

// Format constants. They are frozen: changing one is a new format version.
const (
	MagicV1    uint32 = 0x4D514C31 // "MQL1"
	BlankMagic uint32 = 0x424C4E4B // "BLNK"
	FrameSize         = 28         // bytes before the payload
	BlankSize         = 12         // size of an end-of-segment marker

	DefaultSegmentSize   = 1 << 30
	DefaultMaxRecordSize = 4<<20 + 64<<10 // RocketMQ: body limit plus 64 KiB
	MinSegmentSize       = 4096
	MaxSegmentSize       = 1 << 40 // the largest Options.SegmentSize
	// DefaultWarmBytes is the most the allocator keeps pre-faulted ahead
	// of the write position by default, for a writer fast enough to need
	// it (the lead follows the write rate; warm.go), and the most of the
	// head of a new segment it pre-faults once it has handed it over.
	DefaultWarmBytes = 64 << 20
)

// Sentinels, the same values as the root package's.
var (
	ErrClosed          = errs.ErrClosed
	ErrCorrupt         = errs.ErrCorrupt
	ErrNotFound        = errs.ErrNotFound
	ErrDiskFull        = errs.ErrDiskFull
	ErrFenced          = errs.ErrFenced
	ErrIO              = errs.ErrIO
	ErrMessageTooLarge = errs.ErrMessageTooLarge
	ErrInvalidArgument = errs.ErrInvalidArgument
	ErrReadOnly        = errs.ErrReadOnly
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

var le = binary.LittleEndian

// Options configure a Log. The zero value of each field means its default.
type Options struct {
	Dir           string
	FS            vfs.FS // default vfs.OS
	SegmentSize   int64  // default 1 GiB
	MaxRecordSize int    // default 4 MiB + 64 KiB, including the frame
	NoWarm        bool   // do not pre-fault the log ahead of the write position (warm.go)
	WarmBytes     int64  // how far ahead to pre-fault; default DefaultWarmBytes
	Logger        *slog.Logger
	// NoRecycle makes DeleteBefore remove every segment it drops, instead
	// of keeping up to two to become next segments (recycle.go).
	NoRecycle bool
	// SmallSyncs says the log is flushed often, a few records at a time
	// (a group commit per send, FlushSync): the segment being written
	// then keeps its page cache in single pages (vfs.Pager), so that a
	// flush writes back only the pages it covers. Otherwise the kernel's
	// read-ahead, which the pre-faulting triggers, brings the pages in
	// large folios, and every flush writes its whole folio back (about
	// 1 MiB for a 200-byte record, 4x the time, on Linux 6.18); a sealed
	// segment gets read-ahead back for its readers. Without it (a log
	// flushed in large ranges, FlushAsync) and with warming on, the
	// segments to be written are mapped for huge pages instead, which
	// makes the writer's first touch of each page cheaper (vfs.Pager's
	// HugePages): in the steady state of retention, where recycled
	// segments' folios are still in memory, the Store's async Put ran
	// 1.6-1.8x as fast.
	SmallSyncs bool
	// RawThrough makes AppendRaw write each large chunk (64 KiB or more)
	// into its segment file with one WriteAt (pwrite) instead of copying
	// it into the mapping, and not warm the log ahead of it (raw.go): a
	// replica catching up fills new page-cache pages without taking a
	// page fault on each. Append is unchanged. Ignored where the file
	// system's writes do not reach its mappings (vfs.WritesReachMappings).
	RawThrough bool

	// RecoverFrom is where Open starts validating records; it is rounded
	// down to its segment. Negative means the third-to-last segment, or
	// after an unclean shutdown the segment holding Trusted if that is
	// earlier (everything past Trusted may have lost pages).
	RecoverFrom int64
	// Trusted is an offset known to have been durably flushed (the
	// checkpoint's); damage below it with valid data after is corruption.
	Trusted int64
	// CleanShutdown says the previous owner closed the log cleanly; then a
	// zeroed tail is taken as the end without searching past it.
	CleanShutdown bool
	// ReadOnly opens the log for reading only, beside a process that may
	// be appending to it: segments are opened O_RDONLY and mapped
	// read-only, nothing is created, truncated or removed, and the end is
	// the last valid record as of Open. Append, Flush and DeleteBefore
	// fail with ErrReadOnly. RecoverFrom, Trusted, CleanShutdown and
	// NoWarm are ignored.
	ReadOnly bool

	// populate pre-faults memory for the allocator; vfs.Populate (or
	// vfs.PopulateRead for a log that writes through its files) unless a
	// test watches the warming.
	populate func([]byte)
	// noWriteThrough makes a log with SmallSyncs write through its
	// mappings even where it could write through its files (through.go),
	// for benchmarks that compare the two.
	noWriteThrough bool
	// noPrewrite stops the allocator pre-writing new segments ahead of a
	// writer that writes through its files (prewrite.go), for benchmarks.
	noPrewrite bool
	// resident tells which share of a spare is in memory; vfs.Resident
	// unless a test evicts it.
	resident func([]byte) float64
}

// Appender encodes one record's payload in place, inside the append lock.
type Appender interface {
	// PayloadSize is the exact number of bytes EncodePayload writes.
	PayloadSize() int
	// EncodePayload fills dst (len PayloadSize()) for the record at phys.
	// It runs under the append lock, after space is reserved, and cannot fail.
	EncodePayload(dst []byte, phys int64)
}

// Report describes what Open found.
type Report struct {
	Start           int64 // where validation started
	End             int64 // end of the last valid record
	TruncatedBytes  int64 // non-zero bytes discarded after End
	DroppedRecords  int   // valid-looking records discarded after a torn tail
	RemovedSegments int
	// LostFlushed is how far Options.Trusted is past End: bytes that had
	// been durably flushed and are gone (a damaged, cut or zeroed tail, or
	// a missing last segment). A torn tail is truncated even there (a
	// clean close's last record may be torn too); this says it cost data
	// that was acknowledged as durable.
	LostFlushed int64
	// Damaged lists, for a read-only open, the ranges [from, to) of
	// invalid bytes it found between valid records of a segment while
	// looking for the end, and read past (Verify reports them too).
	Damaged [][2]int64
	// Torn is, for a read-only open, the range [End, x) of invalid bytes
	// at the end that no valid record follows (a record the owner is
	// writing, or a torn or damaged last record); zero when the log ends
	// at zeros or a segment end.
	Torn [2]int64
}

// Log is a segmented, memory-mapped append-only log. Append, Flush, reads
// and DeleteBefore are safe for concurrent use. Reads take no lock: they
// pin a snapshot of the segment list with an atomic add.
//
// Lock order: delMu, then mu, then ret. flushMu is taken before ret.
type Log struct {
	opts   Options
	report Report

	mu struct {
		sync.Mutex
		cur    *segment
		closed bool
		warmAt int64 // ask the allocator to warm more once the write position passes this (warm.go)
		// warmLead is how far ahead the last request asked (0 before
		// the first), made at warmPos at warmTime (warm.go).
		warmLead, warmPos int64
		warmTime          time.Time
		// allocIdle: the allocator's last preparation failed and nothing
		// is asked of it; the next roll asks again and waits for the answer
		allocIdle bool
		wbuf      []byte // where appends encode when writing through files (through.go)
	}
	snap    atomic.Pointer[snapshot] // pinned by readers; copy-on-write (retention.go)
	wrote   atomic.Int64             // end of the last appended record
	flushed atomic.Int64             // durably flushed through here
	fenced  atomic.Pointer[error]
	pending atomic.Int64 // len(ret.retired): tells the last reader of a snapshot to look
	// rollWait is the time appends spent waiting at a roll for the
	// allocator to prepare the next segment (BenchmarkAppend reports it).
	rollWait atomic.Int64
	// recycled counts the segments made from a spare (recycle.go).
	recycled atomic.Int64
	// writeThrough: appends write into the segment files with WriteAt,
	// not through the mappings (through.go).
	writeThrough bool
	// rawThrough: AppendRaw writes into the segment files (RawThrough).
	rawThrough bool
	pre        prewriteState // the writer and the zero-fill kept apart (prewrite.go)

	flushMu sync.Mutex
	delMu   sync.Mutex // serialises DeleteBefore and Close's unmapping

	spareMu sync.Mutex
	spare   spareState // dropped segments kept for recycling (recycle.go)

	// unmapFirst: the FS cannot remove or rename a mapped file (Windows,
	// vfs.StrictMapFS), so DeleteBefore retires a segment first and drops
	// its file once unmapped (unmapfirst.go). dropping counts those whose
	// file is still to go.
	unmapFirst bool
	dropping   atomic.Int64

	// ret tracks what readers may still hold. It is held only for
	// bookkeeping, never across a syscall: unmapping happens outside.
	ret struct {
		sync.Mutex
		done      sync.Cond   // broadcast when a release finishes
		old       []*snapshot // superseded snapshots that had readers
		retired   []*segment  // dropped, still mapped: an old snapshot may hold them
		releasing int         // handed out by collectLocked, not yet unmapped
	}

	allocReq   chan int64
	allocReady chan prepared
	warmKick   chan struct{} // wakes the allocator to warm up to warmTo
	warmTo     atomic.Int64
	warmFrom   atomic.Int64 // the write position warmTo was asked at
	warmHeadTo atomic.Int64 // how much of a new segment's head to warm: the lead
	quit       chan struct{}
	allocDone  chan struct{}

	// cut holds the segments TruncateTo cut, mapped until Close (raw.go);
	// under delMu.
	cut []*segment
}

func (o *Options) validate() error {
	var problems []error
	if o.Dir == "" {
		problems = append(problems, errors.New("empty Dir"))
	}
	if o.FS == nil {
		o.FS = vfs.OS
	}
	if o.SegmentSize == 0 {
		o.SegmentSize = DefaultSegmentSize
	}
	if o.SegmentSize < MinSegmentSize || o.SegmentSize > MaxSegmentSize {
		problems = append(problems, fmt.Errorf("SegmentSize %d outside [%d, 2^40]", o.SegmentSize, MinSegmentSize))
	}
	if o.WarmBytes == 0 {
		o.WarmBytes = DefaultWarmBytes
	}
	if o.populate == nil {
		o.populate = vfs.Populate
	}
	if o.resident == nil {
		o.resident = vfs.Resident
	}
	if o.WarmBytes < 0 {
		problems = append(problems, fmt.Errorf("negative WarmBytes %d", o.WarmBytes))
	}
	if o.MaxRecordSize == 0 {
		o.MaxRecordSize = DefaultMaxRecordSize
	}
	if o.MaxRecordSize < FrameSize+1 {
		problems = append(problems, fmt.Errorf("MaxRecordSize %d too small", o.MaxRecordSize))
	}
	if int64(o.MaxRecordSize) > o.SegmentSize-BlankSize {
		o.MaxRecordSize = int(o.SegmentSize - BlankSize)
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if len(problems) > 0 {
		return fmt.Errorf("mqlite/commitlog: bad options: %w: %w", errs.ErrInvalidArgument, errors.Join(problems...))
	}
	return nil
}

// Open opens or creates the log in opts.Dir and recovers it.
func Open(opts Options) (*Log, error) {
	defaultPopulate := opts.populate == nil
	if err := opts.validate(); err != nil {
		return nil, err
	}
	if opts.ReadOnly {
		return openReadOnly(opts)
	}
	l := &Log{
		opts:       opts,
		unmapFirst: vfs.MustUnmapFirst(opts.FS),
		allocReq:   make(chan int64, 1),
		allocReady: make(chan prepared, 1),
		warmKick:   make(chan struct{}, 1),
		quit:       make(chan struct{}),
		allocDone:  make(chan struct{}),
	}
	l.ret.done.L = &l.ret.Mutex
	if l.writeThrough = writesThrough(&l.opts); l.writeThrough && defaultPopulate {
		l.opts.populate = vfs.PopulateRead
	}
	l.rawThrough = l.opts.RawThrough && !l.opts.ReadOnly && vfs.WritesReachMappings(l.opts.FS)
	l.snap.Store(&snapshot{})
	if err := opts.FS.MkdirAll(opts.Dir, 0o700); err != nil {
		return nil, diskErr("mkdir", opts.Dir, err)
	}
	if err := l.recover(); err != nil {
		l.releaseAll()
		return nil, err
	}
	// Recovery has read what it needed of the write segment, with
	// read-ahead; from here on it is written.
	l.mu.cur.toWrite(&l.opts)
	if err := l.openForWrite(l.mu.cur); err != nil {
		l.releaseAll()
		return nil, err
	}
	l.pre.reserved.Store(l.wrote.Load()) // the allocator pre-writes nothing below
	l.mu.warmAt = math.MaxInt64
	if !opts.NoWarm {
		// From the first append on: a log opened to be read, or not
		// written for a while, has no use for pre-faulted pages.
		l.mu.warmAt = l.wrote.Load()
	}
	go l.allocate()
	l.allocReq <- l.mu.cur.start + l.opts.SegmentSize
	return l, nil
}

// Recycled is how many segments were made from spares (removed segments
// kept for reuse) since Open.
func (l *Log) Recycled() int64 { return l.recycled.Load() }

// Report returns what recovery found at Open.
func (l *Log) Report() Report { return l.report }

// SegmentSize returns the segment size.
func (l *Log) SegmentSize() int64 { return l.opts.SegmentSize }

// Locate names the segment file that holds global offset off and off's
// position in it, for errors that point at a record: segments are named
// by their start, so this needs no lookup (the file may be gone).
func (l *Log) Locate(off int64) (path string, pos int64) {
	start := off - off%l.opts.SegmentSize
	return filepath.Join(l.opts.Dir, segmentName(start)), off - start
}

// MaxRecordSize returns the largest record (frame included) Append takes.
func (l *Log) MaxRecordSize() int { return l.opts.MaxRecordSize }

// WrotePosition is the end of the last appended record: readers may read
// everything below it.
func (l *Log) WrotePosition() int64 { return l.wrote.Load() }

// FlushedPosition is how far the log is durably flushed.
func (l *Log) FlushedPosition() int64 { return l.flushed.Load() }

// MinOffset is the start of the oldest segment: DeleteBefore moves it up.
func (l *Log) MinOffset() int64 {
	segs := l.snap.Load().segs
	if len(segs) == 0 {
		return 0
	}
	return segs[0].start
}

// Appending reports whether an append holds the append lock at this
// moment. A monitor that sees it true while WrotePosition stands still
// knows the append path is stuck (a roll waiting for a segment, a write
// into a mapping the kernel cannot fill); appends pay nothing for it.
func (l *Log) Appending() bool {
	if l.mu.TryLock() {
		l.mu.Unlock()
		return false
	}
	return true
}

// Fenced returns the error that fenced the log, or nil.
func (l *Log) Fenced() error {
	if p := l.fenced.Load(); p != nil {
		return *p
	}
	return nil
}

func (l *Log) fence(err error) {
	wrapped := fmt.Errorf("%w: %w", errs.ErrFenced, err)
	l.fenced.CompareAndSwap(nil, &wrapped)
}

// Locked runs fn under the append lock, which Appender.EncodePayload runs
// under too: fn sees what the payloads encoded so far wrote, and no
// payload is encoded meanwhile.
func (l *Log) Locked(fn func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fn()
}

// Append writes one record and returns its global offset.
func (l *Log) Append(a Appender) (phys int64, err error) {
	one := [1]Appender{a}
	phys, _, err = l.AppendBatch(one[:])
	return phys, err
}

// AppendBatch writes the records contiguously in one segment under one
// lock hold, so that readers see all of them or none. It returns the
// offset of the first record and the end of the last.
func (l *Log) AppendBatch(as []Appender) (first, end int64, err error) {
	total := 0
	for _, a := range as {
		n := FrameSize + a.PayloadSize()
		if n > l.opts.MaxRecordSize {
			return 0, 0, fmt.Errorf("mqlite/commitlog: record of %d bytes, the limit is %d: %w", n, l.opts.MaxRecordSize, errs.ErrMessageTooLarge)
		}
		total += n
	}
	if len(as) == 0 || int64(total) > l.opts.SegmentSize-BlankSize {
		return 0, 0, fmt.Errorf("mqlite/commitlog: batch of %d records, %d bytes: %w", len(as), total, errs.ErrMessageTooLarge)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.appendLocked(as, total)
}

// appendLocked is AppendBatch under the lock. (Kept apart so that both
// functions' defers are open-coded: few returns times few defers.)
func (l *Log) appendLocked(as []Appender, total int) (first, end int64, err error) {
	if l.mu.closed {
		return 0, 0, errs.ErrClosed
	}
	if err := l.Fenced(); err != nil {
		return 0, 0, err
	}
	defer debug.SetPanicOnFault(guardFaults())
	defer l.catchFault(&err)
	cur := l.mu.cur
	w := l.wrote.Load()
	pos := w - cur.start
	if pos+int64(total)+BlankSize > l.opts.SegmentSize && pos+int64(total) != l.opts.SegmentSize {
		next, err := l.rollLocked()
		if err != nil {
			return 0, 0, err
		}
		if err := l.sealLocked(cur, pos); err != nil {
			return 0, 0, err
		}
		cur, w, pos = next, next.start, 0
	}
	synced := l.flushed.Load()
	first = w
	dst := l.encodeBuffer(cur, pos, total)
	at := 0
	for _, a := range as {
		n := FrameSize + a.PayloadSize()
		rec := dst[at : at+n]
		le.PutUint32(rec[0:], uint32(n))
		le.PutUint32(rec[4:], MagicV1)
		le.PutUint64(rec[12:], uint64(w))
		le.PutUint64(rec[20:], uint64(synced))
		a.EncodePayload(rec[FrameSize:], w)
		le.PutUint32(rec[8:], frameCRC(rec))
		at += n
		w += int64(n)
	}
	if l.writeThrough && cur.f != nil {
		if err := l.writeAt(cur, pos, dst); err != nil {
			return 0, 0, err
		}
	}
	l.wrote.Store(w)
	if w >= l.mu.warmAt {
		l.warmLocked(w)
	}
	return first, w, nil
}

// sealLocked ends prev, the segment just rolled from at pos, with a blank
// marker if the rest has room for one, and closes the descriptor it was
// written through.
func (l *Log) sealLocked(prev *segment, pos int64) error {
	if rest := l.opts.SegmentSize - pos; rest >= BlankSize {
		var b [BlankSize]byte
		putBlank(b[:], uint32(rest))
		if err := l.writeAt(prev, pos, b[:]); err != nil {
			return err
		}
	}
	if err := prev.closeForWrite(); err != nil {
		l.opts.Logger.Warn("mqlite/commitlog: close a sealed segment", "path", prev.path, "err", err)
	}
	return nil
}

func frameCRC(rec []byte) uint32 {
	c := crc32.Update(0, castagnoli, rec[0:8])
	return crc32.Update(c, castagnoli, rec[12:])
}

func putBlank(b []byte, rest uint32) {
	le.PutUint32(b[0:], rest)
	le.PutUint32(b[4:], BlankMagic)
	le.PutUint32(b[8:], crc32.Checksum(b[0:8], castagnoli))
}

// rollLocked takes the segment the allocator prepared and makes it current.
func (l *Log) rollLocked() (*segment, error) {
	want := l.mu.cur.start + l.opts.SegmentSize
	if l.mu.allocIdle {
		l.mu.allocIdle = false
		l.allocReq <- want
	}
	var p prepared
	select {
	case p = <-l.allocReady:
	default:
		t := time.Now()
		p = <-l.allocReady
		l.rollWait.Add(int64(time.Since(t)))
	}
	if p.err != nil {
		// No retry in the background: on a full disk it would take the
		// last free bytes for as long as the attempt lasts, failing the
		// small writes (offsets, configs) that should still succeed.
		// The next append that needs the segment asks again.
		l.mu.allocIdle = true
		return nil, p.err
	}
	if p.seg.start != want {
		p.seg.release()
		l.allocReq <- want
		return nil, fmt.Errorf("mqlite/commitlog: allocator prepared segment %d, want %d: %w", p.seg.start, want, errs.ErrIO)
	}
	l.ret.Lock()
	segs := l.snap.Load().segs
	l.publishLocked(&snapshot{segs: append(segs[:len(segs):len(segs)], p.seg)})
	l.ret.Unlock()
	l.mu.cur.sealed(&l.opts)
	l.mu.cur = p.seg
	l.allocReq <- want + l.opts.SegmentSize
	return p.seg, nil
}

// catchFault turns a memory fault while touching a mapping (a file
// truncated underneath, a full tmpfs) into ErrIO and fences the log.
func (l *Log) catchFault(err *error) {
	r := recover()
	if r == nil {
		return
	}
	if re, ok := r.(runtime.Error); ok {
		if fa, ok := re.(interface{ Addr() uintptr }); ok {
			*err = fmt.Errorf("mqlite/commitlog: memory fault at %#x: %w", fa.Addr(), errs.ErrIO)
			l.fence(*err)
			return
		}
	}
	panic(r)
}

// guardFaults makes memory faults in this goroutine panic (recoverably)
// instead of crashing the process and returns the previous setting; call
// as defer debug.SetPanicOnFault(guardFaults()), which (unlike a returned
// closure) does not allocate.
func guardFaults() bool { return debug.SetPanicOnFault(true) }

// Flush makes everything appended so far durable and returns the flushed
// position. After a failure the log is fenced: the flushed position does
// not advance and every later Append and Flush fails.
func (l *Log) Flush() (int64, error) {
	l.flushMu.Lock()
	defer l.flushMu.Unlock()
	if err := l.Fenced(); err != nil {
		return l.flushed.Load(), err
	}
	from, to := l.flushed.Load(), l.wrote.Load()
	if to <= from {
		return from, nil
	}
	snap := l.pin() // after loading to: it holds every segment below
	defer l.unpin(snap)
	if snap.closed {
		return from, errs.ErrClosed
	}
	segs := snap.segs
	i := sort.Search(len(segs), func(i int) bool { return segs[i].start+l.opts.SegmentSize > from })
	for ; i < len(segs) && segs[i].start < to; i++ {
		s := segs[i]
		a := max(from, s.start) - s.start
		b := min(to, s.start+l.opts.SegmentSize) - s.start
		d, drop := s.m.(vfs.Dropper)
		drop = drop && !l.writeThrough // its entries are clean: nothing to protect
		page := int(a) &^ (vfs.PageSize - 1)
		if drop {
			// The pages below the one holding to are complete and never
			// written again: drop their entries in one shootdown, so that
			// the sync has none to write-protect one page at a time.
			d.Drop(page, int(b)-page)
		}
		if err := s.m.Sync(int(a), int(b-a)); err != nil {
			err = diskErr("sync", s.path, err)
			l.fence(err)
			return from, l.Fenced()
		}
		if drop {
			// Map them again, read-only and clean, for the readers behind
			// the writer (the dispatcher, consumers), which would
			// otherwise fault them in.
			vfs.PopulateRead(s.buf[page : int(b)&^(vfs.PageSize-1)])
		}
	}
	l.flushed.Store(to)
	return to, nil
}

// Close flushes the log, stops the allocator and unmaps every segment,
// including segments DeleteBefore removed, once the readers holding them
// return (a Read callback must not call Close). It is idempotent.
func (l *Log) Close() error {
	l.mu.Lock()
	if l.mu.closed {
		l.mu.Unlock()
		return nil
	}
	l.mu.closed = true
	l.mu.Unlock()
	var ferr error
	if !l.opts.ReadOnly {
		if _, ferr = l.Flush(); ferr == nil {
			ferr = l.terminate()
		}
	}
	close(l.quit)
	<-l.allocDone
	select {
	case p := <-l.allocReady:
		if p.seg != nil {
			l.dropPrepared(p.seg)
		} else {
			// No append will get this error: say it here.
			l.opts.Logger.Warn("mqlite/commitlog: preparing the next segment failed", "err", p.err)
		}
	default:
	}
	l.delMu.Lock()
	err := errors.Join(l.retireAll(), l.releaseCut())
	l.delMu.Unlock()
	if !l.opts.ReadOnly {
		l.DropSpare() // a closed log keeps no spare
	}
	if ferr != nil && !errors.Is(ferr, errs.ErrFenced) {
		return ferr
	}
	return err
}

// dropPrepared unmaps and removes a prepared segment nobody appended to.
// A failed removal is only logged: the file holds no record, and the
// next Open removes it with the other segments past the log's end.
func (l *Log) dropPrepared(seg *segment) {
	seg.release()
	if err := l.opts.FS.Remove(seg.path); err != nil {
		l.opts.Logger.Warn("mqlite/commitlog: cannot remove the unused next segment", "path", seg.path, "err", err)
	}
}

// releaseAll unmaps the segments of a log that failed to open (no reader
// can hold them).
func (l *Log) releaseAll() {
	for _, s := range l.snap.Load().segs {
		s.release()
	}
}
