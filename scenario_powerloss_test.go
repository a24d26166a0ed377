package mqlite

// Power-loss tests through the fault-injecting file seam (reliability plan
// S4, S19, S8d): the store runs on vfs.NewFaulty(vfs.NewMem()), which keeps
// the bytes each successful sync made durable; Crash builds the file system
// a power loss at that instant could leave (the durable bytes plus a random
// share p of the unsynced pages), and the store is opened on it.

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqlite/mqlite/clock"
	"github.com/mqlite/mqlite/commitlog"
	"github.com/mqlite/mqlite/message"
	"github.com/mqlite/mqlite/vfs"
)

var (
	plSeed = flag.Uint64("powerloss.seed", 0, "seed for the power-loss tests (0: time-based)")
	// 60 by default; CI builds 200 (.ci/run).
	plImages = flag.Int("powerloss.images", 60, "crash images built by TestPowerLossSyncFlush")
)

const plDir = "/store"

// plStatus classifies a returned Put (the checker's three states; a Put
// that failed before appending leaves no record and is not tracked).
type plStatus int

const (
	plAcked         plStatus = iota // returned nil before the crash: must survive
	plIndeterminate                 // timed out, or returned during/after the crash: may be present
)

// plMsg is one attempted message with a known CommitLog offset.
type plMsg struct {
	off    int64
	size   int
	queue  int
	qoff   int64
	body   []byte
	status plStatus
}

func plSeedValue(t *testing.T) uint64 {
	seed := *plSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (rerun with -powerloss.seed=%d)", seed, seed)
	return seed
}

func plOptions(clk clock.Clock, seg int64) *Options {
	// Small ConsumeQueue and IndexFile files keep each image cheap. The
	// test jumps the fake clock while syncs run: no flow control.
	return &Options{Flush: FlushSync, SegmentSize: seg, SyncFlushTimeout: time.Second, FlowControlThreshold: -1,
		CheckpointInterval: time.Second, NoWarm: true, Clock: clk,
		ConsumeQueueEntries: 1024, IndexSlots: 512, IndexEntries: 2048}
}

func plMessage(rng *rand.Rand, maxBody int) *Message {
	b := make([]byte, 1+rng.IntN(maxBody))
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	m := &Message{Topic: "pl", Body: b}
	if rng.IntN(4) == 0 {
		m.Keys = []string{fmt.Sprintf("k%d", rng.IntN(1000))}
	}
	return m
}

// plCheck verifies a recovered store against what was attempted: every
// acked message is present byte for byte at its offset; an indeterminate
// one is either absent (past the recovered end) or identical; every record
// in the log is one that was attempted; queue offsets are dense per queue.
// It returns the surviving messages (all durable now: recovery synced them).
func plCheck(t *testing.T, s *Store, msgs []plMsg, what string) []plMsg {
	t.Helper()
	byOff := map[int64]int{}
	end := s.log.WrotePosition()
	for i, m := range msgs {
		byOff[m.off] = i
		got, err := s.ReadAt(m.off)
		if m.status == plAcked {
			require.NoError(t, err, "%s: acked message at %d lost", what, m.off)
			require.Less(t, m.off+int64(m.size)-1, end)
		} else if err != nil {
			require.ErrorIs(t, err, ErrNotFound, "%s: indeterminate message at %d", what, m.off)
			require.GreaterOrEqual(t, m.off, end, "%s: a hole below the end at %d", what, m.off)
			continue
		}
		require.True(t, bytes.Equal(m.body, got.Body), "%s: body at %d changed", what, m.off)
		require.EqualValues(t, m.queue, got.QueueID, "%s: at %d", what, m.off)
		require.Equal(t, m.qoff, got.QueueOffset, "%s: at %d", what, m.off)
		byID, err := s.MessageByID(message.ID(m.off))
		require.NoError(t, err)
		require.True(t, bytes.Equal(m.body, byID.Body))
	}
	var kept []plMsg
	next := map[int32]int64{}
	_, err := s.log.Scan(s.log.MinOffset(), end, true, func(r commitlog.Record) error {
		if err := s.checkPayload(r); err != nil {
			return err
		}
		v := viewOf(r)
		i, ok := byOff[r.Offset]
		if !ok {
			return fmt.Errorf("%s: unexpected record at %d (never attempted)", what, r.Offset)
		}
		m := msgs[i]
		if !bytes.Equal(v.Body(), m.body) || v.QueueID() != int32(m.queue) || v.QueueOffset() != m.qoff {
			return fmt.Errorf("%s: record at %d is not the one written there", what, r.Offset)
		}
		if v.QueueOffset() != next[v.QueueID()] {
			return fmt.Errorf("%s: queue %d offset %d, want %d (not dense)", what, v.QueueID(), v.QueueOffset(), next[v.QueueID()])
		}
		next[v.QueueID()]++
		m.status = plAcked
		kept = append(kept, m)
		return nil
	})
	require.NoError(t, err)
	checkQueueEnds(t, s, "pl", 4, next, what)
	return kept
}

// checkQueueEnds asserts that the ConsumeQueues rebuilt at Open end where
// the CommitLog says (P5): MaxOffset of each queue is its message count.
func checkQueueEnds(t *testing.T, s *Store, topic string, queues int, counts map[int32]int64, what string) {
	t.Helper()
	for q := range queues {
		got, err := s.MaxOffset(topic, q)
		if err != nil && counts[int32(q)] == 0 {
			continue // a queue that never got a message may not exist
		}
		require.NoError(t, err, "%s: queue %d", what, q)
		require.Equal(t, counts[int32(q)], got, "%s: ConsumeQueue %d ends at %d, the CommitLog holds %d messages", what, q, got, counts[int32(q)])
	}
}

type plStats struct {
	images, acked, indeterminate, indetPresent, dropped, truncatedImages int
	truncated, maxTruncated                                              int64
	batches                                                              int
}

// TestPowerLossSyncFlush is S4: random concurrent FlushSync workloads
// crashed at a random instant (while senders are mid-Put), recovered, then
// appended to and crashed again.
func TestPowerLossSyncFlush(t *testing.T) {
	seed := plSeedValue(t)
	images := *plImages
	if testing.Short() {
		images = min(images, 40)
	}
	var st plStats
	for i := range images {
		rng := rand.New(rand.NewPCG(seed, uint64(i)))
		plImage(t, rng, fmt.Sprintf("seed %d image %d", seed, i), &st)
		if t.Failed() {
			return
		}
	}
	t.Logf("%d images (x2 crashes): %d acked, 0 lost, %d indeterminate (%d present), %d batches; "+
		"torn tails truncated in %d recoveries (mean %d, max %d bytes); %d records dropped after a hole (all unacked)",
		st.images, st.acked, st.indeterminate, st.indetPresent, st.batches, st.truncatedImages,
		st.truncated/int64(max(1, st.truncatedImages)), st.maxTruncated, st.dropped)
}

func plImage(t *testing.T, rng *rand.Rand, what string, st *plStats) {
	t.Helper()
	ctx := context.Background()
	seg := []int64{4 << 10, 8 << 10, 16 << 10}[rng.IntN(3)]
	maxBody := int(seg / 4)
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	ffs := vfs.NewFaulty(vfs.NewMem())
	s, err := openFS(ffs, plDir, plOptions(clk, seg))
	require.NoError(t, err, what)
	if rng.IntN(2) == 0 {
		// Slow syncs: more appended-but-unsynced data at the crash.
		ffs.SetInjector(func(op vfs.Op, path string) error {
			if op == vfs.OpMapSync && strings.Contains(path, "/commitlog/") {
				for range 50 {
					runtime.Gosched()
				}
			}
			return nil
		})
	}

	var (
		mu        sync.Mutex
		crashed   bool
		msgs      []plMsg
		acks      int
		done      int
		crashNow  = make(chan struct{})
		stop      = make(chan struct{})
		signalled bool
	)
	target := 50 + rng.IntN(451)
	senders := 1 + rng.IntN(4)
	var wg sync.WaitGroup
	for g := range senders {
		srng := rand.New(rand.NewPCG(rng.Uint64(), uint64(g)))
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				q := srng.IntN(4)
				var res []PutResult
				var bodies [][]byte
				var err error
				if srng.IntN(10) == 0 {
					batch := make([]*Message, 2+srng.IntN(3))
					for j := range batch {
						batch[j] = plMessage(srng, maxBody/len(batch))
						bodies = append(bodies, batch[j].Body)
					}
					res, err = s.PutBatch(ctx, batch, q)
				} else {
					m := plMessage(srng, maxBody)
					var r PutResult
					r, err = s.Put(ctx, m, q)
					res, bodies = []PutResult{r}, [][]byte{m.Body}
				}
				mu.Lock()
				status := plAcked
				switch {
				case err == nil && crashed:
					status = plIndeterminate // its sync may have completed after the snapshot
				case errors.Is(err, ErrFlushTimeout):
					status = plIndeterminate
				case err != nil:
					if !signalled { // let the test go on to report it
						signalled = true
						close(crashNow)
					}
					mu.Unlock()
					t.Errorf("%s: unexpected Put error: %v", what, err)
					return
				}
				for j, r := range res {
					msgs = append(msgs, plMsg{off: r.Offset, size: r.Size, queue: q, qoff: r.QueueOffset, body: bodies[j], status: status})
				}
				if len(res) > 1 {
					st.batches++
				}
				if status == plAcked {
					acks += len(res)
				}
				if done++; done%40 == 0 {
					// A checkpoint, and a timeout for whoever is waiting.
					clk.Advance(time.Second)
				}
				if acks >= target && !signalled {
					signalled = true
					close(crashNow)
				}
				mu.Unlock()
			}
		})
	}
	<-crashNow
	mu.Lock()
	crashed = true
	mu.Unlock()
	p := rng.Float64()
	img := ffs.Crash(rng, p)
	close(stop)
	wg.Wait()
	require.NoError(t, s.Close(), what)
	what = fmt.Sprintf("%s (seg %d, %d senders, p %.2f)", what, seg, senders, p)

	// Recover the image, wrapped again so that it can crash a second time.
	ffs2 := vfs.NewFaulty(img)
	clk2 := clock.NewFake(time.Unix(1_800_000_000, 0))
	s2, err := openFS(ffs2, plDir, plOptions(clk2, seg))
	require.NoError(t, err, what)
	rep := s2.Recovery()
	require.False(t, rep.CleanShutdown, what)
	kept := plCheck(t, s2, msgs, what+": first recovery")
	st.images++
	for _, m := range msgs {
		if m.status == plAcked {
			st.acked++
		} else {
			st.indeterminate++
		}
	}
	st.indetPresent += len(kept) - (len(msgs) - countIndeterminate(msgs))
	st.dropped += rep.DroppedRecords
	if rep.TruncatedBytes > 0 {
		st.truncatedImages++
		st.truncated += rep.TruncatedBytes
		st.maxTruncated = max(st.maxTruncated, rep.TruncatedBytes)
	}

	// New appends after recovery survive a second crash.
	more := 10 + rng.IntN(40)
	for range more {
		q := rng.IntN(4)
		m := plMessage(rng, maxBody)
		r, err := s2.Put(ctx, m, q)
		require.NoError(t, err, what)
		kept = append(kept, plMsg{off: r.Offset, size: r.Size, queue: q, qoff: r.QueueOffset, body: m.Body, status: plAcked})
	}
	st.acked += more
	p2 := rng.Float64()
	img2 := ffs2.Crash(rng, p2)
	require.NoError(t, s2.Close(), what)
	s3, err := openFS(img2, plDir, plOptions(clock.NewFake(time.Unix(1_900_000_000, 0)), seg))
	require.NoError(t, err, what)
	defer s3.Close()
	final := plCheck(t, s3, kept, fmt.Sprintf("%s: second recovery (p %.2f)", what, p2))
	require.Len(t, final, len(kept), "%s: everything durable before the second crash survives it", what)
}

func countIndeterminate(msgs []plMsg) int {
	n := 0
	for _, m := range msgs {
		if m.status != plAcked {
			n++
		}
	}
	return n
}

// TestSyncFailureFailsEveryWaiter is S19: a sync fails with EIO while 64
// Puts wait in one group commit.
func TestSyncFailureFailsEveryWaiter(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	ffs := vfs.NewFaulty(vfs.NewMem())
	opts := plOptions(clk, 64<<10)
	opts.SyncFlushTimeout = time.Hour // the fake clock is never advanced
	s, err := openFS(ffs, plDir, opts)
	require.NoError(t, err)
	defer s.Close()
	rng := rand.New(rand.NewPCG(19, 19))

	var acked []plMsg
	for range 20 {
		m := plMessage(rng, 2000)
		r, err := s.Put(ctx, m, 0)
		require.NoError(t, err)
		acked = append(acked, plMsg{off: r.Offset, size: r.Size, queue: 0, qoff: r.QueueOffset, body: m.Body})
	}
	flushed := s.log.FlushedPosition()

	injected := fmt.Errorf("injected: %w", syscall.EIO)
	release := make(chan struct{})
	// Deferred after s.Close, so run before it: a failing check below must
	// not leave the sync blocked and Close waiting for it forever.
	releaseSync := sync.OnceFunc(func() { close(release) })
	defer releaseSync()
	var syncs atomic.Int32
	ffs.SetInjector(func(op vfs.Op, path string) error {
		if op != vfs.OpMapSync || !strings.Contains(path, "/commitlog/") {
			return nil
		}
		syncs.Add(1)
		<-release
		return injected
	})
	// Background loops arm their timers on their own schedule: count from
	// a settled store, and accept a timer armed meanwhile (a sender that is
	// not waiting yet at the release fails all the same: the log is fenced).
	require.NoError(t, s.Settle(ctx))
	baseline := clk.Waiters()
	const waiters = 64
	type outcome struct {
		res  PutResult
		body []byte
		err  error
	}
	out := make(chan outcome, waiters)
	for g := range waiters {
		m := plMessage(rand.New(rand.NewPCG(20, uint64(g))), 500)
		go func() {
			r, err := s.Put(ctx, m, 1)
			out <- outcome{r, m.Body, err}
		}()
	}
	// Every sender has appended and armed its flush timer, and the group
	// commit's sync has reached the injector (a sender can arm its timer
	// before the flusher gets there): all 64 wait on that one sync.
	waitFor(t, "64 waiting senders and a sync", func() bool {
		return clk.Waiters() >= baseline+waiters && syncs.Load() >= 1
	})
	require.EqualValues(t, 1, syncs.Load(), "one sync in flight for all of them")
	releaseSync()
	var failed []plMsg
	for range waiters {
		o := <-out
		require.Error(t, o.err, "a Put whose sync failed was acknowledged")
		require.True(t, errors.Is(o.err, syscall.EIO) || errors.Is(o.err, ErrFenced), "%v", o.err)
		require.ErrorIs(t, o.err, ErrFenced)
		failed = append(failed, plMsg{off: o.res.Offset, size: o.res.Size, queue: 1, qoff: o.res.QueueOffset, body: o.body, status: plIndeterminate})
	}
	require.Equal(t, flushed, s.log.FlushedPosition(), "the flushed position did not advance")
	require.ErrorIs(t, s.log.Fenced(), ErrFenced)

	// The failure is sticky: no retry, even once the disk is healthy.
	ffs.SetInjector(nil)
	_, err = s.Put(ctx, plMessage(rng, 100), 1)
	require.ErrorIs(t, err, ErrFenced)
	_, err = s.PutBatch(ctx, []*Message{plMessage(rng, 100)}, 1)
	require.ErrorIs(t, err, ErrFenced)
	require.Equal(t, flushed, s.log.FlushedPosition())
	for _, m := range acked {
		got, err := s.ReadAt(m.off)
		require.NoError(t, err, "reads of durable data keep working")
		require.Equal(t, m.body, got.Body)
	}

	// Power loss now keeps only what was synced: every acked message, and
	// none of the failed ones.
	img := ffs.Crash(rng, 0)
	// Close says the store did not close cleanly, and leaves the abort
	// marker for the next Open.
	err = s.Close()
	require.ErrorIs(t, err, ErrFenced, "Close of a fenced store")
	require.ErrorIs(t, err, syscall.EIO)
	_, _, err = ffs.Stat(plDir + "/" + abortName)
	require.NoError(t, err, "the abort marker stays")
	s2, err := openFS(img, plDir, plOptions(clk, 64<<10))
	require.NoError(t, err)
	defer s2.Close()
	plCheck(t, s2, append(acked, failed...), "after the sync failure")
	for _, m := range failed {
		_, err := s2.ReadAt(m.off)
		require.ErrorIs(t, err, ErrNotFound, "a failed Put's record survived a crash that kept only synced data")
	}
	r, err := s2.Put(ctx, plMessage(rng, 100), 1)
	require.NoError(t, err, "the reopened store accepts writes")
	require.EqualValues(t, 0, r.QueueOffset, "queue 1 holds only failed (lost) messages")
	t.Logf("waiters failed %d/%d, false acks 0, syncs attempted 1", len(failed), waiters)
}

// TestCheckpointMissingOrDamaged is S8 at the store level: without a
// usable checkpoint Open rescans and finds the same content; a torn last
// record after a clean close is still truncated, whether or not the
// checkpoint (which says everything was flushed) is there.
func TestCheckpointMissingOrDamaged(t *testing.T) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(8, 8))
	build := func(t *testing.T) (*vfs.MemFS, []plMsg) {
		fs := vfs.NewMem()
		s, err := openFS(fs, plDir, plOptions(nil, 8<<10))
		require.NoError(t, err)
		var msgs []plMsg
		for i := range 60 {
			m := plMessage(rng, 1000)
			r, err := s.Put(ctx, m, i%3)
			require.NoError(t, err)
			msgs = append(msgs, plMsg{off: r.Offset, size: r.Size, queue: i % 3, qoff: r.QueueOffset, body: m.Body})
		}
		require.NoError(t, s.Close())
		return fs, msgs
	}
	cp := plDir + "/" + checkpointName
	cases := map[string]func(t *testing.T, fs *vfs.MemFS){
		"intact":  func(t *testing.T, fs *vfs.MemFS) {},
		"missing": func(t *testing.T, fs *vfs.MemFS) { require.NoError(t, fs.Remove(cp)) },
		"garbage": func(t *testing.T, fs *vfs.MemFS) { plWrite(t, fs, cp, []byte("not a checkpoint at all, no")) },
		"empty":   func(t *testing.T, fs *vfs.MemFS) { plWrite(t, fs, cp, nil) },
		"bad-crc": func(t *testing.T, fs *vfs.MemFS) {
			b, err := vfs.ReadFile(fs, cp)
			require.NoError(t, err)
			b[9] ^= 1
			plWrite(t, fs, cp, b)
		},
	}
	for name, damage := range cases {
		for _, torn := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/torn=%v", name, torn), func(t *testing.T) {
				fs, msgs := build(t)
				damage(t, fs)
				if torn {
					// Tear the last record: cut its segment file inside it.
					last := msgs[len(msgs)-1]
					segStart := last.off / (8 << 10) * (8 << 10)
					f, err := fs.OpenFile(fmt.Sprintf("%s/commitlog/%020d", plDir, segStart), os.O_RDWR, 0)
					require.NoError(t, err)
					require.NoError(t, f.Truncate(last.off-segStart+int64(last.size)/2))
					require.NoError(t, f.Close())
				}
				s, err := openFS(fs, plDir, plOptions(nil, 8<<10))
				require.NoError(t, err)
				defer s.Close()
				rep := s.Recovery()
				require.Equal(t, name == "intact", rep.CheckpointFound)
				require.True(t, rep.CleanShutdown)
				want := msgs
				if torn {
					want = msgs[:len(msgs)-1]
					require.Positive(t, rep.TruncatedBytes)
					_, err := s.ReadAt(msgs[len(msgs)-1].off)
					require.ErrorIs(t, err, ErrNotFound)
				}
				require.Len(t, plCheck(t, s, want, name), len(want))
				wantEnd := msgs[len(msgs)-1].off // the torn record's start (maybe a segment start, past a blank)
				if !torn {
					wantEnd += int64(msgs[len(msgs)-1].size)
				}
				require.Equal(t, wantEnd, rep.CommitLogEnd)
			})
		}
	}
}

func plWrite(t *testing.T, fs vfs.FS, path string, b []byte) {
	t.Helper()
	f, err := fs.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	require.NoError(t, err)
	_, err = f.WriteAt(b, 0)
	require.NoError(t, err)
	require.NoError(t, f.Close())
}
