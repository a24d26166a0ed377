package commitlog

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"

	"github.com/mqlite/mqlite/internal/errs"
	"github.com/mqlite/mqlite/vfs"
)

// segment is one mapped segment file. Its file descriptor is closed once
// the file is mapped: the mapping outlives it, and nothing needs the file
// again (it is preallocated, and synced through the mapping), so a store
// of many segments needs no descriptor per segment. A log that writes
// through its files (through.go) opens the segment being written again,
// and closes it when it moves on.
type segment struct {
	start int64
	path  string
	m     vfs.Mapping
	buf   []byte
	spare string // where DeleteBefore renamed the file to be recycled; "" if removed
	// dropOnRelease: DeleteBefore retired the segment with its file still
	// there, to be removed or renamed once unmapped (unmapfirst.go).
	dropOnRelease bool
	// lock is a read-only log's shared lock on the file, held while it is
	// mapped, so that the owner does not recycle it (recycle.go); or nil.
	lock io.Closer
	// f is the file, open while the segment is written through it
	// (through.go); else nil.
	f vfs.File
	// pw shares f with the allocator's pre-writing (prewrite.go).
	pw prewriteRef
	// recycled: the file is a spare's (recycle.go), whose blocks are
	// written already, so it is not pre-written (prewrite.go).
	recycled bool
}

func segmentName(start int64) string { return fmt.Sprintf("%020d", start) }

func (s *segment) release() error {
	err := s.closeForWrite()
	if s.m != nil {
		if uerr := s.m.Unmap(); err == nil {
			err = uerr
		}
		s.m, s.buf = nil, nil
	}
	if s.lock != nil {
		s.lock.Close()
		s.lock = nil
	}
	return err
}

// diskErr classifies a failed file operation.
func diskErr(op, path string, err error) error {
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EFBIG) || errors.Is(err, syscall.EDQUOT) {
		return fmt.Errorf("mqlite/commitlog: %s %s: %w (%w)", op, path, errs.ErrDiskFull, err)
	}
	return fmt.Errorf("mqlite/commitlog: %s %s: %w (%w)", op, path, errs.ErrIO, err)
}

// openSegment maps an existing or new segment file of l.size bytes. A new
// or short file is preallocated first, so writes through the mapping never
// hit a hole the disk cannot fill.
func (l *Log) openSegment(start int64, create bool) (*segment, error) {
	path := filepath.Join(l.opts.Dir, segmentName(start))
	flag := os.O_RDWR
	if create {
		flag |= os.O_CREATE
	}
	f, err := l.opts.FS.OpenFile(path, flag, 0o600)
	if err != nil {
		return nil, diskErr("open", path, err)
	}
	fail := func(op string, err error) (*segment, error) {
		f.Close()
		if create {
			l.opts.FS.Remove(path)
		}
		return nil, diskErr(op, path, err)
	}
	size, err := f.Size()
	if err != nil {
		return fail("stat", err)
	}
	if size > l.opts.SegmentSize {
		f.Close()
		return nil, errs.Corrupt(path, 0, "segment is %d bytes, longer than the segment size %d", size, l.opts.SegmentSize)
	}
	if size < l.opts.SegmentSize {
		err := f.Allocate(l.opts.SegmentSize)
		if err == nil {
			// Make the new length durable: otherwise a power loss before
			// the first flush into this segment leaves a short file that,
			// once a later segment exists, looks like a damaged sealed one.
			err = f.Sync()
		}
		if err != nil {
			return fail("allocate", err)
		}
	}
	m, err := f.Map(int(l.opts.SegmentSize))
	if err != nil {
		return fail("map", err)
	}
	if err := f.Close(); err != nil {
		m.Unmap()
		return fail("close", err)
	}
	return &segment{start: start, path: path, m: m, buf: m.Bytes()}, nil
}

// toWrite sets how the kernel pages s in for the writer (vfs.Pager):
// single pages for a log with SmallSyncs, else huge pages if the log is
// pre-faulted (without warming, the appender would fault in, and the
// kernel zero, a 2 MiB folio at a time itself).
func (s *segment) toWrite(o *Options) {
	switch p, ok := s.m.(vfs.Pager); {
	case !ok:
	case o.SmallSyncs:
		p.SmallPages(true)
	case !o.NoWarm:
		p.HugePages()
	}
}

// sealed gives s, no longer written, back the read-ahead that SmallSyncs
// took away; huge pages stay, for its readers.
func (s *segment) sealed(o *Options) {
	if p, ok := s.m.(vfs.Pager); ok && o.SmallSyncs {
		p.SmallPages(false)
	}
}

// newSegment is openSegment of a new segment: a spare's file when there
// is one whose pages are mostly still in memory (recycle.go), else a new
// file.
func (l *Log) newSegment(start int64) (*segment, error) {
	path := filepath.Join(l.opts.Dir, segmentName(start))
	if !l.recycle(path) {
		return l.openSegment(start, true)
	}
	seg, err := l.openSegment(start, true)
	if err != nil {
		return nil, err
	}
	if r := l.opts.resident(seg.buf); r >= minResident {
		l.recycled.Add(1)
		seg.recycled = true
		return seg, nil
	}
	// Written back and evicted: pre-faulting would read it from disk.
	seg.release()
	l.removeSpare(path)
	return l.openSegment(start, true)
}

// minResident is the share of a spare's pages that must be in memory for
// it to be recycled.
const minResident = 0.9

// prepared is a segment made ready by the allocator, or why it is not.
type prepared struct {
	seg *segment
	err error
}

// allocate runs in its own goroutine: it creates, preallocates and maps
// the next segment before the appender needs it, and syncs the directory
// so that the new file's entry is durable before any record in it is
// acknowledged; then it pre-faults the new segment's head. In between it
// keeps the current segment warm ahead of the write position (warm.go).
func (l *Log) allocate() {
	defer close(l.allocDone)
	var warmed int64 // everything below is pre-faulted (or was skipped)
	// cold is a segment handed over before the first append since Open:
	// its head is warmed at the first request to warm, if one comes.
	var cold *segment
	for {
		select {
		case start := <-l.allocReq:
			seg, err := l.newSegment(start)
			if err == nil {
				seg.toWrite(&l.opts) // before any of it is faulted in
				err = l.openForWrite(seg)
				if err == nil {
					if serr := l.opts.FS.SyncDir(l.opts.Dir); serr != nil {
						err = diskErr("sync dir", l.opts.Dir, serr)
					}
				}
				if err != nil {
					seg.release()
					l.opts.FS.Remove(seg.path)
					seg = nil
				}
			}
			// The head is warmed after the hand-over: an appender that
			// outruns the warming then rolls at once and faults pages in
			// itself, beside the warming, instead of waiting for all of
			// it (an idle core: the 4 KiB Append spent a fifth of its time
			// so). The appender asks for a segment only after taking the
			// last one, so the buffered send does not block.
			select {
			case l.allocReady <- prepared{seg, err}:
			case <-l.quit:
				if seg != nil {
					l.dropPrepared(seg)
				} else {
					l.opts.Logger.Warn("mqlite/commitlog: preparing the next segment failed", "err", err)
				}
				return
			}
			if seg != nil && !l.opts.NoWarm {
				if l.warmTo.Load() == 0 { // nothing appended yet
					cold = seg
				} else {
					l.warmHead(seg, &warmed)
				}
			}
		case <-l.warmKick:
			for l.warmAhead(&warmed) {
				select {
				case <-l.quit:
					return
				default:
				}
			}
			if cold != nil {
				// Populating unmapped memory fails harmlessly, should the
				// segment be gone by now.
				seg := cold
				cold = nil
				l.warmHead(seg, &warmed)
			}
		case <-l.quit:
			return
		}
	}
}
