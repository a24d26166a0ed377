package hook

import (
	"context"
	"time"

	"github.com/mqlite/mqlite/message"
)

// AroundBatch runs h's send hooks around a batch send: BeforeSend for
// each message in order, then send, then AfterSend for each message with
// its result (put(r) reads the PutResult out of the send's result type).
// A store and a producer wrap their batch sends with it.
func AroundBatch[R any](h *Hooks, ctx context.Context, msgs []*message.Message,
	send func() ([]R, error), put func(R) message.PutResult) ([]R, error) {
	start := time.Now()
	ctxs := make([]context.Context, len(msgs))
	for i, m := range msgs {
		ctxs[i] = ctx
		if m != nil {
			ctxs[i] = h.BeforeSendCtx(ctx, m)
		}
	}
	out, err := send()
	if h.AfterSend == nil {
		return out, err
	}
	d := time.Since(start)
	for i, m := range msgs {
		if m == nil {
			continue
		}
		e := SendEvent{Message: m, Err: err, Duration: d, Batch: len(msgs)}
		if i < len(out) {
			e.Result = put(out[i])
		}
		h.AfterSend(ctxs[i], e)
	}
	return out, err
}
