package producer

import (
	"context"
	"fmt"

	"github.com/mqlite/mqlite/internal/errs"
	"github.com/mqlite/mqlite/message"
)

// Wait says what a send does about durability once its message is stored.
type Wait int

const (
	// WaitDurable waits until the message is durable as the store's flush
	// mode promises (Send, SendBatch).
	WaitDurable Wait = iota
	// WaitKick starts making it durable and returns (SendOneway, Request).
	WaitKick
	// WaitLater does neither: the caller waits for many sends at once
	// with AwaitDurable (SendAsync).
	WaitLater
)

// Sink is the store's write path as a Producer drives it: a whole send in
// one call, its topic resolved once. An Appender that also implements Sink
// (the root package's does) gets every send through it; any other gets
// the step-by-step calls of its interface.
type Sink interface {
	// Send validates m (the store's rules, then CheckSize), resolves its
	// topic (creating it with o.AutoCreateQueues queues when the store
	// allows), picks its queue with pick, compresses it (Compress),
	// stores it, and does what w says. A message that fails a check
	// stores nothing.
	Send(ctx context.Context, m *message.Message, o *Options, pick *Picker, w Wait) (message.PutResult, error)
	// SendBatch checks msgs (CheckBatch), resolves their topic, picks one
	// queue with pick from the first message, stores them as one
	// contiguous append and waits until they are durable.
	SendBatch(ctx context.Context, msgs []*message.Message, o *Options, pick *Picker) ([]message.PutResult, error)
}

// BatchIntoSink is a Sink whose batch send can write its results into
// the caller's memory: SendBatch, with the results in dst[:len(msgs)]
// when cap(dst) allows (else in a new slice). SendBatchInto uses it to
// allocate nothing per batch.
type BatchIntoSink interface {
	SendBatchInto(ctx context.Context, msgs []*message.Message, o *Options, pick *Picker, dst []message.PutResult) ([]message.PutResult, error)
}

// CheckSize checks m's body against o.MaxMessageSize (0: no limit of the
// producer's own).
func CheckSize(m *message.Message, o *Options) error {
	if o.MaxMessageSize > 0 && len(m.Body) > o.MaxMessageSize {
		return fmt.Errorf("%w: body of %d bytes, the producer's limit is %d", errs.ErrMessageTooLarge, len(m.Body), o.MaxMessageSize)
	}
	return nil
}

// Compress returns m with its body compressed when o asks for it
// (CompressOver) and m is not compressed already; m itself is never
// modified.
func Compress(m *message.Message, o *Options) (*message.Message, error) {
	if o.CompressOver > 0 && len(m.Body) >= o.CompressOver && m.SysFlag&message.SysCompressed == 0 {
		return compressed(m, o.CompressLevel)
	}
	return m, nil
}

// CheckBatch checks a batch as SendBatch promises: not empty, every
// message valid (validate: the store's rules; then CheckSize), one
// topic, none delayed, bodies within MaxBatchBytes.
func CheckBatch(msgs []*message.Message, o *Options, validate func(*message.Message) error) error {
	if len(msgs) == 0 {
		return fmt.Errorf("mqlite/producer: empty batch: %w", errs.ErrInvalidArgument)
	}
	total := 0
	for i, m := range msgs {
		if m == nil {
			return fmt.Errorf("mqlite/producer: batch message %d: %w", i, message.ErrNilMessage)
		}
		if err := validate(m); err != nil {
			return fmt.Errorf("mqlite/producer: batch message %d: %w", i, err)
		}
		if m.Topic != msgs[0].Topic {
			return fmt.Errorf("mqlite/producer: batch message %d has topic %q, the batch %q: %w", i, m.Topic, msgs[0].Topic, errs.ErrInvalidArgument)
		}
		if m.DelayLevel != 0 || !m.DeliverAt.IsZero() {
			return fmt.Errorf("mqlite/producer: batch message %d: delayed messages cannot be batched: %w", i, message.ErrInvalidDelay)
		}
		if err := CheckSize(m, o); err != nil {
			return fmt.Errorf("mqlite/producer: batch message %d: %w", i, err)
		}
		total += len(m.Body)
	}
	if total > MaxBatchBytes {
		return fmt.Errorf("mqlite/producer: batch bodies total %d bytes, the limit is %d: %w", total, MaxBatchBytes, errs.ErrMessageTooLarge)
	}
	return nil
}

// stepSink drives an Appender that is not a Sink through its step-by-step
// calls.
type stepSink struct{ st Appender }

func (k stepSink) Send(ctx context.Context, m *message.Message, o *Options, pick *Picker, w Wait) (message.PutResult, error) {
	if err := k.st.Validate(m); err != nil {
		return message.PutResult{}, err
	}
	if err := CheckSize(m, o); err != nil {
		return message.PutResult{}, err
	}
	queue, err := k.pick(m, o, pick)
	if err != nil {
		return message.PutResult{}, err
	}
	out, err := Compress(m, o)
	if err != nil {
		return message.PutResult{}, err
	}
	r, err := k.st.Append(out, queue)
	if err != nil {
		return message.PutResult{}, err
	}
	switch w {
	case WaitDurable:
		return r, k.st.AwaitDurable(ctx, r.End())
	case WaitKick:
		k.st.Kick(r.End())
	}
	return r, nil
}

func (k stepSink) SendBatch(ctx context.Context, msgs []*message.Message, o *Options, pick *Picker) ([]message.PutResult, error) {
	if err := CheckBatch(msgs, o, k.st.Validate); err != nil {
		return nil, err
	}
	queue, err := k.pick(msgs[0], o, pick)
	if err != nil {
		return nil, err
	}
	rs, err := k.st.AppendBatch(msgs, queue)
	if err != nil {
		return nil, err
	}
	return rs, k.st.AwaitDurable(ctx, rs[len(rs)-1].End())
}

// pick resolves the topic and selects a queue for m.
func (k stepSink) pick(m *message.Message, o *Options, pick *Picker) (int, error) {
	n, err := k.st.QueueCount(m.Topic, o.AutoCreateQueues)
	if err != nil {
		return 0, err
	}
	return pick.Pick(m, n)
}
