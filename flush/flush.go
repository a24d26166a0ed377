// Package flush owns mqlite's flush services: group commit for FlushSync
// (many waiting senders share one sync; a sender returns only after a sync
// that covers its record) and the periodic flusher for FlushAsync (on an
// interval when enough pages are dirty, everything at least every thorough
// interval, as RocketMQ's FlushRealTimeService does). Both drive any
// Flusher, such as a *commitlog.Log, and each owns one goroutine that stops
// on Close.
package flush

import "github.com/mqlite/mqlite/internal/errs"

// Flusher makes everything written so far durable and reports how far.
type Flusher interface {
	Flush() (int64, error)
	WrotePosition() int64
	FlushedPosition() int64
}

// ErrFlushTimeout is the same value as the root package's.
var ErrFlushTimeout = errs.ErrFlushTimeout
