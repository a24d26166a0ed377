package mqlite

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqlite/mqlite/clock"
	"github.com/mqlite/mqlite/vfs"
)

// TestSettlePushRetryToDLQ drives a message through a push consumer's
// retry path to the dead-letter queue on a fake clock, with Settle as the
// only barrier: the handler fails every time, and after each Advance to
// the next retry's due time exactly one more call has happened, never
// early. Run it many times (-count 1000) to check that Settle is a
// barrier, not luck.
func TestSettlePushRetryToDLQ(t *testing.T) {
	const maxRetries = 3
	clk := clock.NewFake(t0)
	s := delayStore(t, vfs.NewMem(), clk)
	defer s.Close()
	ctx := context.Background()
	require.NoError(t, s.CreateTopic("orders", TopicConfig{Queues: 2}))
	c, err := s.NewPushConsumer("g", ConsumerOptions{MaxReconsumeTimes: maxRetries, ConsumeFromWhere: ConsumeFromFirstOffset})
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, c.Subscribe("orders", nil))
	var calls atomic.Int32
	var lastTimes atomic.Int32
	require.NoError(t, c.Start(func(_ context.Context, ms []*MessageExt) ConsumeResult {
		calls.Add(int32(len(ms)))
		lastTimes.Store(ms[0].ReconsumeTimes)
		return ReconsumeLater
	}))
	p, err := s.NewProducer(ProducerOptions{})
	require.NoError(t, err)
	_, err = p.Send(ctx, &Message{Topic: "orders", Body: []byte("pay")})
	require.NoError(t, err)

	require.NoError(t, s.Settle(ctx))
	require.Equal(t, int32(1), calls.Load(), "first delivery")
	for i := 1; i <= maxRetries; i++ {
		wait := s.retryDelay("g", i)
		clk.Advance(wait - time.Millisecond)
		require.NoError(t, s.Settle(ctx))
		require.Equal(t, int32(i), calls.Load(), "retry %d came early", i)
		clk.Advance(time.Millisecond)
		require.NoError(t, s.Settle(ctx))
		require.Equal(t, int32(i+1), calls.Load(), "retry %d after %s", i, wait)
		require.Equal(t, int32(i), lastTimes.Load())
	}
	dead, err := s.DeadLetters("g", 0, 10)
	require.NoError(t, err)
	require.Len(t, dead, 1, "the last failure goes to the DLQ")
	require.Equal(t, "pay", string(dead[0].Body))
	clk.Advance(3 * time.Hour)
	require.NoError(t, s.Settle(ctx))
	require.Equal(t, int32(maxRetries+1), calls.Load(), "nothing after the DLQ")
}

// TestTryPollAfterSettle: on a fake clock, Settle then TryPoll returns a
// message sent just before, and TryPoll with nothing ready returns none
// at once.
func TestTryPollAfterSettle(t *testing.T) {
	clk := clock.NewFake(t0)
	s := delayStore(t, vfs.NewMem(), clk)
	defer s.Close()
	ctx := context.Background()
	require.NoError(t, s.CreateTopic("t", TopicConfig{Queues: 1}))
	c, err := s.NewPullConsumer("g", ConsumerOptions{ConsumeFromWhere: ConsumeFromFirstOffset})
	require.NoError(t, err)
	require.NoError(t, c.Subscribe("t", nil))
	require.NoError(t, s.Settle(ctx))
	ms, err := c.TryPoll(10)
	require.NoError(t, err)
	require.Empty(t, ms)
	_, err = s.Put(ctx, &Message{Topic: "t", Body: []byte("a"), DelayLevel: 1}, 0)
	require.NoError(t, err)
	require.NoError(t, s.Settle(ctx))
	ms, err = c.TryPoll(10)
	require.NoError(t, err)
	require.Empty(t, ms, "delayed message before its time")
	clk.Advance(time.Second)
	require.NoError(t, s.Settle(ctx))
	done, cancel := context.WithCancel(ctx)
	cancel()
	ms, err = c.Poll(done, 10)
	require.NoError(t, err, "a ready message is returned even with ctx done")
	require.Len(t, ms, 1)
	require.Equal(t, "a", string(ms[0].Body))
}
