package consumer

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mqlite/mqlite/clock"
	"github.com/mqlite/mqlite/message"
)

// A member stuck draining a queue it lost (a handler that ignores its
// context) keeps the queue's lock for LockExpiry after the rebalance, then
// loses it: the new owner takes over from the committed offset and the
// stuck member's late commit is ignored. The queue is never blocked
// forever.
func TestLockExpiresWhenDrainIsStuck(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fake := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
		e := newEnvNoCleanup(t, fake)
		defer e.close()
		e.st.createTopic("t", 2)
		stuck := make(chan struct{})
		var mu sync.Mutex
		seen := map[string][]string{}
		h := func(id string) Handler {
			return func(ctx context.Context, msgs []*message.MessageExt) ConsumeResult {
				b := string(msgs[0].Body)
				mu.Lock()
				seen[id] = append(seen[id], b)
				mu.Unlock()
				if id == "a" && b == "stuck" {
					<-stuck // ignores ctx
				}
				return ConsumeSuccess
			}
		}
		o := Options{Orderly: true, ConsumeFromWhere: ConsumeFromFirstOffset}
		o.InstanceName = "a"
		a := e.push("g", o, "t", h("a"))
		e.st.put("t", 1, "", "stuck")
		e.st.put("t", 1, "", "after")
		synctest.Wait() // a is stuck on queue 1
		o.InstanceName = "b"
		b := e.push("g", o, "t", h("b")) // averagely: a keeps 0, b gets 1
		synctest.Wait()
		if got := e.mg.mu.groups["g"].lockHolder(Queue{"t", 1}); got != "a" {
			t.Fatalf("queue 1 lock held by %q, want a (draining)", got)
		}
		fake.Advance(DefaultLockExpiry - time.Second)
		synctest.Wait()
		mu.Lock()
		if len(seen["b"]) != 0 {
			t.Fatalf("b consumed %v before the lock expired", seen["b"])
		}
		mu.Unlock()
		fake.Advance(DefaultRebalanceInterval) // the next rebalance tick retries the lock
		synctest.Wait()
		mu.Lock()
		if got := seen["b"]; len(got) != 2 || got[0] != "stuck" || got[1] != "after" {
			t.Fatalf("b consumed %v after the lock expired", got)
		}
		mu.Unlock()
		if got := e.committed("g", "", "t", 1); got != 2 {
			t.Fatalf("committed %d, want 2", got)
		}
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
		e.st.put("t", 1, "", "later") // b left: the queue goes back to a...
		close(stuck)                  // ...whose stuck call ends now; its commit must be ignored
		synctest.Wait()
		if got := e.committed("g", "", "t", 1); got < 2 {
			t.Fatalf("the revoked member moved the offset back to %d", got)
		}
		if err := a.Close(); err != nil {
			t.Fatal(err)
		}
	})
}

// Broadcasting failures are retried locally (no shared retry topic), then
// dropped after MaxReconsumeTimes.
func TestBroadcastingFailureRetriedLocallyThenDropped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fake := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
		e := newEnvNoCleanup(t, fake)
		defer e.close()
		e.st.createTopic("t", 1)
		var mu sync.Mutex
		calls := 0
		c := e.push("b", Options{Model: Broadcasting, MaxReconsumeTimes: 2, ConsumeFromWhere: ConsumeFromFirstOffset}, "t",
			func(ctx context.Context, msgs []*message.MessageExt) ConsumeResult {
				mu.Lock()
				calls++
				mu.Unlock()
				return ReconsumeLater
			})
		e.st.put("t", 0, "", "x")
		synctest.Wait()
		for range 3 {
			fake.Advance(DefaultSuspendInterval)
			synctest.Wait()
		}
		mu.Lock()
		if calls != 3 {
			t.Fatalf("%d calls, want 1 + MaxReconsumeTimes = 3", calls)
		}
		mu.Unlock()
		if s := c.Stats(); s.Dropped != 1 || s.SentBack != 0 {
			t.Fatalf("stats %+v", s)
		}
		if got := e.committed("b", DefaultInstanceName, "t", 0); got != 1 {
			t.Fatalf("committed %d after the drop, want 1", got)
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	})
}

// Queues added to a topic are picked up on the next rebalance tick.
func TestRebalanceTickPicksUpNewQueues(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fake := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
		e := newEnvNoCleanup(t, fake)
		defer e.close()
		e.st.createTopic("t", 2)
		cnt := newCounter(4)
		a := e.push("g", Options{InstanceName: "a"}, "t", cnt.handler("a"))
		b := e.push("g", Options{InstanceName: "b"}, "t", cnt.handler("b"))
		synctest.Wait()
		if len(a.Assignment()) != 1 || len(b.Assignment()) != 1 {
			t.Fatalf("assignments %v %v", a.Assignment(), b.Assignment())
		}
		e.st.growTopic("t", 4)
		for q := range 4 { // stored before the members know the new queues
			e.st.put("t", q, "", fmt.Sprint(q))
		}
		synctest.Wait()
		fake.Advance(DefaultRebalanceInterval)
		synctest.Wait()
		if len(a.Assignment()) != 2 || len(b.Assignment()) != 2 {
			t.Fatalf("after the tick: %v %v", a.Assignment(), b.Assignment())
		}
		if d, dups := cnt.dups(); d != 4 || dups != 0 {
			t.Fatalf("consumed %v", cnt.seen)
		}
		for _, c := range []*PushConsumer{a, b} {
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// A queue's lock taken by a member that is still finding the queue's start
// offset (its pq pending) is not free for another member: taking it over
// then left the first one active with no fetcher, holding the queue for
// good (TestClusteringAtLeastOnceWhenAMemberDies hung on it about once in
// 40 runs). Once that pq is released, the lock is free.
func TestLockHeldWhileStarting(t *testing.T) {
	e := newEnv(t, nil)
	e.st.createTopic("t", 1)
	noop := func(context.Context, []*message.MessageExt) ConsumeResult { return ConsumeSuccess }
	a := e.push("g", Options{InstanceName: "a"}, "t", noop)
	b := e.push("g", Options{InstanceName: "b"}, "t", noop)
	g := e.mg.mu.groups["g"]
	q := Queue{"other", 0} // no member holds it
	now := e.clk.Now()
	starting := newPQ(a.m, q, &subscription{topic: q.Topic})
	if !g.tryLock(starting, now) {
		t.Fatal("a free lock was refused")
	}
	late := newPQ(b.m, q, &subscription{topic: q.Topic})
	if g.tryLock(late, now) {
		t.Fatal("b took the lock of a queue a is starting")
	}
	if starting.revoked.Load() || g.lockHolder(q) != "a" {
		t.Fatalf("revoked %v, holder %q: a must keep the lock", starting.revoked.Load(), g.lockHolder(q))
	}
	starting.mu.Lock()
	starting.mu.state = pqReleased // dropped before it started
	starting.mu.Unlock()
	if !g.tryLock(late, now) || g.lockHolder(q) != "b" {
		t.Fatalf("the lock of a released queue was not taken over (holder %q)", g.lockHolder(q))
	}
}
