package producer

import (
	"context"
	"fmt"
	"sync"

	"github.com/mqlite/mqlite/internal/errs"
	"github.com/mqlite/mqlite/message"
)

// MaxBatchBytes bounds the total body size of a batch, as RocketMQ's.
const MaxBatchBytes = 4 << 20

// SendBatch stores msgs, all of one topic, in one queue as one contiguous
// append, so readers see all of them or none, in order; with FlushSync
// they share one sync. The queue is chosen from the first message (its
// ShardingKey, the Selector, or round robin). As in RocketMQ a batch may
// not carry delayed messages and is never compressed, and its bodies
// total at most MaxBatchBytes. If any message is invalid nothing is
// stored. Results are in message order; on ErrFlushTimeout every result
// has Status FlushDiskTimeout.
func (p *Producer) SendBatch(ctx context.Context, msgs []*message.Message) ([]SendResult, error) {
	if p == nil {
		return nil, errs.NilReceiver("producer.Producer")
	}
	if p.opts.Hooks.Sends() {
		return p.sendBatchHooked(ctx, msgs, nil)
	}
	return p.sendBatch(ctx, msgs, nil)
}

// SendBatchInto is SendBatch returning the results in dst's memory when
// cap(dst) >= len(msgs) (as dst[:len(msgs)], overwritten), else in a
// new slice: a sender that passes the previous batch's results back in
// allocates nothing per batch (on a store whose sink writes into the
// caller's memory, as the root package's does), which spares the
// garbage collector a result per message. The results must not be used
// after being passed in again.
func (p *Producer) SendBatchInto(ctx context.Context, msgs []*message.Message, dst []SendResult) ([]SendResult, error) {
	if p == nil {
		return nil, errs.NilReceiver("producer.Producer")
	}
	if p.opts.Hooks.Sends() {
		return p.sendBatchHooked(ctx, msgs, dst)
	}
	return p.sendBatch(ctx, msgs, dst)
}

// sendBatch is SendBatch without hooks, its results in dst when it has
// room.
func (p *Producer) sendBatch(ctx context.Context, msgs []*message.Message, dst []SendResult) ([]SendResult, error) {
	if err := errs.CheckContext(ctx, "mqlite/producer: send batch"); err != nil {
		return nil, err
	}
	if p.async.closed.Load() {
		return nil, fmt.Errorf("mqlite/producer: send batch: %w", errs.ErrClosed)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	send := func() ([]message.PutResult, error) { return p.sink.SendBatch(ctx, msgs, &p.opts, &p.picker) }
	if into, ok := p.sink.(BatchIntoSink); ok && cap(dst) > 0 {
		scratch := putScratch(cap(dst))
		defer batchScratch.Put(scratch)
		send = func() ([]message.PutResult, error) {
			return into.SendBatchInto(ctx, msgs, &p.opts, &p.picker, *scratch)
		}
	}
	rs, err := send()
	for attempt := 1; ; attempt++ {
		var last message.PutResult
		if len(rs) > 0 {
			last = rs[len(rs)-1]
		}
		again, redo := p.retry(ctx, attempt, last, err)
		if !again {
			break
		}
		if redo {
			rs, err = send()
		} else {
			err = p.st.AwaitDurable(ctx, last.End())
		}
	}
	if len(rs) == 0 || !stored(rs[0]) {
		return nil, err
	}
	out := dst[:0]
	if cap(dst) < len(rs) {
		out = make([]SendResult, len(rs))
	}
	out = out[:len(rs)]
	for i, r := range rs {
		out[i], _ = finish(SendResult{Topic: msgs[0].Topic, PutResult: r}, err)
	}
	return out, err
}

// batchScratch holds the PutResults of batch sends into the caller's
// memory (SendBatchInto) between sends: *[]message.PutResult.
var batchScratch sync.Pool

// putScratch returns a scratch of room for n PutResults, from the pool.
func putScratch(n int) *[]message.PutResult {
	sp, _ := batchScratch.Get().(*[]message.PutResult)
	if sp == nil {
		sp = new([]message.PutResult)
	}
	if cap(*sp) < n {
		*sp = make([]message.PutResult, n)
	}
	return sp
}
