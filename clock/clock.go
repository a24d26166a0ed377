// Package clock is mqlite's injectable time source. Every timer, ticker and
// timestamp the store uses comes from a Clock, so tests and users' test
// harnesses can move time forward instantly with a Fake (or run the real
// clock inside testing/synctest).
package clock

import (
	"sort"
	"sync"
	"time"
)

// Clock tells time and makes timers.
type Clock interface {
	Now() time.Time
	// NewTimer fires once after d.
	NewTimer(d time.Duration) Timer
	// NewTicker fires every d.
	NewTicker(d time.Duration) Ticker
}

// Timer is a one-shot timer.
type Timer interface {
	C() <-chan time.Time
	Stop() bool
	// Reset makes a stopped or fired timer fire d from now, with no stale
	// value left in C (as time.Timer since Go 1.23).
	Reset(d time.Duration)
}

// AtTimer is implemented by clocks that can arm a timer for an instant
// rather than a duration (Fake): a duration is relative to when the timer
// is armed, and a clock that moves between reading it and arming would
// arm it late. NewTimerAt fires once the clock reaches t, at once if it
// has.
type AtTimer interface {
	NewTimerAt(t time.Time) Timer
}

// Ticker fires periodically.
type Ticker interface {
	C() <-chan time.Time
	Stop()
}

// Real is the system clock.
var Real Clock = realClock{}

type realClock struct{}

func (realClock) Now() time.Time                 { return time.Now() }
func (realClock) NewTimer(d time.Duration) Timer { return realTimer{time.NewTimer(d)} }
func (realClock) NewTicker(d time.Duration) Ticker {
	return realTicker{time.NewTicker(max(d, time.Nanosecond))}
}

type realTimer struct{ t *time.Timer }

func (t realTimer) C() <-chan time.Time   { return t.t.C }
func (t realTimer) Stop() bool            { return t.t.Stop() }
func (t realTimer) Reset(d time.Duration) { t.t.Reset(d) }

type realTicker struct{ t *time.Ticker }

func (t realTicker) C() <-chan time.Time { return t.t.C }
func (t realTicker) Stop()               { t.t.Stop() }

// Fake is a manual clock: time moves only when Advance or Set is called,
// firing every timer and ticker that falls due, in order.
type Fake struct {
	mu      sync.Mutex
	now     time.Time
	waiters []*fakeWaiter
}

// NewFake returns a Fake clock set to start.
func NewFake(start time.Time) *Fake { return &Fake{now: start} }

type fakeWaiter struct {
	f      *Fake
	at     time.Time
	period time.Duration // 0 for a timer
	ch     chan time.Time
}

// Now returns the fake time.
func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

// NewTimer returns a timer firing when the fake time reaches now+d.
func (f *Fake) NewTimer(d time.Duration) Timer { return f.add(d, 0) }

// NewTicker returns a ticker firing every d of fake time.
func (f *Fake) NewTicker(d time.Duration) Ticker {
	d = max(d, time.Nanosecond)
	return fakeTicker{f.add(d, d)}
}

// NewTimerAt returns a timer firing when the fake time reaches t (AtTimer).
func (f *Fake) NewTimerAt(t time.Time) Timer {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.addLocked(t, 0)
}

func (f *Fake) add(d, period time.Duration) *fakeWaiter {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.addLocked(f.now.Add(d), period)
}

func (f *Fake) addLocked(at time.Time, period time.Duration) *fakeWaiter {
	w := &fakeWaiter{f: f, at: at, period: period, ch: make(chan time.Time, 1)}
	if !at.After(f.now) && period == 0 {
		w.ch <- f.now
		return w
	}
	f.waiters = append(f.waiters, w)
	return w
}

// Advance moves the fake time forward by d.
func (f *Fake) Advance(d time.Duration) { f.Set(f.Now().Add(d)) }

// Set moves the fake time to t (never backwards), firing due timers. A
// ticker that missed several periods fires once, as time.Ticker drops ticks.
func (f *Fake) Set(t time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if t.Before(f.now) {
		return
	}
	f.now = t
	sort.Slice(f.waiters, func(i, j int) bool { return f.waiters[i].at.Before(f.waiters[j].at) })
	kept := f.waiters[:0]
	for _, w := range f.waiters {
		if w.at.After(t) {
			kept = append(kept, w)
			continue
		}
		select {
		case w.ch <- w.at:
		default:
		}
		if w.period > 0 {
			for !w.at.After(t) {
				w.at = w.at.Add(w.period)
			}
			kept = append(kept, w)
		}
	}
	f.waiters = kept
}

// Waiters reports how many timers and tickers are pending, so a test can
// wait until a goroutine has armed its timer before advancing.
func (f *Fake) Waiters() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.waiters)
}

func (w *fakeWaiter) C() <-chan time.Time { return w.ch }

// Reset re-arms the timer d of fake time from now, dropping a value it
// fired and nobody received.
func (w *fakeWaiter) Reset(d time.Duration) {
	w.Stop()
	f := w.f
	f.mu.Lock()
	defer f.mu.Unlock()
	select {
	case <-w.ch:
	default:
	}
	w.at = f.now.Add(d)
	if d <= 0 && w.period == 0 {
		w.ch <- f.now
		return
	}
	f.waiters = append(f.waiters, w)
}

type fakeTicker struct{ *fakeWaiter }

func (t fakeTicker) Stop() { t.fakeWaiter.Stop() }

func (w *fakeWaiter) Stop() bool {
	f := w.f
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, x := range f.waiters {
		if x == w {
			f.waiters = append(f.waiters[:i], f.waiters[i+1:]...)
			return true
		}
	}
	return false
}
