package commitlog

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/mqlite/mqlite/internal/errs"
	"github.com/mqlite/mqlite/vfs"
)

// RawReader reads what ViewRaw hands over, whole frames of the log as
// stored, but copies them from the segment file with one ReadAt into a
// buffer it reuses, instead of handing over a view of the mapping. A
// primary's sender catching a replica up sends each chunk from that
// buffer: the kernel copies the page cache through its own mapping, the
// frames are walked and checksummed in a buffer that stays in the CPU's
// cache, and the socket copies from it again; reading the mapping instead
// took a TLB miss on every page the walk touched.
//
// Only a log whose file system reads what the mapping holds (one page
// cache or one buffer behind both: vfs.WritesReachMappings) has one:
// NewRawReader returns nil elsewhere. A RawReader is not safe for
// concurrent use; Close it when done (it keeps one segment file open).
type RawReader struct {
	l   *Log
	seg *segment // whose file f is
	f   vfs.File
	buf []byte
}

// NewRawReader returns a RawReader of l, or nil when l's file system does
// not promise that its files' reads see what was stored through their
// mappings.
func (l *Log) NewRawReader() *RawReader {
	if !vfs.WritesReachMappings(l.opts.FS) {
		return nil
	}
	return &RawReader{l: l}
}

// Close closes the segment file the reader holds open.
func (r *RawReader) Close() error {
	if r.f == nil {
		return nil
	}
	err := r.f.Close()
	r.f, r.seg = nil, nil
	return err
}

// Read returns the frames ViewRaw would hand over for (from, max), in the
// reader's buffer (valid until the next Read), and the offset after them.
// Errors as ViewRaw's, and ReadAt's (wrapped) if the segment file cannot
// be read: nothing is returned then.
func (r *RawReader) Read(from int64, max int) (b []byte, next int64, err error) {
	l := r.l
	w := l.wrote.Load()
	snap := l.pin()
	defer l.unpin(snap) // retention removes no pinned segment's file
	if snap.closed {
		return nil, from, errs.ErrClosed
	}
	s, err := l.segmentAt(snap, w, from)
	if err != nil || s == nil {
		return nil, from, err
	}
	pos := from - s.start
	n := min(int64(max), w-from, l.opts.SegmentSize-pos)
	if err := r.open(s); err != nil {
		return nil, from, err
	}
	if err := r.fill(s, pos, 0, n); err != nil {
		return nil, from, err
	}
	end, err := r.walk(s, pos, n, w)
	if err != nil {
		return nil, from, err
	}
	return r.buf[:end], from + end, nil
}

// walk finds the whole frames at the start of the buffer's n bytes (read
// at pos of s), reading the rest of a first frame longer than n; it
// returns their length. Checks as rawSpan's.
func (r *RawReader) walk(s *segment, pos, n, w int64) (int64, error) {
	end := int64(0)
	for end < n {
		at := pos + end
		rest := r.l.opts.SegmentSize - at
		if need := frameNeeds(r.buf[end:n], rest); need > n-end {
			if end > 0 {
				break // the next chunk's
			}
			// A first frame longer than n: its header, then all of it.
			for ; need > n; need = frameNeeds(r.buf[:n], rest) {
				if err := r.fill(s, pos, n, need); err != nil {
					return 0, err
				}
				n = need
			}
		}
		size, k, reason := checkFrame(r.buf[end:n], rest, s.start+at, false) // the replica checks each CRC as it appends
		switch k {
		case kRecord, kBlank:
		case kZero:
			return 0, errs.Corrupt(s.path, at, "zeros where a record should be (below the written position %d)", w)
		default:
			return 0, errs.Corrupt(s.path, at, "%s", reason)
		}
		end += size
		if k == kBlank {
			break
		}
	}
	return end, nil
}

// frameNeeds is how many bytes from the start of f checkFrame needs to
// judge the frame there, rest bytes before its segment's end: its header,
// then all of it (at most rest: a size beyond is judged from the header).
func frameNeeds(f []byte, rest int64) int64 {
	if int64(len(f)) < min(BlankSize, rest) {
		return min(BlankSize, rest)
	}
	if rest < BlankSize {
		return rest
	}
	size := int64(le.Uint32(f))
	if size > rest || size < BlankSize {
		return BlankSize
	}
	return size
}

// open makes f the file of s.
func (r *RawReader) open(s *segment) error {
	if r.seg == s {
		return nil
	}
	if err := r.Close(); err != nil {
		r.l.opts.Logger.Warn("mqlite/commitlog: close a segment read for a replica", "path", s.path, "err", err)
	}
	f, err := r.l.opts.FS.OpenFile(s.path, os.O_RDONLY, 0)
	if err != nil {
		return fmt.Errorf("mqlite/commitlog: open %s to read raw frames: %w", s.path, err)
	}
	r.f, r.seg = f, s
	return nil
}

// fill reads [pos+from, pos+to) of the file into buf[from:to).
func (r *RawReader) fill(s *segment, pos, from, to int64) error {
	if int64(cap(r.buf)) < to {
		r.buf = append(r.buf[:cap(r.buf)], make([]byte, to-int64(cap(r.buf)))...)
	}
	r.buf = r.buf[:cap(r.buf)]
	k, err := r.f.ReadAt(r.buf[from:to], pos+from)
	if int64(k) == to-from {
		return nil
	}
	if err == nil || errors.Is(err, io.EOF) {
		return errs.Corrupt(s.path, pos+from, "the segment file ends %d bytes into a read of %d", k, to-from)
	}
	return fmt.Errorf("mqlite/commitlog: read %s at %d: %w", s.path, pos+from, err)
}
