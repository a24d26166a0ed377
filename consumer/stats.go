package consumer

import "sync/atomic"

// Stats describes a consumer: totals since it was created and the state of
// each queue it holds.
type Stats struct {
	// Fetched counts messages returned by Source.Pull.
	Fetched int64
	// Consumed counts messages of handler calls that returned
	// ConsumeSuccess (push) or messages returned by Poll (pull).
	Consumed int64
	// Failed counts messages of handler calls that failed (ReconsumeLater,
	// panic or timeout).
	Failed int64
	// SentBack counts messages handed to Source.SendBack successfully;
	// SendBackErrors the calls that failed.
	SentBack, SendBackErrors int64
	// Redelivered counts messages queued again locally after a failure.
	Redelivered int64
	// Dropped counts broadcast messages given up after MaxReconsumeTimes.
	Dropped int64
	// Timeouts counts handler calls cancelled by ConsumeTimeout; Panics
	// handler calls that panicked.
	Timeouts, Panics int64
	// Skipped counts offsets jumped over because they fell below a queue's
	// min offset (deleted by retention before being consumed).
	Skipped int64
	// SkippedDamaged counts messages jumped over because the store could
	// not read them (Options.SkipDamaged).
	SkippedDamaged int64
	// FlowControlled counts the times a queue's fetching paused on the
	// cache limits.
	FlowControlled int64
	// FetchErrors counts failed Pulls (each retried after a pause); see
	// QueueStats.FetchError.
	FetchErrors int64
	// Queues describes each queue held, sorted.
	Queues []QueueStats
}

// QueueStats describes one queue held by a consumer.
type QueueStats struct {
	Queue
	// Active is false while the queue waits for its lock.
	Active bool
	// NextOffset is the fetch position.
	NextOffset int64
	// Committed is the group's committed offset for the queue (-1: none).
	Committed int64
	// CachedCount and CachedBytes are the messages fetched and not yet
	// consumed (push) or polled (pull): what the QueueCache limits bound.
	CachedCount int
	CachedBytes int64 // see CachedCount
	// Running is the number of batches handler goroutines took and have
	// not finished: calls in progress and the batches waiting behind them
	// in their runs (see the package doc).
	Running int
	// FetchError is why fetching from the queue fails, nil while it
	// works. The queue does not move past a record it cannot read: an
	// ErrCorrupt names the damaged file and offset, and fetching retries
	// every second until the record reads again or the consumer seeks
	// past it (pull: Seek; the store's Verify lists what is damaged), or,
	// with Options.SkipDamaged, steps over it at once.
	FetchError error
	// Paused is true while PushConsumer.Pause holds the queue.
	Paused bool
}

type counters struct {
	fetched, consumed, failed, sentBack, sendBackErrors, redelivered, dropped,
	timeouts, panics, skipped, skippedDamaged, flowControlled, fetchErrors atomic.Int64

	// workerConsumed adds to consumed: push workers count there, spread
	// over cache lines, so that handler calls on different cores do not
	// write one shared counter.
	workerConsumed [8]struct {
		n atomic.Int64
		_ [56]byte
	}
}

// addConsumed counts n messages consumed by push worker slot.
func (c *counters) addConsumed(slot int, n int64) {
	c.workerConsumed[slot%len(c.workerConsumed)].n.Add(n)
}

func (m *member) statsSnapshot() Stats {
	c := &m.stats
	s := Stats{
		Fetched: c.fetched.Load(), Consumed: c.consumed.Load(), Failed: c.failed.Load(),
		SentBack: c.sentBack.Load(), SendBackErrors: c.sendBackErrors.Load(), Redelivered: c.redelivered.Load(),
		Dropped: c.dropped.Load(), Timeouts: c.timeouts.Load(), Panics: c.panics.Load(), Skipped: c.skipped.Load(), SkippedDamaged: c.skippedDamaged.Load(),
		FlowControlled: c.flowControlled.Load(), FetchErrors: c.fetchErrors.Load(),
	}
	for i := range c.workerConsumed {
		s.Consumed += c.workerConsumed[i].n.Load()
	}
	for _, p := range m.activeList() {
		p.mu.Lock()
		qs := QueueStats{Queue: p.q, Active: p.mu.state == pqActive, NextOffset: p.mu.next, Committed: -1,
			CachedCount: p.mu.cachedN, CachedBytes: p.mu.cachedBytes, Running: p.mu.running, FetchError: p.mu.fetchErr, Paused: p.mu.paused}
		p.mu.Unlock()
		if off, ok := m.mg.offsets.get(p.key); ok {
			qs.Committed = off
		}
		s.Queues = append(s.Queues, qs)
	}
	return s
}
