package commitlog

import (
	"errors"
	"strings"

	"github.com/mqlite/mqlite/vfs"
)

// Recycling: a segment DeleteBefore drops is renamed to a spare instead of
// removed (up to maxSpares), and the allocator makes the spare the next
// segment, as Pebble recycles its WAL files. The spare's pages are most
// likely still in the page cache and its blocks allocated, so pre-faulting
// it costs a quarter of what a new file costs (0.3 against 1.1-1.3 µs a
// page here), and the first touch of memory the machine never used, 10-20
// µs a page on this VM, is not paid at all.
//
// A recycled segment holds the records of its previous life past the write
// position. They can never pass for records of this one: a frame stores its
// own global offset, and the segment's start changed (see recovery in
// doc.go). Close writes a zero word at the end of the log, so that a clean
// Open stops there without looking further.
//
// A read-only opener (another process, or a read-only Store) holds a shared
// lock on each segment file it maps, for as long as it maps it. The
// allocator recycles a spare only when it can lock the file exclusively
// (the lock follows the file through DeleteBefore's rename), so no reader's
// mapping of a removed segment ever sees the file rewritten; a spare a
// reader maps is removed instead. Segments created after a reader opened
// are recycled as usual.

const (
	spareSuffix = ".spare"  // a segment DeleteBefore kept for recycling: <start>.spare
	readersName = "readers" // left by versions whose read-only openers locked it: ignored
)

// maxSpares is how many dropped segments the log keeps for recycling. Two,
// not one: the allocator prepares the next segment the moment the appender
// rolls, often before a retention policy has dropped the oldest, and with
// the one spare used up a new file would get memory the machine may never
// have touched (10-20 µs a page here: 2 s for a 256 MiB segment, against
// ~100 ms for a recycled one in BenchmarkAppend).
const maxSpares = 2

// spareState is the log's spares: removed segments waiting to be recycled
// (paths), and renamed ones still mapped by a reader (pending).
type spareState struct {
	paths   []string
	pending int
	drop    bool // DropSpare was called while some were pending: remove those on release
}

// keepSpare says whether DeleteBefore should rename the segment file at
// path rather than remove it, and if so counts a spare as pending. A file a
// read-only opener maps could never be recycled: it takes no spare's place.
func (l *Log) keepSpare(path string) bool {
	if l.opts.NoRecycle || l.readerMaps(path) {
		return false
	}
	l.spareMu.Lock()
	defer l.spareMu.Unlock()
	if len(l.spare.paths)+l.spare.pending >= maxSpares {
		return false
	}
	l.spare.pending++
	return true
}

// readerMaps reports whether a read-only opener holds the segment file at
// path (its shared lock refuses an exclusive one).
func (l *Log) readerMaps(path string) bool {
	lk, err := l.opts.FS.Lock(path)
	if err != nil {
		return errors.Is(err, vfs.ErrLocked)
	}
	lk.Close()
	return false
}

// cancelSpare undoes keepSpare when the rename failed.
func (l *Log) cancelSpare() {
	l.spareMu.Lock()
	l.spare.pending--
	l.spareMu.Unlock()
}

// spareReleased makes path, the file of a retired segment just unmapped,
// a spare (or removes it if DropSpare asked meanwhile).
func (l *Log) spareReleased(path string) {
	l.spareMu.Lock()
	drop := l.spare.drop
	if l.spare.pending--; l.spare.pending == 0 {
		l.spare.drop = false
	}
	if !drop {
		l.spare.paths = append(l.spare.paths, path)
	}
	l.spareMu.Unlock()
	if drop {
		l.removeSpare(path)
	}
}

// takeSpare hands a spare to the allocator, or "" if there is none.
func (l *Log) takeSpare() string {
	l.spareMu.Lock()
	defer l.spareMu.Unlock()
	n := len(l.spare.paths)
	if n == 0 {
		return ""
	}
	p := l.spare.paths[n-1]
	l.spare.paths = l.spare.paths[:n-1]
	return p
}

// DropSpare removes the segment files kept for recycling, so that their
// disk space is free: a retention policy short of space calls it after
// DeleteBefore. A spare still mapped by a reader is removed when the
// reader leaves.
func (l *Log) DropSpare() {
	l.spareMu.Lock()
	paths := l.spare.paths
	l.spare.paths = nil
	if l.spare.pending > 0 {
		l.spare.drop = true
	}
	l.spareMu.Unlock()
	for _, p := range paths {
		l.removeSpare(p)
	}
}

func (l *Log) removeSpare(path string) {
	if err := l.opts.FS.Remove(path); err != nil && !errors.Is(err, vfs.ErrNotExist) {
		l.opts.Logger.Warn("mqlite/commitlog: remove spare segment", "path", path, "err", err)
	}
}

// recycle renames a spare, if there is one and no read-only opener is
// there, to path, the next segment. It reports whether it did; a spare it
// cannot use is removed.
func (l *Log) recycle(path string) bool {
	spare := l.takeSpare()
	if spare == "" {
		return false
	}
	lk, err := l.opts.FS.Lock(spare)
	if err != nil {
		// A read-only opener maps the file (ErrLocked): removing it
		// leaves its mapping intact, rewriting it would not.
		l.removeSpare(spare)
		return false
	}
	if l.unmapFirst {
		// Windows cannot rename a file a handle holds open. No reader can
		// reach the file by name now (it is a spare): let go at once.
		lk.Close()
	} else {
		defer lk.Close()
	}
	if err := l.opts.FS.Rename(spare, path); err != nil {
		l.opts.Logger.Warn("mqlite/commitlog: recycle spare segment", "path", spare, "err", err)
		l.removeSpare(spare)
		return false
	}
	return true
}

// isSpare reports whether name is a spare's file name.
func isSpare(name string) bool {
	start, ok := strings.CutSuffix(name, spareSuffix)
	_, digits := segmentStart(start)
	return ok && digits
}

// terminate writes a zero word at the end of the log if what is there is
// not zeros already (a recycled segment's old records), and syncs it, so
// that the next Open, after a clean shutdown, finds the end at once.
func (l *Log) terminate() error {
	s, end := l.mu.cur, l.wrote.Load()
	if s == nil || s.buf == nil {
		return nil
	}
	pos := end - s.start
	if pos < 0 || pos+8 > l.opts.SegmentSize {
		return nil
	}
	l.reserve(end, end+8) // not while the allocator writes zeros there (prewrite.go)
	if isZero(s.buf[pos : pos+8]) {
		return nil
	}
	clear(s.buf[pos : pos+8])
	if err := s.m.Sync(int(pos), 8); err != nil {
		err = diskErr("sync", s.path, err)
		l.fence(err)
		return err
	}
	return nil
}
