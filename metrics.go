package mqlite

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// StatsObserver receives a Stats snapshot every Options.StatsInterval, so
// a program can export them (Prometheus, OpenTelemetry, logs) without
// mqlite depending on any of those, and once more right after retention
// deletes segments before their retention age (Stats.Retention).
// ObserveStats runs on a goroutine of the store (the monitor, the
// retention pass, or the caller of CleanExpired): it must return quickly
// and must not call Close or CleanExpired.
type StatsObserver interface {
	ObserveStats(Stats)
}

// ThroughputStats are rates and totals of the write and read paths.
type ThroughputStats struct {
	// Puts and Gets count messages stored and messages read (by
	// consumers, ReadQueue, Messages, lookups) since Open.
	Puts, Gets int64
	// PutTPS and GetTPS are messages per second over the last second of
	// the store's clock.
	PutTPS, GetTPS float64
	// FlushP50, FlushP99 and FlushMax are the durations of the last
	// (up to 1024) CommitLog flushes.
	FlushP50, FlushP99, FlushMax time.Duration
	// Flushes counts CommitLog flushes since Open.
	Flushes int64
	// DiskFull and FlowControl say whether sends are being refused.
	DiskFull, FlowControl bool
}

// metrics are the counters behind ThroughputStats.
type metrics struct {
	puts, gets atomic.Int64
	flushes    atomic.Int64

	mu       sync.Mutex
	flushDur [1024]time.Duration
	flushN   int
	lastPuts int64
	lastGets int64
	putTPS   float64
	getTPS   float64
	lastAt   time.Time
}

// timedFlusher wraps the CommitLog for the flush services, timing each
// flush (wall time: it measures the disk, not the store's clock).
type timedFlusher struct{ s *Store }

func (f timedFlusher) Flush() (int64, error) {
	start := time.Now()
	off, err := f.s.log.Flush()
	f.s.metrics.recordFlush(time.Since(start))
	return off, err
}
func (f timedFlusher) WrotePosition() int64   { return f.s.log.WrotePosition() }
func (f timedFlusher) FlushedPosition() int64 { return f.s.log.FlushedPosition() }

func (m *metrics) recordFlush(d time.Duration) {
	m.flushes.Add(1)
	m.mu.Lock()
	m.flushDur[m.flushN%len(m.flushDur)] = d
	m.flushN++
	m.mu.Unlock()
}

// sample updates the rates; the monitor calls it about once a second.
func (m *metrics) sample(now time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	p, g := m.puts.Load(), m.gets.Load()
	if !m.lastAt.IsZero() {
		if dt := now.Sub(m.lastAt).Seconds(); dt > 0 {
			m.putTPS, m.getTPS = float64(p-m.lastPuts)/dt, float64(g-m.lastGets)/dt
		}
	}
	m.lastPuts, m.lastGets, m.lastAt = p, g, now
}

func (m *metrics) snapshot(s *Store) ThroughputStats {
	m.mu.Lock()
	n := min(m.flushN, len(m.flushDur))
	durs := slices.Clone(m.flushDur[:n])
	t := ThroughputStats{Puts: m.puts.Load(), Gets: m.gets.Load(), PutTPS: m.putTPS, GetTPS: m.getTPS,
		Flushes: m.flushes.Load(), DiskFull: s.guard.diskFull.Load(), FlowControl: s.guard.busy.Load()}
	m.mu.Unlock()
	if n > 0 {
		slices.Sort(durs)
		t.FlushP50, t.FlushP99, t.FlushMax = durs[n/2], durs[min(n-1, n*99/100)], durs[n-1]
	}
	return t
}
