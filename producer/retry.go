package producer

import (
	"context"
	"errors"
	"time"

	"github.com/mqlite/mqlite/internal/errs"
	"github.com/mqlite/mqlite/message"
)

// DefaultRetryTimes is how often a send that failed for a transient
// reason is tried again when Options.RetryTimesWhenSendFailed is 0:
// RocketMQ's retryTimesWhenSendFailed.
const DefaultRetryTimes = 2

// DefaultRetryBackoff is the wait before the first retry when
// Options.RetryBackoff is 0; it doubles with each retry, up to 8 times.
const DefaultRetryBackoff = 100 * time.Millisecond

// retries is how many times a failed send is tried again.
func (o *Options) retries() int {
	switch {
	case o.RetryTimesWhenSendFailed < 0:
		return 0
	case o.RetryTimesWhenSendFailed == 0:
		return DefaultRetryTimes
	}
	return o.RetryTimesWhenSendFailed
}

// retry decides what to do after attempt (1, 2, ...) of a send ended
// with err, r being what it stored (nothing: a zero result). It says
// whether to try again: after a flow-control refusal (nothing was
// stored) it waits the backoff first, bounded by ctx; after a flush
// timeout (the message is stored) again means waiting for that message
// again (redo false), never storing it twice.
func (p *Producer) retry(ctx context.Context, attempt int, r message.PutResult, err error) (again, redo bool) {
	if err == nil || attempt > p.opts.retries() {
		return false, false
	}
	switch {
	case stored(r) && errors.Is(err, errs.ErrFlushTimeout):
		p.retried.Add(1)
		return true, false
	case !stored(r) && errors.Is(err, errs.ErrFlowControl):
		if p.backoff(ctx, attempt) != nil {
			return false, false
		}
		p.retried.Add(1)
		return true, true
	}
	return false, false
}

// backoff waits before retry attempt, on the store's clock when the store
// has one (Replies), or until ctx ends.
func (p *Producer) backoff(ctx context.Context, attempt int) error {
	d := p.opts.RetryBackoff
	if d <= 0 {
		d = DefaultRetryBackoff
	}
	d <<= min(attempt-1, 3)
	if rp, ok := p.st.(Replies); ok {
		t := rp.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C():
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Retried is how many times this producer tried a send again
// (Options.RetryTimesWhenSendFailed).
func (p *Producer) Retried() int64 {
	if p == nil {
		return 0
	}
	return p.retried.Load()
}
