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
	if err := p.checkBatch(msgs); err != nil {
		return nil, err
	}
	queue, err := p.pick(msgs[0])
	if err != nil {
		return nil, err
	}
	rs, err := p.st.AppendBatch(msgs, queue)
	if err != nil {
		return nil, err
	}
	out := make([]SendResult, len(rs))
	for i, r := range rs {
		out[i] = SendResult{Topic: msgs[0].Topic, PutResult: r}
	}
	err = p.st.AwaitDurable(ctx, rs[len(rs)-1].End())
	for i := range out {
		out[i], _ = finish(out[i], err)
	}
	return out, err
}

func (p *Producer) checkBatch(msgs []*message.Message) error {
	if len(msgs) == 0 {
		return fmt.Errorf("mqlite/producer: empty batch: %w", errs.ErrInvalidArgument)
	}
	total := 0
	for i, m := range msgs {
		if m == nil {
			return fmt.Errorf("mqlite/producer: batch message %d: %w", i, message.ErrNilMessage)
		}
		if err := p.st.Validate(m); err != nil {
			return fmt.Errorf("mqlite/producer: batch message %d: %w", i, err)
		}
		if m.Topic != msgs[0].Topic {
			return fmt.Errorf("mqlite/producer: batch message %d has topic %q, the batch %q: %w", i, m.Topic, msgs[0].Topic, errs.ErrInvalidArgument)
		}
		if m.DelayLevel != 0 || !m.DeliverAt.IsZero() {
			return fmt.Errorf("mqlite/producer: batch message %d: delayed messages cannot be batched: %w", i, message.ErrInvalidDelay)
		}
		if err := p.checkSize(m); err != nil {
			return fmt.Errorf("mqlite/producer: batch message %d: %w", i, err)
		}
		total += len(m.Body)
	}
	if total > MaxBatchBytes {
		return fmt.Errorf("mqlite/producer: batch bodies total %d bytes, the limit is %d: %w", total, MaxBatchBytes, errs.ErrMessageTooLarge)
	}
	return nil
}
