package dashboard

import (
	"sync"
	"time"

	"github.com/mqlite/mqlite/clock"
)

// rates turns counters read on each view into rates: the change since the
// previous reading of the same counter, at least minRateSpan earlier, per
// second of the clock. The first view of a counter shows 0.
type rates struct {
	clk clock.Clock
	mu  sync.Mutex
	m   map[string]sample
}

type sample struct {
	at    time.Time
	count int64
	rate  float64
}

// minRateSpan is the shortest span a rate is computed over; views closer
// together show the last rate.
const minRateSpan = time.Second

// maxRateKeys bounds the samples kept (a store with very many queues
// viewed page by page): past it the map starts over.
const maxRateKeys = 1 << 17

func newRates(clk clock.Clock) *rates { return &rates{clk: clk, m: map[string]sample{}} }

// rate records count for key and returns its rate.
func (r *rates) rate(key string, count int64) float64 {
	now := r.clk.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	s, ok := r.m[key]
	if !ok {
		if len(r.m) >= maxRateKeys {
			clear(r.m)
		}
		r.m[key] = sample{at: now, count: count}
		return 0
	}
	if d := now.Sub(s.at); d >= minRateSpan {
		s.rate = float64(count-s.count) / d.Seconds()
		s.at, s.count = now, count
		r.m[key] = s
	}
	return s.rate
}
