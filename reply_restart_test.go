package mqlite

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mqlite/mqlite/clock"
	"github.com/mqlite/mqlite/vfs"
)

// TestRequestReplyModes: a request answered by a push handler, in memory
// and on files with each flush mode.
func TestRequestReplyModes(t *testing.T) {
	for _, o := range []Options{{InMemory: true}, {Flush: FlushAsync}, {Flush: FlushSync}} {
		t.Run(fmt.Sprintf("inmemory=%v/%v", o.InMemory, o.Flush), func(t *testing.T) {
			o.Clock = clock.NewFake(t0)
			s, err := openFS(vfs.NewMem(), "/d", smallFiles(&o))
			require.NoError(t, err)
			defer s.Close()
			require.NoError(t, s.CreateTopic("req", TopicConfig{Queues: 1}))
			c, err := s.NewPushConsumer("replier", ConsumerOptions{ConsumeFromWhere: ConsumeFromFirstOffset})
			require.NoError(t, err)
			require.NoError(t, c.Subscribe("req", nil))
			require.NoError(t, c.Start(func(ctx context.Context, ms []*MessageExt) ConsumeResult {
				for _, m := range ms {
					if _, err := s.Reply(ctx, m, append([]byte("re:"), m.Body...)); err != nil {
						return ReconsumeLater
					}
				}
				return ConsumeSuccess
			}))
			p, err := s.NewProducer(ProducerOptions{})
			require.NoError(t, err)
			for i := range 3 {
				rep, err := p.Request(context.Background(), &Message{Topic: "req", Body: []byte(fmt.Sprint(i))})
				require.NoError(t, err)
				require.Equal(t, fmt.Sprintf("re:%d", i), string(rep.Body))
				require.Equal(t, int64(i), rep.QueueOffset)
			}
			require.Equal(t, RequestStats{Replies: 3}, requestStats(t, s))
		})
	}
}

// TestReplyAfterReopen: a request whose requester went away with the
// store (its callback got ErrClosed) is still stored; answered after a
// reopen, the reply is stored, counted late, and survives the next reopen
// in the reply topic, which is a system topic.
func TestReplyAfterReopen(t *testing.T) {
	fs := vfs.NewMem()
	clk := clock.NewFake(t0)
	s := delayStore(t, fs, clk)
	require.NoError(t, s.CreateTopic("req", TopicConfig{Queues: 1}))
	p, err := s.NewProducer(ProducerOptions{})
	require.NoError(t, err)
	done := make(chan error, 1)
	require.NoError(t, p.RequestAsync(context.Background(), &Message{Topic: "req", Body: []byte("q")}, func(m *MessageExt, err error) { done <- err }))
	require.NoError(t, s.Close())
	require.ErrorIs(t, <-done, ErrClosed)

	ctx := context.Background()
	s = delayStore(t, fs, clk)
	reqs, err := s.ReadQueue(ctx, "req", 0, 0, 10)
	require.NoError(t, err)
	require.Len(t, reqs, 1)
	require.Equal(t, RequestStats{}, requestStats(t, s))
	res, err := s.Reply(ctx, reqs[0], []byte("a"))
	require.NoError(t, err)
	require.Equal(t, RequestStats{LateReplies: 1}, requestStats(t, s))
	require.NoError(t, s.Close())

	s = delayStore(t, fs, clk)
	reps, err := s.ReadQueue(ctx, ReplyTopic, 0, 0, 10)
	require.NoError(t, err)
	require.Len(t, reps, 1)
	require.Equal(t, "a", string(reps[0].Body))
	require.Equal(t, res.MsgID(), reps[0].MsgID)
	require.Equal(t, reqs[0].Properties[PropCorrelationID], reps[0].Properties[PropCorrelationID])
	require.Equal(t, ReplyMessageFlag, reps[0].Properties[PropMessageType])
	found := false
	for _, ti := range s.Topics() {
		if ti.Name == ReplyTopic {
			found = true
			require.True(t, ti.System)
		}
	}
	require.True(t, found, "reply topic registered")
	require.NoError(t, s.Close())

	// Read-only: Reply is refused and stores nothing.
	ro, err := openFS(fs, "/d", smallFiles(&Options{Clock: clk, SegmentSize: 1 << 20, ReadOnly: true}))
	require.NoError(t, err)
	defer ro.Close()
	_, err = ro.Reply(ctx, reqs[0], []byte("b"))
	require.ErrorIs(t, err, ErrReadOnly)
	reps, err = ro.ReadQueue(ctx, ReplyTopic, 0, 0, 10)
	require.NoError(t, err)
	require.Len(t, reps, 1)
}
