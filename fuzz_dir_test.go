package mqlite

// FuzzOpenCorruptedDir (reliability plan S39): SQLite's "malformed
// database file" fuzzing, applied to a whole store directory. Each input
// is a mutation script (fuzz_dir_script_test.go) applied to a copy of the
// golden store (fuzz_dir_golden_test.go); the damaged copy is opened, and
// either Open fails with an error matching ErrCorrupt that names a file
// of the store (or refuses a file of another format version), or the
// store passes checkOpened, closes cleanly and opens again with the same
// content. Never a panic, a hang (a watchdog panics with every stack), or
// a goroutine left running.
//
//	go test -run '^$' -fuzz '^FuzzOpenCorruptedDir$' -fuzztime 10m -parallel 1 .

import (
	"context"
	"errors"
	"fmt"
	"path"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqlite/mqlite/consumequeue"
	"github.com/mqlite/mqlite/indexfile"
	"github.com/mqlite/mqlite/topic"
	"github.com/mqlite/mqlite/vfs"
)

// fzWatchdog bounds one input: Open, Verify, the reads and Close of a
// store this small take milliseconds.
const fzWatchdog = 30 * time.Second

func FuzzOpenCorruptedDir(f *testing.F) {
	g := golden(f)
	for _, s := range fzSeeds(g) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, script []byte) {
		runScript(t, g, g.decodeScript(script))
	})
}

// fzSeeds are one script per kind of operation, on the files where it
// matters most.
func fzSeeds(g *fzGolden) [][]byte {
	seg := func(i int) int { return g.fileIndex(path.Join(fzDir, "commitlog", fmt.Sprintf("%020d", i*4096))) }
	cq := g.fileIndex(path.Join(fzDir, "consumequeue", "orders", "0", "00000000000000000160"))
	idx := g.fileIndex(path.Join(fzDir, "index", "00000000000000000000"))
	last := seg(len(g.segments()) - 1)
	return [][]byte{
		{},
		fzOp(mutFlip, seg(0), 100, 0, 3),
		fzOp(mutFlip, last, 300, 0, 0),
		fzOp(mutTruncate, last, 700, 0, 0),
		fzOp(mutTruncate, seg(1), 2000, 0, 0),
		fzOp(mutZero, seg(1), 40, 4, 0),
		fzOp(mutZero, cq, 20, 20, 0),
		fzOp(mutAppend, last, 1, 100, 7),
		fzOp(mutAppend, idx, 1, 300, 0),
		fzOp(mutDelete, last, 0, 0, 0),
		fzOp(mutDelete, cq, 0, 0, 0),
		fzOp(mutDuplicate, seg(0), 0x100|3, 0, 0),
		fzOp(mutRename, idx, 1, 0, 0),
		fzOp(mutCheckpoint, 0, 10, 0, 1),
		fzOp(mutCheckpoint, 0, 2, 0, 2|4),
		append(fzOp(mutCheckpoint, 0, 0xFF00, 0, 2|0x10), fzOp(mutRemoveDir, 1, 0, 0, 0)...),
		fzOp(mutOffsets, 0, 20, 0, 0),
		fzOp(mutRemoveDir, 1, 0, 0, 0),
		append(fzOp(mutFlip, cq, 5, 0, 1), fzOp(mutDelete, g.fileIndex(path.Join(fzDir, checkpointName)), 0, 0, 0)...),
	}
}

// segments lists the golden CommitLog segment files.
func (g *fzGolden) segments() []string {
	var out []string
	for _, f := range g.files {
		if path.Dir(f) == path.Join(fzDir, "commitlog") {
			out = append(out, f)
		}
	}
	return out
}

// runScript applies muts to a copy of the golden store in memory and
// checks what opening it does (fzRun).
func runScript(t *testing.T, g *fzGolden, muts []mutation) (*fzResult, error) {
	fs := vfs.NewMem()
	require.NoError(t, g.copyTo(fs, fzDir))
	return fzRun(t, g, fs, fzDir, muts)
}

// fzRun applies muts to the copy of the golden store in dir on fs and
// checks what opening it does (openAndCheck). A store that opened must
// open again after Close, and deliver exactly what it delivered the first
// time: the first Open repaired what it accepted. It returns what the
// first Open did.
func fzRun(t *testing.T, g *fzGolden, fs vfs.FS, dir string, muts []mutation) (*fzResult, error) {
	for _, m := range muts {
		require.NoError(t, m.apply(fs, dir), m)
	}
	wd := time.AfterFunc(fzWatchdog, func() {
		buf := make([]byte, 1<<20)
		panic(fmt.Sprintf("FuzzOpenCorruptedDir: %v took over %s; goroutines:\n%s", muts, fzWatchdog, buf[:runtime.Stack(buf, true)]))
	})
	defer wd.Stop()
	first, err := openAndCheck(t, g, fs, dir, muts, "first open")
	if err != nil {
		return nil, err
	}
	second, err := openAndCheck(t, g, fs, dir, muts, "reopen")
	if err != nil && first.reregistered {
		// Registering a system topic again made its damaged queue one the
		// store reads at Open (the transaction service's half queue).
		return first, nil
	}
	require.NoError(t, err, "%v: the reopen of a store that opened failed", muts)
	require.Equal(t, first.delivered, second.delivered, "%v: the reopen delivered other messages", muts)
	return first, nil
}

// fzResult is what one open of a damaged store found and delivered.
type fzResult struct {
	recovery RecoveryReport
	verifyOK bool
	// reregistered says topics were missing from the registry and the
	// check registered them again: the store was changed.
	reregistered bool
	delivered    map[int64]bool // CommitLog offsets read through their queues
}

// openAndCheck opens the store in dir on fs. If Open fails, the error must
// match ErrCorrupt and name a file in dir (or be a format version refusal)
// and is returned; otherwise checkOpened runs and the store must close
// without error. Either way no goroutine may be left.
func openAndCheck(t *testing.T, g *fzGolden, fs vfs.FS, dir string, muts []mutation, what string) (*fzResult, error) {
	trusted, cpOK := fzTrusted(fs, dir)
	registryLost := !vfs.Exists(fs, path.Join(dir, configDir, topic.File))
	s, err := openFS(fs, dir, fzOptions())
	if err != nil {
		require.Nil(t, s)
		// Neither file system fails an operation here: ErrIO would be the
		// store asking for something impossible, such as a mapping past
		// the end of a file. A file of another format version is refused
		// (a header whose checksum holds names it: a flipped version byte
		// is damage).
		var ce *CorruptError
		if errors.As(err, &ce) {
			require.ErrorIs(t, err, ErrCorrupt, "%s %v", what, muts)
			require.True(t, strings.HasPrefix(ce.Path, dir+"/"), "%s %v: %v does not name a file of the store", what, muts, err)
		} else {
			require.True(t, errors.Is(err, consumequeue.ErrIncompatible) || errors.Is(err, indexfile.ErrVersion),
				"%s %v: %v matches neither ErrCorrupt nor a version refusal", what, muts, err)
			require.ErrorIs(t, err, ErrInvalidArgument, "%s %v", what, muts)
			require.Contains(t, err.Error(), dir, "%s %v: %v does not name the file", what, muts, err)
		}
		require.Zero(t, fzGoroutines(), "%s %v: goroutines left by the failed Open", what, muts)
		return nil, err
	}
	closed := false
	defer func() {
		if !closed {
			s.Close()
		}
	}()
	res := checkOpened(t, g, s, trusted, cpOK, registryLost, func() string { return fmt.Sprintf("%s %v", what, muts) })
	closed = true
	require.NoError(t, s.Close(), "%s %v", what, muts)
	require.Zero(t, fzGoroutines(), "%s %v: goroutines left by Close", what, muts)
	return res, nil
}

// fzTrusted is the flushed offset of the checkpoint in dir, as Open will
// read it, and whether there is a valid one.
func fzTrusted(fs vfs.FS, dir string) (int64, bool) {
	b, err := vfs.ReadFile(fs, path.Join(dir, checkpointName))
	if err != nil {
		return 0, false
	}
	cp, err := decodeCheckpoint(checkpointName, b)
	return cp.flushed, err == nil
}

// checkOpened checks a store opened on a damaged copy of the golden one.
//
// Verify must run without error. Whatever is read (every queue of every
// golden topic read whole with Messages, and every golden record read by
// offset) must be byte for byte what the golden store holds at that
// position. A golden message may be missing only when the store reported
// damage that accounts for it:
//   - its record lies past the recovered CommitLog end, and Open reported
//     a truncated or lost tail (RecoveryReport.TruncatedBytes,
//     DroppedRecords or LostFlushedBytes), or found no valid checkpoint,
//     or the checkpoint does not claim the record durable (its flushed
//     offset is not past the record);
//   - its record lies below the recovered CommitLog's first segment, or
//     its queue offset below its queue's first offset: removed files at
//     the front are what retention leaves, and the store keeps no record
//     of where it cut (commitlog package doc, retention.go);
//   - Verify reported a problem (the damaged record or index entry).
//
// Every read error must match ErrCorrupt or ErrNotFound and come with a
// problem in Verify, or be ErrNotFound for a record whose loss is
// accounted for as above.
func checkOpened(t *testing.T, g *fzGolden, s *Store, trusted int64, cpOK, registryLost bool, what func() string) *fzResult {
	dir := s.Dir()
	ctx := context.Background()
	rep := s.Recovery()
	vr, err := s.Verify(ctx, nil)
	require.NoError(t, err, what)
	require.Equal(t, vr.OK, len(vr.Problems) == 0 && vr.Omitted == 0)
	st, err := s.Stats()
	require.NoError(t, err)
	logMin := st.CommitLog.MinOffset
	truncated := rep.TruncatedBytes > 0 || rep.DroppedRecords > 0 || rep.LostFlushedBytes > 0
	// lost says whether the loss of the record at off is accounted for.
	lost := func(off int64) bool {
		switch {
		case !vr.OK, off < logMin:
			return true
		case off >= rep.CommitLogEnd:
			return truncated || !cpOK || trusted <= off
		}
		return false
	}
	// check fails the test with the whole story unless ok.
	check := func(ok bool, format string, args ...any) {
		t.Helper()
		if !ok {
			t.Fatalf("%s: recovery %+v, checkpoint %v (flushed %d), verify %q: "+format,
				append([]any{what(), rep, cpOK, trusted, vr.Problems}, args...)...)
		}
	}

	res := &fzResult{recovery: rep, verifyOK: vr.OK, delivered: map[int64]bool{}}
	for _, q := range g.queueNames() {
		offs := g.queues[q]
		if _, err := s.Topic(q.topic); errors.Is(err, ErrTopicNotFound) {
			// The topic is not registered: only a lost registry file does
			// that, and it loses no message, as registering it again shows.
			check(registryLost, "topic %s is gone", q.topic)
			reregister(t, s, g, q.topic)
			res.reregistered = true
		}
		if cfg, err := s.Topic(q.topic); err == nil && q.id >= cfg.Queues {
			// Restored with too few queues (by this Open or the one
			// before): a lost registry when nothing else named the
			// queue (its directory, the checkpoint's marks, its
			// records). Its messages must all be reported lost.
			for _, off := range offs {
				check(lost(off), "%s/%d is gone with the message at %d, without a report", q.topic, q.id, off)
			}
			continue
		}
		got, errs := readQueue(s, q.topic, q.id, nil)
		for _, err := range errs {
			check(errors.Is(err, ErrCorrupt) || errors.Is(err, ErrNotFound), "read: %v", err)
			check(!vr.OK, "read failed but Verify found nothing: %v", err)
			checkNamesFile(err, dir, check)
		}
		for _, m := range got {
			want := g.byOff[m.CommitLogOffset]
			check(want != nil, "%s/%d delivered a message at %d that was never written", q.topic, q.id, m.CommitLogOffset)
			check(sameMessage(m, want) && m.Topic == q.topic && int(m.QueueID) == q.id,
				"%s/%d@%d differs from what was written:\n got %+v\nwant %+v", q.topic, q.id, m.QueueOffset, m, want)
			res.delivered[m.CommitLogOffset] = true
		}
		qmin, err := s.MinOffset(q.topic, q.id)
		check(err == nil, "MinOffset: %v", err)
		for i, off := range offs {
			// Below the queue's first offset is what retention leaves, and
			// also an interrupted one (it removes ConsumeQueue files before
			// segments): the store cannot tell a lost first file from it.
			check(res.delivered[off] || lost(off) || int64(i) < qmin,
				"%s/%d lost the message at %d without a report", q.topic, q.id, off)
		}
	}
	for off, want := range g.byOff {
		m, err := s.ReadAt(off)
		if err != nil {
			check(errors.Is(err, ErrCorrupt) || errors.Is(err, ErrNotFound), "ReadAt(%d): %v", off, err)
			check(lost(off), "ReadAt(%d) failed without a report: %v", off, err)
			checkNamesFile(err, dir, check)
			continue
		}
		check(sameMessage(m, want), "the record at %d differs from what was written", off)
	}
	checkOffsets(g, s, check, lost)
	return res
}

// checkNamesFile checks that an ErrCorrupt names a file of the store.
func checkNamesFile(err error, dir string, check func(bool, string, ...any)) {
	var ce *CorruptError
	if errors.Is(err, ErrCorrupt) {
		check(errors.As(err, &ce) && strings.HasPrefix(ce.Path, dir+"/"), "%v does not name a file of the store", err)
	}
}

// reregister registers topic again, with the golden queue count: as a
// user would with CreateTopic, and as the store does for a system topic.
func reregister(t *testing.T, s *Store, g *fzGolden, topic string) {
	n := 0
	for q := range g.queues {
		if q.topic == topic {
			n = max(n, q.id+1)
		}
	}
	if g.system[topic] {
		_, err := s.topics.EnsureAtLeast(topic, n)
		require.NoError(t, err)
		return
	}
	require.NoError(t, s.CreateTopic(topic, TopicConfig{Queues: n}))
}

// checkOffsets checks the group's committed offsets: each is what the
// golden group committed, or none (a lost offsets file means redelivery,
// which at-least-once allows), never another value; except that a commit
// past its queue's new end, when the loss of every message in between is
// accounted for (lost), is lowered to that end (ClampOffsets: the next
// messages take those offsets again).
func checkOffsets(g *fzGolden, s *Store, check func(bool, string, ...any), lost func(int64) bool) {
	lag, err := s.ConsumerLag(fzGroup)
	if errors.Is(err, ErrGroupNotFound) {
		return
	}
	check(err == nil, "ConsumerLag: %v", err)
	for _, l := range lag {
		if want, ok := g.committed[fzQueue{l.Topic, l.ID}]; ok && l.Committed != -1 {
			clamped := l.Committed < want && l.Committed == l.MaxOffset
			offs := g.queues[fzQueue{l.Topic, l.ID}]
			for i := l.Committed; clamped && i < want && i < int64(len(offs)); i++ {
				clamped = lost(offs[i])
			}
			check(l.Committed == want || clamped, "committed offset of %s/%d is %d, want %d (queue end %d)",
				l.Topic, l.ID, l.Committed, want, l.MaxOffset)
		}
	}
}

// fzGoroutines counts the mqlite goroutines running besides the test's
// own and the testing package's (a fuzz target runs under fRunner and
// runFuzzTests, which mqliteGoroutines would count), retrying a while
// for those that are finishing their exit.
func fzGoroutines() int {
	n := countFzGoroutines()
	for i := 0; n > 0 && i < 10_000; i++ {
		runtime.Gosched()
		n = countFzGoroutines()
	}
	return n
}

// fzStacks is countFzGoroutines' buffer (fuzz inputs run one at a time).
var fzStacks = make([]byte, 64<<10)

func countFzGoroutines() int {
	for {
		n := runtime.Stack(fzStacks, true)
		if n < len(fzStacks) {
			break
		}
		fzStacks = make([]byte, 2*len(fzStacks))
	}
	buf := fzStacks[:runtime.Stack(fzStacks, true)]
	n := 0
	for _, g := range strings.Split(string(buf), "\n\n") {
		if !strings.Contains(g, "github.com/mqlite/mqlite") {
			continue
		}
		if !strings.Contains(g, "testing.tRunner") && !strings.Contains(g, "testing.fRunner") &&
			!strings.Contains(g, "testing.runFuzz") && !strings.Contains(g, "testing.(*M).") {
			n++
		}
	}
	return n
}
