package mqlite

import (
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqlite/mqlite/clock"
)

// armClock is a Fake clock that reports the duration of every timer armed.
type armClock struct {
	*clock.Fake
	armed chan time.Duration
}

func (c armClock) NewTimer(d time.Duration) clock.Timer {
	c.report(d)
	return c.Fake.NewTimer(d)
}

// NewTimerAt reports the duration from now (sleepUntil arms timers so).
func (c armClock) NewTimerAt(at time.Time) clock.Timer {
	c.report(at.Sub(c.Now()))
	return c.Fake.NewTimerAt(at)
}

func (c armClock) report(d time.Duration) {
	select {
	case c.armed <- d:
	default:
	}
}

// TestDamagedScheduleQueueRetriesLessOften: a delivery that keeps failing
// (the schedule queue of delay level 18 holds a copy of the timer queue's
// file, as in TestDamagedScheduleQueueDeliversNothingEarly) is retried after 100 ms,
// then twice as long each time up to 10 s, each retry logged with its delay:
// a persistent fault warns a few times a minute, not ten times a second.
func TestDamagedScheduleQueueRetriesLessOften(t *testing.T) {
	fs, _ := damagedScheduleQueue(t)
	o := fzOptions()
	clk := armClock{o.Clock.(*clock.Fake), make(chan time.Duration, 4096)}
	o.Clock = clk
	retries := make(chan time.Duration, 64)
	o.Logger = slog.New(logFunc(func(msg string, attrs []slog.Attr) {
		if msg != "mqlite: delayed delivery failed; retrying" {
			return
		}
		for _, a := range attrs {
			if a.Key == "retry_in" {
				retries <- a.Value.Duration()
			}
		}
	}))
	s, err := openFS(fs, fzDir, o)
	require.NoError(t, err)
	defer s.Close()
	clk.Advance(3 * time.Hour) // the damaged entry's record is due
	var got []time.Duration
	for len(got) < 9 {
		select {
		case d := <-retries:
			got = append(got, d)
			waitArmed(t, clk.armed, d) // the scheduler sleeps d: move the clock past it
			clk.Advance(d)
		case <-time.After(fzWatchdog):
			t.Fatalf("no retry after %v", got)
		}
	}
	ms := time.Millisecond
	require.Equal(t, []time.Duration{100 * ms, 200 * ms, 400 * ms, 800 * ms, 1600 * ms, 3200 * ms, 6400 * ms,
		10 * time.Second, 10 * time.Second}, got)
}

// waitArmed waits until a timer of duration d has been armed.
func waitArmed(t *testing.T, armed <-chan time.Duration, d time.Duration) {
	t.Helper()
	for {
		select {
		case a := <-armed:
			if a == d {
				return
			}
		case <-time.After(fzWatchdog):
			t.Fatalf("no timer of %v armed", d)
		}
	}
}
