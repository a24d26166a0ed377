package mqlite

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqlite/mqlite/clock"
	"github.com/mqlite/mqlite/delay"
	"github.com/mqlite/mqlite/topic"
	"github.com/mqlite/mqlite/vfs"
)

// TestDelayLevelsDeliverOnTime sends one message per level (and three at
// level 2, which keep their order), then moves the clock to each due time:
// every message lands exactly then, never before.
func TestDelayLevelsDeliverOnTime(t *testing.T) {
	clk := clock.NewFake(t0)
	s := delayStore(t, vfs.NewMem(), clk)
	defer s.Close()
	require.NoError(t, s.CreateTopic("d", TopicConfig{Queues: 1}))
	type want struct {
		body string
		due  time.Time
	}
	var wants []want
	send := func(level int, body string) {
		_, err := s.Put(context.Background(), &Message{Topic: "d", DelayLevel: level, Body: []byte(body)}, 0)
		require.NoError(t, err)
		wants = append(wants, want{body, t0.Add(DefaultDelayLevels[level-1])})
	}
	for level := len(DefaultDelayLevels); level >= 1; level-- {
		send(level, fmt.Sprintf("level-%d", level))
	}
	send(2, "level-2-b")
	send(2, "level-2-c")
	slices.SortStableFunc(wants, func(a, b want) int { return a.due.Compare(b.due) })

	got := 0
	for i := 0; i < len(wants); {
		due := wants[i].due
		j := i
		for j < len(wants) && wants[j].due.Equal(due) {
			j++
		}
		require.NoError(t, s.WaitVisible(context.Background()))
		max, err := s.MaxOffset("d", 0)
		require.NoError(t, err)
		require.Equal(t, int64(got), max, "nothing delivered before %s", due.Sub(t0))
		clk.Set(due)
		msgs := readN(t, s, "d", 0, j)
		for k := i; k < j; k++ {
			m := msgs[k]
			require.Equal(t, wants[k].body, string(m.Body))
			require.Equal(t, due, m.StoreTimestamp.UTC(), "%s delivered at its due time", m.Body)
			require.Zero(t, m.DelayLevel)
			require.NotContains(t, m.Properties, "REAL_TOPIC")
		}
		got, i = j, j
	}
}

// TestDelaysSurviveRestart delivers the first level, restarts, then the
// rest: each message exactly once.
func TestDelaysSurviveRestart(t *testing.T) {
	clk := clock.NewFake(t0)
	fs := vfs.NewMem()
	s := delayStore(t, fs, clk)
	require.NoError(t, s.CreateTopic("d", TopicConfig{Queues: 2}))
	for i, level := range []int{1, 3, 5, 1, 3, 5} {
		_, err := s.Put(context.Background(), &Message{Topic: "d", DelayLevel: level, Keys: []string{fmt.Sprint(i)}, Body: []byte(fmt.Sprint(i))}, i%2)
		require.NoError(t, err)
	}
	clk.Advance(time.Second)
	readN(t, s, "d", 0, 1)
	readN(t, s, "d", 1, 1)
	require.NoError(t, s.Close())

	s = delayStore(t, fs, clk)
	defer s.Close()
	clk.Advance(10 * time.Minute)
	seen := map[string]int{}
	for q := range 2 {
		for _, m := range readN(t, s, "d", q, 3) {
			seen[string(m.Body)]++
		}
	}
	require.NoError(t, s.WaitVisible(context.Background()))
	require.Equal(t, map[string]int{"0": 1, "1": 1, "2": 1, "3": 1, "4": 1, "5": 1}, seen)
	for q := range 2 {
		max, err := s.MaxOffset("d", q)
		require.NoError(t, err)
		require.Equal(t, int64(3), max, "no duplicates in queue %d", q)
	}
}

func TestBadDelaysAreRefused(t *testing.T) {
	clk := clock.NewFake(t0)
	s := delayStore(t, vfs.NewMem(), clk)
	defer s.Close()
	before := s.log.WrotePosition()
	for name, m := range map[string]*Message{
		"level past the table": {Topic: "d", DelayLevel: 19, Body: []byte("x")},
		"negative level":       {Topic: "d", DelayLevel: -3, Body: []byte("x")},
		"deliver-at too far":   {Topic: "d", DeliverAt: t0.Add(72*time.Hour + time.Second), Body: []byte("x")},
	} {
		_, err := s.Put(context.Background(), m, 0)
		require.ErrorIs(t, err, ErrInvalidDelay, name)
	}
	_, err := s.PutBatch(context.Background(), []*Message{{Topic: "d", DelayLevel: 1, Body: []byte("x")}}, 0)
	require.ErrorIs(t, err, ErrInvalidDelay)
	require.Equal(t, before, s.log.WrotePosition())
	_, err = Open("x", &Options{InMemory: true, DelayLevels: []time.Duration{time.Second, 0}})
	require.ErrorIs(t, err, ErrInvalidArgument)
}

// TestTimersFireOnTime spreads timers over a virtual day with millisecond
// deliver-at times, restarts halfway, and moves the clock to each due
// second: every timer is delivered once, within a second after its time.
func TestTimersFireOnTime(t *testing.T) {
	n := *timersCount
	if testing.Short() {
		n = min(n, 5_000)
	}
	clk := clock.NewFake(t0)
	fs := vfs.NewMem()
	s, err := openFS(fs, "/d", &Options{Clock: clk, SegmentSize: 8 << 20, ConsumeQueueEntries: 1 << 17, IndexSlots: 1 << 15, IndexEntries: 1 << 17})
	require.NoError(t, err)
	require.NoError(t, s.CreateTopic("tm", TopicConfig{Queues: 1}))
	rng := rand.New(rand.NewPCG(7, 7))
	at := map[string]time.Time{}
	var dues []time.Time
	p, err := s.NewProducer(ProducerOptions{})
	require.NoError(t, err)
	for i := range n {
		d := t0.Add(time.Duration(1+rng.Int64N(int64(24*time.Hour/time.Millisecond))) * time.Millisecond)
		body := fmt.Sprint(i)
		at[body] = d
		dues = append(dues, d)
		require.NoError(t, p.SendOneway(&Message{Topic: "tm", DeliverAt: d, Body: []byte(body)}))
	}
	slices.SortFunc(dues, func(a, b time.Time) int { return a.Compare(b) })
	delivered := 0
	restarted := false
	for i := 0; i < n; {
		sec := dues[i].Truncate(time.Second)
		if !dues[i].Equal(sec) {
			sec = sec.Add(time.Second)
		}
		j := i
		for j < n && !dues[j].After(sec) {
			j++
		}
		if !restarted && j > n/2 {
			restarted = true
			require.NoError(t, s.Close())
			s, err = openFS(fs, "/d", &Options{Clock: clk, SegmentSize: 8 << 20, ConsumeQueueEntries: 1 << 17, IndexSlots: 1 << 15, IndexEntries: 1 << 17})
			require.NoError(t, err)
		}
		clk.Set(sec)
		for _, m := range readRange(t, s, "tm", 0, delivered, j) {
			late := m.StoreTimestamp.Sub(at[string(m.Body)])
			require.True(t, late >= 0 && late < time.Second, "timer %s delivered %s after its time", m.Body, late)
		}
		delivered, i = j, j
	}
	require.NoError(t, s.WaitVisible(context.Background()))
	max, err := s.MaxOffset("tm", 0)
	require.NoError(t, err)
	require.Equal(t, int64(n), max, "each timer once")
	require.NoError(t, s.Close())
}

// TestDelayAcrossClockGoingBack (S34): a store reopened with a clock set
// back an hour delivers a delayed message no earlier than its due time.
func TestDelayAcrossClockGoingBack(t *testing.T) {
	fs := vfs.NewMem()
	clk := clock.NewFake(t0.Add(time.Hour))
	s := delayStore(t, fs, clk)
	require.NoError(t, s.CreateTopic("d", TopicConfig{Queues: 1}))
	_, err := s.Put(context.Background(), &Message{Topic: "d", DelayLevel: 3, Body: []byte("x")}, 0) // 10 s
	require.NoError(t, err)
	require.NoError(t, s.Close())

	back := clock.NewFake(t0) // an hour earlier
	s = delayStore(t, fs, back)
	defer s.Close()
	back.Set(t0.Add(time.Hour)) // the wall clock catches up: still 10 s early
	require.NoError(t, s.WaitVisible(context.Background()))
	n, err := s.MaxOffset("d", 0)
	require.NoError(t, err)
	require.Zero(t, n, "not before its due time")
	back.Set(t0.Add(time.Hour + 10*time.Second))
	m := readN(t, s, "d", 0, 1)[0]
	require.Equal(t, t0.Add(time.Hour+10*time.Second), m.StoreTimestamp.UTC())
}

// Opening a store creates no directory for a queue without messages: the
// delay levels' and the timer's queues appear with their first message,
// and reading an empty queue creates nothing either.
func TestOpenCreatesNoEmptyQueues(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	o := &Options{SegmentSize: 64 << 10, ConsumeQueueEntries: 64}
	queueDirs := func() []string {
		dirs, err := filepath.Glob(filepath.Join(dir, "consumequeue", "*", "*"))
		require.NoError(t, err)
		for i, d := range dirs {
			dirs[i], _ = filepath.Rel(filepath.Join(dir, "consumequeue"), d)
		}
		return dirs
	}
	s, err := Open(dir, o)
	require.NoError(t, err)
	require.NoError(t, s.CreateTopic("t", TopicConfig{Queues: 2}))
	max, err := s.MaxOffset("t", 1)
	require.NoError(t, err)
	require.Zero(t, max)
	require.Empty(t, queueDirs())
	require.NoError(t, s.Close())
	s, err = Open(dir, o)
	require.NoError(t, err)
	require.Empty(t, queueDirs(), "after a reopen too")

	ctx := context.Background()
	_, err = s.Put(ctx, &Message{Topic: "t", DelayLevel: 3, Body: []byte("level 3")}, 0)
	require.NoError(t, err)
	_, err = s.Put(ctx, &Message{Topic: "t", DeliverAt: time.Now().Add(time.Hour), Body: []byte("in an hour")}, 1)
	require.NoError(t, err)
	require.NoError(t, s.WaitVisible(ctx))
	want := []string{filepath.Join(topic.Schedule, "2"), filepath.Join(topic.Timer, "0")}
	require.ElementsMatch(t, want, queueDirs())
	require.NoError(t, s.Close())
	s, err = Open(dir, o)
	require.NoError(t, err)
	require.NoError(t, s.Close())
	require.ElementsMatch(t, want, queueDirs())
}

// Under FlushSync the delay progress's save flushes the CommitLog itself:
// it must wake the dispatcher, or a record that flush made durable (a
// delivery appended just before, not yet synced by the group commit) stays
// invisible until the next flush, which in an idle store never comes (the
// group commit finds nothing left to sync). Found by FuzzCheckpointFile,
// whose image store hung so once in a few hundred runs.
func TestDelaySaveWakesTheDispatcher(t *testing.T) {
	clk := clock.NewFake(t0)
	s, err := openFS(vfs.NewMem(), "/d", smallFiles(&Options{Clock: clk, Flush: FlushSync, SegmentSize: 1 << 20}))
	require.NoError(t, err)
	defer s.Close()
	require.NoError(t, s.CreateTopic("d", TopicConfig{Queues: 1}))
	ctx := context.Background()
	_, err = s.append(ctx, &Message{Topic: "d", Body: []byte("delivered")}, 0, false, false) // as deliverDue, before its kick
	require.NoError(t, err)
	require.NoError(t, delayHost{s}.Flush()) // as the progress's save does
	require.Equal(t, s.log.WrotePosition(), s.log.FlushedPosition())
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	ms, err := s.ReadQueue(ctx, "d", 0, 0, 1)
	require.NoError(t, err, "the record save flushed is not visible")
	require.Equal(t, "delivered", string(ms[0].Body))
}

// TestTimerBucketsBackAfterPowerLossDeliverOnce: a timer bucket's removal
// after its delivery is durable only with the timer directory's next
// sync, so a power loss can bring back every bucket delivered since, not
// only the one being delivered. Each of their messages is delivered once:
// before, only the first bucket after Open was checked against the
// index, and the others were delivered a second time.
func TestTimerBucketsBackAfterPowerLossDeliverOnce(t *testing.T) {
	clk := clock.NewFake(t0)
	ffs := vfs.NewFaulty(vfs.NewMem())
	opts := smallFiles(&Options{Clock: clk, SegmentSize: 1 << 20, Flush: FlushSync})
	s, err := openFS(ffs, "/d", opts)
	require.NoError(t, err)
	require.NoError(t, s.CreateTopic("tm", TopicConfig{Queues: 1}))
	ctx := context.Background()
	for i := range 3 { // three buckets, a minute apart
		_, err := s.Put(ctx, &Message{Topic: "tm", DeliverAt: t0.Add(time.Duration(i+1) * time.Minute), Body: []byte{byte(i)}}, 0)
		require.NoError(t, err)
	}
	// The timer service buckets each (and syncs the directory) before it
	// delivers anything, and removes each bucket once delivered.
	for i := range 3 {
		clk.Set(t0.Add(time.Duration(i+1) * time.Minute))
		readN(t, s, "tm", 0, i+1) // delivered durably: FlushSync shows only flushed records
	}
	img := ffs.Crash(rand.New(rand.NewPCG(1, 2)), 0) // nothing unsynced survives: the removals are undone
	require.NoError(t, s.Close())

	clk = clock.NewFake(clk.Now())
	s, err = openFS(vfs.NewFaulty(img), "/d", smallFiles(&Options{Clock: clk, SegmentSize: 1 << 20, Flush: FlushSync}))
	require.NoError(t, err)
	defer s.Close()
	// A later timer: buckets go in order, so once it is delivered, the
	// buckets before it are done.
	_, err = s.Put(ctx, &Message{Topic: "tm", DeliverAt: clk.Now().Add(time.Minute), Body: []byte{9}}, 0)
	require.NoError(t, err)
	clk.Advance(time.Minute)
	got := readN(t, s, "tm", 0, 4)
	require.NoError(t, s.WaitVisible(ctx))
	n, err := s.MaxOffset("tm", 0)
	require.NoError(t, err)
	require.Equal(t, int64(4), n, "each timer once")
	require.Equal(t, []byte{9}, got[3].Body)
}

// TestTimerDeliveryDurableBeforeBucketGoes: a timer bucket is all that
// remembers its messages once the timer queue is past them, so their
// deliveries must be durable before the bucket is removed. Before, under
// FlushAsync a power loss after the removal reached the disk (with the
// timer directory's next sync) lost a timer message whose own record had
// long been durable.
func TestTimerDeliveryDurableBeforeBucketGoes(t *testing.T) {
	clk := clock.NewFake(t0)
	ffs := vfs.NewFaulty(vfs.NewMem())
	s := openTimerTopic(t, ffs, clk)
	var err error
	ctx := context.Background()
	_, err = s.Put(ctx, &Message{Topic: "tm", DeliverAt: t0.Add(time.Minute), Body: []byte("a")}, 0)
	require.NoError(t, err)
	_, err = s.log.Flush() // the timer record is durable
	require.NoError(t, err)
	clk.Set(t0.Add(time.Minute))
	readN(t, s, "tm", 0, 1) // delivered; its bucket removed
	// A second timer: bucketing it syncs the timer directory, which makes
	// the first bucket's removal durable.
	_, err = s.Put(ctx, &Message{Topic: "tm", DeliverAt: t0.Add(3 * time.Minute), Body: []byte("b")}, 0)
	require.NoError(t, err)
	clk.Set(t0.Add(3 * time.Minute))
	readN(t, s, "tm", 0, 2)
	img := ffs.Crash(rand.New(rand.NewPCG(1, 2)), 0) // only what was synced
	require.NoError(t, s.Close())

	clk = clock.NewFake(clk.Now())
	s, err = openFS(vfs.NewFaulty(img), "/d", timerOptions(clk))
	require.NoError(t, err)
	defer s.Close()
	require.NoError(t, s.WaitVisible(ctx))
	n, err := s.MaxOffset("tm", 0)
	require.NoError(t, err)
	require.Positive(t, n, "the first timer survives")
	got, err := s.ReadQueue(ctx, "tm", 0, 0, 1)
	require.NoError(t, err)
	require.Equal(t, "a", string(got[0].Body))
}

// TestTimerBucketsForgetRecordsACrashLost: a power loss that cuts the
// CommitLog's tail takes timer records whose bucket entries are durable,
// and new records take their offsets. Such entries are dropped at Open;
// before, delivering one read the new record (here not a timer message:
// an error retried forever, which stalled every timer after it).
func TestTimerBucketsForgetRecordsACrashLost(t *testing.T) {
	clk := clock.NewFake(t0)
	ffs := vfs.NewFaulty(vfs.NewMem())
	s := openTimerTopic(t, ffs, clk)
	var err error
	ctx := context.Background()
	for _, d := range []time.Duration{50 * time.Second, time.Second} { // one bucket
		_, err = s.Put(ctx, &Message{Topic: "tm", DeliverAt: t0.Add(d), Body: []byte("lost")}, 0)
		require.NoError(t, err)
	}
	clk.Set(t0.Add(time.Second))
	readN(t, s, "tm", 0, 1) // so both are in their bucket, durably; their records are not
	img := ffs.Crash(rand.New(rand.NewPCG(1, 2)), 0)
	require.NoError(t, s.Close())

	clk = clock.NewFake(clk.Now())
	s, err = openFS(vfs.NewFaulty(img), "/d", timerOptions(clk))
	require.NoError(t, err)
	defer s.Close()
	_, err = s.Put(ctx, &Message{Topic: "tm", Body: []byte("plain")}, 0) // where the first timer record was
	require.NoError(t, err)
	_, err = s.Put(ctx, &Message{Topic: "tm", DeliverAt: t0.Add(2 * time.Minute), Body: []byte("later")}, 0)
	require.NoError(t, err)
	clk.Set(t0.Add(2 * time.Minute))
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second) // a watchdog: the stalled timers never deliver
	defer cancel()
	got, err := s.ReadQueue(wctx, "tm", 0, 1, 1)
	require.NoError(t, err, "the later timer is delivered")
	require.Equal(t, "later", string(got[0].Body))
	require.NoError(t, s.WaitVisible(ctx))
	n, err := s.MaxOffset("tm", 0)
	require.NoError(t, err)
	require.Equal(t, int64(2), n, "nothing else delivered")
}

// TestTimerProgressMovedBackIsSaved: the timer service saves its position
// after bucketing, without waiting for the records to be durable, so after
// a power loss it can lie past the end of the timer queue. Open moves it
// back and must save that before it takes a put: before, it was moved
// back in memory only, and a second power loss before the next bucketing
// brought the stale position back over timer messages stored since, which
// were never delivered.
func TestTimerProgressMovedBackIsSaved(t *testing.T) {
	clk := clock.NewFake(t0)
	ffs := vfs.NewFaulty(vfs.NewMem())
	s := openTimerTopic(t, ffs, clk)
	var err error
	ctx := context.Background()
	for _, d := range []time.Duration{time.Second, 50 * time.Second} { // one bucket: delivering the first flushes nothing
		_, err = s.Put(ctx, &Message{Topic: "tm", DeliverAt: t0.Add(d), Body: []byte("lost")}, 0)
		require.NoError(t, err)
	}
	clk.Set(t0.Add(time.Second))
	readN(t, s, "tm", 0, 1) // both bucketed, the position (2) saved; the records are not durable
	img := ffs.Crash(rand.New(rand.NewPCG(1, 2)), 0)
	require.NoError(t, s.Close())

	s, err = openFS(vfs.NewFaulty(img), "/d", timerOptions(clk))
	require.NoError(t, err)
	defer s.Close()
	n, err := s.MaxOffset(topic.Timer, 0)
	require.NoError(t, err)
	require.Zero(t, n, "the timer queue lost its entries")
	st, err := delay.LoadTimerState(s.fs, s.path(configDir))
	require.NoError(t, err)
	require.Equal(t, int64(0), st.Enqueued, "the position moved back is saved")
}

// timerOptions is FlushAsync with no periodic flush while a test runs, so
// that a power-loss image holds only what the test (or the store) synced.
func timerOptions(clk clock.Clock) *Options {
	return smallFiles(&Options{Clock: clk, SegmentSize: 1 << 20, Flush: FlushAsync, FlushInterval: time.Hour, FlushThoroughInterval: time.Hour})
}

// openTimerTopic opens a timerOptions store on fs, at "/d", with a
// one-queue topic "tm".
func openTimerTopic(t *testing.T, fs vfs.FS, clk clock.Clock) *Store {
	t.Helper()
	s, err := openFS(fs, "/d", timerOptions(clk))
	require.NoError(t, err)
	require.NoError(t, s.CreateTopic("tm", TopicConfig{Queues: 1}))
	return s
}
