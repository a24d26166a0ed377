package hook

import (
	"context"

	"github.com/mqlite/mqlite/message"
)

// Chain returns hooks that run a's then b's for every event (a field set
// in one only is that one's; neither: nil). Before hooks pass their
// contexts on: b's BeforeSend gets the context a's returned.
func Chain(a, b Hooks) Hooks {
	return Hooks{
		BeforeSend:    chainCtx(a.BeforeSend, b.BeforeSend),
		AfterSend:     chain2(a.AfterSend, b.AfterSend),
		Stored:        chain1(a.Stored, b.Stored),
		BeforeConsume: chainCtx(a.BeforeConsume, b.BeforeConsume),
		AfterConsume:  chain2(a.AfterConsume, b.AfterConsume),
		Retry:         chain1(a.Retry, b.Retry),
		DeadLetter:    chain1(a.DeadLetter, b.DeadLetter),
		Redrive:       chain1(a.Redrive, b.Redrive),
		TxDecision:    chain1(a.TxDecision, b.TxDecision),
	}
}

func chain1[E any](a, b func(E)) func(E) {
	if a == nil {
		return b
	}
	if b == nil {
		return a
	}
	return func(e E) { a(e); b(e) }
}

func chain2[E any](a, b func(context.Context, E)) func(context.Context, E) {
	if a == nil {
		return b
	}
	if b == nil {
		return a
	}
	return func(ctx context.Context, e E) { a(ctx, e); b(ctx, e) }
}

func chainCtx[E any](a, b func(context.Context, E) context.Context) func(context.Context, E) context.Context {
	if a == nil {
		return b
	}
	if b == nil {
		return a
	}
	return func(ctx context.Context, e E) context.Context {
		if c := a(ctx, e); c != nil {
			ctx = c
		}
		if c := b(ctx, e); c != nil {
			ctx = c
		}
		return ctx
	}
}

// Safe returns h with every function wrapped so that a panic is
// recovered and reported to onPanic (with the hook's name) instead of
// reaching the send or delivery that ran it. A Before hook that panics
// leaves the context as it was.
func Safe(h Hooks, onPanic func(name string, v any)) Hooks {
	return Hooks{
		BeforeSend:    safeCtx(h.BeforeSend, "BeforeSend", onPanic),
		AfterSend:     safe2(h.AfterSend, "AfterSend", onPanic),
		Stored:        safe1(h.Stored, "Stored", onPanic),
		BeforeConsume: safeCtx(h.BeforeConsume, "BeforeConsume", onPanic),
		AfterConsume:  safe2(h.AfterConsume, "AfterConsume", onPanic),
		Retry:         safe1(h.Retry, "Retry", onPanic),
		DeadLetter:    safe1(h.DeadLetter, "DeadLetter", onPanic),
		Redrive:       safe1(h.Redrive, "Redrive", onPanic),
		TxDecision:    safe1(h.TxDecision, "TxDecision", onPanic),
	}
}

func safe1[E any](f func(E), name string, onPanic func(string, any)) func(E) {
	if f == nil {
		return nil
	}
	return func(e E) {
		defer recoverTo(name, onPanic)
		f(e)
	}
}

func safe2[E any](f func(context.Context, E), name string, onPanic func(string, any)) func(context.Context, E) {
	if f == nil {
		return nil
	}
	return func(ctx context.Context, e E) {
		defer recoverTo(name, onPanic)
		f(ctx, e)
	}
}

func safeCtx[E any](f func(context.Context, E) context.Context, name string, onPanic func(string, any)) func(context.Context, E) context.Context {
	if f == nil {
		return nil
	}
	return func(ctx context.Context, e E) (out context.Context) {
		out = ctx
		defer recoverTo(name, onPanic)
		if c := f(ctx, e); c != nil {
			out = c
		}
		return out
	}
}

func recoverTo(name string, onPanic func(string, any)) {
	if v := recover(); v != nil && onPanic != nil {
		onPanic(name, v)
	}
}

// BeforeSendCtx runs h.BeforeSend if set and returns the context to go
// on with (ctx when unset or nil).
func (h *Hooks) BeforeSendCtx(ctx context.Context, m *message.Message) context.Context {
	if h.BeforeSend != nil {
		if c := h.BeforeSend(ctx, m); c != nil {
			return c
		}
	}
	return ctx
}

// BeforeConsumeCtx runs h.BeforeConsume if set and returns the context to
// go on with (ctx when unset or nil).
func (h *Hooks) BeforeConsumeCtx(ctx context.Context, e ConsumeEvent) context.Context {
	if h.BeforeConsume != nil {
		if c := h.BeforeConsume(ctx, e); c != nil {
			return c
		}
	}
	return ctx
}
