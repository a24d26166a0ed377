package consumequeue

import (
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"
)

// snapshot is an immutable list of mapped files with the number of readers
// pinning it. Readers only pin the current snapshot, so a superseded one
// drains; its files are unmapped once no undrained snapshot holds them.
type snapshot struct {
	segs    []*segment // contiguous, ascending
	readers atomic.Int64
}

// errRetry makes a reader start over with a fresh snapshot.
var errRetry = errors.New("retry")

// pin pins the current snapshot, or returns nil once the queue is closed.
// The caller must unpin it with s.readers.Add(-1).
func (q *Queue) pin() *snapshot {
	for {
		s := q.snap.Load()
		s.readers.Add(1)
		if q.snap.Load() != s { // superseded meanwhile: its files may go
			s.readers.Add(-1)
			continue
		}
		if q.closed.Load() {
			s.readers.Add(-1)
			return nil
		}
		return s
	}
}

// stableGen waits out a rewrite of published bytes (TruncateAfterPhys) or
// the restart of an emptied queue.
func (q *Queue) stableGen() uint64 {
	for {
		if g := q.gen.Load(); g&1 == 0 {
			return g
		}
		runtime.Gosched()
	}
}

// slot returns the bytes of logical's slot in segs, or nil.
func (q *Queue) slot(segs []*segment, logical int64) []byte {
	if len(segs) == 0 || logical < segs[0].start {
		return nil
	}
	i := (logical - segs[0].start) / q.perFile
	if i >= int64(len(segs)) {
		return nil
	}
	off := int(logical-segs[i].start) * EntrySize
	return segs[i].b[off : off+EntrySize]
}

// Get returns the entry at logical offset logical: ErrNotFound outside
// [MinOffset, MaxOffset), a *CorruptError if the stored entry is damaged.
func (q *Queue) Get(logical int64) (Entry, error) {
	for {
		s := q.pin()
		if s == nil {
			return Entry{}, fmt.Errorf("mqlite/consumequeue: get from %s: %w", q.dir, ErrClosed)
		}
		e, err := q.get(s, logical)
		s.readers.Add(-1)
		if err != errRetry {
			return e, err
		}
	}
}

func (q *Queue) get(s *snapshot, logical int64) (Entry, error) {
	g := q.stableGen()
	end := q.max.Load()
	begin := q.min.Load()
	if logical < begin || logical >= end {
		if q.gen.Load() != g {
			return Entry{}, errRetry
		}
		return Entry{}, fmt.Errorf("mqlite/consumequeue: get %d from %s: outside [%d, %d): %w", logical, q.dir, begin, end, ErrNotFound)
	}
	b := q.slot(s.segs, logical)
	var e Entry
	ok := false
	if b != nil {
		e, ok = decodeEntry(b) // a copy: nothing returned aliases the mapping
	}
	if q.gen.Load() != g || q.snap.Load() != s {
		return Entry{}, errRetry // rewritten, or files were added or replaced meanwhile
	}
	if !ok || isFiller(e) {
		return Entry{}, fmt.Errorf("mqlite/consumequeue: get: %w", q.corruptAt(s.segs, logical))
	}
	return e, nil
}

// Read copies the entries from logical offset from on into dst, up to
// len(dst) or MaxOffset, and returns how many it copied. from == MaxOffset
// returns 0 and no error (nothing new); from outside [MinOffset, MaxOffset]
// is ErrNotFound. A damaged entry stops the batch with a *CorruptError,
// after the entries before it.
func (q *Queue) Read(from int64, dst []Entry) (int, error) {
	for {
		s := q.pin()
		if s == nil {
			return 0, fmt.Errorf("mqlite/consumequeue: read from %s: %w", q.dir, ErrClosed)
		}
		n, err := q.read(s, from, dst)
		s.readers.Add(-1)
		if err != errRetry {
			return n, err
		}
	}
}

func (q *Queue) read(s *snapshot, from int64, dst []Entry) (int, error) {
	g := q.stableGen()
	end := q.max.Load()
	begin := q.min.Load()
	if from < begin || from > end {
		if q.gen.Load() != g {
			return 0, errRetry
		}
		return 0, fmt.Errorf("mqlite/consumequeue: read %d from %s: outside [%d, %d]: %w", from, q.dir, begin, end, ErrNotFound)
	}
	n := int(min(int64(len(dst)), end-from))
	bad := -1
	for i := 0; i < n; i++ {
		b := q.slot(s.segs, from+int64(i))
		if b == nil {
			bad = i
			break
		}
		e, ok := decodeEntry(b)
		if !ok || isFiller(e) {
			bad = i
			break
		}
		dst[i] = e
	}
	if q.gen.Load() != g || q.snap.Load() != s {
		return 0, errRetry // rewritten, or files were added or replaced meanwhile
	}
	if bad >= 0 {
		return bad, fmt.Errorf("mqlite/consumequeue: read: %w", q.corruptAt(s.segs, from+int64(bad)))
	}
	return n, nil
}

// corruptAt locates an invalid or missing slot.
func (q *Queue) corruptAt(segs []*segment, logical int64) error {
	if q.slot(segs, logical) == nil {
		return errCorrupt(q.dir, logical*EntrySize, "no file holds logical offset %d", logical)
	}
	s := segs[(logical-segs[0].start)/q.perFile]
	return errCorrupt(s.path, (logical-s.start)*EntrySize, "invalid entry for logical offset %d", logical)
}
