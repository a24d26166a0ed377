package mqlite

// The golden store of FuzzOpenCorruptedDir (reliability plan S39): a small
// closed store on an in-memory file system, built once per process, with
// its messages kept to compare against whatever a damaged copy delivers.

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"os"
	"path"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mqlite/mqlite/clock"
	"github.com/mqlite/mqlite/commitlog"
	"github.com/mqlite/mqlite/vfs"
)

const fzDir = "/store"

// fzStart is the fake clock's start: fixed, so that the store times, the
// delayed message's due time and every reopen agree.
var fzStart = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// fzQueue names one queue of one topic.
type fzQueue struct {
	topic string
	id    int
}

// fzGolden is the golden store: its files and what it holds.
type fzGolden struct {
	fs    *vfs.MemFS // the closed store; never changed after the build
	files []string   // regular files, sorted: mutation scripts index them
	dirs  []string   // directories, the store's own first, sorted
	sizes map[string]int64
	// byOff is every record of the CommitLog, by offset, as read back.
	byOff map[int64]*MessageExt
	// queues holds, per queue of every topic (system ones included), the
	// CommitLog offsets of its messages in queue order.
	queues     map[fzQueue][]int64
	end        int64             // the CommitLog's end
	committed  map[fzQueue]int64 // group fzGroup's committed offsets
	checkpoint checkpoint        // as Close wrote it
	system     map[string]bool   // the system topics
}

const fzGroup = "billing"

var (
	fzOnce    sync.Once
	fzGold    *fzGolden
	fzGoldErr error
)

// fzOptions are the options of the golden store and of every reopen, on a
// fake clock of their own. Tiny files: several CommitLog segments,
// ConsumeQueue files and IndexFiles.
func fzOptions() *Options {
	return &Options{Flush: FlushSync, SegmentSize: commitlog.MinSegmentSize, SyncFlushTimeout: time.Second,
		FlowControlThreshold: -1, NoWarm: true, Retention: -1, Clock: clock.NewFake(fzStart),
		ConsumeQueueEntries: 8, IndexSlots: 16, IndexEntries: 32}
}

// golden returns the golden store, building it on first use.
func golden(tb testing.TB) *fzGolden {
	tb.Helper()
	fzOnce.Do(func() { fzGold, fzGoldErr = buildGolden() })
	if fzGoldErr != nil {
		tb.Fatalf("golden store: %v", fzGoldErr)
	}
	return fzGold
}

func buildGolden() (*fzGolden, error) {
	fs := vfs.NewMem()
	s, err := openFS(fs, fzDir, fzOptions())
	if err != nil {
		return nil, err
	}
	g, err := fillGolden(s)
	if cerr := s.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	g.fs = fs
	b, err := vfs.ReadFile(fs, path.Join(fzDir, checkpointName))
	if err != nil {
		return nil, err
	}
	if g.checkpoint, err = decodeCheckpoint(checkpointName, b); err != nil {
		return nil, err
	}
	g.sizes = map[string]int64{}
	if err := walkFS(fs, fzDir, func(p string, dir bool) {
		if dir {
			g.dirs = append(g.dirs, p)
			return
		}
		g.files = append(g.files, p)
		g.sizes[p], _, _ = fs.Stat(p)
	}); err != nil {
		return nil, err
	}
	return g, nil
}

// fillGolden writes the golden store's content: two topics with tags,
// keys and properties, a delayed and a timed message, a committed and a
// pending transaction, and a consumer group that committed offsets.
func fillGolden(s *Store) (*fzGolden, error) {
	ctx := context.Background()
	if err := s.CreateTopic("orders", TopicConfig{Queues: 2}); err != nil {
		return nil, err
	}
	if err := s.CreateTopic("audit", TopicConfig{Queues: 1}); err != nil {
		return nil, err
	}
	for i := range 48 {
		m := &Message{Topic: "orders", Tags: fmt.Sprintf("t%d", i%3), Keys: []string{fmt.Sprintf("k%d", i%7)},
			Properties: map[string]string{"n": fmt.Sprint(i)}, Body: body(i * 7)}
		q := i % 2
		if i%5 == 0 {
			m.Topic, q = "audit", 0
		}
		if _, err := s.Put(ctx, m, q); err != nil {
			return nil, err
		}
	}
	clk := s.opts.Clock
	if _, err := s.Put(ctx, &Message{Topic: "orders", DelayLevel: 18, Body: []byte("delayed")}, 0); err != nil {
		return nil, err
	}
	if _, err := s.Put(ctx, &Message{Topic: "orders", DeliverAt: clk.Now().Add(time.Hour), Body: []byte("timed")}, 0); err != nil {
		return nil, err
	}
	tp, err := s.NewTransactionProducer(func(context.Context, *MessageExt) TxState { return TxUnknown }, TransactionOptions{})
	if err != nil {
		return nil, err
	}
	for _, st := range []TxState{CommitMessage, TxUnknown} {
		if _, err := tp.SendInTransaction(ctx, &Message{Topic: "orders", Body: []byte("tx " + fmt.Sprint(st))},
			func(context.Context, *Message) TxState { return st }); err != nil {
			tp.Close()
			return nil, err
		}
	}
	if err := tp.Close(); err != nil {
		return nil, err
	}
	if err := s.WaitVisible(ctx); err != nil {
		return nil, err
	}
	committed := map[fzQueue]int64{{"orders", 0}: 5, {"orders", 1}: 3}
	pc, err := s.NewPullConsumer(fzGroup, ConsumerOptions{ConsumeFromWhere: ConsumeFromFirstOffset})
	if err != nil {
		return nil, err
	}
	err = pc.Assign("orders", nil, 0, 1)
	for i := 0; err == nil && i < 100 && !polledTo(pc, committed); i++ {
		_, err = pc.Poll(ctx, 4)
	}
	for q, off := range committed {
		if err == nil {
			err = pc.CommitOffset(q.topic, q.id, off)
		}
	}
	if cerr := pc.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	g := &fzGolden{byOff: map[int64]*MessageExt{}, queues: map[fzQueue][]int64{}, committed: committed,
		end: s.log.WrotePosition(), system: map[string]bool{}}
	var offs []int64
	if _, err := s.log.Scan(s.log.MinOffset(), g.end, true, func(r commitlog.Record) error {
		offs = append(offs, r.Offset)
		return nil
	}); err != nil {
		return nil, err
	}
	for _, off := range offs {
		if g.byOff[off], err = s.ReadAt(off); err != nil {
			return nil, err
		}
	}
	for _, ti := range s.Topics() {
		g.system[ti.Name] = ti.System
		for q := range ti.Config.Queues {
			rs, errs := readQueue(s, ti.Name, q, nil)
			if len(errs) > 0 {
				return nil, fmt.Errorf("golden %s/%d: %v", ti.Name, q, errs)
			}
			for _, m := range rs {
				if g.byOff[m.CommitLogOffset] == nil || !sameMessage(m, g.byOff[m.CommitLogOffset]) {
					return nil, fmt.Errorf("golden %s/%d@%d: differs from its record", ti.Name, q, m.QueueOffset)
				}
				g.queues[fzQueue{ti.Name, q}] = append(g.queues[fzQueue{ti.Name, q}], m.CommitLogOffset)
			}
		}
	}
	return g, nil
}

// queueNames lists the golden queues in order (topic, then id).
func (g *fzGolden) queueNames() []fzQueue {
	out := slices.Collect(maps.Keys(g.queues))
	slices.SortFunc(out, func(a, b fzQueue) int { return cmp.Or(cmp.Compare(a.topic, b.topic), cmp.Compare(a.id, b.id)) })
	return out
}

// queueOffsetsFrom lists, in order, the CommitLog offsets of the golden
// messages in queues that are at or past from.
func (g *fzGolden) queueOffsetsFrom(from int64) []int64 {
	var out []int64
	for _, offs := range g.queues {
		for _, off := range offs {
			if off >= from {
				out = append(out, off)
			}
		}
	}
	slices.Sort(out)
	return out
}

// missing lists, in order, the golden queue messages not in delivered.
func (g *fzGolden) missing(delivered map[int64]bool) []int64 {
	var out []int64
	for _, off := range g.queueOffsetsFrom(0) {
		if !delivered[off] {
			out = append(out, off)
		}
	}
	return out
}

// recordStartAtOrBefore is the start of the golden record that holds the
// CommitLog offset x, or of the record that starts at x.
func (g *fzGolden) recordStartAtOrBefore(x int64) int64 {
	best := int64(-1)
	for off := range g.byOff {
		if off <= x && off > best {
			best = off
		}
	}
	return best
}

// polledTo reports whether pc has polled each queue up to the offset
// given.
func polledTo(pc *PullConsumer, to map[fzQueue]int64) bool {
	for q, off := range to {
		if pos, err := pc.Position(q.topic, q.id); err != nil || pos < off {
			return false
		}
	}
	return true
}

// readQueue reads a whole queue with Messages, from its minimum offset to
// its end, stepping over each entry that fails; errs has one error per
// entry stepped over, as readErr. skip, when not nil, says which failed
// offsets were stepped over.
func readQueue(s *Store, topic string, queue int, skip func(int64)) ([]*MessageExt, []error) {
	var out []*MessageExt
	var errs []error
	min, err := s.MinOffset(topic, queue)
	if err != nil {
		return nil, []error{err}
	}
	for next := min; ; {
		failed := false
		for m, err := range s.Messages(topic, queue, next) {
			if err != nil {
				errs = append(errs, fmt.Errorf("%s/%d@%d: %w", topic, queue, next, err))
				if skip != nil {
					skip(next)
				}
				failed = true
				break
			}
			out = append(out, m)
			next = m.QueueOffset + 1
		}
		if !failed {
			return out, errs
		}
		next++ // step over the entry that failed
		if max, err := s.MaxOffset(topic, queue); err != nil || next >= max {
			return out, errs
		}
	}
}

// sameMessage reports whether a and b are the same stored message, field
// by field.
func sameMessage(a, b *MessageExt) bool {
	return a.QueueID == b.QueueID && a.QueueOffset == b.QueueOffset && a.CommitLogOffset == b.CommitLogOffset &&
		a.StoreSize == b.StoreSize && a.StoreTimestamp.Equal(b.StoreTimestamp) && a.MsgID == b.MsgID &&
		a.Topic == b.Topic && a.Tags == b.Tags && slices.Equal(a.Keys, b.Keys) && a.Flag == b.Flag &&
		string(a.Body) == string(b.Body) && a.ShardingKey == b.ShardingKey && a.DelayLevel == b.DelayLevel &&
		a.DeliverAt.Equal(b.DeliverAt) && a.UniqKey == b.UniqKey && a.ReconsumeTimes == b.ReconsumeTimes &&
		a.SysFlag == b.SysFlag && a.PreparedTxOffset == b.PreparedTxOffset && a.BornTimestamp.Equal(b.BornTimestamp) &&
		sameProps(a.Properties, b.Properties)
}

func sameProps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// walkFS calls fn for every directory and file under root (root first),
// in name order.
func walkFS(fs vfs.FS, root string, fn func(p string, dir bool)) error {
	fn(root, true)
	names, err := fs.ReadDir(root)
	if err != nil {
		return err
	}
	for _, n := range names {
		p := path.Join(root, n)
		_, isDir, err := fs.Stat(p)
		if err != nil {
			return err
		}
		if isDir {
			if err := walkFS(fs, p, fn); err != nil {
				return err
			}
			continue
		}
		fn(p, false)
	}
	return nil
}

// copyTo copies the golden store to dir on fs.
func (g *fzGolden) copyTo(fs vfs.FS, dir string) error {
	for _, d := range g.dirs {
		if err := fs.MkdirAll(rebase(d, dir), 0o755); err != nil {
			return err
		}
	}
	for _, p := range g.files {
		b, err := vfs.ReadFile(g.fs, p)
		if err == nil {
			err = writeWhole(fs, rebase(p, dir), b)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// rebase is the path of the golden store's file p in a copy in dir.
func rebase(p, dir string) string { return dir + strings.TrimPrefix(p, fzDir) }

// writeWhole replaces the file p with b.
func writeWhole(fs vfs.FS, p string, b []byte) error {
	f, err := fs.OpenFile(p, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.WriteAt(b, 0); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
