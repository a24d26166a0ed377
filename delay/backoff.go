package delay

import "time"

// Retry delays of the delay scheduler and the timer service after a failed
// delivery: RocketMQ retries a failed delivery in 100 ms and waits 10 s
// after an exception. A failure that persists (a damaged queue, a full
// disk) is retried with the delay doubled each time, up to 10 s, so that
// its warning shows a few times a minute rather than ten times a second.
const (
	retryFirst = 100 * time.Millisecond
	retryMax   = 10 * time.Second
)

// backoff is the delay before the next retry of one delivery loop. The
// zero value starts at retryFirst. It is owned by one goroutine.
type backoff struct{ next time.Duration }

// fail returns how long to wait before retrying after one more failure.
func (b *backoff) fail() time.Duration {
	d := max(b.next, retryFirst)
	b.next = min(2*d, retryMax)
	return d
}

// reset starts over after a success.
func (b *backoff) reset() { b.next = 0 }
