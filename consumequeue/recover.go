package consumequeue

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/mqlite/mqlite/internal/errs"
	"github.com/mqlite/mqlite/vfs"
)

// scanFiles is how many of the newest data files Open scans entry by entry
// (RocketMQ starts from the third-to-last file); older files are trusted and
// checked by CRC when read.
const scanFiles = 3

// dataFile is a data file found in the queue directory.
type dataFile struct {
	start int64 // logical offset of its first slot
	path  string
	size  int64
}

// loadMeta checks the meta file, or writes it for a new queue; found says
// there was one.
func (q *Queue) loadMeta(perFile int) (found bool, err error) {
	found, filePerFile, err := q.checkMeta(perFile)
	if err != nil {
		return found, err
	}
	if found {
		if perFile == 0 { // adopt the queue's own
			q.perFile, q.fileSize = int64(filePerFile), filePerFile*EntrySize
		}
		return true, nil
	}
	if err := vfs.WriteFileAtomic(q.fs, q.dir, metaName, encodeMeta(int(q.perFile))); err != nil {
		return false, fmt.Errorf("mqlite/consumequeue: write %s: %w", filepath.Join(q.dir, metaName), errs.Disk(err))
	}
	return false, nil
}

// checkMeta checks the meta file (perFile 0: any entries per file, which
// it returns). found is false (with no error) when there is none and no
// data file either: a new queue (or, read-only, one whose directory is
// missing).
func (q *Queue) checkMeta(perFile int) (found bool, filePerFile int, err error) {
	path := filepath.Join(q.dir, metaName)
	size, _, err := q.fs.Stat(path)
	if errors.Is(err, vfs.ErrNotExist) {
		files, err := q.listFiles()
		if errors.Is(err, vfs.ErrNotExist) {
			return false, 0, nil // no directory
		}
		if err != nil {
			return false, 0, err
		}
		if len(files) > 0 {
			return false, 0, fmt.Errorf("mqlite/consumequeue: %w", errCorrupt(path, 0, "meta file missing next to %d data files", len(files)))
		}
		return false, 0, nil
	}
	if err != nil {
		return false, 0, fmt.Errorf("mqlite/consumequeue: stat %s: %w", path, errs.Disk(err))
	}
	if size > 4096 {
		return false, 0, fmt.Errorf("mqlite/consumequeue: %w", errCorrupt(path, 0, "meta file of %d bytes", size))
	}
	b, err := vfs.ReadFile(q.fs, path)
	if err != nil {
		return false, 0, fmt.Errorf("mqlite/consumequeue: read %s: %w", path, errs.Disk(err))
	}
	n, err := checkMeta(path, b, perFile)
	return true, n, err
}

// listFiles returns the data files in ascending order. Unknown names are
// ignored (and logged); a data file name that is not a multiple of the file
// size is a *CorruptError.
func (q *Queue) listFiles() ([]dataFile, error) {
	names, err := q.fs.ReadDir(q.dir)
	if err != nil {
		return nil, fmt.Errorf("mqlite/consumequeue: list %s: %w", q.dir, errs.Disk(err))
	}
	var files []dataFile
	for _, name := range names {
		if name == metaName || name == metaName+".tmp" {
			continue
		}
		path := filepath.Join(q.dir, name)
		off, ok := parseFileName(name)
		if !ok {
			q.log.Warn("consumequeue: ignoring unknown file", "file", path)
			continue
		}
		size, isDir, err := q.fs.Stat(path)
		if err != nil {
			return nil, fmt.Errorf("mqlite/consumequeue: stat %s: %w", path, errs.Disk(err))
		}
		if isDir {
			q.log.Warn("consumequeue: ignoring directory", "file", path)
			continue
		}
		if off%int64(q.fileSize) != 0 {
			return nil, fmt.Errorf("mqlite/consumequeue: %w", errCorrupt(path, 0, "file name is not a multiple of the file size %d", q.fileSize))
		}
		files = append(files, dataFile{start: off / EntrySize, path: path, size: size})
	}
	slices.SortFunc(files, func(a, b dataFile) int { return cmp.Compare(a.start, b.start) })
	return files, nil
}

// recover loads the data files and sets min, max and physEnd; see "Recovery"
// in the package documentation. hadMeta says the meta file was there
// before this Open.
func (q *Queue) recover(hadMeta bool) error {
	files, err := q.listFiles()
	if err != nil {
		return err
	}
	if len(files) == 0 {
		if hadMeta {
			// The first data file is created with the meta file and never
			// removed (retention and truncation keep the last file): it
			// was lost, and whatever it held with it. Re-dispatch finds
			// out (from MaxPhysEnd 0, the CommitLog's start).
			q.log.Warn("consumequeue: meta file without data files; the queue is rebuilt", "dir", q.dir)
			q.repaired.Store(true)
		}
		return nil
	}
	keep := q.contiguous(files)
	scanFrom := q.firstToScan(files, keep)

	segs := make([]*segment, 0, keep)
	fail := func(err error) error {
		for _, s := range segs {
			s.release()
		}
		return err
	}
	for i := range scanFrom {
		s, err := q.openSegment(files[i])
		if err != nil {
			return fail(err)
		}
		segs = append(segs, s)
	}
	realSeen, prevEnd := q.scanStart(segs, scanFrom)
	stop, stopSlot := -1, int64(0)
	for i := scanFrom; i < keep; i++ {
		s, err := q.openSegment(files[i])
		if err != nil {
			return fail(err)
		}
		segs = append(segs, s)
		if n := q.scan(s, i == 0, &realSeen, &prevEnd); n < q.perFile {
			stop, stopSlot = i, n
			break
		}
	}

	// Nothing after the first invalid entry is trusted.
	drop := files[keep:]
	if stop >= 0 {
		drop = files[stop+1:]
		if err := q.zeroTail(segs[stop], stopSlot); err != nil {
			return fail(err)
		}
		if stopSlot == 0 && stop > 0 {
			// Only the first file may be empty; the one before is full.
			drop = files[stop:]
			segs[stop].release()
			segs = segs[:stop]
			stop = -1
		}
	}
	if err := q.dropFiles(drop); err != nil {
		return fail(err)
	}

	last := segs[len(segs)-1]
	end := last.start + q.perFile
	if stop >= 0 {
		end = last.start + stopSlot
	}
	begin := q.recoveredBounds(segs, end)
	q.snap.Store(&snapshot{segs: segs})
	q.min.Store(begin)
	q.max.Store(end)
	q.scanned = files[scanFrom].start
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.checkBackLocked()
}

// contiguous returns how many of files (sorted by start) follow each other
// without a gap; the files after a gap are dropped.
func (q *Queue) contiguous(files []dataFile) int {
	for i := 1; i < len(files); i++ {
		if files[i].start != files[i-1].start+q.perFile {
			q.log.Warn("consumequeue: gap before data file; dropping it and the files after it", "file", files[i].path)
			q.repaired.Store(true)
			return i
		}
	}
	return len(files)
}

// firstToScan is the first of the keep files whose entries recovery
// checks: the last scanFiles, and every file from the first one that is
// not full size.
func (q *Queue) firstToScan(files []dataFile, keep int) int {
	scanFrom := max(0, keep-scanFiles)
	for i := range scanFrom {
		if files[i].size != int64(q.fileSize) {
			return i
		}
	}
	return scanFrom
}

// dropFiles removes the data files past the recovered end and syncs the
// directory.
func (q *Queue) dropFiles(drop []dataFile) error {
	if len(drop) == 0 {
		return nil
	}
	q.repaired.Store(true)
	for _, f := range drop {
		q.log.Warn("consumequeue: removing data file after the recovered end", "file", f.path)
		if err := q.fs.Remove(f.path); err != nil {
			return fmt.Errorf("mqlite/consumequeue: remove %s: %w", f.path, errs.Disk(err))
		}
	}
	if err := q.fs.SyncDir(q.dir); err != nil {
		return fmt.Errorf("mqlite/consumequeue: sync %s: %w", q.dir, errs.Disk(err))
	}
	return nil
}

// firstReal is the first entry of segs below end that is not a filler
// (end if none): the queue's minimum.
func (q *Queue) firstReal(segs []*segment, end int64) int64 {
	begin := segs[0].start
	for begin < end {
		if e, ok := decodeEntry(q.slot(segs, begin)); !ok || !isFiller(e) {
			break
		}
		begin++
	}
	return begin
}

// recoveredBounds returns the queue's minimum below end (firstReal), and
// records the CommitLog end of the entry before end.
func (q *Queue) recoveredBounds(segs []*segment, end int64) int64 {
	begin := q.firstReal(segs, end)
	if end > segs[0].start {
		if e, ok := decodeEntry(q.slot(segs, end-1)); ok && !isFiller(e) {
			q.physEnd.Store(e.End())
		}
	}
	return begin
}

// checkBackLocked checks, entry by entry, the files the next Open will
// scan and this one trusted: Open scans the newest scanFiles files, so
// once recovery or TruncateAfterPhys dropped files, the next Open's window
// reaches back into older ones. A damaged entry there would pass this
// Open (and fail every read of it) and be dropped by the next, with the
// entries after it, which re-dispatch then rebuilds: consecutive Opens
// would disagree. So it is dropped now, as the next Open would, and the
// queue is marked repaired. Each drop moves the window back again; the
// loop ends when the window holds only checked files.
func (q *Queue) checkBackLocked() error {
	for {
		segs := q.snap.Load().segs
		if len(segs) == 0 {
			return nil
		}
		i := max(0, len(segs)-scanFiles)
		if segs[i].start >= q.scanned {
			return nil
		}
		realSeen, prevEnd := q.scanStart(segs, i)
		bad := int64(-1)
		for j := i; j < len(segs) && segs[j].start < q.scanned; j++ {
			if n := q.scan(segs[j], j == 0, &realSeen, &prevEnd); n < q.perFile {
				if segs[j].start+n < q.max.Load() { // not the queue's end
					bad = segs[j].start + n
				}
				break
			}
		}
		q.scanned = segs[i].start
		if bad < 0 {
			return nil
		}
		path, off := q.Locate(bad)
		q.log.Warn("consumequeue: invalid entry in a file the next open scans; dropping it and everything after it (re-dispatch rebuilds them)",
			"file", path, "offset", off)
		q.repaired.Store(true)
		if err := q.truncateToLocked(segs, bad); err != nil {
			return err
		}
	}
}

// scanStart is the state scan starts from at file i of segs, whose
// earlier files are trusted: whether a real entry came before, and the
// End() of the last one (from the previous file's last slot).
func (q *Queue) scanStart(segs []*segment, i int) (realSeen bool, prevEnd int64) {
	if i == 0 {
		return false, 0
	}
	if e, ok := decodeEntry(segs[i-1].b[q.fileSize-EntrySize:]); ok && !isFiller(e) {
		prevEnd = e.End()
	}
	return true, prevEnd
}

// openSegment opens and maps a data file, first bringing a file of the
// wrong size (torn, zero-length, or grown) to the file size: the missing
// bytes read as zero, that is as invalid entries.
func (q *Queue) openSegment(df dataFile) (*segment, error) {
	f, err := q.fs.OpenFile(df.path, os.O_RDWR, 0)
	if err != nil {
		return nil, fmt.Errorf("mqlite/consumequeue: open %s: %w", df.path, errs.Disk(err))
	}
	fail := func(err error) (*segment, error) {
		f.Close()
		return nil, fmt.Errorf("mqlite/consumequeue: open %s: %w", df.path, errs.Disk(err))
	}
	size, err := f.Size()
	if err != nil {
		return fail(err)
	}
	switch want := int64(q.fileSize); {
	case size < want:
		q.log.Warn("consumequeue: short data file, extending with zeros", "file", df.path, "size", size, "want", want)
		err = f.Allocate(want)
	case size > want:
		q.log.Warn("consumequeue: long data file, truncating", "file", df.path, "size", size, "want", want)
		err = f.Truncate(want)
	}
	if err != nil {
		return fail(err)
	}
	if size != int64(q.fileSize) {
		q.repaired.Store(true) // the cut entries are gone
	}
	m, err := f.Map(q.fileSize)
	if err != nil {
		return fail(err)
	}
	if b := m.Bytes(); len(b) != q.fileSize {
		m.Unmap()
		return fail(fmt.Errorf("mapping has %d bytes, want %d", len(b), q.fileSize))
	}
	if err := f.Close(); err != nil {
		m.Unmap()
		return nil, fmt.Errorf("mqlite/consumequeue: open %s: %w", df.path, errs.Disk(err))
	}
	return &segment{start: df.start, path: df.path, m: m, b: m.Bytes()}, nil
}

// scan returns the number of valid entries at the start of s. An entry is
// valid if its CRC matches, its size is positive, and it does not point
// before the previous entry's end; fillers are valid only at the start of
// the queue's first file.
func (q *Queue) scan(s *segment, first bool, realSeen *bool, prevEnd *int64) int64 {
	for k := range q.perFile {
		off := k * EntrySize
		e, ok := decodeEntry(s.b[off : off+EntrySize])
		switch {
		case !ok:
			return k
		case isFiller(e):
			if !first || *realSeen {
				return k
			}
		case e.Offset < *prevEnd:
			return k
		default:
			*prevEnd = e.End()
			*realSeen = true
		}
	}
	return q.perFile
}

// zeroTail clears s from slot on, so that stale entries can never be taken
// for new ones, and syncs the cleared bytes.
func (q *Queue) zeroTail(s *segment, slot int64) error {
	lo := int(slot) * EntrySize
	tail := s.b[lo:]
	hi := lo + len(bytes.TrimRight(tail, "\x00"))
	if hi == lo {
		return nil // clean end
	}
	valid := 0
	for off := lo + EntrySize; off+EntrySize <= q.fileSize; off += EntrySize {
		if _, ok := decodeEntry(s.b[off : off+EntrySize]); ok {
			valid++
		}
	}
	q.log.Warn("consumequeue: invalid entry; dropping it and everything after it (re-dispatch rebuilds them)",
		"file", s.path, "offset", lo, "valid_entries_after", valid)
	q.repaired.Store(true)
	clear(s.b[lo:hi])
	if err := s.m.Sync(lo, hi-lo); err != nil {
		return fmt.Errorf("mqlite/consumequeue: sync %s: %w", s.path, errs.Disk(err))
	}
	return nil
}
