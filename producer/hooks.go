package producer

import (
	"context"
	"time"

	"github.com/mqlite/mqlite/hook"
	"github.com/mqlite/mqlite/message"
)

// store validates, routes and appends m, running the send hooks around it
// when there are any (unset: one check and storeMsg).
func (p *Producer) store(ctx context.Context, m *message.Message, w Wait) (SendResult, error) {
	h := &p.opts.Hooks
	if !h.Sends() {
		return p.storeMsg(ctx, m, w)
	}
	start := time.Now()
	if m != nil {
		ctx = h.BeforeSendCtx(ctx, m)
	}
	res, err := p.storeMsg(ctx, m, w)
	if h.AfterSend != nil && m != nil {
		h.AfterSend(ctx, hook.SendEvent{Message: m, Result: res.PutResult, Err: err, Duration: time.Since(start)})
	}
	return res, err
}

// sendBatchHooked is sendBatch with BeforeSend run for every message in
// order, then AfterSend for every message.
func (p *Producer) sendBatchHooked(ctx context.Context, msgs []*message.Message) ([]SendResult, error) {
	h := &p.opts.Hooks
	start := time.Now()
	ctxs := make([]context.Context, len(msgs))
	for i, m := range msgs {
		ctxs[i] = ctx
		if m != nil {
			ctxs[i] = h.BeforeSendCtx(ctx, m)
		}
	}
	out, err := p.sendBatch(ctx, msgs)
	if h.AfterSend == nil {
		return out, err
	}
	d := time.Since(start)
	for i, m := range msgs {
		if m == nil {
			continue
		}
		e := hook.SendEvent{Message: m, Err: err, Duration: d, Batch: len(msgs)}
		if i < len(out) {
			e.Result = out[i].PutResult
		}
		h.AfterSend(ctxs[i], e)
	}
	return out, err
}
