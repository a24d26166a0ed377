package mqlite

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mqlite/mqlite/clock"
	"github.com/mqlite/mqlite/vfs"
)

// TestSubscribeBeforeTopicExists: consumers may start before the topic
// exists; a producer's first send (auto-create) gives their queues out
// at once, and they consume it. A bad name still fails.
func TestSubscribeBeforeTopicExists(t *testing.T) {
	clk := clock.NewFake(t0)
	s := delayStore(t, vfs.NewMem(), clk)
	defer s.Close()
	ctx := context.Background()
	push, err := s.NewPushConsumer("pg", ConsumerOptions{ConsumeFromWhere: ConsumeFromFirstOffset})
	require.NoError(t, err)
	require.NoError(t, push.Subscribe("later", nil))
	var got atomic.Int32
	require.NoError(t, push.Start(func(_ context.Context, ms []*MessageExt) ConsumeResult {
		got.Add(int32(len(ms)))
		return ConsumeSuccess
	}))
	pull, err := s.NewPullConsumer("lg", ConsumerOptions{ConsumeFromWhere: ConsumeFromFirstOffset})
	require.NoError(t, err)
	require.NoError(t, pull.Subscribe("created", nil))
	require.ErrorIs(t, pull.Subscribe("bad name!", nil), ErrInvalidArgument)

	p, err := s.NewProducer(ProducerOptions{})
	require.NoError(t, err)
	_, err = p.Send(ctx, &Message{Topic: "later", Body: []byte("x")})
	require.NoError(t, err)
	require.NoError(t, s.CreateTopic("created", TopicConfig{Queues: 2}))
	_, err = s.Put(ctx, &Message{Topic: "created", Body: []byte("y")}, 1)
	require.NoError(t, err)
	require.NoError(t, s.Settle(ctx))
	require.Equal(t, int32(1), got.Load(), "the push consumer got the message of the auto-created topic")
	ms, err := pull.TryPoll(10)
	require.NoError(t, err)
	require.Len(t, ms, 1)
	require.Equal(t, "y", string(ms[0].Body))
}

// TestRetryQueuesMarkedAndLagPrinted: a clustering group's retry queue
// is in Assignment and ConsumerLag, marked by IsRetry, and a lag prints
// every field.
func TestRetryQueuesMarkedAndLagPrinted(t *testing.T) {
	clk := clock.NewFake(t0)
	s := delayStore(t, vfs.NewMem(), clk)
	defer s.Close()
	ctx := context.Background()
	require.NoError(t, s.CreateTopic("orders", TopicConfig{Queues: 1}))
	for range 3 {
		_, err := s.Put(ctx, &Message{Topic: "orders", Body: []byte("x")}, 0)
		require.NoError(t, err)
	}
	c, err := s.NewPullConsumer("g", ConsumerOptions{ConsumeFromWhere: ConsumeFromFirstOffset})
	require.NoError(t, err)
	require.NoError(t, c.Subscribe("orders", nil))
	require.NoError(t, s.Settle(ctx))
	var retry []string
	for _, q := range c.Assignment() {
		if q.IsRetry() {
			retry = append(retry, q.String())
		}
	}
	require.Equal(t, []string{"%RETRY%g:0"}, retry)
	lags, err := s.ConsumerLag("g")
	require.NoError(t, err)
	var lines []string
	for _, l := range lags {
		lines = append(lines, fmt.Sprint(l))
	}
	require.ElementsMatch(t, []string{"orders:0 lag=3 committed=0 max=3", "%RETRY%g:0 lag=0 committed=0 max=0 (retry)"}, lines)
}

// TestErrorsSayWhatOnce: each layer adds its context once, and a
// reserved property name is called reserved.
func TestErrorsSayWhatOnce(t *testing.T) {
	s, err := openFS(vfs.NewMem(), "/store", &Options{SegmentSize: 64 << 10})
	require.NoError(t, err)
	defer s.Close()
	c, err := s.NewPullConsumer("g", ConsumerOptions{})
	require.NoError(t, err)
	err = c.Assign("nosuch", nil)
	require.ErrorIs(t, err, ErrTopicNotFound)
	require.Equal(t, `mqlite/consumer: assign: mqlite: topic not found: "nosuch"`, err.Error())
	require.Equal(t, 1, strings.Count(err.Error(), "nosuch"))

	_, err = s.Put(context.Background(), &Message{Topic: "t", Body: []byte("x"), Properties: map[string]string{"KEYS": "k"}}, 0)
	require.ErrorIs(t, err, ErrInvalidProperty)
	require.Contains(t, err.Error(), `"KEYS" is a reserved name`)
}

// TestRedriveReturnsSendResult: Redrive's result is a SendResult like a
// producer's, naming the topic the message went back to.
func TestRedriveReturnsSendResult(t *testing.T) {
	clk := clock.NewFake(t0)
	s := delayStore(t, vfs.NewMem(), clk)
	defer s.Close()
	ctx := context.Background()
	require.NoError(t, s.CreateTopic("orders", TopicConfig{Queues: 1}))
	_, err := s.Put(ctx, &Message{Topic: "orders", Body: []byte("pay")}, 0)
	require.NoError(t, err)
	m := readN(t, s, "orders", 0, 1)[0]
	m.ReconsumeTimes = 16
	require.NoError(t, s.SendBack(ctx, "g", m))
	require.NoError(t, s.WaitVisible(ctx))
	dead, err := s.DeadLetters("g", 0, 10)
	require.NoError(t, err)
	require.Len(t, dead, 1)
	var res SendResult
	res, err = s.Redrive(ctx, "g", dead[0].MsgID)
	require.NoError(t, err)
	require.Equal(t, "orders", res.Topic)
	require.Equal(t, SendOK, res.Status)
	require.Equal(t, int64(1), res.QueueOffset)
	back, err := s.MessageByID(res.ID())
	require.NoError(t, err)
	require.Equal(t, "pay", string(back.Body))
	require.Equal(t, res.QueueID, back.QueueID)
	require.Equal(t, res.MsgID(), back.ID())
}
