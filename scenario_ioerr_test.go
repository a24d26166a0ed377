package mqlite

// S18 of the reliability plan: an I/O error at every operation index. A
// fixed script (Open, 50 FlushSync Puts across two segment rolls, a pull
// consumer's Poll and offset commit, a committed transaction, Close) runs
// once on vfs.NewFaulty(vfs.NewMem()) to count the operations of the file
// seam; then, for i = 0, 1, 2, ..., it runs again with an EIO at operation
// i only ("once") and at every operation from i on ("persistent"). Every
// run must surface the fault, must not panic or leak a goroutine, and must
// leave a directory that opens, as it is and as a power loss would leave
// it, with every acknowledged message intact and Store.Verify clean.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqlite/mqlite/clock"
	"github.com/mqlite/mqlite/vfs"
)

const (
	ioDir   = "/ioerr"
	ioTopic = "io"
	ioPuts  = 50
)

// errInjected is the fault: an EIO, recognisable with errors.Is.
var errInjected = fmt.Errorf("mqlite test: injected I/O error: %w", syscall.EIO)

// ioLogOnly are the log messages through which alone an injected fault may
// surface: background work whose failure has no caller to return to, and
// that loses nothing.
//   - Open reads the checkpoint; unreadable, it is ignored and recovery
//     validates more of the CommitLog.
//   - The allocator prepares the next CommitLog segment ahead of need; an
//     append that rolls into it gets the error, but when none does (the
//     script ends first) the log is the only place it shows. Likewise a
//     failed removal of the unused prepared segment at Close: it holds no
//     record, and the next Open removes it.
//   - A committed transaction whose op record cannot be written: the real
//     message is stored and acknowledged, and the check-back service
//     writes the op record later (after a reopen it finds the real
//     message by its key).
//   - Retention renames a removed segment to a spare for recycling; when
//     the rename fails it removes the file instead, as without recycling.
//     A spare that cannot be removed (the space was wanted, or the store
//     closes) stays behind as a file the next Open recognises and reuses.
var ioLogOnly = []string{
	"mqlite: cannot read checkpoint",
	"mqlite/commitlog: preparing the next segment failed",
	"mqlite/commitlog: cannot remove the unused next segment",
	"mqlite/txn: committed, op record not written",
	"mqlite/commitlog: keeping the segment to recycle failed",
	"mqlite/commitlog: remove spare segment",
}

func ioOptions(clk clock.Clock, log *slog.Logger) *Options {
	// 4 KiB segments: the 50 Puts roll the CommitLog twice. Nothing moves
	// the fake clock, so no timeout, checkpoint, offset persist or
	// check-back timer fires: the operations are the same from run to run
	// but for the order in which the dispatcher and the allocator
	// interleave with the senders.
	return &Options{Flush: FlushSync, SegmentSize: 4 << 10, SyncFlushTimeout: time.Hour, FlowControlThreshold: -1,
		NoWarm: true, Clock: clk, Logger: log, TxCheckInterval: 24 * time.Hour,
		ConsumeQueueEntries: 64, IndexSlots: 64, IndexEntries: 256}
}

// ioInjector counts the operations of one run and fails the chosen ones.
type ioInjector struct {
	mu         sync.Mutex
	at         int  // the first operation to fail; -1: none
	persistent bool // fail every operation from at on
	ops        int  // operations seen
	injected   int  // operations failed
	first      string
}

func (in *ioInjector) inject(op vfs.Op, path string) error {
	in.mu.Lock()
	defer in.mu.Unlock()
	i := in.ops
	in.ops++
	if in.at < 0 || i < in.at || (i > in.at && !in.persistent) {
		return nil
	}
	if in.injected == 0 {
		in.first = fmt.Sprintf("op %d (%s %s)", i, opName(op), path)
	}
	in.injected++
	return errInjected
}

func opName(op vfs.Op) string {
	names := [...]string{vfs.OpOpen: "open", vfs.OpRemove: "remove", vfs.OpRename: "rename", vfs.OpMkdir: "mkdir",
		vfs.OpSyncDir: "syncdir", vfs.OpWrite: "write", vfs.OpRead: "read", vfs.OpTruncate: "truncate",
		vfs.OpAllocate: "allocate", vfs.OpSync: "sync", vfs.OpMap: "map", vfs.OpMapSync: "msync"}
	if int(op) < len(names) && names[op] != "" {
		return names[op]
	}
	return fmt.Sprintf("op%d", int(op))
}

// errLog keeps the messages of the log records at Warn or above that carry
// the injected error.
type errLog struct {
	mu     sync.Mutex
	logged []string
}

func (l *errLog) Enabled(_ context.Context, lv slog.Level) bool { return lv >= slog.LevelWarn }
func (l *errLog) WithAttrs([]slog.Attr) slog.Handler            { return l }
func (l *errLog) WithGroup(string) slog.Handler                 { return l }
func (l *errLog) Handle(_ context.Context, r slog.Record) error {
	r.Attrs(func(a slog.Attr) bool {
		if err, ok := a.Value.Any().(error); ok && errors.Is(err, errInjected) {
			l.mu.Lock()
			l.logged = append(l.logged, r.Message)
			l.mu.Unlock()
		}
		return true
	})
	return nil
}

// ioRun is what one run of the script did.
type ioRun struct {
	acked     []plMsg  // Puts (and the transaction's message) that returned nil
	returned  []string // errors returned by calls
	fenced    bool     // the store refused writes when the script ended
	logged    []string // messages of the log records that carried the fault
	committed int64    // the offset committed on queue 0, or -1
	closeErr  error
	imgs      []*vfs.MemFS // power-loss images: before Close, after it
	problems  []string     // contract violations seen during the run

	// mu guards acked and committing for a reader on another goroutine
	// (scenario_crashpoint_test.go's images, taken inside an operation of the seam);
	// the script's own goroutine reads them without it.
	mu         sync.Mutex
	committing int64 // the offset being committed on queue 0, or -1

	// capped runs the script with MaxStoreBytes of two segments and a
	// retention pass before Close, which removes the oldest segments
	// (scenario_crashpoint_test.go): acknowledged messages below the reopened
	// store's minimum are gone by design.
	capped  bool
	cleaned int  // segments the retention pass removed
	async   bool // FlushAsync instead of FlushSync (scenario_crashpoint_test.go)
}

// ioCap is the capped script's MaxStoreBytes: two 4 KiB segments.
const ioCap = 8 << 10

// ack records an acknowledged message.
func (r *ioRun) ack(m plMsg) {
	r.mu.Lock()
	r.acked = append(r.acked, m)
	r.mu.Unlock()
}

// progress is how many messages were acknowledged so far and the highest
// offset a commit was started for (-1: none).
func (r *ioRun) progress() (int, int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.acked), r.committing
}

func (r *ioRun) bad(format string, args ...any) {
	r.problems = append(r.problems, fmt.Sprintf(format, args...))
}

// seen counts the ways the fault surfaced: returned errors, the fence
// (a failed sync can reach no caller when its only waiter was an op
// record), and log records.
func (r *ioRun) seen() int {
	n := len(r.returned) + len(r.logged)
	if r.fenced {
		n++
	}
	return n
}

// ioFenced is why s refuses writes until it is reopened, or nil: a failed
// CommitLog sync or a stopped dispatcher.
func ioFenced(s *Store) error {
	if err := s.log.Fenced(); err != nil {
		return err
	}
	return s.disp.failure()
}

func ioBody(i int) []byte {
	return []byte(fmt.Sprintf("io-%03d-%s", i, strings.Repeat("abcdefgh", 12)))
}

func newIORun() *ioRun { return &ioRun{committed: -1, committing: -1} }

// ioScriptRun runs the script on ffs, recording into run, which another
// goroutine may watch through progress. Every error a call returns must be
// the injected one, typed: matching ErrIO or ErrFenced. No write may be
// acknowledged once the store refuses writes.
func ioScriptRun(t *testing.T, ffs *vfs.Faulty, rng *rand.Rand, run *ioRun) {
	ctx := context.Background()
	elog := &errLog{}
	defer func() {
		elog.mu.Lock()
		run.logged = elog.logged
		elog.mu.Unlock()
	}()
	check := func(what string, err error) bool {
		if err == nil {
			return true
		}
		run.returned = append(run.returned, what)
		switch {
		case !errors.Is(err, errInjected):
			run.bad("%s: an error that is not the injected one: %v", what, err)
		case !errors.Is(err, ErrIO) && !errors.Is(err, ErrFenced):
			run.bad("%s: %v matches neither ErrIO nor ErrFenced", what, err)
		}
		return false
	}
	o := ioOptions(clock.NewFake(t0), slog.New(elog))
	if run.capped {
		o.MaxStoreBytes = ioCap
	}
	if run.async {
		o.Flush = FlushAsync
	}
	s, err := openFS(ffs, ioDir, o)
	if !check("open", err) {
		run.imgs = append(run.imgs, ffs.Crash(rng, rng.Float64()))
		return
	}
	defer s.Close() // if an assertion stops the run; a no-op after the Close below
	for i := range ioPuts {
		m := &Message{Topic: ioTopic, Keys: []string{fmt.Sprintf("k%d", i)}, Body: ioBody(i)}
		fenced := ioFenced(s)
		r, err := s.Put(ctx, m, i%2)
		if fenced != nil && err == nil {
			run.bad("put %d acknowledged after the store failed: %v", i, fenced)
		}
		if check(fmt.Sprintf("put %d", i), err) {
			run.ack(plMsg{off: r.Offset, size: r.Size, queue: i % 2, qoff: r.QueueOffset, body: m.Body})
		}
	}

	pc, err := s.NewPullConsumer("g", ConsumerOptions{ConsumeFromWhere: ConsumeFromFirstOffset})
	if check("new consumer", err) && check("assign", pc.Assign(ioTopic, nil, 0)) && check("wait visible", s.WaitVisible(ctx)) {
		if n, err := s.MaxOffset(ioTopic, 0); err == nil && n > 0 {
			ioPoll(run, pc, min(n, 5), check)
		}
	}

	tp, err := s.NewTransactionProducer(never(t), TransactionOptions{Group: "g"})
	if check("new transaction producer", err) {
		m := &Message{Topic: ioTopic, Body: []byte("transaction")}
		fenced := ioFenced(s)
		res, err := tp.SendInTransaction(ctx, m, func(context.Context, *Message) TxState { return CommitMessage })
		if fenced != nil && err == nil {
			run.bad("transaction acknowledged after the store failed: %v", fenced)
		}
		if check("transaction", err) {
			run.ack(plMsg{off: res.Offset, size: res.Size, queue: res.QueueID, qoff: res.QueueOffset, body: m.Body})
		}
	}

	if run.capped {
		if rep, err := s.CleanExpired(); check("clean", err) {
			run.cleaned = rep.Segments
		}
	}
	run.fenced = ioFenced(s) != nil
	run.imgs = append(run.imgs, ffs.Crash(rng, rng.Float64()))
	run.closeErr = s.Close()
	check("close", run.closeErr)
	run.imgs = append(run.imgs, ffs.Crash(rng, rng.Float64()))
}

// ioPoll polls want messages (which the queue holds, so Poll returns at
// once), checks them against the acknowledged ones and commits after them.
func ioPoll(run *ioRun, pc *PullConsumer, want int64, check func(string, error) bool) {
	// The timeout only bounds a failure.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var next int64
	for next < want {
		ms, err := pc.Poll(ctx, int(want-next))
		if err != nil {
			run.bad("poll of a queue holding %d messages: %v", want, err)
			return
		}
		for _, m := range ms {
			if m.QueueOffset != next {
				run.bad("poll from the first offset: queue offset %d, want %d", m.QueueOffset, next)
			}
			for _, a := range run.acked {
				if a.queue == 0 && a.qoff == m.QueueOffset && !bytes.Equal(a.body, m.Body) {
					run.bad("polled message at queue offset %d: %q, want %q", m.QueueOffset, m.Body, a.body)
				}
			}
			next = m.QueueOffset + 1
		}
	}
	run.mu.Lock()
	run.committing = next
	run.mu.Unlock()
	if check("commit", pc.CommitOffset(ioTopic, 0, next)) {
		run.committed = next
	}
}

// ioReopen opens fs without faults and returns what is wrong: an
// acknowledged message missing or changed, a Verify problem, a committed
// offset beyond the last commit, or (exact: the directory as the script
// left it, closed without error) a commit that was not persisted.
func ioReopen(fs vfs.FS, run *ioRun, exact bool) (problems []string) {
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	s, err := openFS(fs, ioDir, ioOptions(clock.NewFake(t0.Add(time.Hour)), nil))
	if err != nil {
		bad("reopen: %v", err)
		return problems
	}
	defer func() {
		if err := s.Close(); err != nil {
			bad("close after reopen: %v", err)
		}
	}()
	for _, m := range run.acked {
		if run.capped && m.off < s.log.MinOffset() {
			continue // removed by the retention pass
		}
		got, err := s.ReadAt(m.off)
		switch {
		case err != nil:
			bad("acknowledged message at %d lost: %v", m.off, err)
		case !bytes.Equal(m.body, got.Body) || int(got.QueueID) != m.queue || got.QueueOffset != m.qoff:
			bad("acknowledged message at %d changed: queue %d offset %d %q", m.off, got.QueueID, got.QueueOffset, got.Body)
		}
	}
	if rep, err := s.Verify(context.Background(), nil); err != nil || !rep.OK {
		bad("verify: %v %v", err, rep.Problems)
	}
	committed := int64(-1)
	if offs, err := s.consumers().Offsets("g"); err == nil {
		for _, o := range offs {
			if o.Topic == ioTopic && o.ID == 0 {
				committed = o.Offset
			}
		}
	}
	// Without a commit the group may hold its starting position, the
	// queue's first offset (ConsumeFromFirstOffset): 0.
	if committed > max(run.committed, 0) || exact && run.closeErr == nil && run.committed >= 0 && committed != run.committed {
		bad("committed offset of queue 0 is %d, the script committed %d (close: %v)", committed, run.committed, run.closeErr)
	}
	return problems
}

func TestIOErrorAtEveryOperation(t *testing.T) {
	t.Run("plain", func(t *testing.T) { ioErrorAtEveryOperation(t, false) })
	// With a retention pass before Close removing the oldest segments: a
	// fault in the middle of the removal.
	t.Run("retention", func(t *testing.T) { ioErrorAtEveryOperation(t, true) })
}

func ioErrorAtEveryOperation(t *testing.T, capped bool) {
	count := &ioInjector{at: -1}
	ffs := vfs.NewFaulty(vfs.NewMem())
	ffs.SetInjector(count.inject)
	base := newIORun()
	base.capped = capped
	ioScriptRun(t, ffs, rand.New(rand.NewPCG(18, 0)), base)
	require.Zero(t, base.seen(), "a run without faults: %v %v", base.returned, base.logged)
	require.Empty(t, base.problems)
	require.Len(t, base.acked, ioPuts+1)
	require.EqualValues(t, 5, base.committed)
	if capped {
		require.Positive(t, base.cleaned, "the retention pass removes segments")
	}
	for _, img := range base.imgs {
		require.Empty(t, ioReopen(img, base, false))
	}
	n := count.ops
	require.Greater(t, n, 150, "the script runs through the fault seam")
	require.Zero(t, mqliteGoroutines())

	for _, persistent := range []bool{false, true} {
		variant := map[bool]string{false: "once", true: "persistent"}[persistent]
		t.Run(variant, func(t *testing.T) {
			var points, unreached, acked int
			var violations []string
			// Up to the counted n, then on while runs still reach index i
			// (the interleaving of the background goroutines varies the
			// count a little).
			for i := 0; ; i++ {
				mem := vfs.NewMem()
				ffs := vfs.NewFaulty(mem)
				in := &ioInjector{at: i, persistent: persistent}
				ffs.SetInjector(in.inject)
				run := newIORun()
				run.capped = capped
				ioScriptRun(t, ffs, rand.New(rand.NewPCG(18, uint64(i))), run)
				ffs.SetInjector(nil)
				what := fmt.Sprintf("%s fault at %s", variant, in.first)
				require.Zero(t, mqliteGoroutines(), "%s: goroutines left", what)
				if in.injected == 0 {
					if i >= n {
						break
					}
					unreached++
					continue
				}
				points++
				acked += len(run.acked)
				problems := run.problems
				// Once: one fault, so injected <= seen is seen >= 1.
				// Persistent: every operation from i on fails, and one
				// returned error stands for many of them (a failed Open
				// fails its cleanup too; Close joins the failures of all
				// its steps), so only seen >= 1 holds.
				if run.seen() == 0 {
					problems = append(problems, fmt.Sprintf("the fault surfaced nowhere (%d acked)", len(run.acked)))
				} else if !persistent && in.injected > run.seen() {
					problems = append(problems, fmt.Sprintf("%d faults injected, %d seen", in.injected, run.seen()))
				}
				if len(run.returned) == 0 && !run.fenced {
					for _, msg := range run.logged {
						if !ioAbsorbable(msg) {
							problems = append(problems, "surfaced only in the log: "+msg)
						}
					}
				}
				for _, p := range ioReopen(mem, run, true) {
					problems = append(problems, "healthy reopen: "+p)
				}
				for k, img := range run.imgs {
					for _, p := range ioReopen(img, run, false) {
						problems = append(problems, fmt.Sprintf("power-loss image %d: %s", k, p))
					}
				}
				for _, p := range problems {
					violations = append(violations, what+": "+p)
				}
			}
			t.Logf("%s: %d operations counted, injection points %d (%d not reached), acked messages checked %d, violations %d",
				variant, n, points, unreached, acked, len(violations))
			for j, v := range violations {
				if j == 50 {
					t.Errorf("... and %d more", len(violations)-j)
					break
				}
				t.Error(v)
			}
		})
	}
}

func ioAbsorbable(msg string) bool {
	for _, p := range ioLogOnly {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return false
}
