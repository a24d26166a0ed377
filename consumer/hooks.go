package consumer

import (
	"context"
	"time"

	"github.com/mqlite/mqlite/hook"
	"github.com/mqlite/mqlite/message"
)

// handle runs the handler on batch, with the consume hooks around it when
// there are any (unset: one check). A handler panic passes through
// AfterConsume as a failure and on to invoke's recover.
func (m *member) handle(ctx context.Context, batch []*message.MessageExt) ConsumeResult {
	if m.o.Hooks.BeforeConsume == nil && m.o.Hooks.AfterConsume == nil {
		return m.h(ctx, batch) // inlined: no hooks, no extra call
	}
	return m.handleHooked(ctx, batch)
}

func (m *member) handleHooked(ctx context.Context, batch []*message.MessageExt) (res ConsumeResult) {
	h := &m.o.Hooks
	e := hook.ConsumeEvent{Group: m.group, Member: m.id, Messages: batch}
	ctx = h.BeforeConsumeCtx(ctx, e)
	if h.AfterConsume == nil {
		return m.h(ctx, batch)
	}
	start := time.Now()
	res = ReconsumeLater
	defer func() {
		e.Success, e.Duration = res == ConsumeSuccess, time.Since(start)
		h.AfterConsume(ctx, e)
	}()
	return m.h(ctx, batch)
}

// polledHook runs BeforeConsume for the messages a Poll returns; it
// returns nil (a hook cannot fail a Poll).
func (m *member) polledHook(ctx context.Context, out []*message.MessageExt) error {
	if m.o.Hooks.BeforeConsume != nil {
		m.o.Hooks.BeforeConsume(ctx, hook.ConsumeEvent{Group: m.group, Member: m.id, Messages: out, Pull: true})
	}
	return nil
}
