package commitlog

import (
	"os"

	"github.com/mqlite/mqlite/vfs"
)

// Writing through the file. A log with SmallSyncs (a group commit per
// send, FlushSync) on a file system whose writes reach its mappings
// (vfs.WritesReachMappings: Linux, MemFS) encodes each append into a
// buffer and writes it into the segment file with one WriteAt (pwrite),
// instead of storing into the mapping; readers, the dispatcher and
// recovery still read through the mapping, and Flush still syncs the range
// through it (on Linux msync(MS_SYNC) is fdatasync of the range).
//
// A store through a mapping marks the page-table entry dirty. Writing the
// page back then makes the kernel write-protect that entry first, a TLB
// shootdown per page (an inter-processor interrupt, slow on a virtual
// machine), and the writer's next store into the page faults to make it
// writable again: per small sync a fault and a shootdown, besides the
// sync. pwrite dirties the page cache only; the mapping's entries stay
// read-only and clean, so the sync writes the pages back and nothing else
// (the RocketMQ answer, transientStorePoolEnable: records are
// committed into the file with write() before force(), readers keep the
// mapping; Pebble writes its WAL the same way).
//
// The warming ahead of the writer then faults pages in for reading
// (vfs.PopulateRead) instead of writing: a page pre-faulted for writing
// is dirty, and the sync of the range would write the zeros ahead back
// too (msync syncs whole pages of the range only, but the kernel's
// periodic write-back would write them all). Read-faulting brings the
// page into the page cache, so a pwrite into it reads nothing from disk.
//
// The segment being written keeps its file open for the writes; the
// descriptor is closed when the writer leaves it (rollLocked) or it is
// released.

// openForWrite opens the file of s for writing through it, if the log
// writes through files (its appends, or its raw appends) and s has no
// descriptor yet.
func (l *Log) openForWrite(s *segment) error {
	if !l.writeThrough && !l.rawThrough || s.f != nil {
		return nil
	}
	f, err := l.opts.FS.OpenFile(s.path, os.O_RDWR, 0o600)
	if err != nil {
		return diskErr("open", s.path, err)
	}
	s.f = f
	s.pw.set(f)
	return nil
}

// closeForWrite closes the descriptor openForWrite opened, if any, or
// leaves it to the pre-writing using it to close (prewrite.go).
func (s *segment) closeForWrite() error {
	f := s.f
	if f == nil {
		return nil
	}
	s.f = nil
	if !s.pw.leave() {
		return nil
	}
	return f.Close()
}

// writeAt puts b at pos in s: with one WriteAt for a log that writes
// through files, else by a copy into the mapping. A failed write fences
// the log: the caller has taken offsets for the records it held.
func (l *Log) writeAt(s *segment, pos int64, b []byte) error {
	if s.f == nil {
		copy(s.buf[pos:], b)
		return nil
	}
	l.reserve(s.start+pos, s.start+pos+int64(len(b)))
	if _, err := s.f.WriteAt(b, pos); err != nil {
		err = diskErr("write", s.path, err)
		l.fence(err)
		return err
	}
	return nil
}

// encodeBuffer returns where appendLocked encodes n bytes at pos of s: the
// mapping itself, or for a log that writes through files its reused
// buffer, which writeAt then writes. Called under mu.
func (l *Log) encodeBuffer(s *segment, pos int64, n int) []byte {
	if !l.writeThrough || s.f == nil {
		return s.buf[pos : pos+int64(n)]
	}
	if n > maxKeptBuffer {
		return make([]byte, n) // a large batch: not kept
	}
	if cap(l.mu.wbuf) < n {
		l.mu.wbuf = make([]byte, max(n, 64<<10))
	}
	return l.mu.wbuf[:n]
}

// maxKeptBuffer is the largest encode buffer the log keeps between appends.
const maxKeptBuffer = 1 << 20

// writesThrough reports whether a log opened with opts writes through
// its files.
func writesThrough(opts *Options) bool {
	return opts.SmallSyncs && !opts.ReadOnly && !opts.noWriteThrough && vfs.WritesReachMappings(opts.FS)
}
