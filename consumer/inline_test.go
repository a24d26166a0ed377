package consumer

import (
	"context"
	"runtime"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mqlite/mqlite/clock"
	"github.com/mqlite/mqlite/message"
)

// inlineQueues is a queue count at which fetchers run their own batches
// (at least GOMAXPROCS queues).
func inlineQueues() int { return runtime.GOMAXPROCS(0) + 2 }

// concurrency counts the handler calls running at once and their peak.
type concurrency struct{ now, peak atomic.Int32 }

func (c *concurrency) enter() {
	n := c.now.Add(1)
	for p := c.peak.Load(); n > p && !c.peak.CompareAndSwap(p, n); p = c.peak.Load() {
	}
}

func (c *concurrency) leave() { c.now.Add(-1) }

// TestInlineKeepsTheGoroutineBound: with more queues than processors and
// short calls, the fetchers run their queues' batches themselves, and
// still no more than Goroutines calls run at once (1 and 3), every
// message once.
func TestInlineKeepsTheGoroutineBound(t *testing.T) {
	for _, g := range []int{1, 3} {
		synctest.Test(t, func(t *testing.T) {
			e := newEnvNoCleanup(t, clock.Real)
			defer e.close()
			nq := inlineQueues() + g
			e.st.createTopic("t", nq)
			const n = 3000
			cnt := newCounter(n)
			var conc concurrency
			c := e.push("g", Options{Goroutines: g, ConsumeFromWhere: ConsumeFromFirstOffset}, "t",
				func(ctx context.Context, msgs []*message.MessageExt) ConsumeResult {
					conc.enter()
					defer conc.leave()
					runtime.Gosched() // let another call start, were one allowed to
					cnt.add("a", msgs)
					return ConsumeSuccess
				})
			e.st.putMany("t", 100, "warm") // a worker's timed run shows the calls short
			synctest.Wait()
			e.st.putMany("t", n-100, "m")
			synctest.Wait()
			if d, dups := cnt.dups(); d != n || dups != 0 {
				t.Fatalf("Goroutines %d: %d distinct, %d dups, want %d once each", g, d, dups, n)
			}
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
			if p := conc.peak.Load(); p > int32(g) {
				t.Fatalf("Goroutines %d: %d calls ran at once", g, p)
			}
			if c.m.inlineCalls.Load() == 0 {
				t.Fatalf("Goroutines %d, %d queues: no fetcher ran its own batches", g, nq)
			}
		})
	}
}

// TestInlineNeedsQueuesAndShortCalls: a consumer with fewer queues than
// processors, or whose handler has not been seen to return quickly (it
// blocks from its first call), hands every batch to the workers: its
// fetchers go on fetching.
func TestInlineNeedsQueuesAndShortCalls(t *testing.T) {
	if runtime.GOMAXPROCS(0) < 2 {
		t.Skip("one processor: a single queue is enough to run inline")
	}
	synctest.Test(t, func(t *testing.T) {
		e := newEnvNoCleanup(t, clock.Real)
		defer e.close()
		e.st.createTopic("one", 1)
		e.st.createTopic("many", inlineQueues())
		cnt := newCounter(200)
		c := e.push("g", Options{ConsumeFromWhere: ConsumeFromFirstOffset}, "one",
			func(ctx context.Context, msgs []*message.MessageExt) ConsumeResult {
				cnt.add("a", msgs)
				return ConsumeSuccess
			})
		e.st.putMany("one", 200, "m")
		synctest.Wait()
		if d, _ := cnt.dups(); d != 200 {
			t.Fatalf("%d of 200 consumed", d)
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		if n := c.m.inlineCalls.Load(); n != 0 {
			t.Fatalf("one queue on %d processors: the fetcher ran %d calls", runtime.GOMAXPROCS(0), n)
		}

		gate := make(chan struct{})
		c2 := e.push("g2", Options{ConsumeFromWhere: ConsumeFromFirstOffset, QueueCacheCount: 40}, "many",
			func(ctx context.Context, msgs []*message.MessageExt) ConsumeResult {
				select {
				case <-gate:
				case <-ctx.Done():
				}
				return ConsumeSuccess
			})
		e.st.putMany("many", 100*inlineQueues(), "b")
		synctest.Wait()
		if s := c2.Stats(); s.Fetched < int64(40*inlineQueues()) {
			t.Fatalf("fetched %d with every call blocked, want the caches full (%d)", s.Fetched, 40*inlineQueues())
		}
		close(gate)
		synctest.Wait()
		if err := c2.Close(); err != nil {
			t.Fatal(err)
		}
	})
}

// TestInlineCallTimesOut: a call a fetcher runs has its context cancelled
// after ConsumeTimeout like a worker's (the timeout check watches the
// borrowed slots too), counts as a timeout, and consuming goes on.
func TestInlineCallTimesOut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fake := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
		e := newEnvNoCleanup(t, fake)
		defer e.close()
		nq := inlineQueues()
		e.st.createTopic("t", nq)
		const timeout = time.Minute
		var cancelled atomic.Int32
		cnt := newCounter(0)
		c := e.push("g", Options{ConsumeTimeout: timeout, ConsumeFromWhere: ConsumeFromFirstOffset}, "t",
			func(ctx context.Context, msgs []*message.MessageExt) ConsumeResult {
				if string(msgs[0].Body) == "slow" && msgs[0].ReconsumeTimes == 0 {
					<-ctx.Done()
					cancelled.Add(1)
					return ReconsumeLater
				}
				cnt.add("a", msgs)
				return ConsumeSuccess
			})
		e.st.putMany("t", 20*nq, "warm")
		synctest.Wait()
		e.st.put("t", 0, "", "slow")
		synctest.Wait()
		fake.Advance(timeout)
		synctest.Wait()
		fake.Advance(timeout)
		synctest.Wait()
		e.st.putMany("t", 20*nq, "after")
		synctest.Wait()
		if cancelled.Load() != 1 {
			t.Fatalf("the slow call's context was cancelled %d times, want 1", cancelled.Load())
		}
		if d, _ := cnt.dups(); d < 40*nq {
			t.Fatalf("%d of %d fast messages consumed", d, 40*nq)
		}
		if s := c.Stats(); s.Timeouts != 1 {
			t.Fatalf("%d timeouts, want 1", s.Timeouts)
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		if c.m.inlineCalls.Load() == 0 {
			t.Fatal("no fetcher ran its own batches")
		}
	})
}

// TestInlineAllowed: a fetcher whose calls were long hands its batches to
// the workers and tries again once in inlineRetryEvery deliveries; none
// runs inline before a timed run showed the calls short.
func TestInlineAllowed(t *testing.T) {
	m := &member{kind: kindPush, procs: 2, mg: &Manager{}}
	m.queues.Store(2)
	p := newPQ(m, Queue{Topic: "t"}, &subscription{topic: "t"})
	if p.inlineAllowed() {
		t.Fatal("allowed before any timed run")
	}
	m.shortCalls.Store(true)
	if !p.inlineAllowed() {
		t.Fatal("not allowed with short calls and enough queues")
	}
	m.queues.Store(1)
	if p.inlineAllowed() {
		t.Fatal("allowed with fewer queues than processors")
	}
	m.queues.Store(2)
	p.inline.long = true
	for i := 1; i < inlineRetryEvery; i++ {
		if p.inlineAllowed() {
			t.Fatalf("allowed at delivery %d after long calls", i)
		}
	}
	if !p.inlineAllowed() {
		t.Fatalf("not tried again after %d deliveries", inlineRetryEvery)
	}
}
