package delay

import (
	"time"

	"github.com/mqlite/mqlite/clock"
)

// sleepUntil waits until the clock reaches t, wake fires, or quit closes
// (then it returns false). A clock that can arm a timer for an instant
// (clock.AtTimer: a Fake) gets one for t. Otherwise the timer is armed for
// a duration, so a clock that moves between reading it and arming (this
// goroutine descheduled) arms it late by as much: the clock is read again
// after arming, and a timer armed more than sleepSlack late is armed
// again. (A fake clock needs the instant: one that jumped to 1 ms short of
// t, and then to t while the timer was being armed, left it armed for 1 ms
// after t, and held at t never fired it.)
func sleepUntil(clk clock.Clock, t time.Time, wake <-chan struct{}, quit <-chan struct{}) bool {
	return sleepUntilPoked(clk, t, wake, nil, quit)
}

// sleepUntilPoked is sleepUntil that also returns true when poke fires
// (a Settle asking for a pass).
func sleepUntilPoked(clk clock.Clock, t time.Time, wake, poke <-chan struct{}, quit <-chan struct{}) bool {
	at, isAt := clk.(clock.AtTimer)
	for {
		now := clk.Now()
		if !now.Before(t) {
			return true
		}
		var tm clock.Timer
		if isAt {
			tm = at.NewTimerAt(t)
		} else if tm = clk.NewTimer(t.Sub(now)); clk.Now().Sub(now) > sleepSlack {
			tm.Stop()
			continue
		}
		ok := true
		select {
		case <-tm.C():
		case <-wake:
		case <-poke:
		case <-quit:
			ok = false
		}
		tm.Stop()
		return ok
	}
}

// sleepSlack is how late sleepUntil lets a timer be armed.
const sleepSlack = time.Millisecond
