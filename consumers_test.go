package mqlite

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqlite/mqlite/clock"
	"github.com/mqlite/mqlite/vfs"
)

// TestPushConsumerFiltersByTag sends tagged messages through a producer
// and consumes with a tag filter and a SQL filter in two groups.
func TestPushConsumerFiltersByTag(t *testing.T) {
	s := memStore(t, Options{})
	require.NoError(t, s.CreateTopic("orders", TopicConfig{Queues: 4}))
	p := newProducer(t, s, ProducerOptions{})
	ctx := context.Background()
	for i := range 200 {
		tag := []string{"created", "paid", "shipped"}[i%3]
		_, err := p.Send(ctx, &Message{Topic: "orders", Tags: tag, Properties: map[string]string{"amount": fmt.Sprint(i)}, Body: []byte(fmt.Sprint(i))})
		require.NoError(t, err)
	}
	consume := func(group string, f Filter, want int) map[string]int {
		got := map[string]int{}
		var mu sync.Mutex
		done := make(chan struct{})
		c, err := s.NewPushConsumer(group, ConsumerOptions{ConsumeFromWhere: ConsumeFromFirstOffset})
		require.NoError(t, err)
		require.NoError(t, c.Subscribe("orders", f))
		require.NoError(t, c.Start(func(_ context.Context, msgs []*MessageExt) ConsumeResult {
			mu.Lock()
			defer mu.Unlock()
			for _, m := range msgs {
				got[m.Tags]++
			}
			if n := got["created"] + got["paid"] + got["shipped"]; n == want {
				close(done)
			}
			return ConsumeSuccess
		}))
		awaitDone(t, done, &mu, func() string { return fmt.Sprintf("group %s got %v, stats %+v", group, got, c.Stats()) })
		require.NoError(t, c.Shutdown(ctx))
		return got
	}
	tags, err := Tag("created || paid")
	require.NoError(t, err)
	require.Equal(t, map[string]int{"created": 67, "paid": 67}, consume("by-tag", tags, 134))
	sql, err := SQL("amount >= 150 AND TAGS = 'shipped'")
	require.NoError(t, err)
	require.Equal(t, map[string]int{"shipped": 16}, consume("by-sql", sql, 16))
	_, err = SQL("amount >")
	require.ErrorIs(t, err, ErrInvalidArgument)
	lag, err := s.ConsumerLag("by-tag")
	require.NoError(t, err)
	var behind int64
	for _, l := range lag {
		behind += l.Lag
	}
	require.Zero(t, behind, "filtered-out messages advance the offset too")
}

// TestAlwaysFailingHandlerEndsInDLQ: a handler that always fails sees the
// message 1 + 16 times on RocketMQ's retry schedule, then it is dead once,
// with its original topic, keys and body; re-driving delivers it again.
func TestAlwaysFailingHandlerEndsInDLQ(t *testing.T) {
	clk := clock.NewFake(t0)
	s := delayStore(t, vfs.NewMem(), clk)
	defer s.Close()
	require.NoError(t, s.CreateTopic("jobs", TopicConfig{Queues: 1}))
	ctx := context.Background()
	type call struct {
		at    time.Time
		times int32
		body  string
	}
	calls := make(chan call, 64)
	c, err := s.NewPushConsumer("workers", ConsumerOptions{ConsumeFromWhere: ConsumeFromFirstOffset})
	require.NoError(t, err)
	require.NoError(t, c.Subscribe("jobs", nil))
	require.NoError(t, c.Start(func(_ context.Context, msgs []*MessageExt) ConsumeResult {
		for _, m := range msgs {
			require.Equal(t, "jobs", m.Topic, "retries show their original topic")
			calls <- call{clk.Now(), m.ReconsumeTimes, string(m.Body)}
		}
		return ReconsumeLater
	}))
	_, err = s.Put(ctx, &Message{Topic: "jobs", Keys: []string{"job-1"}, Body: []byte("work")}, 0)
	require.NoError(t, err)
	first := <-calls
	require.Equal(t, call{t0, 0, "work"}, first)
	ladder := []time.Duration{10 * time.Second, 30 * time.Second, time.Minute, 2 * time.Minute, 3 * time.Minute,
		4 * time.Minute, 5 * time.Minute, 6 * time.Minute, 7 * time.Minute, 8 * time.Minute, 9 * time.Minute,
		10 * time.Minute, 20 * time.Minute, 30 * time.Minute, time.Hour, 2 * time.Hour}
	at := t0
	for i, wait := range ladder {
		// The send-back is stored once the handler returns; wait for the
		// schedule record before moving time.
		readN(t, s, ScheduleTopic, 2+i, 1) // retry n+1 is scheduled at level n+3
		at = at.Add(wait)
		clk.Set(at)
		got := <-calls
		require.Equal(t, call{at, int32(i + 1), "work"}, got, "retry %d", i+1)
	}
	_, err = s.sysQueueCount("%DLQ%workers", 1) // to wait on it before the death
	require.NoError(t, err)
	readN(t, s, "%DLQ%workers", 0, 1)
	dead, err := s.DeadLetters("workers", 0, 5)
	require.NoError(t, err)
	require.Len(t, dead, 1)
	require.Equal(t, "jobs", dead[0].Properties[PropRetryTopic])
	require.Equal(t, []string{"job-1"}, dead[0].Keys)
	require.Equal(t, "work", string(dead[0].Body))
	_, err = s.Redrive(ctx, "workers", dead[0].MsgID)
	require.NoError(t, err)
	require.Equal(t, call{at, 0, "work"}, <-calls, "re-driven to the group")
	require.NoError(t, c.Close())
}

// TestPollWakesWithoutTimePassing: under synctest, a Poll blocked on an
// empty queue returns as soon as a message is sent, with no virtual time
// passing, so no polling interval hides in the path; a cancelled Poll
// returns at once.
func TestPollWakesWithoutTimePassing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, err := Open("/poll", &Options{InMemory: true})
		require.NoError(t, err)
		defer s.Close()
		require.NoError(t, s.CreateTopic("t", TopicConfig{Queues: 1}))
		pc, err := s.NewPullConsumer("g", ConsumerOptions{})
		require.NoError(t, err)
		require.NoError(t, pc.Subscribe("t", nil))
		got := make(chan []*MessageExt)
		go func() {
			msgs, err := pc.Poll(context.Background(), 10)
			require.NoError(t, err)
			got <- msgs
		}()
		synctest.Wait()
		start := time.Now()
		_, err = s.Put(context.Background(), &Message{Topic: "t", Body: []byte("now")}, 0)
		require.NoError(t, err)
		msgs := <-got
		require.Len(t, msgs, 1)
		require.Equal(t, "now", string(msgs[0].Body))
		require.Equal(t, start, time.Now(), "no virtual time passed")

		ctx, cancel := context.WithCancel(context.Background())
		errc := make(chan error)
		go func() {
			_, err := pc.Poll(ctx, 10)
			errc <- err
		}()
		synctest.Wait()
		cancel()
		require.ErrorIs(t, <-errc, context.Canceled)
		require.Equal(t, start, time.Now())
		require.NoError(t, pc.Close())
	})
}

const consumeChildEnv = "MQLITE_CONSUME_CHILD_DIR"

// TestConsumeCrashChild is the child of TestConsumerSurvivesKill9: it
// consumes with a push consumer, printing each message before returning
// success, until it is killed.
func TestConsumeCrashChild(t *testing.T) {
	dir := os.Getenv(consumeChildEnv)
	if dir == "" {
		t.Skip("child process only")
	}
	s, err := Open(dir, smallFiles(&Options{SegmentSize: 1 << 20, OffsetPersistInterval: 5 * time.Millisecond}))
	require.NoError(t, err)
	c, err := s.NewPushConsumer("g", ConsumerOptions{ConsumeFromWhere: ConsumeFromFirstOffset, Goroutines: 2})
	require.NoError(t, err)
	require.NoError(t, c.Subscribe("k", nil))
	var mu sync.Mutex
	require.NoError(t, c.Start(func(_ context.Context, msgs []*MessageExt) ConsumeResult {
		mu.Lock()
		defer mu.Unlock()
		for _, m := range msgs {
			fmt.Printf("C %d %d %s\n", m.QueueID, m.QueueOffset, m.Body)
		}
		time.Sleep(50 * time.Microsecond) // a handler doing work, not synchronisation
		return ConsumeSuccess
	}))
	select {} // killed here
}

// TestConsumerSurvivesKill9 kills a consuming child mid-stream; a new
// member of the group then gets every message the child did not finish,
// so nothing is lost, and redelivers only what followed the child's last
// persisted commit in each queue.
func TestConsumerSurvivesKill9(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	s, err := Open(dir, smallFiles(&Options{SegmentSize: 1 << 20}))
	require.NoError(t, err)
	require.NoError(t, s.CreateTopic("k", TopicConfig{Queues: 4}))
	const n = 4000
	p, err := s.NewProducer(ProducerOptions{})
	require.NoError(t, err)
	for i := range n {
		require.NoError(t, p.SendOneway(&Message{Topic: "k", Body: []byte(fmt.Sprint(i))}))
	}
	require.NoError(t, s.Close())

	cmd := exec.Command(os.Args[0], "-test.run=^TestConsumeCrashChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), consumeChildEnv+"="+dir)
	cmd.SysProcAttr = childProcAttr()
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	child := map[string]bool{}
	childMax := map[int]int64{} // queue -> highest offset the child finished
	sc := bufio.NewScanner(out)
	scan := func() bool {
		if !sc.Scan() {
			return false
		}
		var q int
		var off int64
		var body string
		if _, err := fmt.Sscanf(sc.Text(), "C %d %d %s", &q, &off, &body); err == nil {
			child[body] = true
			childMax[q] = max(childMax[q], off)
		}
		return true
	}
	for len(child) < n/2 && scan() {
	}
	require.NoError(t, cmd.Process.Kill())
	for scan() { // what the child printed before it died
	}
	cmd.Wait()
	require.GreaterOrEqual(t, len(child), n/2, "the child consumed before it was killed")

	s, err = Open(dir, smallFiles(&Options{SegmentSize: 1 << 20}))
	require.NoError(t, err)
	defer s.Close()
	var mu sync.Mutex
	again := map[string]bool{}
	firstAgain := map[int]int64{}
	missing := n - len(child) // messages the child never finished
	done := make(chan struct{})
	c, err := s.NewPushConsumer("g", ConsumerOptions{ConsumeFromWhere: ConsumeFromFirstOffset})
	require.NoError(t, err)
	require.NoError(t, c.Subscribe("k", nil))
	require.NoError(t, c.Start(func(_ context.Context, msgs []*MessageExt) ConsumeResult {
		mu.Lock()
		defer mu.Unlock()
		for _, m := range msgs {
			// The lowest offset redelivered, not the first to arrive:
			// concurrent handler calls take the lock in any order.
			if first, ok := firstAgain[int(m.QueueID)]; !ok || m.QueueOffset < first {
				firstAgain[int(m.QueueID)] = m.QueueOffset
			}
			if b := string(m.Body); !again[b] {
				again[b] = true
				if !child[b] {
					missing--
				}
			}
			if missing == 0 {
				select {
				case <-done:
				default:
					close(done)
				}
			}
		}
		return ConsumeSuccess
	}))
	<-done
	require.NoError(t, c.Close())
	require.True(t, allSeen(child, again, n), "no message lost")
	dups := 0
	for b := range again {
		if child[b] {
			dups++
		}
	}
	for q, first := range firstAgain {
		require.LessOrEqual(t, first, childMax[q]+1, "queue %d resumes at or before where the child stopped", q)
	}
	require.Less(t, dups, len(child), "commits persisted while the child ran bound the redeliveries")
	t.Logf("child consumed %d, redelivered %d", len(child), dups)
}

func allSeen(a, b map[string]bool, n int) bool {
	for i := range n {
		if k := fmt.Sprint(i); !a[k] && !b[k] {
			return false
		}
	}
	return true
}

const retryChildEnv = "MQLITE_RETRY_CHILD_DIR"

// fastRetries makes RocketMQ's retry ladder 20 ms per step.
func fastRetries(dir string) *Options {
	levels := make([]time.Duration, 18)
	for i := range levels {
		levels[i] = 20 * time.Millisecond
	}
	return smallFiles(&Options{SegmentSize: 1 << 20, DelayLevels: levels, OffsetPersistInterval: 5 * time.Millisecond})
}

// failingConsumer starts a push consumer of group g that fails every
// message, reporting each attempt.
func failingConsumer(t *testing.T, s *Store, attempt func(body string, times int32)) *PushConsumer {
	c, err := s.NewPushConsumer("g", ConsumerOptions{ConsumeFromWhere: ConsumeFromFirstOffset})
	require.NoError(t, err)
	require.NoError(t, c.Subscribe("r", nil))
	require.NoError(t, c.Start(func(_ context.Context, msgs []*MessageExt) ConsumeResult {
		for _, m := range msgs {
			attempt(string(m.Body), m.ReconsumeTimes)
		}
		return ReconsumeLater
	}))
	return c
}

// TestRetryCrashChild fails messages until it is killed (S33).
func TestRetryCrashChild(t *testing.T) {
	dir := os.Getenv(retryChildEnv)
	if dir == "" {
		t.Skip("child process only")
	}
	s, err := Open(dir, fastRetries(dir))
	require.NoError(t, err)
	var mu sync.Mutex
	failingConsumer(t, s, func(body string, times int32) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Printf("A %s %d\n", body, times)
	})
	select {} // killed here
}

// TestRetriesSurviveKill9 (S33): messages that always fail go through
// their retries across a kill -9 and end in the dead-letter queue exactly
// once each, after attempts 0..16 (1 + 16 retries). Each attempt is seen
// once on either side of the crash; the only repeats are redeliveries
// across it (attempts consumed but not yet committed when the child died:
// at-least-once), never a second retry chain.
func TestRetriesSurviveKill9(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	s, err := Open(dir, fastRetries(dir))
	require.NoError(t, err)
	require.NoError(t, s.CreateTopic("r", TopicConfig{Queues: 2}))
	const n = 20
	for i := range n {
		_, err := s.Put(context.Background(), &Message{Topic: "r", Body: []byte(fmt.Sprint(i))}, i%2)
		require.NoError(t, err)
	}
	require.NoError(t, s.Close())

	type attempt struct {
		body  string
		times int32
	}
	before, after := map[attempt]int{}, map[attempt]int{}
	cmd := exec.Command(os.Args[0], "-test.run=^TestRetryCrashChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), retryChildEnv+"="+dir)
	cmd.SysProcAttr = childProcAttr()
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	sc := bufio.NewScanner(out)
	scan := func() bool {
		if !sc.Scan() {
			return false
		}
		var a attempt
		if _, err := fmt.Sscanf(sc.Text(), "A %s %d", &a.body, &a.times); err == nil {
			before[a]++
		}
		return true
	}
	for len(before) < n*17/2 && scan() {
	}
	require.NoError(t, cmd.Process.Kill())
	for scan() { // what the child printed before it died
	}
	cmd.Wait()

	s, err = Open(dir, fastRetries(dir))
	require.NoError(t, err)
	defer s.Close()
	var mu sync.Mutex
	c := failingConsumer(t, s, func(body string, times int32) {
		mu.Lock()
		defer mu.Unlock()
		after[attempt{body, times}]++
	})
	_, err = s.sysQueueCount("%DLQ%g", 1) // to wait on it before the first death
	require.NoError(t, err)
	dead := readN(t, s, "%DLQ%g", 0, n)
	require.NoError(t, c.Close())
	require.NoError(t, s.WaitVisible(context.Background()))
	max, err := s.MaxOffset("%DLQ%g", 0)
	require.NoError(t, err)
	require.Equal(t, int64(n), max, "each message dead once")
	seen := map[string]bool{}
	for _, m := range dead {
		require.False(t, seen[string(m.Body)], "%s dead twice", m.Body)
		seen[string(m.Body)] = true
	}
	mu.Lock()
	defer mu.Unlock()
	redelivered := 0
	for i := range n {
		for times := range int32(17) {
			a := attempt{fmt.Sprint(i), times}
			require.LessOrEqual(t, before[a], 1, "attempt %v twice before the crash", a)
			require.LessOrEqual(t, after[a], 1, "attempt %v twice after the crash", a)
			require.Positive(t, before[a]+after[a], "attempt %v never made", a)
			redelivered += before[a] + after[a] - 1
			delete(before, a)
			delete(after, a)
		}
	}
	require.Empty(t, before, "attempts beyond 0..16 before the crash")
	require.Empty(t, after, "attempts beyond 0..16 after the crash")
	t.Logf("%d attempts redelivered across the crash", redelivered)
}

// TestCommittedOffsetPastACutQueueIsMovedBack: a power loss that cuts a
// queue's tail below a group's committed offset must not make the group
// skip the messages stored there afterwards. Before, the offset was only
// capped in memory when a member started, so after a second power loss
// (before the next persist) the stale offset came back and the message
// stored in between was skipped.
func TestCommittedOffsetPastACutQueueIsMovedBack(t *testing.T) {
	clk := clock.NewFake(t0)
	ffs := vfs.NewFaulty(vfs.NewMem())
	opts := func() *Options {
		// No periodic flush or offset persist comes while the test runs.
		return smallFiles(&Options{Clock: clk, SegmentSize: 1 << 20, Flush: FlushAsync, FlushInterval: time.Hour, FlushThoroughInterval: time.Hour,
			OffsetPersistInterval: time.Hour})
	}
	s, err := openFS(ffs, "/d", opts())
	require.NoError(t, err)
	require.NoError(t, s.CreateTopic("t", TopicConfig{Queues: 1}))
	ctx := context.Background()
	for range 3 {
		_, err := s.Put(ctx, &Message{Topic: "t", Body: []byte("lost")}, 0)
		require.NoError(t, err)
	}
	pc, err := s.NewPullConsumer("g", ConsumerOptions{ConsumeFromWhere: ConsumeFromFirstOffset})
	require.NoError(t, err)
	require.NoError(t, pc.Assign("t", nil, 0))
	pctx, cancel := context.WithTimeout(ctx, time.Minute) // a watchdog
	defer cancel()
	for got := 0; got < 3; {
		ms, err := pc.Poll(pctx, 3-got)
		require.NoError(t, err)
		got += len(ms)
	}
	require.NoError(t, pc.Commit())
	require.NoError(t, s.consumers().PersistOffsets()) // offset 3 is durable; the messages are not
	img := ffs.Crash(rand.New(rand.NewPCG(1, 2)), 0)
	require.NoError(t, s.Close())

	ffs = vfs.NewFaulty(img)
	s, err = openFS(ffs, "/d", opts())
	require.NoError(t, err)
	n, err := s.MaxOffset("t", 0)
	require.NoError(t, err)
	require.Zero(t, n, "the queue lost its messages")
	_, err = s.Put(ctx, &Message{Topic: "t", Body: []byte("kept")}, 0)
	require.NoError(t, err)
	_, err = s.log.Flush() // durable
	require.NoError(t, err)
	img = ffs.Crash(rand.New(rand.NewPCG(1, 2)), 0)
	require.NoError(t, s.Close())

	s, err = openFS(vfs.NewFaulty(img), "/d", opts())
	require.NoError(t, err)
	defer s.Close()
	lag, err := s.ConsumerLag("g")
	require.NoError(t, err)
	require.Len(t, lag, 1)
	require.Equal(t, int64(1), lag[0].MaxOffset)
	require.Equal(t, int64(0), lag[0].Committed, "the committed offset was moved back to the queue's end")
}
