package producer

import (
	"context"
	"fmt"

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
		return p.sendBatchHooked(ctx, msgs)
	}
	return p.sendBatch(ctx, msgs)
}

// sendBatch is SendBatch without hooks.
func (p *Producer) sendBatch(ctx context.Context, msgs []*message.Message) ([]SendResult, error) {
	if err := errs.CheckContext(ctx, "mqlite/producer: send batch"); err != nil {
		return nil, err
	}
	if p.async.closed.Load() {
		return nil, fmt.Errorf("mqlite/producer: send batch: %w", errs.ErrClosed)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	rs, err := p.sink.SendBatch(ctx, msgs, &p.opts, &p.picker)
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
			rs, err = p.sink.SendBatch(ctx, msgs, &p.opts, &p.picker)
		} else {
			err = p.st.AwaitDurable(ctx, last.End())
		}
	}
	if len(rs) == 0 || !stored(rs[0]) {
		return nil, err
	}
	out := make([]SendResult, len(rs))
	for i, r := range rs {
		out[i], _ = finish(SendResult{Topic: msgs[0].Topic, PutResult: r}, err)
	}
	return out, err
}
