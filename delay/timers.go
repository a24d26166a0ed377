package delay

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/mqlite/mqlite/consumequeue"
	"github.com/mqlite/mqlite/internal/cfgfile"
	"github.com/mqlite/mqlite/internal/errs"
	"github.com/mqlite/mqlite/topic"
	"github.com/mqlite/mqlite/vfs"
)

// The timer wheel's progress file, in the store's config directory.
const (
	TimerFile    = "timer.json"
	TimerMagic   = 0x4D51544D // "MQTM"
	TimerVersion = 1
)

const (
	bucketSecs  = 60 // one bucket file per minute of due times
	bucketEntry = 16 // CommitLog offset u64 | due unix seconds u32 | CRC32-C u32
	timerBatch  = 4096
)

// Timers delivers messages with a deliver-at time (RocketMQ 5 timer
// messages). Such a message is stored in the timer topic; the dispatcher
// puts its due second (rounded up) in the ConsumeQueue tags code. The
// timer goroutine tails that queue and appends each entry to the bucket
// file of its due minute under timer/ (synced before the tail position is
// saved), so pending timers live on disk: memory holds only the entries of
// the minute being delivered. When a minute comes due its file is loaded,
// sorted, and delivered in due order; the file is removed when done.
// After a restart the buckets due by then are delivered again (a power
// loss may have undone the removal of any delivered since the timer
// directory's last sync), skipping messages the index shows were
// delivered already.
type Timers struct {
	h    Host
	cfg  Config
	dir  string
	quit chan struct{}
	done chan struct{}
	bar  *passBarrier // Settle: a pass over what is due
	step stepTimers   // Config.Stepped: Settle's passes

	enqueued atomic.Int64 // next timer-queue offset to bucket; saved in timer.json
	buckets  []int64
	cur      []timerEntry // entries of due buckets, by due time
	curEnd   int64        // buckets below this are loaded into cur
	// Entries due by verifyUntil (unix seconds; the clock at Open) may
	// have been delivered before a restart: not only in the bucket being
	// delivered then, as a bucket's removal is durable only with the
	// directory's next sync, so a power loss can bring back any number of
	// delivered buckets. Their deliveries are checked against the index.
	verifyUntil int64
}

type timerEntry struct {
	off int64
	due int64 // unix seconds
}

// TimerState is the timer wheel's saved progress.
type TimerState struct {
	// Enqueued is the next timer-queue offset to put in a bucket file.
	Enqueued int64 `json:"enqueued"`
}

// NewTimers loads the wheel's progress (moving back, and saving, one that
// lies past the timer queue's end) and its bucket files, dropping their
// entries for records a crash lost, for Start. The timer topic must exist.
// It runs while the store opens: no message is sent meanwhile.
func NewTimers(h Host, cfg Config) (*Timers, error) {
	t := &Timers{h: h, cfg: cfg, dir: cfg.TimerDir, quit: make(chan struct{}), done: make(chan struct{}), bar: newPassBarrier(),
		verifyUntil: cfg.Clock.Now().Unix()}
	st, err := LoadTimerState(cfg.FS, cfg.ConfigDir)
	if err != nil {
		return nil, err
	}
	if end := queueEnd(h, topic.Timer, 0); st.Enqueued > end {
		// The queue lost its tail after the position was saved (or the
		// file lies): waiting for offset st.Enqueued would strand every
		// timer sent until the queue got there.
		cfg.Logger.Warn("mqlite: timer progress lies past the end of the timer queue; moved back",
			"enqueued", st.Enqueued, "end", end)
		st.Enqueued = end
		// Saved now, before a put: the position is written only after
		// bucketing (which does not wait for the records to be durable),
		// so it can lie past a queue a power loss cut. Kept in memory
		// only, a second power loss before the next bucketing brought the
		// stale position back, now over timer messages stored since,
		// which were then never bucketed: lost.
		if err := cfgfile.Write(cfg.FS, cfg.ConfigDir, TimerFile, TimerMagic, TimerVersion, st); err != nil {
			return nil, err
		}
	}
	t.enqueued.Store(st.Enqueued)
	if err := t.loadBuckets(); err != nil {
		return nil, err
	}
	return t, nil
}

// loadBuckets lists the bucket files and drops their entries for records
// past the CommitLog's end.
func (t *Timers) loadBuckets() error {
	fs := t.cfg.FS
	if err := fs.MkdirAll(t.dir, 0o700); err != nil {
		return fmt.Errorf("mqlite: create %s: %w (%w)", t.dir, errs.ErrIO, err)
	}
	names, err := fs.ReadDir(t.dir)
	if err != nil {
		return fmt.Errorf("mqlite: list %s: %w (%w)", t.dir, errs.ErrIO, err)
	}
	for _, n := range names {
		b, err := strconv.ParseInt(n, 10, 64)
		if err != nil || b < 0 || b%bucketSecs != 0 || filepath.Base(t.bucketPath(b)) != n { // only the names bucketPath makes
			t.cfg.Logger.Warn("mqlite: ignoring unexpected file", "path", filepath.Join(t.dir, n))
			continue
		}
		t.buckets = append(t.buckets, b)
	}
	slices.Sort(t.buckets)
	// A power loss that cut the CommitLog's tail took timer records the
	// buckets still name; their offsets are written again by new records.
	// Those entries must go before anything is appended: delivered, they
	// would read another record (a timer message delivered at another's
	// time, or an error retried forever that stalled every timer after).
	end := t.h.LogEnd()
	for _, b := range t.buckets {
		if err := t.dropStale(b, end); err != nil {
			return err
		}
	}
	return nil
}

// dropStale rewrites bucket b without its entries for CommitLog offsets
// at or past end (records that no longer exist). Damaged entries stay, for
// loadBucket to report.
func (t *Timers) dropStale(b, end int64) error {
	path := t.bucketPath(b)
	data, err := vfs.ReadFile(t.cfg.FS, path)
	if err != nil {
		return fmt.Errorf("mqlite: read %s: %w (%w)", path, errs.ErrIO, err)
	}
	kept := make([]byte, 0, len(data))
	dropped := 0
	for p := 0; p+bucketEntry <= len(data); p += bucketEntry {
		e := data[p : p+bucketEntry]
		if binary.LittleEndian.Uint32(e[12:]) == crc32.Checksum(e[:12], castagnoli) && int64(binary.LittleEndian.Uint64(e)) >= end {
			dropped++
			continue
		}
		kept = append(kept, e...)
	}
	if dropped == 0 {
		return nil
	}
	t.cfg.Logger.Warn("mqlite: dropping timer entries for records a crash lost", "path", path, "entries", dropped)
	if err := vfs.WriteFileAtomic(t.cfg.FS, t.dir, filepath.Base(path), kept); err != nil {
		return fmt.Errorf("mqlite: write %s: %w (%w)", path, errs.ErrIO, err)
	}
	return nil
}

// LoadTimerState reads the timer wheel's progress from dir: an ErrCorrupt
// naming the file for a negative offset.
func LoadTimerState(fs vfs.FS, dir string) (TimerState, error) {
	var st TimerState
	if _, err := cfgfile.Read(fs, dir, TimerFile, TimerMagic, TimerVersion, &st); err != nil {
		return TimerState{}, err
	}
	if st.Enqueued < 0 {
		return TimerState{}, errs.Corrupt(filepath.Join(dir, TimerFile), cfgfile.HeaderSize,
			"negative enqueued offset %d", st.Enqueued)
	}
	return st, nil
}

// Start starts the wheel's goroutine (none when stepped: Settle runs
// the passes).
func (t *Timers) Start() {
	if t.cfg.Stepped {
		close(t.done)
		return
	}
	go t.run()
}

// Enqueued is the next timer-queue offset to put in a bucket file.
func (t *Timers) Enqueued() int64 { return t.enqueued.Load() }

// VerifyUntil is the due time up to which deliveries are checked against
// the index (the clock at NewTimers).
func (t *Timers) VerifyUntil() time.Time { return time.Unix(t.verifyUntil, 0) }

// Settle has the wheel run one pass over what is due, started after the
// call, and waits until it is done, ctx ends or the wheel stops.
// Stepped (Config.Stepped): the pass runs on the caller's goroutine.
func (t *Timers) Settle(ctx context.Context) error {
	if t.cfg.Stepped {
		return t.stepPass(ctx)
	}
	return t.bar.sync(ctx, t.quit)
}

// Stop ends the wheel's goroutine (and waits for a stepped pass running).
func (t *Timers) Stop() {
	close(t.quit)
	<-t.done
	awaitUnlocked(&t.step.mu)
}

func (t *Timers) run() {
	defer close(t.done)
	q, err := t.h.Queue(topic.Timer, 0, true)
	if err != nil {
		t.cfg.Logger.Error("mqlite: timer service stopped", "err", err)
		return
	}
	// Deliveries made before a restart are skipped by an index lookup
	// (verify), so the index must know them first: after a power loss it
	// is rebuilt in the background, and a bucket delivered but whose
	// removal the crash undid was delivered again.
	if !t.h.Indexed(t.quit) {
		return
	}
	var retry backoff
	for {
		gen := t.bar.begin()
		if err := t.enqueue(q); err != nil {
			if !t.failed("bucketing timers", err, &retry) {
				return
			}
			continue
		}
		next, err := t.deliverDue()
		if err != nil {
			if !t.failed("delivering timers", err, &retry) {
				return
			}
			continue
		}
		retry.reset()
		ch, err := t.h.WaitCh(q, t.enqueued.Load())
		if err != nil {
			return // closing or fenced
		}
		var ch2 <-chan struct{} = ch
		t.bar.idle(gen)
		if next > 0 {
			if !sleepUntilPoked(t.cfg.Clock, time.Unix(next, 0), ch2, t.bar.poke, t.quit) {
				return
			}
		} else {
			select {
			case <-ch2:
			case <-t.bar.poke:
			case <-t.quit:
				return
			}
		}
	}
}

// failed logs err and waits before a retry, for longer after each failure
// in a row (retry); false when stopping.
func (t *Timers) failed(what string, err error, retry *backoff) bool {
	if errors.Is(err, errs.ErrClosed) {
		return false
	}
	wait := retry.fail()
	t.cfg.Logger.Warn("mqlite: "+what+" failed; retrying", "err", err, "retry_in", wait)
	tm := t.cfg.Clock.NewTimer(wait)
	defer tm.Stop()
	select {
	case <-tm.C():
		return true
	case <-t.quit:
		return false
	}
}

// enqueue moves new timer-queue entries into bucket files (or straight
// into cur when their bucket is loaded), then saves the tail position.
func (t *Timers) enqueue(q *consumequeue.Queue) error {
	if t.enqueued.Load() < q.MinOffset() {
		t.enqueued.Store(q.MinOffset())
	}
	var buf [timerBatch]consumequeue.Entry
	for t.enqueued.Load() < q.MaxOffset() {
		n, err := q.Read(t.enqueued.Load(), buf[:])
		if err != nil {
			return err
		}
		pending := map[int64][]byte{}
		for _, e := range buf[:n] {
			due := int64(e.TagsCode)
			b := due - due%bucketSecs
			if b < t.curEnd {
				t.cur = append(t.cur, timerEntry{e.Offset, due})
			}
			pending[b] = appendBucketEntry(pending[b], e.Offset, due)
		}
		for b, data := range pending {
			if err := t.appendBucket(b, data); err != nil {
				return err
			}
		}
		if err := t.cfg.FS.SyncDir(t.dir); err != nil {
			return fmt.Errorf("mqlite: sync %s: %w (%w)", t.dir, errs.ErrIO, err)
		}
		next := t.enqueued.Load() + int64(n)
		if err := cfgfile.Write(t.cfg.FS, t.cfg.ConfigDir, TimerFile, TimerMagic, TimerVersion, TimerState{next}); err != nil {
			return err
		}
		t.enqueued.Store(next)
	}
	slices.SortStableFunc(t.cur, func(a, b timerEntry) int { return cmp.Compare(a.due, b.due) })
	return nil
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func appendBucketEntry(dst []byte, off, due int64) []byte {
	var e [bucketEntry]byte
	binary.LittleEndian.PutUint64(e[0:], uint64(off))
	binary.LittleEndian.PutUint32(e[8:], uint32(due))
	binary.LittleEndian.PutUint32(e[12:], crc32.Checksum(e[:12], castagnoli))
	return append(dst, e[:]...)
}

func (t *Timers) bucketPath(b int64) string {
	return filepath.Join(t.dir, fmt.Sprintf("%012d", b))
}

// appendBucket appends entries to bucket b's file and syncs it.
func (t *Timers) appendBucket(b int64, data []byte) error {
	path := t.bucketPath(b)
	f, err := t.cfg.FS.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("mqlite: open %s: %w (%w)", path, errs.ErrIO, err)
	}
	defer f.Close()
	size, err := f.Size()
	if err == nil {
		size -= size % bucketEntry // drop a torn entry
		_, err = f.WriteAt(data, size)
	}
	if err == nil {
		err = f.Sync()
	}
	if err != nil {
		return fmt.Errorf("mqlite: write %s: %w (%w)", path, errs.ErrIO, err)
	}
	if i, found := slices.BinarySearch(t.buckets, b); !found {
		t.buckets = slices.Insert(t.buckets, i, b)
	}
	return nil
}

// loadBucket reads bucket b into cur, skipping damaged entries (they are
// reported) and duplicates.
func (t *Timers) loadBucket(b int64) error {
	data, err := vfs.ReadFile(t.cfg.FS, t.bucketPath(b))
	if err != nil && !errors.Is(err, vfs.ErrNotExist) {
		return fmt.Errorf("mqlite: read %s: %w (%w)", t.bucketPath(b), errs.ErrIO, err)
	}
	seen := map[int64]bool{}
	for p := 0; p+bucketEntry <= len(data); p += bucketEntry {
		e := data[p : p+bucketEntry]
		if binary.LittleEndian.Uint32(e[12:]) != crc32.Checksum(e[:12], castagnoli) {
			t.cfg.Logger.Error("mqlite: damaged timer entry skipped", "path", t.bucketPath(b), "offset", p)
			continue
		}
		off := int64(binary.LittleEndian.Uint64(e))
		if !seen[off] {
			seen[off] = true
			t.cur = append(t.cur, timerEntry{off, int64(binary.LittleEndian.Uint32(e[8:]))})
		}
	}
	return nil
}

// deliverDue delivers every entry due by now and returns the unix second
// of the next due entry or bucket (0: none pending).
func (t *Timers) deliverDue() (int64, error) {
	now := t.cfg.Clock.Now().Unix()
	for len(t.buckets) > 0 && t.buckets[0] <= now {
		b := t.buckets[0]
		if b >= t.curEnd {
			if err := t.loadBucket(b); err != nil {
				return 0, err
			}
			t.curEnd = b + bucketSecs
		}
		slices.SortStableFunc(t.cur, func(a, b timerEntry) int { return cmp.Compare(a.due, b.due) })
		for len(t.cur) > 0 && t.cur[0].due <= now {
			if err := t.deliver(b, t.cur[0]); err != nil {
				return 0, err
			}
			t.cur = t.cur[1:]
		}
		if len(t.cur) > 0 {
			return t.cur[0].due, nil // the rest of this bucket is due later
		}
		// The bucket is all that remembers its messages (the timer queue
		// is past them): its deliveries must be durable before it goes,
		// or a power loss after the removal is durable (the directory's
		// next sync) loses them. Under FlushAsync they were not; under
		// FlushSync the group commit had not always flushed them yet.
		if err := t.h.Flush(); err != nil {
			return 0, err
		}
		t.cur = nil
		if err := t.cfg.FS.Remove(t.bucketPath(b)); err != nil && !errors.Is(err, vfs.ErrNotExist) {
			return 0, fmt.Errorf("mqlite: remove %s: %w (%w)", t.bucketPath(b), errs.ErrIO, err)
		}
		t.buckets = t.buckets[1:]
	}
	if len(t.cur) > 0 {
		return t.cur[0].due, nil
	}
	if len(t.buckets) > 0 {
		return t.buckets[0], nil
	}
	return 0, nil
}

// deliver stores the timer message at off, an entry of bucket b, in its
// real topic and queue. A record that is not a timer message (the timer
// queue was damaged: another queue's file in its place, say) is not
// delivered: its entry is an ErrCorrupt.
func (t *Timers) deliver(b int64, e timerEntry) error {
	off := e.off
	m, err := t.h.ReadAt(off)
	if err != nil {
		if errors.Is(err, errs.ErrNotFound) {
			return nil // removed by retention
		}
		return err
	}
	if m.Topic != topic.Timer || m.QueueID != 0 {
		return errs.Corrupt(t.bucketPath(b), 0, "timer entry for commitlog offset %d, which holds %s/%d@%d, not a timer message",
			off, m.Topic, m.QueueID, m.QueueOffset)
	}
	return t.h.Deliver(m, e.due <= t.verifyUntil, "timer")
}
