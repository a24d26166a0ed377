package delay

import (
	"runtime"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqlite/mqlite/clock"
)

var t0 = time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)

// waitFor polls cond until it holds (30 s: then the test fails).
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

// jumpingClock is a fake clock that jumps by jump the first time a timer
// is armed, just before arming it: the clock moving between sleepUntil's
// reading of it and the arming, as a test's clock or a descheduled
// goroutine does.
type jumpingClock struct {
	*clock.Fake
	jump   time.Duration
	jumped atomic.Bool
}

func (c *jumpingClock) NewTimer(d time.Duration) clock.Timer {
	c.jumpOnce()
	return c.Fake.NewTimer(d)
}

func (c *jumpingClock) NewTimerAt(t time.Time) clock.Timer {
	c.jumpOnce()
	return c.Fake.NewTimerAt(t)
}

func (c *jumpingClock) jumpOnce() {
	if c.jumped.CompareAndSwap(false, true) {
		c.Advance(c.jump)
	}
}

// TestSleepUntilRearmsALateTimer: a clock that jumped part of the way
// while the timer was armed left it armed for after the deadline, and a
// clock then held at the deadline never woke the sleeper (the retry
// ladder test hung so, once in several runs).
func TestSleepUntilRearmsALateTimer(t *testing.T) {
	clk := &jumpingClock{Fake: clock.NewFake(t0), jump: 5 * time.Second}
	deadline := t0.Add(10 * time.Second)
	woke := make(chan bool, 1)
	// Only the Clock methods: a clock that arms timers for a duration
	// (clock.AtTimer hidden), whose late timer sleepUntil re-arms.
	go func() { woke <- sleepUntil(struct{ clock.Clock }{clk}, deadline, nil, nil) }()
	waitFor(t, "the sleeper's timer", func() bool { return clk.jumped.Load() && clk.Waiters() == 1 })
	clk.Set(deadline)
	select {
	case ok := <-woke:
		require.True(t, ok)
	case <-time.After(time.Minute): // a failure, not synchronisation
		t.Fatal("the sleeper slept past its deadline")
	}
}

// TestSleepUntilClockMovesWhileArming: a fake clock that reaches the
// wake-up time while the timer is being armed (1 ms after it was read,
// within sleepSlack) still wakes the sleeper. A timer armed for the
// duration read before the jump fired 1 ms after it, and a clock held at
// the wake-up time never fired it: a delayed message waited for ever.
func TestSleepUntilClockMovesWhileArming(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		due := t0.Add(time.Minute)
		clk := &jumpingClock{Fake: clock.NewFake(due.Add(-time.Millisecond)), jump: time.Millisecond}
		done := make(chan bool, 1)
		go func() { done <- sleepUntil(clk, due, nil, nil) }()
		synctest.Wait()
		select {
		case ok := <-done:
			require.True(t, ok)
		default:
			t.Fatal("sleepUntil still sleeps with the clock at its wake-up time")
		}
	})
}
