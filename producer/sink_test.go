package producer

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mqlite/mqlite/message"
)

// countingSink is a Store that is also a Sink: it counts the calls of
// each kind, and its step-by-step methods fail the test.
type countingSink struct {
	t     *testing.T
	sends []Wait
	batch int
}

func (c *countingSink) Validate(*message.Message) error { c.t.Error("Validate called"); return nil }
func (c *countingSink) QueueCount(string, int) (int, error) {
	c.t.Error("QueueCount called")
	return 1, nil
}
func (c *countingSink) Append(*message.Message, int) (message.PutResult, error) {
	c.t.Error("Append called")
	return message.PutResult{}, nil
}
func (c *countingSink) AppendBatch([]*message.Message, int) ([]message.PutResult, error) {
	c.t.Error("AppendBatch called")
	return nil, nil
}
func (c *countingSink) AwaitDurable(context.Context, int64) error { return nil }
func (c *countingSink) Kick(int64)                                { c.t.Error("Kick called") }

func (c *countingSink) Send(_ context.Context, m *message.Message, _ *Options, _ *Picker, w Wait) (message.PutResult, error) {
	c.sends = append(c.sends, w)
	return message.PutResult{Size: 10, Offset: int64(10 * len(c.sends))}, nil
}

func (c *countingSink) SendBatch(_ context.Context, msgs []*message.Message, _ *Options, _ *Picker) ([]message.PutResult, error) {
	c.batch++
	rs := make([]message.PutResult, len(msgs))
	for i := range rs {
		rs[i] = message.PutResult{Size: 10}
	}
	return rs, nil
}

// TestSinkSendsInOneCall: a Store that is a Sink gets each send as one
// Sink call, with the durability each kind of send asks for, and none of
// the step-by-step calls (Validate, QueueCount, Append, AwaitDurable).
func TestSinkSendsInOneCall(t *testing.T) {
	st := &countingSink{t: t}
	p, err := New(st, Options{})
	require.NoError(t, err)
	defer p.Close()
	ctx := context.Background()
	m := &message.Message{Topic: "t", Body: []byte("x")}
	res, err := p.Send(ctx, m)
	require.NoError(t, err)
	require.Equal(t, "t", res.Topic)
	require.Equal(t, SendOK, res.Status)
	require.NoError(t, p.SendOneway(m))
	done := make(chan error, 1)
	require.NoError(t, p.SendAsync(ctx, m, func(_ SendResult, err error) { done <- err }))
	require.NoError(t, <-done)
	rs, err := p.SendBatch(ctx, []*message.Message{m, m})
	require.NoError(t, err)
	require.Len(t, rs, 2)
	require.Equal(t, []Wait{WaitDurable, WaitKick, WaitLater}, st.sends)
	require.Equal(t, 1, st.batch)
}
