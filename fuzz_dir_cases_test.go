package mqlite

// Hand-written mutation scripts for the FuzzOpenCorruptedDir harness: one
// or more per kind of operation, each with the outcome it must have, plus
// the damage the fuzzer found. They run on the in-memory file system and,
// for the mapped-memory paths, on real files.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqlite/mqlite/clock"
	"github.com/mqlite/mqlite/topic"
	"github.com/mqlite/mqlite/vfs"
)

// fzWant is the outcome a script must have, on top of the harness's
// checks (fzRun).
type fzWant struct {
	openErr error  // the sentinel a failed Open matches; nil: it opens
	errPath string // golden path the failed Open names (CorruptError.Path or the message)
	// For an Open that succeeds:
	verifyOK bool                             // Verify finds nothing
	lost     func(g *fzGolden) []int64        // golden queue messages missing (nil: none)
	report   func(*testing.T, RecoveryReport) // more checks of the recovery report
}

func fzCases(g *fzGolden) []struct {
	name string
	muts []mutation
	want fzWant
} {
	p := func(rel ...string) string { return path.Join(append([]string{fzDir}, rel...)...) }
	seg := func(i int) string { return p("commitlog", fmt.Sprintf("%020d", i*4096)) }
	nSeg := len(g.segments())
	last := seg(nSeg - 1)
	cq0 := p("consumequeue", "orders", "0", "00000000000000000000")
	cq1 := p("consumequeue", "orders", "0", "00000000000000000160")
	idx0 := p("index", "00000000000000000000")
	first := g.queues[fzQueue{"orders", 0}][0] // the first message of orders/0
	offsets := p(configDir, "consumer_offsets")
	lostFrom := func(from int64) func(*fzGolden) []int64 {
		return func(g *fzGolden) []int64 { return g.queueOffsetsFrom(from) }
	}
	return []struct {
		name string
		muts []mutation
		want fzWant
	}{
		{"nothing", nil, fzWant{verifyOK: true}},
		{"flip in a sealed segment outside the recovery window", []mutation{{kind: mutFlip, file: seg(0), off: first + 40, bit: 2}},
			fzWant{lost: func(*fzGolden) []int64 { return []int64{first} }}},
		{"flip in the recovery window with later records", []mutation{{kind: mutFlip, file: seg(nSeg - 2), off: 100, bit: 5}},
			fzWant{openErr: ErrCorrupt, errPath: seg(nSeg - 2)}},
		// Found by the fuzzer: rebuilding the cut IndexFile re-dispatches
		// from the start, across a record whose store time the flip broke.
		// Records read back at Open are checked, so this is an ErrCorrupt
		// naming the segment, not an ErrInvalidArgument from the index.
		// Found by the fuzzer: the log now ends where the zeroed header
		// of segment 1 was, before the window recovery validates; the
		// flip at the start of segment 0 must fail this Open as it would
		// the next, not pass now (Open validates back from there).
		{"flip before a lost tail at a segment start", []mutation{{kind: mutFlip, file: seg(0), off: 48, bit: 0}, {kind: mutZero, file: seg(1), off: 0, n: 49}},
			fzWant{openErr: ErrCorrupt, errPath: seg(0)}},
		// Found by the fuzzer: the zeroed record in segment 1 ends the log
		// inside the window (segments 1 to 3), which left segment 0
		// unchecked; the next Open keeps two segments and validates from
		// segment 0. This Open must validate back as far and fail now.
		{"flip before a lost tail inside the window's first segment", []mutation{{kind: mutFlip, file: seg(0), off: 48, bit: 0},
			{kind: mutZero, file: seg(1), off: 3584, n: 49}},
			fzWant{openErr: ErrCorrupt, errPath: seg(0)}},
		{"flip in a record a rebuild re-dispatches", []mutation{{kind: mutTruncate, file: idx0, n: 675}, {kind: mutFlip, file: seg(0), off: 3640, bit: 7}},
			fzWant{openErr: ErrCorrupt, errPath: seg(0)}},
		{"truncate the last segment inside a record", []mutation{{kind: mutTruncate, file: last, n: 1000}},
			fzWant{verifyOK: true, lost: lostFrom(g.recordStartAtOrBefore(int64(nSeg-1)*4096 + 1000)),
				report: func(t *testing.T, r RecoveryReport) { require.Positive(t, r.LostFlushedBytes) }}},
		{"truncate a sealed segment", []mutation{{kind: mutTruncate, file: seg(1), n: 2000}},
			fzWant{openErr: ErrCorrupt, errPath: seg(1)}},
		{"zero entries of a ConsumeQueue file", []mutation{{kind: mutZero, file: cq0, off: 20, n: 40}},
			fzWant{verifyOK: true}},
		{"zero the last records after a clean close", []mutation{{kind: mutZero, file: last, off: 3000, n: 1096}},
			fzWant{verifyOK: true, lost: lostFrom(g.recordStartAtOrBefore(int64(nSeg-1)*4096 + 3000)),
				report: func(t *testing.T, r RecoveryReport) { require.Positive(t, r.LostFlushedBytes) }}},
		// After a clean close the zero word Close wrote ends the log at once.
		{"garbage after the last record", []mutation{{kind: mutFlip, file: last, off: 4050, bit: 6}},
			fzWant{verifyOK: true, report: func(t *testing.T, r RecoveryReport) {
				require.Equal(t, g.end, r.CommitLogEnd)
				require.Zero(t, r.TruncatedBytes)
			}}},
		{"garbage after the last record after a crash", []mutation{{kind: mutFlip, file: last, off: 4050, bit: 6},
			{kind: mutDuplicate, file: p(lockName), target: p(abortName)}},
			fzWant{verifyOK: true, report: func(t *testing.T, r RecoveryReport) {
				require.False(t, r.CleanShutdown)
				require.Equal(t, g.end, r.CommitLogEnd)
				require.Positive(t, r.TruncatedBytes)
				require.Zero(t, r.LostFlushedBytes)
			}}},
		{"append garbage to the last segment", []mutation{{kind: mutAppend, file: last, data: []byte("garbage after the end")}},
			fzWant{openErr: ErrCorrupt, errPath: last}},
		{"append garbage to an IndexFile", []mutation{{kind: mutAppend, file: idx0, data: make([]byte, 300)}},
			fzWant{verifyOK: true}},
		{"delete the last segment", []mutation{{kind: mutDelete, file: last}},
			fzWant{verifyOK: true, lost: lostFrom(int64(nSeg-1) * 4096), report: func(t *testing.T, r RecoveryReport) {
				require.Equal(t, int64(nSeg-1)*4096, r.CommitLogEnd)
				require.Equal(t, g.end-r.CommitLogEnd, r.LostFlushedBytes)
			}}},
		{"delete the first ConsumeQueue file", []mutation{{kind: mutDelete, file: cq0}},
			fzWant{verifyOK: true, lost: func(g *fzGolden) []int64 { return g.queues[fzQueue{"orders", 0}][:8] }}},
		{"delete a middle ConsumeQueue file", []mutation{{kind: mutDelete, file: cq1}}, fzWant{verifyOK: true}},
		{"delete the checkpoint", []mutation{{kind: mutDelete, file: p(checkpointName)}},
			fzWant{verifyOK: true, report: func(t *testing.T, r RecoveryReport) { require.False(t, r.CheckpointFound) }}},
		{"duplicate a segment as the next one", []mutation{{kind: mutDuplicate, file: seg(0), target: seg(nSeg)}},
			fzWant{verifyOK: true}},
		{"duplicate a segment over a sealed one", []mutation{{kind: mutDuplicate, file: seg(0), target: seg(1)}},
			fzWant{openErr: ErrCorrupt, errPath: seg(1)}},
		{"rename an IndexFile", []mutation{{kind: mutRename, file: idx0, target: p("index", "00000000000000000001")}},
			fzWant{verifyOK: true}},
		{"rename a segment to a gap", []mutation{{kind: mutRename, file: seg(1), target: seg(nSeg + 1)}},
			fzWant{openErr: ErrCorrupt}},
		{"checkpoint flushed past the end", []mutation{{kind: mutCheckpoint, file: p(checkpointName),
			flushed: g.end + 1000, dispatched: g.end}},
			fzWant{verifyOK: true, report: func(t *testing.T, r RecoveryReport) { require.EqualValues(t, 1000, r.LostFlushedBytes) }}},
		{"checkpoint dispatched nothing", []mutation{{kind: mutCheckpoint, file: p(checkpointName), flushed: g.end}},
			fzWant{verifyOK: true, report: func(t *testing.T, r RecoveryReport) { require.Equal(t, g.end, r.Redispatched) }}},
		{"flip the consumer offsets file", []mutation{{kind: mutFlip, file: offsets, off: 30, bit: 1}},
			fzWant{openErr: ErrCorrupt, errPath: offsets}},
		{"empty the consumer offsets file", []mutation{{kind: mutTruncate, file: offsets}},
			fzWant{openErr: ErrCorrupt, errPath: offsets}},
		{"remove the index directory", []mutation{{kind: mutRemoveDir, file: p("index")}}, fzWant{verifyOK: true}},
		{"remove the config directory", []mutation{{kind: mutRemoveDir, file: p(configDir)}}, fzWant{verifyOK: true}},
		// Found by the fuzzer.
		// The schedule queue left with its meta file alone is rebuilt from
		// the whole CommitLog, which meets the timer queue's entry that is
		// not its record's.
		{"the schedule queue's file moved into the timer queue, timer progress lost", []mutation{{kind: mutRename,
			file: p("consumequeue", ScheduleTopic, "17", "00000000000000000000"), target: p("consumequeue", topic.Timer, "0", "00000000000000000000")},
			{kind: mutDelete, file: p(configDir, "timer.json")}},
			fzWant{openErr: ErrCorrupt, errPath: p("consumequeue", topic.Timer, "0")}},
		{"the schedule queue's file copied into the timer queue, timer progress lost", []mutation{{kind: mutDuplicate,
			file: p("consumequeue", ScheduleTopic, "17", "00000000000000000000"), target: p("consumequeue", topic.Timer, "0", "00000000000000000000")},
			{kind: mutDelete, file: p(configDir, "timer.json")}},
			fzWant{lost: func(g *fzGolden) []int64 { return []int64{g.queues[fzQueue{topic.Timer, 0}][0]} }}},
		{"the schedule queue's file moved into the half queue", []mutation{{kind: mutRename,
			file: p("consumequeue", ScheduleTopic, "17", "00000000000000000000"), target: p("consumequeue", HalfTopic, "0", "00000000000000000000")}},
			fzWant{openErr: ErrCorrupt, errPath: p("consumequeue", HalfTopic, "0")}},
		{"a ConsumeQueue file moved into another queue", []mutation{{kind: mutRename, file: cq0,
			target: p("consumequeue", HalfTopic, "0", "00000000000000000000")}},
			fzWant{openErr: ErrCorrupt, errPath: p("consumequeue", HalfTopic, "0")}},
		// The checksum is checked before the version: a flipped version
		// byte is damage, not another format version.
		{"flip the version of a ConsumeQueue meta file", []mutation{{kind: mutFlip, file: p("consumequeue", "orders", "1", "meta"), off: 7}},
			fzWant{openErr: ErrCorrupt, errPath: p("consumequeue", "orders", "1", "meta")}},
		// Found by the fuzzer: the registry gone with a queue directory
		// brought the topic back with too few queues. The checkpoint's
		// queue marks find the queue; without them (version 1) the lost
		// registry alone has the whole CommitLog re-dispatched.
		{"a queue directory and the topic registry lost", []mutation{{kind: mutRemoveDir, file: p("consumequeue", "orders", "1")},
			{kind: mutDelete, file: p(configDir, topic.File)}},
			fzWant{verifyOK: true, report: fullRedispatch(g, "orders")}},
		{"a queue directory and the topic registry lost, a version 1 checkpoint", []mutation{
			{kind: mutCheckpoint, file: p(checkpointName), flushed: g.end, dispatched: g.end},
			{kind: mutRemoveDir, file: p("consumequeue", "orders", "1")}, {kind: mutDelete, file: p(configDir, topic.File)}},
			fzWant{verifyOK: true, report: fullRedispatch(g, "orders")}},
		{"a queue directory lost", []mutation{{kind: mutRemoveDir, file: p("consumequeue", "orders", "1")}},
			fzWant{verifyOK: true, report: fullRedispatch(g)}},
		{"the last file of a queue lost", []mutation{{kind: mutDelete, file: p("consumequeue", "orders", "0", "00000000000000000320")}},
			fzWant{verifyOK: true, report: fullRedispatch(g)}},
		// A damaged IndexFile is deleted and rebuilt.
		{"flip the version of an IndexFile", []mutation{{kind: mutFlip, file: idx0, off: 5, bit: 3}}, fzWant{verifyOK: true}},
	}
}

// TestOpenCorruptedDirCases runs the hand-written scripts through the
// fuzz harness, in memory and (the mapped paths) on real files.
func TestOpenCorruptedDirCases(t *testing.T) {
	g := golden(t)
	for _, c := range fzCases(g) {
		for _, onDisk := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/disk=%v", c.name, onDisk), func(t *testing.T) {
				fs, dir := vfs.FS(vfs.NewMem()), fzDir
				if onDisk {
					fs, dir = vfs.OS, filepath.Join(t.TempDir(), "store")
				}
				require.NoError(t, g.copyTo(fs, dir))
				res, err := fzRun(t, g, fs, dir, c.muts)
				if c.want.openErr != nil {
					require.ErrorIs(t, err, c.want.openErr)
					if c.want.errPath != "" {
						var ce *CorruptError
						if errors.As(err, &ce) {
							require.Equal(t, rebase(c.want.errPath, dir), ce.Path)
						} else {
							require.Contains(t, err.Error(), rebase(c.want.errPath, dir))
						}
					}
					return
				}
				require.NoError(t, err)
				require.Equal(t, c.want.verifyOK, res.verifyOK)
				var want []int64
				if c.want.lost != nil {
					want = c.want.lost(g)
				}
				require.Equal(t, want, g.missing(res.delivered), "messages missing")
				if c.want.report != nil {
					c.want.report(t, res.recovery)
				}
			})
		}
	}
}

// TestDamagedScheduleQueueDeliversNothingEarly: the timer queue's file in
// the place of delay level 18's makes that level's entry point at the
// timed message. Once due by its own store time, the scheduler must not
// deliver that message (early, and as a delayed one): it reports the
// damaged entry and retries, delivering nothing.
func TestDamagedScheduleQueueDeliversNothingEarly(t *testing.T) {
	fs, sched := damagedScheduleQueue(t)
	o := fzOptions()
	clk := o.Clock.(*clock.Fake)
	failed := make(chan string, 16)
	o.Logger = slog.New(logFunc(func(msg string, attrs []slog.Attr) {
		if msg == "mqlite: delayed delivery failed; retrying" {
			for _, a := range attrs {
				if a.Key == "err" {
					select {
					case failed <- a.Value.String():
					default:
					}
				}
			}
		}
	}))
	s, err := openFS(fs, fzDir, o)
	require.NoError(t, err)
	defer s.Close()
	before, err := s.MaxOffset("orders", 0)
	require.NoError(t, err)
	clk.Advance(3 * time.Hour)
	select {
	case msg := <-failed:
		require.Contains(t, msg, sched)
		require.Contains(t, msg, "not this queue's")
	case <-time.After(fzWatchdog):
		t.Fatal("the scheduler neither failed nor stopped")
	}
	require.NoError(t, s.WaitVisible(t.Context()))
	// The timer service may deliver the timed message, due an hour after
	// the golden store's clock: its queue lost its file and Open rebuilt
	// it from the CommitLog. The delayed message, whose entry is gone, and
	// the timer's record, which the schedule queue now points at, must not
	// come through the scheduler.
	after, err := s.MaxOffset("orders", 0)
	require.NoError(t, err)
	var got []string
	for m, err := range s.Messages("orders", 0, before) {
		require.NoError(t, err)
		got = append(got, string(m.Body))
	}
	// The timer may deliver between the MaxOffset read and the reads of
	// Messages: these may see one message more, never fewer.
	require.GreaterOrEqual(t, len(got), int(after-before))
	require.LessOrEqual(t, len(got), 1, "delivered: %q", got)
	if len(got) == 1 {
		require.Equal(t, "timed", got[0], "only the timer's own message may arrive")
	}
}

// damagedScheduleQueue is the golden store with the timer queue's file
// copied in the place of delay level 18's (sched). A copy: a queue left
// with no data file would be rebuilt from the whole CommitLog at Open,
// which would refuse the schedule queue.
func damagedScheduleQueue(t *testing.T) (fs *vfs.MemFS, sched string) {
	t.Helper()
	g := golden(t)
	fs = vfs.NewMem()
	require.NoError(t, g.copyTo(fs, fzDir))
	sched = path.Join(fzDir, "consumequeue", ScheduleTopic, "17", "00000000000000000000")
	require.NoError(t, mutation{kind: mutDuplicate, file: path.Join(fzDir, "consumequeue", topic.Timer, "0", "00000000000000000000"),
		target: sched}.apply(fs, fzDir))
	return fs, sched
}

// logFunc is a slog.Handler calling a function for each record.
type logFunc func(msg string, attrs []slog.Attr)

func (f logFunc) Enabled(context.Context, slog.Level) bool { return true }
func (f logFunc) Handle(_ context.Context, r slog.Record) error {
	var attrs []slog.Attr
	r.Attrs(func(a slog.Attr) bool { attrs = append(attrs, a); return true })
	f(r.Message, attrs)
	return nil
}
func (f logFunc) WithAttrs([]slog.Attr) slog.Handler { return f }
func (f logFunc) WithGroup(string) slog.Handler      { return f }

// fullRedispatch checks that Open re-dispatched the whole CommitLog and
// restored the topics named (those of a lost registry).
func fullRedispatch(g *fzGolden, restored ...string) func(*testing.T, RecoveryReport) {
	return func(t *testing.T, r RecoveryReport) {
		require.Equal(t, g.end, r.Redispatched)
		for _, name := range restored {
			require.Contains(t, r.RestoredTopics, name)
		}
	}
}
