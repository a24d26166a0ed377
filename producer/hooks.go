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
func (p *Producer) sendBatchHooked(ctx context.Context, msgs []*message.Message, dst []SendResult) ([]SendResult, error) {
	return hook.AroundBatch(&p.opts.Hooks, ctx, msgs, func() ([]SendResult, error) { return p.sendBatch(ctx, msgs, dst) },
		func(r SendResult) message.PutResult { return r.PutResult })
}
