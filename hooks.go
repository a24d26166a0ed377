package mqlite

import (
	"context"
	"log/slog"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/mqlite/mqlite/hook"
	"github.com/mqlite/mqlite/message"
	"github.com/mqlite/mqlite/topic"
	"github.com/mqlite/mqlite/txn"
)

// Hook types; see package hook for the events and their order.
type (
	// Hooks intercept a store's message events: set store-wide on
	// Options.Hooks, per producer on ProducerOptions.Hooks, per consumer
	// on ConsumerOptions.Hooks.
	Hooks = hook.Hooks
	// SendEvent describes a finished send (Hooks.AfterSend).
	SendEvent = hook.SendEvent
	// StoreEvent describes an appended record (Hooks.Stored).
	StoreEvent = hook.StoreEvent
	// ConsumeEvent describes a delivery (Hooks.BeforeConsume, AfterConsume).
	ConsumeEvent = hook.ConsumeEvent
	// RetryEvent describes a retry or a death (Hooks.Retry, DeadLetter).
	RetryEvent = hook.RetryEvent
	// RedriveEvent describes a re-drive (Hooks.Redrive).
	RedriveEvent = hook.RedriveEvent
	// TxEvent describes a transaction decision (Hooks.TxDecision).
	TxEvent = hook.TxEvent
)

// storeHooks are the store-wide hooks, each wrapped to recover panics.
type storeHooks struct {
	h      hook.Hooks
	log    *slog.Logger
	panics atomic.Int64
}

// init wraps the Options' hooks, after the message trace's when
// Options.MessageTrace is on (a user's hook sees a step once it is
// traced).
func (sh *storeHooks) init(s *Store) {
	sh.log = s.opts.Logger
	if sh.log == nil {
		sh.log = slog.New(slog.DiscardHandler)
	}
	h := s.opts.Hooks
	if s.opts.MessageTrace {
		h = hook.Chain(tracer{s}.hooks(), h)
	}
	sh.h = hook.Safe(h, sh.onPanic)
}

func (sh *storeHooks) onPanic(name string, v any) {
	sh.panics.Add(1)
	sh.log.Error("mqlite: hook panicked; recovered", "hook", name, "panic", v)
}

// merge returns the store-wide hooks chained with a producer's or
// consumer's own (wrapped as the store's are).
func (sh *storeHooks) merge(own hook.Hooks) hook.Hooks {
	return hook.Chain(sh.h, hook.Safe(own, sh.onPanic))
}

// putHooked is Put with the send hooks around it.
func (s *Store) putHooked(ctx context.Context, m *Message, queue int) (PutResult, error) {
	h := &s.hooks.h
	start := time.Now()
	if m != nil {
		ctx = h.BeforeSendCtx(ctx, m)
	}
	res, err := s.put(ctx, m, queue)
	if h.AfterSend != nil && m != nil {
		h.AfterSend(ctx, hook.SendEvent{Message: m, Result: res, Err: err, Duration: time.Since(start)})
	}
	return res, err
}

// putBatchHooked is PutBatch with the send hooks around it.
func (s *Store) putBatchHooked(ctx context.Context, msgs []*Message, queue int) ([]PutResult, error) {
	return hook.AroundBatch(&s.hooks.h, ctx, msgs, func() ([]PutResult, error) { return s.putBatch(ctx, msgs, queue) },
		func(r PutResult) PutResult { return r })
}

// stored runs the Stored hook for an appended record.
func (s *Store) stored(m *Message, topic string, res PutResult) {
	if f := s.hooks.h.Stored; f != nil {
		f(hook.StoreEvent{Message: m, Topic: topic, Result: res})
	}
}

// sentBack runs the Retry or DeadLetter hook once SendBack stored c (the
// copy of the failed delivery m) without error, and returns err.
func (s *Store) sentBack(group string, m *MessageExt, c *Message, delay time.Duration, err error) error {
	if err != nil {
		return err
	}
	h := &s.hooks.h
	if c.Topic == topic.DLQTopic(group) {
		if h.DeadLetter != nil {
			h.DeadLetter(hook.RetryEvent{Group: group, Message: m, Attempt: m.ReconsumeTimes, Topic: c.Topic})
		}
		return nil
	}
	if h.Retry != nil {
		h.Retry(hook.RetryEvent{Group: group, Message: m, Attempt: c.ReconsumeTimes, Delay: delay, Topic: c.Topic})
	}
	return nil
}

// redriven runs the Redrive hook.
func (s *Store) redriven(group string, dead *MessageExt, c *Message, r PutResult) {
	if f := s.hooks.h.Redrive; f != nil {
		f(hook.RedriveEvent{Group: group, DeadID: dead.MsgID, Dead: dead, Message: c, Result: r})
	}
}

// txDecided runs the TxDecision hook when m, just stored by the
// transaction service, records a transaction's outcome. It reads the half
// message back for its ID and topic (only when the hook is set).
func (s *Store) txDecided(ctx context.Context, m *Message) {
	f := s.hooks.h.TxDecision
	if f == nil || m.Topic != topic.OpHalf || m.Tags != txn.OpTagDone {
		return
	}
	off, err := strconv.ParseInt(string(m.Body), 10, 64)
	if err != nil {
		return
	}
	e := hook.TxEvent{State: m.Properties[txn.PropTxState], HalfOffset: off}
	if err := s.WaitVisible(ctx); err != nil {
		s.hooks.log.Warn("mqlite: TxDecision hook: half message not visible", "err", err)
	} else if half, err := (txnHost{s}).Read(topic.Half, 0, off, 1); err == nil && len(half) == 1 {
		e.TransactionID = half[0].UniqKey
		e.Topic = half[0].Properties[message.PropRealTopic]
	}
	f(e)
}
