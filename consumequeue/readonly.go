package consumequeue

import (
	"errors"
	"fmt"
	"math"
	"os"
	"slices"

	"github.com/mqlite/mqlite/internal/errs"
	"github.com/mqlite/mqlite/vfs"
)

// openReadOnly finishes Open for Options.ReadOnly. A missing directory or
// meta file is an empty queue: the writer creates both before any entry.
func openReadOnly(q *Queue) (*Queue, error) {
	q.mu.lazy = true // meta not checked yet
	if err := q.refresh(math.MaxInt64); err != nil {
		q.releaseAll()
		return nil, err
	}
	return q, nil
}

// CatchUp, for a read-only Store, takes in what the writing process added
// since Open (or the last CatchUp): queue directories and data files that
// appeared, and the valid entries appended after MaxOffset whose record
// ends at or below limit (the part of the CommitLog the reader can see).
// A writable Store refuses it with ErrInvalidArgument.
func (s *Store) CatchUp(limit int64) error {
	if !s.opts.ReadOnly {
		return fmt.Errorf("mqlite/consumequeue: catch up %s: only a read-only Store catches up: %w", s.opts.Dir, ErrInvalidArgument)
	}
	s.mu.Lock()
	if s.mu.closed {
		s.mu.Unlock()
		return fmt.Errorf("mqlite/consumequeue: catch up %s: %w", s.opts.Dir, ErrClosed)
	}
	err := s.eachDir(func(topic string, id int) error {
		if _, ok := s.mu.queues[QueueID{topic, id}]; !ok {
			q, _ := s.openQueue(topic, id, true) // lazy: refreshed below
			s.mu.queues[QueueID{topic, id}] = q
		}
		return nil
	})
	queues := make([]*Queue, 0, len(s.mu.queues))
	for _, q := range s.mu.queues {
		queues = append(queues, q)
	}
	s.mu.Unlock()
	if err != nil {
		return err
	}
	var errList []error
	for _, q := range queues {
		errList = append(errList, q.refresh(limit))
	}
	return errors.Join(errList...)
}

// refresh (read-only queues) maps the data files that appeared after the
// last one mapped and moves MaxOffset over the valid entries after it that
// point forward and whose record ends at or below limit. The first call
// maps every file and, as Open does, scans only the newest scanFiles.
func (q *Queue) refresh(limit int64) error {
	q.maint.Lock()
	defer q.maint.Unlock()
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed.Load() {
		return fmt.Errorf("mqlite/consumequeue: refresh %s: %w", q.dir, ErrClosed)
	}
	if q.mu.lazy {
		// The queue's own meta file decides its file size: a reader
		// cannot reshape files, so it need not be told.
		found, perFile, err := q.checkMeta(0)
		if err != nil || !found {
			return err
		}
		q.perFile, q.fileSize = int64(perFile), perFile*EntrySize
		q.mu.lazy = false
	}
	files, err := q.listFiles()
	if err != nil {
		return err
	}
	old := q.snap.Load().segs
	segs, err := q.mapNew(files, old)
	if err != nil {
		return err
	}
	if len(segs) == 0 {
		return nil
	}
	from, prevEnd := q.max.Load(), q.physEnd.Load()
	realSeen := from > q.min.Load()
	initial := len(old) == 0
	if initial {
		scanFrom := max(0, len(segs)-scanFiles)
		from, prevEnd, realSeen = segs[scanFrom].start, 0, scanFrom > 0
		if scanFrom > 0 {
			if e, ok := decodeEntry(segs[scanFrom-1].b[q.fileSize-EntrySize:]); ok && !isFiller(e) {
				prevEnd = e.End()
			}
		}
	}
	end, physEnd := q.scanForward(segs, from, limit, realSeen, prevEnd)
	if len(segs) > len(old) {
		q.publishLocked(segs)
	}
	if initial {
		q.min.Store(q.firstReal(segs, end))
	}
	q.physEnd.Store(physEnd)
	q.max.Store(end)
	return nil
}

// mapNew returns old followed by the data files of files that come after
// it, mapped read-only, up to a gap or a file not yet full size.
func (q *Queue) mapNew(files []dataFile, old []*segment) ([]*segment, error) {
	segs := slices.Clone(old)
	for _, df := range files {
		n := len(segs)
		if n > 0 && df.start <= segs[n-1].start {
			continue // mapped already
		}
		if n > 0 && df.start != segs[n-1].start+q.perFile {
			break // a gap: the writer's recovery would drop what follows
		}
		if df.size != int64(q.fileSize) {
			break // being created (or torn)
		}
		seg, err := q.mapReadOnly(df)
		if errors.Is(err, vfs.ErrNotExist) && n == 0 {
			continue // removed by the writer's retention since the listing
		}
		if errors.Is(err, errChanged) || errors.Is(err, vfs.ErrNotExist) {
			break // replaced since the listing: the next refresh looks again
		}
		if err != nil {
			for _, s := range segs[len(old):] {
				s.release()
			}
			return nil, err
		}
		segs = append(segs, seg)
	}
	return segs, nil
}

// scanForward returns the end of the valid entries from logical offset
// from on (see refresh) and the End of the last real one (prevEnd if none).
func (q *Queue) scanForward(segs []*segment, from, limit int64, realSeen bool, prevEnd int64) (end, physEnd int64) {
	firstFileEnd := segs[0].start + q.perFile
	last := segs[len(segs)-1].start + q.perFile
	for l := from; l < last; l++ {
		e, ok := decodeEntry(q.slot(segs, l))
		switch {
		case !ok:
			return l, prevEnd
		case isFiller(e):
			if l >= firstFileEnd || realSeen {
				return l, prevEnd
			}
		case e.Offset < prevEnd || e.End() > limit:
			return l, prevEnd
		default:
			prevEnd, realSeen = e.End(), true
		}
	}
	return last, prevEnd
}

// mapReadOnly maps a data file read-only and closes its descriptor.
func (q *Queue) mapReadOnly(df dataFile) (*segment, error) {
	f, err := q.fs.OpenFile(df.path, os.O_RDONLY, 0)
	if err != nil {
		return nil, fmt.Errorf("mqlite/consumequeue: open %s: %w", df.path, errs.Disk(err))
	}
	defer f.Close()
	if size, err := f.Size(); err != nil || size != int64(q.fileSize) {
		return nil, fmt.Errorf("mqlite/consumequeue: open %s: %d bytes, want %d (%v): %w", df.path, size, q.fileSize, err, errChanged)
	}
	m, err := f.Map(q.fileSize)
	if err != nil {
		return nil, fmt.Errorf("mqlite/consumequeue: map %s: %w", df.path, errs.Disk(err))
	}
	return &segment{start: df.start, path: df.path, m: m, b: m.Bytes()}, nil
}

// errChanged: a file changed size between the listing and its opening.
var errChanged = errors.New("changed under the reader")
