package mqlite

// Helpers shared by the root package's tests: stores in every mode,
// message bodies, reads that wait, goroutine counts, and fault helpers.

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqlite/mqlite/clock"
	"github.com/mqlite/mqlite/delay"
	"github.com/mqlite/mqlite/vfs"
)

// awaitDone waits for done; after a minute (a bound on a failure, not
// synchronisation) it fails the test with what(), called with mu held.
func awaitDone(t *testing.T, done <-chan struct{}, mu *sync.Mutex, what func() string) {
	t.Helper()
	select {
	case <-done:
	case <-time.After(time.Minute):
		mu.Lock()
		t.Fatal(what())
	}
}

// goroutinesBy counts the goroutines that fn started (whether or not they
// have run yet).
func goroutinesBy(fn string) int {
	count := 0
	for _, g := range goroutineStacks() {
		if strings.Contains(g, "\ncreated by "+fn+" in goroutine ") {
			count++
		}
	}
	return count
}

var t0 = time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)

// The delay services' progress files, as the config tests name them.
const (
	delayFile    = delay.ProgressFile
	delayMagic   = delay.ProgressMagic
	delayVersion = delay.ProgressVersion
	timerFile    = delay.TimerFile
	timerMagic   = delay.TimerMagic
	timerVersion = delay.TimerVersion
)

// readN blocks until queue q of topic holds n messages from offset 0 and
// returns them.
func readN(t *testing.T, s *Store, topic string, q int, n int) []*MessageExt {
	t.Helper()
	return readRange(t, s, topic, q, 0, n)
}

// readRange blocks until queue q of topic holds messages [from, to) and
// returns them.
func readRange(t testing.TB, s *Store, topic string, q int, from, to int) []*MessageExt {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out []*MessageExt
	for from+len(out) < to {
		ms, err := s.ReadQueue(ctx, topic, q, int64(from+len(out)), to-from-len(out))
		require.NoError(t, err, "waiting for message %d of [%d, %d)", from+len(out), from, to)
		out = append(out, ms...)
	}
	return out
}

func delayStore(t *testing.T, fs vfs.FS, clk *clock.Fake) *Store {
	t.Helper()
	s, err := openFS(fs, "/d", smallFiles(&Options{Clock: clk, SegmentSize: 1 << 20}))
	require.NoError(t, err)
	return s
}

// sent is what a test remembers of each Put.
type sent struct {
	topic string
	queue int
	qoff  int64
	off   int64
	body  string
	key   string
}

func memStore(t *testing.T, o Options) *Store {
	t.Helper()
	o.InMemory = true
	s, err := Open("/p", &o)
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	return s
}

func newProducer(t *testing.T, s *Store, o ProducerOptions) *Producer {
	t.Helper()
	p, err := s.NewProducer(o)
	require.NoError(t, err)
	t.Cleanup(func() { p.Close() })
	return p
}

// mqliteGoroutines counts goroutines running mqlite code outside tests,
// giving goroutines that are returning (after signalling that they are
// done) a moment to go.
func mqliteGoroutines() int {
	n := countMqliteGoroutines()
	for i := 0; n > 0 && i < 10_000; i++ {
		runtime.Gosched()
		n = countMqliteGoroutines()
	}
	return n
}

// goroutineStacks is every goroutine's stack trace, one string each.
func goroutineStacks() []string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return strings.Split(string(buf[:n]), "\n\n")
		}
		buf = make([]byte, 2*len(buf))
	}
}

func bodies(ms []*MessageExt) []string {
	var out []string
	for _, m := range ms {
		out = append(out, string(m.Body))
	}
	return out
}

// pollCommit polls the first n messages of pc's queue 0 of topic (which
// holds them) and commits after them.
func pollCommit(t *testing.T, pc *PullConsumer, topic string, n int) {
	t.Helper()
	for got := 0; got < n; {
		ms, err := pc.Poll(context.Background(), n-got)
		require.NoError(t, err)
		got += len(ms)
	}
	require.NoError(t, pc.CommitOffset(topic, 0, int64(n)))
}

// flipLogBit flips one bit of the CommitLog of the store in dir (64 KiB
// segments) at global offset off, through a file handle of its own, and
// returns the byte as it was.
func flipLogBit(t *testing.T, dir string, off int64, bit uint) byte {
	t.Helper()
	const seg = 64 << 10
	f, err := os.OpenFile(filepath.Join(dir, "commitlog", fmt.Sprintf("%020d", off/seg*seg)), os.O_RDWR, 0)
	require.NoError(t, err)
	defer f.Close()
	var b [1]byte
	_, err = f.ReadAt(b[:], off%seg)
	require.NoError(t, err)
	was := b[0]
	b[0] ^= 1 << bit
	_, err = f.WriteAt(b[:], off%seg)
	require.NoError(t, err)
	return was
}

// waitFor spins until cond holds, failing after a generous real-time
// bound; it synchronises on state, not on elapsed time.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		runtime.Gosched()
	}
}

// mode is one configuration of the conformance suite.
type mode struct {
	name string
	opts Options
	fs   func(t *testing.T) (vfs.FS, string)
}

func onDisk(t *testing.T) (vfs.FS, string) { return vfs.OS, filepath.Join(t.TempDir(), "store") }

// The tiny modes have tiny index files too: on the in-memory file system
// every file is heap (see smallFiles). file-sync-default keeps every default.
var modes = []mode{
	{"mem-async-tiny", *smallFiles(&Options{Flush: FlushAsync, SegmentSize: 8 << 10}), inMem},
	{"mem-sync-tiny", *smallFiles(&Options{Flush: FlushSync, SegmentSize: 8 << 10}), inMem},
	{"file-async-tiny", *smallFiles(&Options{Flush: FlushAsync, SegmentSize: 16 << 10}), onDisk},
	{"file-sync-tiny", *smallFiles(&Options{Flush: FlushSync, SegmentSize: 16 << 10}), onDisk},
	{"file-sync-default", Options{Flush: FlushSync}, onDisk},
}

// smallFiles gives the file sizes o leaves at zero small values (1 MiB
// segments, 4,096-entry ConsumeQueue files, an IndexFile of 1,024 slots
// and 8,192 entries) and returns o. A test on the in-memory file system
// needs it unless it is about the default sizes: there every file is a heap
// slice of its full size (two 1 GiB segments, a 96 MiB IndexFile), copied
// whole by every crash image, and under -race the detector's shadow of that
// heap stays resident for the rest of the test binary.
func smallFiles(o *Options) *Options {
	if o.SegmentSize == 0 {
		o.SegmentSize = 1 << 20
	}
	if o.ConsumeQueueEntries == 0 {
		o.ConsumeQueueEntries = 4096
	}
	if o.IndexSlots == 0 && o.IndexEntries == 0 {
		o.IndexSlots, o.IndexEntries = 1024, 8192
	}
	return o
}

func openMode(t *testing.T, md mode, fs vfs.FS, dir string) *Store {
	t.Helper()
	o := md.opts
	s, err := openFS(fs, dir, &o)
	require.NoError(t, err)
	return s
}

func body(i int) []byte {
	return []byte(fmt.Sprintf("message-%06d-%s", i, bytes.Repeat([]byte{'x'}, i%300)))
}

func never(t *testing.T) TransactionChecker {
	return func(context.Context, *MessageExt) TxState {
		t.Error("unexpected check-back")
		return TxUnknown
	}
}

// flipLogByte flips a bit of the CommitLog byte at off (in 64 KiB
// segments) and checks that it was want.
func flipLogByte(t *testing.T, dir string, off int64, want byte) {
	t.Helper()
	require.Equal(t, want, flipLogBit(t, dir, off, 5))
}

func dedupStore(t *testing.T, fs vfs.FS, clk clock.Clock, o *Options) *Store {
	t.Helper()
	if o == nil {
		o = &Options{}
	}
	o.Clock = clk
	s, err := openFS(fs, "/store", smallFiles(o))
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	return s
}

// queueIDs returns the DedupIDs stored in every queue of topic, by count.
func queueIDs(t *testing.T, s *Store, topicName string) map[string]int {
	t.Helper()
	require.NoError(t, s.WaitVisible(context.Background()))
	n, err := s.queueCount(topicName, 0)
	require.NoError(t, err)
	ids := map[string]int{}
	for q := range n {
		for m, err := range s.Messages(topicName, q, 0) {
			require.NoError(t, err)
			ids[m.DedupID]++
		}
	}
	return ids
}

func dedupOf(t *testing.T, s *Store) DedupStats {
	t.Helper()
	st, err := s.Stats()
	require.NoError(t, err)
	return st.Dedup
}

// pollAll drains what a fresh pull consumer of group gets from topic now.
func pollAll(t *testing.T, s *Store, group, topicName string) []string {
	t.Helper()
	c, err := s.NewPullConsumer(group, ConsumerOptions{ConsumeFromWhere: ConsumeFromFirstOffset})
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, c.Subscribe(topicName, nil))
	var got []string
	// A poll may come back empty once while the consumer moves an offset
	// below a queue's retained start up to it: three empty polls in a
	// row, each after a Settle, end the drain.
	for empty := 0; empty < 3; {
		require.NoError(t, s.Settle(context.Background()))
		msgs, err := c.TryPoll(64)
		require.NoError(t, err)
		if len(msgs) == 0 {
			empty++
			continue
		}
		empty = 0
		for _, m := range msgs {
			got = append(got, string(m.Body))
		}
	}
	slices.Sort(got)
	require.NoError(t, c.Commit())
	return got
}

func putStrings(t *testing.T, s *Store, topicName string, bodies ...string) {
	t.Helper()
	for i, b := range bodies {
		_, err := s.Put(context.Background(), &Message{Topic: topicName, Body: []byte(b)}, i%2)
		require.NoError(t, err)
	}
	require.NoError(t, s.WaitVisible(context.Background()))
}

func hasOffsetOn(t *testing.T, s *Store, group, topicName string) bool {
	t.Helper()
	offs, err := s.ConsumerOffsets(group)
	require.NoError(t, err)
	for _, o := range offs {
		if o.Queue.Topic == topicName {
			return true
		}
	}
	return false
}

// recoveredEnd is the end of a queue (0 for one never written), as
// package delay reads it for its progress checks while Open runs.
func (s *Store) recoveredEnd(name string, id int) int64 {
	q, err := s.disp.cq.Queue(name, id, false)
	if err != nil || q == nil {
		return 0
	}
	return q.MaxOffset()
}
