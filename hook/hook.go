// Package hook owns the interceptors a service sets around a store's
// message events: send, store, deliver, consume, retry, dead-letter,
// re-drive and transaction decisions (RocketMQ's SendMessageHook and
// ConsumeMessageHook). It is a leaf package (it imports only message) so
// that the producer, consumer and root packages can all carry a Hooks.
//
// Every field of Hooks is optional; a nil field costs one nil check. The
// root package chains the Hooks of Options (store-wide) with those of
// ProducerOptions or ConsumerOptions (store-wide first) and wraps each
// function so that a panic is recovered and counted (Stats.HookPanics)
// instead of breaking a send or a delivery.
//
// # Order
//
// For one message sent and consumed once by one push consumer:
//
//	BeforeSend -> Stored -> AfterSend -> BeforeConsume -> AfterConsume
//
// Stored runs for every record the store appends, under any topic: a
// delayed message is Stored twice (under the schedule or timer topic with
// Result.Delayed set, then under its own topic when due), a retried
// message again under the group's retry topic, a dead one under the DLQ
// topic. A failed push delivery runs AfterConsume (Success false), then
// Retry or DeadLetter per message sent back (clustering groups; an
// orderly consumer retries locally first, and broadcasting groups retry
// only locally). A pull consumer's Poll runs BeforeConsume with Pull set
// (there is no AfterConsume: its ack is the commit), and its
// ReconsumeLater runs Retry or DeadLetter. Redrive runs Stored then
// Redrive. A transaction's commit or rollback runs TxDecision once the
// decision record is stored (by the producer or by a check-back). A
// batch runs BeforeSend for every message in order, then Stored for each,
// then AfterSend for each.
//
// Hooks run on the goroutine of the event (the sender, the consumer's
// handler goroutine, the store's delay service) and must be safe for
// concurrent use. They must not keep the messages they are given past the
// call unless they copy what they need (a consumer with ReuseMessages
// recycles them).
package hook

import (
	"context"
	"time"

	"github.com/mqlite/mqlite/message"
)

// Hooks are interceptors of a store's message events. The zero value has
// none set.
type Hooks struct {
	// BeforeSend runs before a message is validated and stored. It may
	// read and change m's Properties (creating the map when nil), e.g. to
	// add a trace context; the message is validated after it. The context
	// it returns is the one AfterSend gets (nil: ctx unchanged).
	BeforeSend func(ctx context.Context, m *message.Message) context.Context
	// AfterSend runs once a send's message is stored or refused, with the
	// context BeforeSend returned.
	AfterSend func(ctx context.Context, e SendEvent)
	// Stored runs for every record the store appends (store-wide Options
	// only), inside the send, before the flush wait.
	Stored func(e StoreEvent)
	// BeforeConsume runs before a push consumer's handler gets a batch,
	// and when a pull consumer's Poll returns messages. For a push
	// consumer the context it returns is the handler's (nil: unchanged).
	BeforeConsume func(ctx context.Context, e ConsumeEvent) context.Context
	// AfterConsume runs when a push consumer's handler returns, with the
	// context BeforeConsume returned.
	AfterConsume func(ctx context.Context, e ConsumeEvent)
	// Retry runs when a message a group failed to consume is stored in
	// its retry path (store-wide Options only).
	Retry func(e RetryEvent)
	// DeadLetter runs when a message is stored in a group's dead-letter
	// topic (store-wide Options only).
	DeadLetter func(e RetryEvent)
	// Redrive runs when a dead message is sent back to its topic
	// (store-wide Options only).
	Redrive func(e RedriveEvent)
	// TxDecision runs when a transaction's outcome is recorded
	// (store-wide Options only).
	TxDecision func(e TxEvent)
}

// SendEvent describes a finished send.
type SendEvent struct {
	// Message is the message sent (read only).
	Message *message.Message
	// Result is where it went; zero when Err is set.
	Result message.PutResult
	// Err is why it was not stored, or nil.
	Err error
	// Duration is the time from BeforeSend to the store (before the flush
	// wait), on the wall clock.
	Duration time.Duration
	// Batch is the batch's size for a message of a batch, else 0.
	Batch int
	// Producer is the sending producer's Group; empty for a Store's own
	// Put and PutBatch and for a producer without one.
	Producer string
}

// StoreEvent describes a record the store appended.
type StoreEvent struct {
	// Message is the message as stored (read only): for a delayed one,
	// under the schedule or timer topic.
	Message *message.Message
	// Topic is the topic it is stored under.
	Topic string
	// Result is where it went. Result.Delayed is set for a delayed message
	// on its way to the schedule or timer topic.
	Result message.PutResult
}

// ConsumeEvent describes messages handed to a consumer.
type ConsumeEvent struct {
	Group  string
	Member string
	// Messages are the batch (read only; valid only during the call).
	Messages []*message.MessageExt
	// Pull is true for a pull consumer's Poll.
	Pull bool
	// Success is the handler's verdict (AfterConsume only).
	Success bool
	// Duration is the handler's run time on the wall clock (AfterConsume
	// only).
	Duration time.Duration
}

// RetryEvent describes a failed message sent to the retry path or to
// the dead-letter topic.
type RetryEvent struct {
	Group string
	// Message is the delivery that failed (read only).
	Message *message.MessageExt
	// Attempt is the new reconsume count (Retry), or the count it died
	// with (DeadLetter).
	Attempt int32
	// Delay is the wait before the retry is delivered (Retry only).
	Delay time.Duration
	// Topic is where the copy went (%RETRY%group through the schedule or
	// timer topic, or %DLQ%group).
	Topic string
}

// RedriveEvent describes a dead message sent back to its topic.
type RedriveEvent struct {
	Group string
	// DeadID is the ID of the message in the dead-letter topic.
	DeadID string
	// Dead is that message (read only).
	Dead *message.MessageExt
	// Message is the new message (read only).
	Message *message.Message
	// Result is where it went.
	Result message.PutResult
}

// TxEvent describes a transaction's recorded outcome.
type TxEvent struct {
	// TransactionID is the half message's unique key ("" when the half
	// message could not be read back).
	TransactionID string
	// Topic is the message's real topic ("" as TransactionID).
	Topic string
	// State is "COMMIT_MESSAGE", "ROLLBACK_MESSAGE" or "DISCARD".
	State string
	// HalfOffset is the half message's queue offset.
	HalfOffset int64
}

// Sends reports whether h has a send hook.
func (h *Hooks) Sends() bool { return h.BeforeSend != nil || h.AfterSend != nil }

// Consumes reports whether h has a consume hook.
func (h *Hooks) Consumes() bool { return h.BeforeConsume != nil || h.AfterConsume != nil }
