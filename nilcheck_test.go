package mqlite

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mqlite/mqlite/vfs"
)

// TestNilContextAndNilHandles calls every exported method that takes a
// context with a nil one, and the methods of nil handles: each returns an
// error matching ErrInvalidArgument instead of panicking, and nothing is
// stored.
func TestNilContextAndNilHandles(t *testing.T) {
	s, err := openFS(vfs.NewMem(), "/store", &Options{SegmentSize: 64 << 10})
	require.NoError(t, err)
	defer s.Close()
	require.NoError(t, s.CreateTopic("t", TopicConfig{Queues: 1}))
	p, err := s.NewProducer(ProducerOptions{})
	require.NoError(t, err)
	tp, err := s.NewTransactionProducer(func(context.Context, *MessageExt) TxState { return CommitMessage }, TransactionOptions{Group: "tx"})
	require.NoError(t, err)
	pc, err := s.NewPullConsumer("g", ConsumerOptions{})
	require.NoError(t, err)
	require.NoError(t, pc.Subscribe("t", nil))
	msg := func() *Message { return &Message{Topic: "t", Body: []byte("x")} }
	var nilCtx context.Context
	var nilStore *Store
	var nilProducer *Producer
	var nilTx *TransactionProducer
	var nilPush *PushConsumer
	var nilPull *PullConsumer
	ext := &MessageExt{Message: *msg()}

	cases := []struct {
		name string
		call func() error
	}{
		{"Producer.Send", func() error { _, err := p.Send(nilCtx, msg()); return err }},
		{"Producer.SendAsync", func() error { return p.SendAsync(nilCtx, msg(), func(SendResult, error) {}) }},
		{"Producer.SendBatch", func() error { _, err := p.SendBatch(nilCtx, []*Message{msg()}); return err }},
		{"TransactionProducer.SendInTransaction", func() error {
			_, err := tp.SendInTransaction(nilCtx, msg(), func(context.Context, *Message) TxState { return CommitMessage })
			return err
		}},
		{"PullConsumer.Poll", func() error { _, err := pc.Poll(nilCtx, 1); return err }},
		{"PullConsumer.ReconsumeLater", func() error { return pc.ReconsumeLater(nilCtx, ext) }},
		{"Store.Put", func() error { _, err := s.Put(nilCtx, msg(), 0); return err }},
		{"Store.PutBatch", func() error { _, err := s.PutBatch(nilCtx, []*Message{msg()}, 0); return err }},
		{"Store.SendBack", func() error { return s.SendBack(nilCtx, "g", ext) }},
		{"Store.Redrive", func() error { _, err := s.Redrive(nilCtx, "g", "0000000000000000"); return err }},
		{"Store.RedriveAll", func() error { _, err := s.RedriveAll(nilCtx, "g", 0); return err }},
		{"Store.ReadQueue", func() error { _, err := s.ReadQueue(nilCtx, "t", 0, 0, 1); return err }},
		{"Store.WaitVisible", func() error { return s.WaitVisible(nilCtx) }},
		{"Store.Verify", func() error { _, err := s.Verify(nilCtx, nil); return err }},
		{"Store.CheckTransactions", func() error { return s.CheckTransactions(nilCtx) }},
		{"Producer.Request", func() error { _, err := p.Request(nilCtx, msg()); return err }},
		{"Producer.RequestAsync", func() error { return p.RequestAsync(nilCtx, msg(), func(*MessageExt, error) {}) }},
		{"Store.Reply", func() error { _, err := s.Reply(nilCtx, ext, []byte("r")); return err }},

		{"nil Store.Close", func() error { return nilStore.Close() }},
		{"nil Store.Put", func() error { _, err := nilStore.Put(context.Background(), msg(), 0); return err }},
		{"nil Producer.Send", func() error { _, err := nilProducer.Send(context.Background(), msg()); return err }},
		{"nil Producer.SendOneway", func() error { return nilProducer.SendOneway(msg()) }},
		{"nil Producer.SendAsync", func() error {
			return nilProducer.SendAsync(context.Background(), msg(), func(SendResult, error) {})
		}},
		{"nil Producer.SendBatch", func() error { _, err := nilProducer.SendBatch(context.Background(), []*Message{msg()}); return err }},
		{"nil Producer.Close", func() error { return nilProducer.Close() }},
		{"nil Producer.Request", func() error { _, err := nilProducer.Request(context.Background(), msg()); return err }},
		{"nil Producer.RequestAsync", func() error {
			return nilProducer.RequestAsync(context.Background(), msg(), func(*MessageExt, error) {})
		}},
		{"nil Store.Reply", func() error { _, err := nilStore.Reply(context.Background(), ext, []byte("r")); return err }},
		{"nil TransactionProducer.Close", func() error { return nilTx.Close() }},
		{"nil PushConsumer.Subscribe", func() error { return nilPush.Subscribe("t", nil) }},
		{"nil PushConsumer.Start", func() error {
			return nilPush.Start(func(context.Context, []*MessageExt) ConsumeResult { return ConsumeSuccess })
		}},
		{"nil PushConsumer.Seek", func() error { return nilPush.Seek("t", 0, 0) }},
		{"nil PushConsumer.Shutdown", func() error { return nilPush.Shutdown(context.Background()) }},
		{"nil PushConsumer.Close", func() error { return nilPush.Close() }},
		{"nil PullConsumer.Poll", func() error { _, err := nilPull.Poll(context.Background(), 1); return err }},
		{"nil PullConsumer.Commit", func() error { return nilPull.Commit() }},
		{"nil PullConsumer.Close", func() error { return nilPull.Close() }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var err error
			require.NotPanics(t, func() { err = c.call() })
			require.ErrorIs(t, err, ErrInvalidArgument)
			require.False(t, errors.Is(err, ErrClosed), "%v", err)
		})
	}
	require.Empty(t, nilPush.Group()+nilPull.ID())
	require.Nil(t, nilPull.Assignment())
	require.Zero(t, nilPush.Stats().Consumed)
	n, err := s.MaxOffset("t", 0)
	require.NoError(t, err)
	require.Zero(t, n, "a call with a nil context stored a message")
}
