package consumer

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mqlite/mqlite/clock"
	"github.com/mqlite/mqlite/message"
)

// counter counts deliveries per body and signals when a total is reached.
type counter struct {
	mu      sync.Mutex
	seen    map[string]int
	first   map[string]string          // body -> first member
	by      map[string]map[string]bool // member -> bodies
	total   int
	want    int
	done    chan struct{}
	closed  bool
	waiters []countWaiter
}

type countWaiter struct {
	n  int
	ch chan struct{}
}

func newCounter(want int) *counter {
	return &counter{seen: map[string]int{}, first: map[string]string{}, by: map[string]map[string]bool{}, want: want, done: make(chan struct{})}
}

// atLeast returns a channel closed once n distinct bodies were seen.
func (c *counter) atLeast(n int) <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan struct{})
	if len(c.seen) >= n {
		close(ch)
		return ch
	}
	c.waiters = append(c.waiters, countWaiter{n, ch})
	return ch
}

func (c *counter) add(member string, msgs []*message.MessageExt) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, m := range msgs {
		b := string(m.Body)
		c.seen[b]++
		if c.seen[b] == 1 {
			c.first[b] = member
		}
		if c.by[member] == nil {
			c.by[member] = map[string]bool{}
		}
		c.by[member][b] = true
		c.total++
	}
	if !c.closed && len(c.seen) >= c.want {
		c.closed = true
		close(c.done)
	}
	kept := c.waiters[:0]
	for _, w := range c.waiters {
		if len(c.seen) >= w.n {
			close(w.ch)
		} else {
			kept = append(kept, w)
		}
	}
	c.waiters = kept
}

func (c *counter) handler(member string) Handler {
	return func(ctx context.Context, msgs []*message.MessageExt) ConsumeResult {
		c.add(member, msgs)
		return ConsumeSuccess
	}
}

func (c *counter) dups() (distinct, dups int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, n := range c.seen {
		dups += n - 1
	}
	return len(c.seen), dups
}

func TestPushBasic(t *testing.T) {
	e := newEnv(t, nil)
	e.st.createTopic("t", 4)
	cnt := newCounter(100)
	c := e.push("g", Options{ConsumeFromWhere: ConsumeFromFirstOffset}, "t", cnt.handler("a"))
	e.st.putMany("t", 100, "m")
	waitFor(t, cnt.done, "100 messages")
	if err := c.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, d := cnt.dups(); d != 0 {
		t.Fatalf("%d duplicates", d)
	}
	for q := range 4 {
		if got := e.committed("g", "", "t", q); got != 25 {
			t.Fatalf("queue %d committed %d, want 25", q, got)
		}
	}
	if err := c.Shutdown(context.Background()); err != nil {
		t.Fatalf("second Shutdown: %v", err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("Close after Shutdown: %v", err)
	}
	isErr(t, c.Subscribe("t", nil), ErrClosed, "Subscribe after Close")
	isErr(t, c.Start(cnt.handler("a")), ErrClosed, "Start after Close")
}

// ReconsumeLater sends each message of the batch back; the retry topic is
// consumed automatically once the store created it, with the original
// topic restored.
func TestPushReconsumeLaterSendsBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnvNoCleanup(t, clock.Real)
		defer e.close()
		e.st.createTopic("t", 2)
		e.st.mu.retry = true
		var mu sync.Mutex
		var seen []string
		h := func(ctx context.Context, msgs []*message.MessageExt) ConsumeResult {
			mu.Lock()
			defer mu.Unlock()
			for _, m := range msgs {
				seen = append(seen, fmt.Sprintf("%s@%s/%d", m.Body, m.Topic, m.ReconsumeTimes))
			}
			if msgs[0].ReconsumeTimes == 0 && strings.HasPrefix(string(msgs[0].Body), "fail") {
				return ReconsumeLater
			}
			return ConsumeSuccess
		}
		c := e.push("g", Options{ConsumeBatchSize: 2, ConsumeFromWhere: ConsumeFromFirstOffset}, "t", h)
		e.st.put("t", 0, "", "fail-1")
		e.st.put("t", 0, "", "fail-2")
		e.st.put("t", 1, "", "ok")
		synctest.Wait()
		sb := e.st.sentBack()
		if len(sb) != 2 || string(sb[0].Body) != "fail-1" || string(sb[1].Body) != "fail-2" {
			t.Fatalf("sent back %v", bodies(sb))
		}
		if got := e.committed("g", "", "t", 0); got != 2 {
			t.Fatalf("committed %d after sending back, want 2", got)
		}
		mu.Lock()
		got := strings.Join(seen, " ")
		mu.Unlock()
		for _, want := range []string{"fail-1@t/0", "fail-2@t/0", "ok@t/0", "fail-1@t/1", "fail-2@t/1"} {
			if !strings.Contains(got, want) {
				t.Fatalf("deliveries %q lack %q", got, want)
			}
		}
		if q := c.Assignment(); len(q) != 3 || q[0].Topic != RetryTopic("g") {
			t.Fatalf("assignment %v lacks the retry topic", q)
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	})
}

// When SendBack fails, the batch is redelivered locally after
// SuspendInterval (on the clock) and the offset waits for it.
func TestPushSendBackFailureRedeliversLocally(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fake := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
		e := newEnvNoCleanup(t, fake)
		defer e.close()
		e.st.createTopic("t", 1)
		e.st.setSendBackErr(errors.New("retry path down"))
		var calls atomic.Int32
		h := func(ctx context.Context, msgs []*message.MessageExt) ConsumeResult {
			if calls.Add(1) == 1 {
				return ReconsumeLater
			}
			if msgs[0].ReconsumeTimes != 1 {
				t.Errorf("redelivered with ReconsumeTimes %d", msgs[0].ReconsumeTimes)
			}
			return ConsumeSuccess
		}
		c := e.push("g", Options{ConsumeFromWhere: ConsumeFromFirstOffset}, "t", h)
		e.st.put("t", 0, "", "x")
		synctest.Wait()
		if calls.Load() != 1 || e.committed("g", "", "t", 0) != 0 {
			t.Fatalf("calls %d committed %d", calls.Load(), e.committed("g", "", "t", 0))
		}
		fake.Advance(DefaultSuspendInterval)
		synctest.Wait()
		if calls.Load() != 2 || e.committed("g", "", "t", 0) != 1 {
			t.Fatalf("after the suspend: calls %d committed %d", calls.Load(), e.committed("g", "", "t", 0))
		}
		if s := c.Stats(); s.Redelivered != 1 || s.SendBackErrors != 1 || s.Failed != 1 || s.Consumed != 1 {
			t.Fatalf("stats %+v", s)
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	})
}

// A panicking handler is recovered and counts as ReconsumeLater.
func TestPushHandlerPanic(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnvNoCleanup(t, clock.Real)
		defer e.close()
		e.st.createTopic("t", 1)
		c := e.push("g", Options{ConsumeFromWhere: ConsumeFromFirstOffset}, "t", func(ctx context.Context, msgs []*message.MessageExt) ConsumeResult {
			if string(msgs[0].Body) == "boom" {
				panic("boom")
			}
			return ConsumeSuccess
		})
		e.st.put("t", 0, "", "boom")
		e.st.put("t", 0, "", "fine")
		synctest.Wait()
		if s := c.Stats(); s.Panics != 1 || s.SentBack != 1 || s.Consumed != 1 {
			t.Fatalf("stats %+v", s)
		}
		if got := e.committed("g", "", "t", 0); got != 2 {
			t.Fatalf("committed %d", got)
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	})
}

// A handler call longer than ConsumeTimeout has its ctx cancelled and
// counts as failed even if it then reports success.
func TestPushConsumeTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fake := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
		e := newEnvNoCleanup(t, fake)
		defer e.close()
		e.st.createTopic("t", 1)
		const timeout = time.Minute
		c := e.push("g", Options{ConsumeTimeout: timeout, ConsumeFromWhere: ConsumeFromFirstOffset}, "t",
			func(ctx context.Context, msgs []*message.MessageExt) ConsumeResult {
				if string(msgs[0].Body) == "slow" {
					<-ctx.Done()
				}
				return ConsumeSuccess
			})
		e.st.put("t", 0, "", "slow")
		synctest.Wait()
		fake.Advance(timeout / 2)
		synctest.Wait()
		if s := c.Stats(); s.Timeouts != 0 || s.Failed != 0 {
			t.Fatalf("cancelled before the timeout: %+v", s)
		}
		fake.Advance(timeout)
		synctest.Wait()
		if s := c.Stats(); s.Timeouts != 1 || s.Failed != 1 || s.SentBack != 1 || s.Consumed != 0 {
			t.Fatalf("stats %+v", s)
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	})
}

// The consume timeout cancels a call no earlier than ConsumeTimeout after
// it started and no later than two check intervals (ConsumeTimeout/4
// each) past that.
func TestPushConsumeTimeoutBounds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fake := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
		e := newEnvNoCleanup(t, fake)
		defer e.close()
		e.st.createTopic("t", 1)
		const timeout = 4 * time.Minute
		const tick = timeout / 4
		started := make(chan time.Time, 1)
		cancelled := make(chan time.Time, 1)
		c := e.push("g", Options{ConsumeTimeout: timeout, ConsumeFromWhere: ConsumeFromFirstOffset}, "t",
			func(ctx context.Context, msgs []*message.MessageExt) ConsumeResult {
				if msgs[0].ReconsumeTimes > 0 {
					return ConsumeSuccess
				}
				started <- fake.Now()
				<-ctx.Done()
				cancelled <- fake.Now()
				return ConsumeSuccess
			})
		fake.Advance(tick / 2) // the call starts between two checks
		synctest.Wait()
		e.st.put("t", 0, "", "slow")
		synctest.Wait()
		begin := <-started
		var end time.Time
		for step := 0; end.IsZero(); step++ {
			if step > 10 {
				t.Fatal("never cancelled")
			}
			fake.Advance(tick)
			synctest.Wait()
			select {
			case end = <-cancelled:
			default:
			}
		}
		if d := end.Sub(begin); d < timeout || d > timeout+2*tick {
			t.Fatalf("cancelled %s after the call started, want [%s, %s]", d, timeout, timeout+2*tick)
		}
		if s := c.Stats(); s.Timeouts != 1 || s.Failed != 1 {
			t.Fatalf("stats %+v", s)
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	})
}

// Handler contexts are reused across calls of a worker, but a call after
// a timeout gets a fresh one: only the call that timed out sees its ctx
// cancelled.
func TestPushContextAfterTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fake := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
		e := newEnvNoCleanup(t, fake)
		defer e.close()
		e.st.createTopic("t", 1)
		const timeout = time.Minute
		var errs []error // handler calls are serial: one goroutine
		var ctxs []context.Context
		c := e.push("g", Options{ConsumeTimeout: timeout, Goroutines: 1, ConsumeFromWhere: ConsumeFromFirstOffset}, "t",
			func(ctx context.Context, msgs []*message.MessageExt) ConsumeResult {
				if string(msgs[0].Body) == "slow" && msgs[0].ReconsumeTimes == 0 {
					<-ctx.Done()
				}
				errs = append(errs, ctx.Err())
				ctxs = append(ctxs, ctx)
				return ConsumeSuccess
			})
		e.st.put("t", 0, "", "a")
		e.st.put("t", 0, "", "b")
		synctest.Wait()
		e.st.put("t", 0, "", "slow")
		synctest.Wait()
		fake.Advance(timeout) // a check sees the call running
		synctest.Wait()
		fake.Advance(timeout) // the next one, a timeout later, cancels it
		synctest.Wait()
		e.st.put("t", 0, "", "c")
		synctest.Wait()
		if len(errs) < 4 {
			t.Fatalf("%d handler calls, want at least 4", len(errs))
		}
		want := []error{nil, nil, context.Canceled, nil}
		for i, w := range want {
			if errs[i] != w {
				t.Fatalf("call %d saw ctx.Err() %v, want %v (all: %v)", i, errs[i], w, errs)
			}
		}
		if ctxs[0] != ctxs[1] || ctxs[1] != ctxs[2] || ctxs[3] == ctxs[2] {
			t.Fatal("want one ctx for the calls up to the timeout and a new one after it")
		}
		if s := c.Stats(); s.Timeouts != 1 {
			t.Fatalf("stats %+v", s)
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		if ctxs[3].Err() == nil {
			t.Fatal("Close did not cancel the handler context")
		}
	})
}

// A worker goes on with the next batch of the queue it just consumed, but
// only concurrentBatchesPerTask batches in a row, and those count against
// the queue's earliest tokens: a queue with a deep backlog does not move
// ahead of the work queue's order by more than that. Every message is
// delivered once, each queue's in offset order.
func TestPushBusyQueueDoesNotStarveOthers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnvNoCleanup(t, clock.Real)
		defer e.close()
		e.st.createTopic("t", 2)
		const deep = 3000
		var order []int // queue of each handler call; one worker: serial
		next := map[int]int64{}
		var outOfOrder int
		gate := make(chan struct{})
		c := e.push("g", Options{Goroutines: 1, QueueCacheCount: 5000, ConsumeMaxSpan: 5000, ConsumeFromWhere: ConsumeFromFirstOffset}, "t",
			func(ctx context.Context, msgs []*message.MessageExt) ConsumeResult {
				<-gate // the first call waits until every token is queued
				m := msgs[0]
				if m.QueueOffset != next[m.QueueID] {
					outOfOrder++
				}
				next[m.QueueID] = m.QueueOffset + 1
				order = append(order, m.QueueID)
				return ConsumeSuccess
			})
		// Work queue: 32 tokens of queue 0 (the first pull; the worker
		// holds the first), 5 of queue 1, then the rest of queue 0's.
		for i := range 32 {
			e.st.put("t", 0, "", fmt.Sprintf("a-%d", i))
		}
		synctest.Wait()
		for i := range 5 {
			e.st.put("t", 1, "", fmt.Sprintf("b-%d", i))
		}
		synctest.Wait()
		for i := 32; i < deep; i++ {
			e.st.put("t", 0, "", fmt.Sprintf("a-%d", i))
		}
		synctest.Wait()
		fetched := c.Stats().Fetched
		close(gate)
		synctest.Wait()
		if fetched != deep+5 {
			t.Fatalf("fetched %d before the first call, want all %d", fetched, deep+5)
		}
		if len(order) != deep+5 || next[0] != deep || next[1] != 5 || outOfOrder != 0 {
			t.Fatalf("%d calls, next offsets %v, %d out of order", len(order), next, outOfOrder)
		}
		last := -1
		for i, q := range order {
			if q == 1 {
				last = i
			}
		}
		// In work-queue order queue 1's calls are 33..37; going on with
		// queue 0 may move them back by at most one run of batches.
		if concurrentBatchesPerTask > 32 || last >= 37+32 {
			t.Fatalf("queue 1's last message was call %d of %d: starved by queue 0", last+1, len(order))
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	})
}

// Tokens wake parked workers one after another (each wakes the next while
// tokens remain), so a backlog still runs on every worker at once.
func TestPushWorkersWakeEachOther(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnvNoCleanup(t, clock.Real)
		defer e.close()
		e.st.createTopic("t", 1)
		const workers = 4
		arrived := make(chan struct{}, 16)
		release := make(chan struct{})
		c := e.push("g", Options{Goroutines: workers, ConsumeFromWhere: ConsumeFromFirstOffset}, "t",
			func(ctx context.Context, msgs []*message.MessageExt) ConsumeResult {
				arrived <- struct{}{}
				<-release
				return ConsumeSuccess
			})
		synctest.Wait() // every worker parked on the empty work queue
		e.st.putMany("t", 10, "m")
		synctest.Wait()
		atOnce := len(arrived)
		close(release)
		synctest.Wait()
		if atOnce != workers {
			t.Fatalf("%d handler calls running at once, want %d", atOnce, workers)
		}
		if n := len(arrived); n != 10 {
			t.Fatalf("%d handler calls, want 10", n)
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	})
}

// With a blocked handler the consumer caches at most QueueCacheCount
// messages per queue (and at most QueueCacheBytes plus one pull), and
// resumes when the handler catches up.
func TestPushFlowControl(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnvNoCleanup(t, clock.Real)
		defer e.close()
		e.st.createTopic("t", 2)
		e.st.createTopic("big", 1)
		const cache = 50
		gate := make(chan struct{})
		cnt := newCounter(2000)
		h := func(ctx context.Context, msgs []*message.MessageExt) ConsumeResult {
			select {
			case <-gate:
			case <-ctx.Done():
				return ReconsumeLater
			}
			cnt.add("a", msgs)
			return ConsumeSuccess
		}
		c := e.push("g", Options{QueueCacheCount: cache, Goroutines: 2, PullBatchSize: 32, ConsumeFromWhere: ConsumeFromFirstOffset}, "t", h)
		e.st.putMany("t", 2000, "m")
		synctest.Wait()
		s := c.Stats()
		if s.Fetched > 2*cache {
			t.Fatalf("fetched %d with a blocked handler, limit %d", s.Fetched, 2*cache)
		}
		for _, q := range s.Queues {
			if q.Topic == "t" && (q.CachedCount > cache || q.CachedCount < cache-32) {
				t.Fatalf("queue %s caches %d, limit %d", q.Queue, q.CachedCount, cache)
			}
		}
		if s.FlowControlled == 0 {
			t.Fatal("flow control never paused fetching")
		}
		close(gate)
		synctest.Wait()
		if d, dups := cnt.dups(); d != 2000 || dups != 0 {
			t.Fatalf("after the handler caught up: %d distinct, %d dups", d, dups)
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}

		// Bytes: 1 KiB bodies, 4 KiB limit.
		gate2 := make(chan struct{})
		c2 := e.push("g2", Options{QueueCacheBytes: 4 << 10, PullBatchSize: 2, ConsumeFromWhere: ConsumeFromFirstOffset}, "big",
			func(ctx context.Context, msgs []*message.MessageExt) ConsumeResult {
				select {
				case <-gate2:
					return ConsumeSuccess
				case <-ctx.Done():
					return ReconsumeLater
				}
			})
		for range 100 {
			e.st.put("big", 0, "", strings.Repeat("x", 1024))
		}
		synctest.Wait()
		for _, q := range c2.Stats().Queues {
			if q.Topic == "big" && q.CachedBytes > 4<<10+2*(1024+64) {
				t.Fatalf("caches %d bytes, limit 4 KiB plus one pull", q.CachedBytes)
			}
		}
		close(gate2)
		if err := c2.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
	})
}

func TestBadInput(t *testing.T) {
	e := newEnv(t, nil)
	e.st.createTopic("t", 1)
	for _, g := range []string{"", "bad group", "x/y", strings.Repeat("g", 300)} {
		_, err := e.mg.NewPushConsumer(g, Options{})
		isErr(t, err, ErrInvalidArgument, fmt.Sprintf("group %q", g))
		_, err = e.mg.NewPullConsumer(g, Options{})
		isErr(t, err, ErrInvalidArgument, fmt.Sprintf("pull group %q", g))
	}
	_, err := e.mg.NewPushConsumer("g", Options{Goroutines: -1, ConsumeBatchSize: 5000, SuspendInterval: time.Hour, Model: 7})
	isErr(t, err, ErrInvalidArgument, "bad options")
	for _, want := range []string{"Goroutines", "ConsumeBatchSize", "SuspendInterval", "Model"} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("options error %q does not report %s", err, want)
		}
	}
	_, err = e.mg.NewPullConsumer("g", Options{Orderly: true})
	isErr(t, err, ErrInvalidArgument, "orderly pull consumer")

	c, _ := e.mg.NewPushConsumer("g", Options{})
	isErr(t, c.Subscribe("", nil), ErrInvalidArgument, "empty topic")
	isErr(t, c.Subscribe("bad topic!", nil), ErrInvalidArgument, "illegal topic name")
	// An unknown topic is fine (it may be created later): see
	// TestSubscribeBeforeTopicExists in the root package.
	isErr(t, c.Start(nil), ErrInvalidArgument, "nil handler")
	isErr(t, c.Start(newCounter(1).handler("a")), ErrInvalidArgument, "Start without subscription")
	if err := c.Subscribe("t", nil); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(newCounter(1).handler("a")); err != nil {
		t.Fatal(err)
	}
	isErr(t, c.Start(newCounter(1).handler("a")), ErrInvalidArgument, "second Start")
	isErr(t, c.Subscribe("t", nil), ErrInvalidArgument, "Subscribe after Start")
	other, _ := e.mg.NewPushConsumer("g", Options{Strategy: ConsistentHash})
	_ = other.Subscribe("t", nil)
	isErr(t, other.Start(newCounter(1).handler("b")), ErrInvalidArgument, "strategy different from the live members'")

	p, _ := e.mg.NewPullConsumer("p", Options{})
	_, err = p.Poll(context.Background(), 1)
	isErr(t, err, ErrInvalidArgument, "Poll before Subscribe")
	isErr(t, p.Assign("nope", nil), ErrTopicNotFound, "pull assign unknown topic")
	isErr(t, p.Subscribe("bad topic!", nil), ErrInvalidArgument, "pull illegal topic name")
	if gs := e.mg.Groups(); len(gs) != 1 || gs[0].Name != "g" {
		t.Fatalf("failed calls created groups: %+v", gs)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}

	_, err = NewManager(e.st, ManagerOptions{})
	isErr(t, err, ErrInvalidArgument, "Manager without Dir")
	_, err = NewManager(nil, ManagerOptions{Dir: "/x", FS: newMemFS()})
	isErr(t, err, ErrInvalidArgument, "Manager without Source")
}

// After Manager.Close every call returns ErrClosed and no goroutine is left.
func TestManagerClose(t *testing.T) {
	e := newEnv(t, nil)
	e.st.createTopic("t", 2)
	c := e.push("g", Options{}, "t", newCounter(1).handler("a"))
	p := e.pull("h", Options{}, "t")
	if err := e.mg.Close(); err != nil {
		t.Fatal(err)
	}
	if err := e.mg.Close(); err != nil {
		t.Fatal(err)
	}
	_, err := p.Poll(context.Background(), 1)
	isErr(t, err, ErrClosed, "Poll after Manager.Close")
	_, err = e.mg.NewPushConsumer("g", Options{})
	isErr(t, err, ErrClosed, "NewPushConsumer after Close")
	isErr(t, e.mg.PersistOffsets(), ErrClosed, "PersistOffsets after Close")
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestRunLength: a worker whose calls are short takes up to
// concurrentRunMax batches of a queue with a backlog at once when the
// queue caches more than one batch for each handler call that can run at
// once (member.parallel, not Goroutines: with short calls goroutines
// beyond the processors add nothing), in offset order, claiming a token
// for each; otherwise one.
func TestRunLength(t *testing.T) {
	cases := []struct {
		name           string
		parallel, msgs int
		backlog, runs  bool
		want           int
	}{
		{"backlog, short calls", 2, 10, true, true, concurrentRunMax},
		{"few cached", 2, 4, true, true, 3},
		{"no more than parallel", 2, 2, true, true, 1},
		{"parallel as Goroutines", 20, 10, true, true, 1},
		{"no backlog", 2, 10, false, true, 1},
		{"long calls", 2, 10, true, false, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := &member{o: Options{Goroutines: 20, ConsumeBatchSize: 1}, parallel: c.parallel}
			p := newPQ(m, Queue{Topic: "t"}, &subscription{topic: "t"})
			p.mu.state, p.mu.backlog = pqActive, c.backlog
			var msgs []*message.MessageExt
			for i := range c.msgs {
				msgs = append(msgs, &message.MessageExt{QueueOffset: int64(i)})
			}
			p.mu.msgs.add(msgs)
			p.addTokens(c.msgs)
			var run [concurrentRunMax][]*message.MessageExt
			n := m.takeRunLocked(p, run[:], false, c.runs)
			if n != c.want {
				t.Fatalf("run of %d batches, want %d", n, c.want)
			}
			for i, b := range run[:n] {
				if len(b) != 1 || b[0].QueueOffset != int64(i) {
					t.Fatalf("batch %d is %v, want offset %d", i, b, i)
				}
			}
			// The first batch's token is the caller's; the rest were claimed.
			if got, want := p.tokens.Load()/claimedToken, uint64(n-1); got != want {
				t.Fatalf("%d tokens claimed, want %d", got, want)
			}
			if p.mu.running != n || p.mu.msgs.len() != c.msgs-n {
				t.Fatalf("running %d, cached %d after a run of %d from %d", p.mu.running, p.mu.msgs.len(), n, c.msgs)
			}
		})
	}
}
