//go:build linux

package mqlite

// kill -9 tests (reliability plan S2, S3): the test binary re-runs itself as
// a child process (TestCrashChild) that writes to a store on disk and
// prints one line per returned Put; the parent SIGKILLs it, reopens the
// store in-process and checks every acknowledged message, many times over
// on the same directory.

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqlite/mqlite/commitlog"
)

var (
	crashSeed = flag.Uint64("crash.seed", 0, "seed for the kill -9 tests (0: time-based)")
	// Each cycle starts a child test binary and then checks every message
	// acked so far: the defaults keep go test ./... short; CI runs more
	// (.ci/run: -crash.cycles=50 -crash.async-cycles=20).
	crashCycles      = flag.Int("crash.cycles", 12, "kill -9 cycles of TestKill9SyncFlush")
	crashAsyncCycles = flag.Int("crash.async-cycles", 6, "kill -9 cycles of TestKill9AsyncFlush")
)

// Environment of the child process.
const (
	crashEnvChild = "MQLITE_CRASH_CHILD" // "1" in the child
	crashEnvDir   = "MQLITE_CRASH_DIR"
	crashEnvMode  = "MQLITE_CRASH_MODE" // "sync" or "async"
	crashEnvSeed  = "MQLITE_CRASH_SEED"
	crashEnvSeg   = "MQLITE_CRASH_SEGMENT"

	crashSenders = 4
	crashQueues  = 4
	crashTopic   = "crash"
)

func crashOptions(mode string, seg int64) *Options {
	o := &Options{Flush: FlushSync, SegmentSize: seg, ConsumeQueueEntries: 4096, IndexSlots: 1024, IndexEntries: 8192}
	if mode == "async" {
		// No background flush at all: what survives kill -9 is what the
		// page cache holds.
		o.Flush, o.FlushInterval, o.FlushThoroughInterval, o.FlushLeastPages = FlushAsync, time.Hour, time.Hour, 1<<20
	}
	return o
}

// crashKey is a message's key, derived from its body so the parent can
// look it up.
func crashKey(body []byte) string {
	return fmt.Sprintf("c%08x-%d", crc32.ChecksumIEEE(body), len(body))
}

// crashBody is the body of a sender's seq-th message.
func crashBody(rng *rand.Rand, seg int64) []byte {
	n := 1 + rng.IntN(1500)
	if rng.IntN(20) == 0 {
		n = 1 + rng.IntN(int(seg/2))
	}
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

// TestCrashChild is the child process's workload; it does nothing in a
// normal run.
func TestCrashChild(t *testing.T) {
	if os.Getenv(crashEnvChild) != "1" {
		t.Skip("helper process of the kill -9 tests")
	}
	dir, mode := os.Getenv(crashEnvDir), os.Getenv(crashEnvMode)
	seed, _ := strconv.ParseUint(os.Getenv(crashEnvSeed), 10, 64)
	seg, _ := strconv.ParseInt(os.Getenv(crashEnvSeg), 10, 64)
	var outMu sync.Mutex
	emit := func(format string, args ...any) {
		line := fmt.Sprintf(format+"\n", args...)
		outMu.Lock()
		os.Stdout.WriteString(line) // one write per line: atomic on a pipe
		outMu.Unlock()
	}
	emit("opening")
	s, err := Open(dir, crashOptions(mode, seg))
	if err != nil {
		emit("openfail %v", strings.ReplaceAll(err.Error(), "\n", " "))
		t.Fatal(err)
	}
	rep := s.Recovery()
	emit("opened %d %d %d", rep.CommitLogEnd, rep.TruncatedBytes, rep.DroppedRecords)
	ctx := context.Background()
	var wg sync.WaitGroup
	for g := range crashSenders {
		rng := rand.New(rand.NewPCG(seed, uint64(g)))
		wg.Go(func() {
			for range 5000 { // the parent kills long before
				q := rng.IntN(crashQueues)
				m := &Message{Topic: crashTopic, Body: crashBody(rng, seg)}
				m.Keys = []string{crashKey(m.Body)}
				if rng.IntN(4) == 0 {
					m.Keys = append(m.Keys, fmt.Sprintf("g%d", g))
				}
				r, err := s.Put(ctx, m, q)
				status := "ok"
				switch {
				case errors.Is(err, ErrFlushTimeout):
					status = "ind"
				case err != nil:
					emit("err %v", err)
					return
				}
				emit("ack %s %d %d %08x %d %s", r.MsgID(), q, r.QueueOffset, crc32.ChecksumIEEE(m.Body), len(m.Body), status)
			}
		})
	}
	wg.Wait()
	if err := s.Close(); err != nil {
		emit("err close: %v", err)
	}
}

// crashAck is one message the child reported.
type crashAck struct {
	id    string
	off   int64
	queue int
	qoff  int64
	crc   uint32
	size  int
	ind   bool // returned ErrFlushTimeout: may or may not be present
}

func parseAck(line string) (crashAck, error) {
	f := strings.Fields(line)
	if len(f) != 7 {
		return crashAck{}, fmt.Errorf("bad ack line %q", line)
	}
	a := crashAck{id: f[1], ind: f[6] == "ind"}
	var err error
	var crc uint64
	a.off, err = strconv.ParseInt(f[1], 16, 64)
	if err == nil {
		a.queue, err = strconv.Atoi(f[2])
	}
	if err == nil {
		a.qoff, err = strconv.ParseInt(f[3], 10, 64)
	}
	if err == nil {
		crc, err = strconv.ParseUint(f[4], 16, 32)
		a.crc = uint32(crc)
	}
	if err == nil {
		a.size, err = strconv.Atoi(f[5])
	}
	return a, err
}

// crashRun is one child process: what it printed and how it ended.
type crashRun struct {
	acks     []crashAck
	opened   bool
	killedIn string // "open", "puts" or "" (not killed)
	stderr   string
}

// runCrashChild starts the child, SIGKILLs it right after it starts to open
// the store (killOpen) or after it has reported killAfter acks, and returns
// everything it printed before dying.
func runCrashChild(t *testing.T, dir, mode string, seg int64, seed uint64, killOpen bool, killAfter int) crashRun {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1", "-test.timeout=5m")
	cmd.Env = append(os.Environ(), crashEnvChild+"=1", crashEnvDir+"="+dir, crashEnvMode+"="+mode,
		crashEnvSeed+"="+strconv.FormatUint(seed, 10), crashEnvSeg+"="+strconv.FormatInt(seg, 10))
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	var run crashRun
	kill := func(where string) {
		if run.killedIn == "" {
			if err := cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) { // SIGKILL
				t.Fatal(err)
			}
			run.killedIn = where
		}
	}
	r := bufio.NewReader(stdout)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			break // EOF; a partial last line is discarded
		}
		line = strings.TrimSuffix(line, "\n")
		switch word, _, _ := strings.Cut(line, " "); word {
		case "opening":
			if killOpen {
				kill("open")
			}
		case "opened":
			run.opened = true
		case "ack":
			a, err := parseAck(line)
			require.NoError(t, err)
			run.acks = append(run.acks, a)
			if len(run.acks) >= killAfter {
				kill("puts")
			}
		case "openfail", "err":
			t.Errorf("child: %s", line)
		}
	}
	err = cmd.Wait()
	run.stderr = stderr.String()
	if run.killedIn != "" {
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			t.Errorf("child was not killed by SIGKILL: %v\n%s", err, run.stderr)
		}
	} else if err != nil {
		t.Errorf("child failed: %v\n%s", err, run.stderr)
	}
	return run
}

type crashStats struct {
	cycles, openKills, inOpen, acked, indPresent, indAbsent, tornRecoveries int
	tornBytes                                                               int64
	recoveries                                                              []time.Duration
}

// crashVerify reopens the store in-process and checks every acked message
// (all cycles so far) and the indeterminate ones of the last run.
func crashVerify(t *testing.T, dir, mode string, seg int64, acked map[int64]crashAck, ind []crashAck, st *crashStats, what string) {
	t.Helper()
	start := time.Now()
	s, err := Open(dir, crashOptions(mode, seg))
	require.NoError(t, err, "%s: reopen after kill -9", what)
	defer func() { require.NoError(t, s.Close(), what) }()
	st.recoveries = append(st.recoveries, time.Since(start))
	rep := s.Recovery()
	if rep.TruncatedBytes > 0 {
		st.tornRecoveries++
		st.tornBytes += rep.TruncatedBytes
	}
	check := func(a crashAck) error {
		m, err := s.MessageByID(a.id)
		if err != nil {
			return err
		}
		if len(m.Body) != a.size || crc32.ChecksumIEEE(m.Body) != a.crc || m.QueueID != a.queue || m.QueueOffset != a.qoff || m.Topic != crashTopic {
			return fmt.Errorf("message %s changed: queue %d offset %d, %d bytes", a.id, m.QueueID, m.QueueOffset, len(m.Body))
		}
		// Reachable through its queue and by key too.
		for q, err := range s.Messages(crashTopic, a.queue, a.qoff) {
			if err != nil {
				return err
			}
			if q.MsgID != a.id {
				return fmt.Errorf("queue %d offset %d holds %s, not %s", a.queue, a.qoff, q.MsgID, a.id)
			}
			break
		}
		hits, err := s.MessagesByKey(crashTopic, crashKey(m.Body), m.StoreTimestamp, m.StoreTimestamp, MaxKeyResults)
		if err != nil {
			return err
		}
		if !slices.ContainsFunc(hits, func(h *MessageExt) bool { return h.MsgID == a.id }) {
			return fmt.Errorf("message %s not found by its key", a.id)
		}
		return nil
	}
	for _, a := range acked {
		require.NoError(t, check(a), "%s: acked message %s (queue %d offset %d)", what, a.id, a.queue, a.qoff)
	}
	for _, a := range ind {
		if err := check(a); err == nil {
			st.indPresent++
		} else {
			require.ErrorIs(t, err, ErrNotFound, "%s: indeterminate message %s", what, a.id)
			st.indAbsent++
		}
	}
	// Every record is intact and queue offsets are dense.
	next := map[int32]int64{}
	_, err = s.log.Scan(s.log.MinOffset(), s.log.WrotePosition(), true, func(r commitlog.Record) error {
		if err := s.checkPayload(r); err != nil {
			return err
		}
		v := viewOf(r)
		if v.QueueOffset() != next[v.QueueID()] {
			return fmt.Errorf("queue %d: offset %d at %d, want %d", v.QueueID(), v.QueueOffset(), r.Offset, next[v.QueueID()])
		}
		next[v.QueueID()]++
		return nil
	})
	require.NoError(t, err, what)
	checkQueueEnds(t, s, crashTopic, crashQueues, next, what)
}

func crashSeedValue(t *testing.T) uint64 {
	seed := *crashSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (rerun with -crash.seed=%d)", seed, seed)
	return seed
}

func runKill9(t *testing.T, mode string, cycles int) {
	if cycles <= 0 {
		t.Skip("no cycles")
	}
	seed := crashSeedValue(t)
	rng := rand.New(rand.NewPCG(seed, 0))
	seg := int64(16<<10) << rng.IntN(3) // 16, 32 or 64 KiB: frequent rolls
	dir := filepath.Join(t.TempDir(), "store")
	t.Cleanup(func() {
		// Keep the failing store for inspection (go test -artifacts).
		if t.Failed() {
			if err := os.CopyFS(filepath.Join(t.ArtifactDir(), "store"), os.DirFS(dir)); err != nil {
				t.Logf("saving the store: %v", err)
			}
		}
	})
	// About one cycle in ten is killed while the child opens the store; the
	// cycle before it is not verified, so that the child's Open is a
	// recovery of a crashed store.
	openKill := make([]bool, cycles)
	for i := 1; i < cycles; i++ {
		openKill[i] = rng.IntN(10) == 0
	}
	acked := map[int64]crashAck{}
	var st crashStats
	var pendingInd []crashAck
	for i := range cycles {
		what := fmt.Sprintf("seed %d cycle %d (%s, segment %d)", seed, i, mode, seg)
		killAfter := 1 + rng.IntN(200)
		run := runCrashChild(t, dir, mode, seg, rng.Uint64(), openKill[i], killAfter)
		if t.Failed() {
			t.Fatalf("%s: child stderr:\n%s", what, run.stderr)
		}
		st.cycles++
		if run.killedIn == "open" {
			st.openKills++
			if !run.opened {
				st.inOpen++ // the kill landed before Open returned
			}
		}
		for _, a := range run.acks {
			if a.ind {
				pendingInd = append(pendingInd, a)
				continue
			}
			_, dup := acked[a.off]
			require.False(t, dup, "%s: offset %s acknowledged twice", what, a.id)
			acked[a.off] = a
			st.acked++
		}
		if i+1 < cycles && openKill[i+1] {
			continue
		}
		crashVerify(t, dir, mode, seg, acked, pendingInd, &st, what)
		// Indeterminate messages now present are durable (recovery synced
		// them); absent ones may have their offset reused.
		pendingInd = nil
	}
	slices.Sort(st.recoveries)
	t.Logf("%s: %d cycles (%d killed at Open, %d of them before it returned), %d acked, 0 lost, 0 corrupt-delivered, indeterminate present/absent = %d/%d, "+
		"torn tails truncated = %d (%d bytes), recovery p50 %v p99 %v",
		mode, st.cycles, st.openKills, st.inOpen, st.acked, st.indPresent, st.indAbsent, st.tornRecoveries, st.tornBytes,
		st.recoveries[len(st.recoveries)/2], st.recoveries[len(st.recoveries)*99/100])
}

// TestKill9SyncFlush is S2: with FlushSync an acked message survives kill -9.
func TestKill9SyncFlush(t *testing.T) {
	cycles := *crashCycles
	if testing.Short() {
		cycles = min(cycles, 10)
	}
	runKill9(t, "sync", cycles)
}

// TestKill9AsyncFlush is S3: with FlushAsync (and no background flush at
// all) an acked message survives kill -9, because it is in the page cache.
func TestKill9AsyncFlush(t *testing.T) {
	cycles := *crashAsyncCycles
	if testing.Short() {
		cycles = min(cycles, 5)
	}
	runKill9(t, "async", cycles)
}

// TestSegmentTruncatedUnderStore is S15 at the store level: a segment file
// truncated underneath the open store turns reads of it into ErrIO (the
// SIGBUS is caught), fences writes, and the process survives.
func TestSegmentTruncatedUnderStore(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	const seg = 64 << 10
	s, err := Open(dir, &Options{Flush: FlushSync, SegmentSize: seg, ConsumeQueueEntries: 4096, IndexSlots: 1024, IndexEntries: 8192})
	require.NoError(t, err)
	defer s.Close()
	ctx := context.Background()
	var res []PutResult
	for i := 0; s.log.WrotePosition() < 3*seg; i++ {
		r, err := s.Put(ctx, &Message{Topic: "t", Body: bytes.Repeat([]byte{byte(i)}, 1000)}, 0)
		require.NoError(t, err)
		res = append(res, r)
	}
	require.NoError(t, os.Truncate(filepath.Join(dir, "commitlog", fmt.Sprintf("%020d", 0)), 0))
	_, err = s.ReadAt(res[0].Offset)
	require.ErrorIs(t, err, ErrIO)
	_, err = s.MessageByID(res[1].MsgID())
	require.ErrorIs(t, err, ErrIO)
	_, err = s.Put(ctx, &Message{Topic: "t", Body: []byte("after")}, 0)
	require.ErrorIs(t, err, ErrFenced)
	last := res[len(res)-1]
	got, err := s.ReadAt(last.Offset)
	require.NoError(t, err, "other segments still read")
	require.Equal(t, bytes.Repeat([]byte{byte(len(res) - 1)}, 1000), got.Body)
}
