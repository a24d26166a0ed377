package consumer

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mqlite/mqlite/clock"
	"github.com/mqlite/mqlite/message"
)

// orderChecker fails on two handler calls overlapping on one queue or a
// queue's messages arriving out of offset order (or twice), whichever
// member makes the call.
type orderChecker struct {
	t        *testing.T
	inFlight [4]atomic.Int32
	mu       sync.Mutex
	next     [4]int64
	total    int
	waiters  []countWaiter
	failures []string
}

func (c *orderChecker) handler(ctx context.Context, msgs []*message.MessageExt) ConsumeResult {
	q := msgs[0].QueueID
	if !c.inFlight[q].CompareAndSwap(0, 1) {
		c.fail("two handler calls overlap on queue %d", q)
		return ConsumeSuccess
	}
	defer c.inFlight[q].Store(0)
	runtime.Gosched() // widen the window an overlap would need
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, m := range msgs {
		if m.QueueID != q {
			c.failLocked("batch mixes queues %d and %d", q, m.QueueID)
		}
		if m.QueueOffset != c.next[q] {
			c.failLocked("queue %d: got offset %d, want %d", q, m.QueueOffset, c.next[q])
		}
		c.next[q] = m.QueueOffset + 1
		c.total++
	}
	kept := c.waiters[:0]
	for _, w := range c.waiters {
		if c.total >= w.n {
			close(w.ch)
		} else {
			kept = append(kept, w)
		}
	}
	c.waiters = kept
	return ConsumeSuccess
}

func (c *orderChecker) fail(format string, args ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.failLocked(format, args...)
}

func (c *orderChecker) failLocked(format string, args ...any) {
	if len(c.failures) < 10 {
		c.failures = append(c.failures, fmt.Sprintf(format, args...))
	}
}

func (c *orderChecker) atLeast(n int) <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan struct{})
	if c.total >= n {
		close(ch)
	} else {
		c.waiters = append(c.waiters, countWaiter{n, ch})
	}
	return ch
}

// Orderly: 4 queues, 8 handler goroutines per member, members joining and
// leaving: never two calls at once on a queue, each queue in offset order
// with nothing repeated or skipped.
func TestOrderlyNoOverlapInOrderAcrossRebalance(t *testing.T) {
	e := newEnv(t, nil)
	e.st.createTopic("t", 4)
	const perQueue = 5000
	chk := &orderChecker{t: t}
	o := Options{Orderly: true, Goroutines: 8, ConsumeBatchSize: 3, ConsumeFromWhere: ConsumeFromFirstOffset, QueueCacheCount: 100}
	o.InstanceName = "a"
	a := e.push("g", o, "t", chk.handler)
	e.st.putMany("t", 4*perQueue, "m")
	waitFor(t, chk.atLeast(4000), "4000 messages")
	o.InstanceName = "b"
	b := e.push("g", o, "t", chk.handler)
	waitFor(t, chk.atLeast(9000), "9000 messages")
	o.InstanceName = "c"
	c := e.push("g", o, "t", chk.handler)
	if err := a.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, chk.atLeast(4*perQueue), "every message")
	for _, x := range []*PushConsumer{b, c} {
		if err := x.Close(); err != nil {
			t.Fatal(err)
		}
	}
	chk.mu.Lock()
	defer chk.mu.Unlock()
	if len(chk.failures) > 0 {
		t.Fatalf("order violations:\n%s", strings.Join(chk.failures, "\n"))
	}
	for q := range 4 {
		if chk.next[q] != perQueue {
			t.Fatalf("queue %d consumed up to %d, want %d", q, chk.next[q], perQueue)
		}
	}
}

// A message that always fails is retried locally MaxReconsumeTimes times,
// SuspendInterval apart on the clock, then sent back, and its queue moves
// on; other queues are not held up.
func TestOrderlyPoisonMessageGoesToSendBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fake := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
		e := newEnvNoCleanup(t, fake)
		defer e.close()
		e.st.createTopic("o", 4)
		e.st.put("o", 0, "", "bad")
		e.st.put("o", 0, "", "good-1")
		e.st.put("o", 0, "", "good-2")
		for q := 1; q < 4; q++ {
			for i := range 5 {
				e.st.put("o", q, "", fmt.Sprintf("q%d-%d", q, i))
			}
		}
		var mu sync.Mutex
		calls := map[string]int{}
		var order []string
		h := func(ctx context.Context, msgs []*message.MessageExt) ConsumeResult {
			mu.Lock()
			defer mu.Unlock()
			b := string(msgs[0].Body)
			calls[b]++
			order = append(order, b)
			if b == "bad" {
				if int(msgs[0].ReconsumeTimes) != calls[b]-1 {
					t.Errorf("ReconsumeTimes %d on call %d", msgs[0].ReconsumeTimes, calls[b])
				}
				return ReconsumeLater
			}
			return ConsumeSuccess
		}
		const maxRe = 3
		c := e.push("g", Options{Orderly: true, Goroutines: 8, MaxReconsumeTimes: maxRe, ConsumeFromWhere: ConsumeFromFirstOffset}, "o", h)
		synctest.Wait()
		mu.Lock()
		if calls["bad"] != 1 || calls["good-1"] != 0 {
			t.Fatalf("before any suspend ended: calls %v", calls)
		}
		for q := 1; q < 4; q++ {
			if calls[fmt.Sprintf("q%d-4", q)] != 1 {
				t.Fatalf("queue %d held up by queue 0: calls %v", q, calls)
			}
		}
		mu.Unlock()
		for i := range maxRe {
			fake.Advance(DefaultSuspendInterval - time.Millisecond)
			synctest.Wait()
			mu.Lock()
			if calls["bad"] != i+1 {
				t.Fatalf("retry %d came before the suspend interval passed: %d calls", i+1, calls["bad"])
			}
			mu.Unlock()
			fake.Advance(time.Millisecond)
			synctest.Wait()
		}
		mu.Lock()
		if calls["bad"] != 1+maxRe {
			t.Fatalf("bad consumed %d times, want %d", calls["bad"], 1+maxRe)
		}
		if calls["good-1"] != 1 || calls["good-2"] != 1 {
			t.Fatalf("queue 0 did not move on: %v", calls)
		}
		mu.Unlock()
		sb := e.st.sentBack()
		if len(sb) != 1 || string(sb[0].Body) != "bad" || sb[0].ReconsumeTimes != maxRe ||
			sb[0].Properties[PropMaxReconsumeTimes] != fmt.Sprint(maxRe) {
			t.Fatalf("sent back %+v", sb)
		}
		if got := e.committed("g", "", "o", 0); got != 3 {
			t.Fatalf("queue 0 committed %d, want 3", got)
		}
		if s := c.Stats(); s.Failed != 1+maxRe || s.SentBack != 1 {
			t.Fatalf("stats %+v", s)
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	})
}

// newEnvNoCleanup is newEnv for synctest bubbles: the caller closes.
func newEnvNoCleanup(t testing.TB, clk clock.Clock) *envC {
	e := &env{t: t, st: newFakeStore(clk), fs: newMemFS(), clk: clk}
	e.open()
	return &envC{e}
}

type envC struct{ *env }

func (e *envC) close() {
	if err := e.mg.Close(); err != nil {
		e.t.Errorf("Manager.Close: %v", err)
	}
	e.st.close()
}
