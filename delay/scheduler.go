package delay

import (
	"context"
	"errors"
	"maps"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/mqlite/mqlite/consumequeue"
	"github.com/mqlite/mqlite/internal/cfgfile"
	"github.com/mqlite/mqlite/internal/errs"
	"github.com/mqlite/mqlite/message"
	"github.com/mqlite/mqlite/topic"
	"github.com/mqlite/mqlite/vfs"
)

// The delay levels' progress file, in the store's config directory.
const (
	ProgressFile    = "delayOffset.json"
	ProgressMagic   = 0x4D51444C // "MQDL"
	ProgressVersion = 1
)

// delayPersistTick is RocketMQ's flushDelayOffsetInterval.
const delayPersistTick = 10 * time.Second

// MaxLevels bounds the number of delay levels.
const MaxLevels = 64

// Scheduler delivers delay-level messages: a message with DelayLevel n is
// stored in the schedule topic's queue n-1; one goroutine waits for the
// head of each level's queue to be due (store time plus the level's delay,
// on the store's clock), then stores it in its real topic and queue. Each
// level is FIFO with one delay, so due times are monotone. Progress per
// level is persisted every 10 s and on Stop; after a restart the messages
// delivered since the last save are checked against the index (by unique
// key) and not delivered twice.
type Scheduler struct {
	h      Host
	cfg    Config
	levels []time.Duration
	quit   chan struct{}
	wg     sync.WaitGroup
	bar    *passBarrier // Settle: a pass over every level
	step   stepLevels   // Config.Stepped: Settle's passes

	mu       sync.Mutex
	progress map[string]int64 // level (decimal) -> next schedule-queue offset
	saved    map[string]int64
}

// NewScheduler loads the levels' progress (moving back any that lies past
// its queue's end) for Start. The schedule topic must have a queue per
// level. It runs while the store opens: no message is sent meanwhile.
func NewScheduler(h Host, cfg Config) (*Scheduler, error) {
	d := &Scheduler{h: h, cfg: cfg, levels: cfg.Levels, quit: make(chan struct{}), bar: newPassBarrier()}
	var err error
	if d.progress, err = LoadProgress(cfg.FS, cfg.ConfigDir); err != nil {
		return nil, err
	}
	d.saved = maps.Clone(d.progress)
	for key, off := range d.progress {
		level, _ := strconv.Atoi(key) // checked by LoadProgress
		if level > len(d.levels) {
			continue // a level this Open does not serve: kept as it is
		}
		if end := queueEnd(h, topic.Schedule, level-1); off > end {
			// The queue lost its tail after the progress was saved (or
			// the file lies): waiting for offset off would strand every
			// message sent at this level until the queue got there.
			cfg.Logger.Warn("mqlite: delay progress lies past the end of its queue; moved back",
				"level", level, "progress", off, "end", end)
			d.progress[key] = end // saved by the next save (saved differs)
		}
	}
	return d, nil
}

// LoadProgress reads the delay levels' progress from dir: an ErrCorrupt
// naming the file for a key that is not a level (1..MaxLevels, in decimal
// as written; levels beyond those served are kept, from a store that had
// more) or a negative offset.
func LoadProgress(fs vfs.FS, dir string) (map[string]int64, error) {
	p := map[string]int64{}
	if _, err := cfgfile.Read(fs, dir, ProgressFile, ProgressMagic, ProgressVersion, &p); err != nil {
		return nil, err
	}
	file := filepath.Join(dir, ProgressFile)
	for key, off := range p {
		level, err := strconv.Atoi(key)
		switch {
		case err != nil || strconv.Itoa(level) != key || level < 1 || level > MaxLevels:
			return nil, errs.Corrupt(file, cfgfile.HeaderSize, "level %q is not a delay level 1..%d", key, MaxLevels)
		case off < 0:
			return nil, errs.Corrupt(file, cfgfile.HeaderSize, "level %s: negative offset %d", key, off)
		}
	}
	return p, nil
}

// Levels is the number of levels served.
func (d *Scheduler) Levels() int { return len(d.levels) }

// Settle has the levels run one pass over what is due, started after the
// call, and waits until it is done, ctx ends or the scheduler stops.
// Stepped (Config.Stepped): the pass runs on the caller's goroutine.
func (d *Scheduler) Settle(ctx context.Context) error {
	if d.cfg.Stepped {
		return d.stepPass(ctx)
	}
	return d.bar.sync(ctx, d.quit)
}

// Start starts the scheduler's goroutines: the levels' loop and the
// progress's periodic save (only the save when stepped).
func (d *Scheduler) Start() {
	if d.cfg.Stepped {
		d.wg.Add(1)
		go d.persistLoop()
		return
	}
	d.wg.Add(2)
	go d.run()
	go d.persistLoop()
}

// Stop ends the goroutines (and waits for a stepped pass running) and
// saves the progress.
func (d *Scheduler) Stop() error {
	close(d.quit)
	d.wg.Wait()
	awaitUnlocked(&d.step.mu) // a stepped pass sees quit before its next delivery
	return d.Save()
}

// Save persists the progress once what it claims delivered is durable.
func (d *Scheduler) Save() error {
	d.mu.Lock()
	p := maps.Clone(d.progress)
	d.mu.Unlock()
	if maps.Equal(p, d.saved) {
		return nil
	}
	if err := d.h.Flush(); err != nil {
		return err
	}
	if err := cfgfile.Write(d.cfg.FS, d.cfg.ConfigDir, ProgressFile, ProgressMagic, ProgressVersion, p); err != nil {
		return err
	}
	d.saved = p
	return nil
}

func (d *Scheduler) persistLoop() {
	defer d.wg.Done()
	t := d.cfg.Clock.NewTicker(delayPersistTick)
	defer t.Stop()
	for {
		select {
		case <-d.quit:
			return
		case <-t.C():
			if err := d.Save(); err != nil {
				d.cfg.Logger.Warn("mqlite: saving delay progress failed", "err", err)
			}
		}
	}
}

// levelState is one delay level's place in the scheduler's loop.
type levelState struct {
	level       int
	key         string // level in decimal, its key in progress
	q           *consumequeue.Queue
	off         int64     // next entry to deliver
	verifyUntil int64     // entries below may have been delivered before the last save
	retry       backoff   // failed deliveries of the head
	retryAt     time.Time // the head's next attempt after a failure; zero if none
}

// ServeBatch is how many messages a level delivers before the loop moves
// on to the next level, so that a backlog at one level does not hold up
// the others.
const ServeBatch = 64

// run is the scheduler's one goroutine: it serves every level in turn,
// each until its head is not yet due (or is backing off after a failure)
// or its queue is empty, then sleeps until the earliest due time or until
// the dispatcher appends to the schedule topic (kick). One goroutine, not
// one per level: every goroutine's stack is scanned by each collection,
// and the 18 default levels are almost always idle.
func (d *Scheduler) run() {
	defer d.wg.Done()
	levels, ok := d.levelStates()
	if !ok {
		return
	}
	for {
		gen := d.bar.begin()
		var next time.Time
		more := false
		for _, l := range levels {
			at, full, ok := d.serve(l, ServeBatch)
			if !ok {
				return
			}
			more = more || full
			if !at.IsZero() && (next.IsZero() || at.Before(next)) {
				next = at
			}
		}
		select {
		case <-d.quit:
			return
		default:
		}
		if !more {
			d.bar.idle(gen)
		}
		switch {
		case more:
		case next.IsZero():
			select {
			case <-d.cfg.Kicked:
			case <-d.bar.poke:
			case <-d.quit:
				return
			}
		default:
			if !sleepUntilPoked(d.cfg.Clock, next, d.cfg.Kicked, d.bar.poke, d.quit) {
				return
			}
		}
	}
}

// levelStates opens the levels' queues with their progress; a level whose
// queue cannot be opened is logged and left out. After a restart the
// entries a level may have delivered since its last save are checked
// against the index, so the loop first waits for re-dispatch to reach the
// CommitLog's end; false if the store stops meanwhile.
func (d *Scheduler) levelStates() ([]*levelState, bool) {
	var levels []*levelState
	verify := false
	for level := 1; level <= len(d.levels); level++ {
		q, err := d.h.Queue(topic.Schedule, level-1, true)
		if err != nil {
			d.cfg.Logger.Error("mqlite: delay level stopped", "level", level, "err", err)
			continue
		}
		l := &levelState{level: level, key: strconv.Itoa(level), q: q, verifyUntil: q.MaxOffset()}
		d.mu.Lock()
		l.off = d.progress[l.key]
		d.mu.Unlock()
		verify = verify || l.off < l.verifyUntil
		levels = append(levels, l)
	}
	if verify && !d.indexed() {
		return nil, false
	}
	return levels, true
}

// serve delivers up to limit due messages of level l. It returns when the
// level waits next (zero: for a new entry), whether it stopped at limit
// with more perhaps due, and false when the store is closing.
func (d *Scheduler) serve(l *levelState, limit int) (at time.Time, full, ok bool) {
	clk := d.cfg.Clock
	for range limit {
		now := clk.Now()
		if now.Before(l.retryAt) {
			return l.retryAt, false, true
		}
		if first := l.q.MinOffset(); l.off < first {
			l.off = first
		}
		if l.q.MaxOffset() <= l.off {
			return time.Time{}, false, true
		}
		m, err := d.head(l.q, l.level, l.off)
		if err == nil {
			due := m.StoreTimestamp.Add(d.levels[l.level-1])
			if now.Before(due) {
				return due, false, true
			}
			err = d.deliver(m, l.off < l.verifyUntil)
		}
		if err != nil {
			if errors.Is(err, errs.ErrClosed) {
				return time.Time{}, false, false
			}
			wait := l.retry.fail()
			d.cfg.Logger.Warn("mqlite: delayed delivery failed; retrying", "level", l.level, "offset", l.off, "err", err, "retry_in", wait)
			l.retryAt = clk.Now().Add(wait)
			return l.retryAt, false, true
		}
		l.retry.reset()
		l.retryAt = time.Time{}
		l.off++
		d.mu.Lock()
		d.progress[l.key] = l.off
		d.mu.Unlock()
	}
	return time.Time{}, true, true
}

// indexed waits until the CommitLog as of now is dispatched, so the index
// knows every message delivered before a restart; false when stopping.
func (d *Scheduler) indexed() bool { return d.h.Indexed(d.quit) }

// head reads the message that entry off of level's queue q points at,
// checking that it is that entry's: a damaged queue (say, another queue's
// file in its place) must not deliver another message early.
func (d *Scheduler) head(q *consumequeue.Queue, level int, off int64) (*message.MessageExt, error) {
	e, err := q.Get(off)
	if err != nil {
		return nil, err
	}
	m, err := d.h.ReadAt(e.Offset)
	if err != nil {
		return nil, err
	}
	if m.Topic != topic.Schedule || int(m.QueueID) != level-1 || m.QueueOffset != off {
		path, at := q.Locate(off)
		return nil, errs.Corrupt(path, at, "entry points at commitlog offset %d, which holds %s/%d@%d, not this queue's",
			e.Offset, m.Topic, m.QueueID, m.QueueOffset)
	}
	return m, nil
}

// deliver stores a due schedule-topic message in its real topic and queue.
// verify skips one already delivered before a restart.
func (d *Scheduler) deliver(m *message.MessageExt, verify bool) error {
	return d.h.Deliver(m, verify, "delayed")
}
