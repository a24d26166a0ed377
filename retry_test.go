package mqlite

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqlite/mqlite/clock"
	"github.com/mqlite/mqlite/vfs"
)

// TestRetryLadderThenDeadLetter fails one message every time, as a pull
// consumer that says "reconsume later" would: it comes back 16 times on
// RocketMQ's schedule (10s, 30s, 1m, ... 2h), then lands once in the
// dead-letter queue, and re-driving it delivers it to its topic again.
func TestRetryLadderThenDeadLetter(t *testing.T) {
	clk := clock.NewFake(t0)
	s := delayStore(t, vfs.NewMem(), clk)
	defer s.Close()
	require.NoError(t, s.CreateTopic("orders", TopicConfig{Queues: 1}))
	ctx := context.Background()
	_, err := s.Put(ctx, &Message{Topic: "orders", Tags: "paid", Keys: []string{"o-7"}, Body: []byte("pay")}, 0)
	require.NoError(t, err)
	cur := readN(t, s, "orders", 0, 1)[0]
	firstID := cur.MsgID
	ladder := []time.Duration{10 * time.Second, 30 * time.Second, time.Minute, 2 * time.Minute, 3 * time.Minute,
		4 * time.Minute, 5 * time.Minute, 6 * time.Minute, 7 * time.Minute, 8 * time.Minute, 9 * time.Minute,
		10 * time.Minute, 20 * time.Minute, 30 * time.Minute, time.Hour, 2 * time.Hour}
	for i, wait := range ladder {
		require.NoError(t, s.SendBack(ctx, "g", cur))
		due := clk.Now().Add(wait)
		clk.Set(due.Add(-time.Millisecond))
		require.NoError(t, s.WaitVisible(ctx))
		if n, err := s.MaxOffset("%RETRY%g", 0); err == nil {
			require.Equal(t, int64(i), n, "retry %d not before its time", i+1)
		}
		clk.Set(due)
		cur = readRange(t, s, "%RETRY%g", 0, i, i+1)[0]
		require.Equal(t, due, cur.StoreTimestamp.UTC(), "retry %d after %s", i+1, wait)
		require.Equal(t, int32(i+1), cur.ReconsumeTimes)
		require.Equal(t, "orders", cur.Properties[PropRetryTopic])
		require.Equal(t, firstID, cur.Properties[PropOriginMsgID])
		require.Equal(t, "pay", string(cur.Body))
	}
	require.NoError(t, s.SendBack(ctx, "g", cur))
	require.NoError(t, s.WaitVisible(ctx))
	dead, err := s.DeadLetters("g", 0, 10)
	require.NoError(t, err)
	require.Len(t, dead, 1)
	require.Equal(t, "%DLQ%g", dead[0].Topic)
	require.Equal(t, "orders", dead[0].Properties[PropRetryTopic])
	require.Equal(t, []string{"o-7"}, dead[0].Keys)
	require.Equal(t, "paid", dead[0].Tags)
	require.Equal(t, int32(16), dead[0].ReconsumeTimes)
	n, err := s.MaxOffset("%RETRY%g", 0)
	require.NoError(t, err)
	require.Equal(t, int64(16), n, "no 17th retry")

	_, err = s.Redrive(ctx, "g", dead[0].MsgID)
	require.NoError(t, err)
	again := readRange(t, s, "orders", 0, 1, 2)[0]
	require.Equal(t, "pay", string(again.Body))
	require.Zero(t, again.ReconsumeTimes)
	require.NotContains(t, again.Properties, PropRetryTopic)
	_, err = s.Redrive(ctx, "other", dead[0].MsgID)
	require.ErrorIs(t, err, ErrInvalidArgument)
	next, err := s.RedriveAll(ctx, "g", 0)
	require.NoError(t, err)
	require.Equal(t, int64(1), next)
	readRange(t, s, "orders", 0, 2, 3)
}

func TestRetryPoliciesAndExplicitDelay(t *testing.T) {
	clk := clock.NewFake(t0)
	s := delayStore(t, vfs.NewMem(), clk)
	defer s.Close()
	require.Equal(t, 10*time.Second, s.retryDelay("y", 1))
	s.retry.set("x", RetryExponential)
	require.Equal(t, []time.Duration{5 * time.Second, 10 * time.Second, 20 * time.Second, 2 * time.Hour, 2 * time.Hour},
		[]time.Duration{s.retryDelay("x", 1), s.retryDelay("x", 2), s.retryDelay("x", 3), s.retryDelay("x", 12), s.retryDelay("x", 40)})
	require.Equal(t, 10*time.Second, s.retryDelay("y", 1), "a group's policy is its own")
	require.Equal(t, 2*time.Hour, s.retryDelay("y", 16))

	ctx := context.Background()
	_, err := s.Put(ctx, &Message{Topic: "o", Body: []byte("x")}, 0)
	require.NoError(t, err)
	m := readN(t, s, "o", 0, 1)[0]
	RetryAfter(m, 1500*time.Millisecond) // not a level: a timer
	require.NoError(t, s.SendBack(ctx, "x", m))
	clk.Set(t0.Add(1500 * time.Millisecond))
	require.NoError(t, s.WaitVisible(ctx))
	clk.Set(t0.Add(2 * time.Second)) // timers fire on whole seconds, never early
	got := readN(t, s, "%RETRY%x", 0, 1)[0]
	require.Equal(t, t0.Add(2*time.Second), got.StoreTimestamp.UTC(), "timers round up to the second")
	require.NotContains(t, got.Properties, propRetryDelay)

	RetryAfter(got, 0)
	require.NoError(t, s.SendBack(ctx, "x", got))
	require.NoError(t, s.WaitVisible(ctx))
	dead, err := s.DeadLetters("x", 0, 5)
	require.NoError(t, err)
	require.Len(t, dead, 1, "a zero delay means dead at once")

	require.ErrorIs(t, s.SendBack(ctx, "", m), ErrInvalidArgument)
	require.ErrorIs(t, s.SendBack(ctx, "g", nil), ErrInvalidArgument)
	_, err = s.DeadLetters("g", 0, 0)
	require.ErrorIs(t, err, ErrInvalidArgument)
}

// TestDeadLetterOnce: a message sent back past its limit twice (as after
// a crash between the DLQ write and the consumer's commit) is dead once.
func TestDeadLetterOnce(t *testing.T) {
	clk := clock.NewFake(t0)
	s := delayStore(t, vfs.NewMem(), clk)
	defer s.Close()
	ctx := context.Background()
	_, err := s.Put(ctx, &Message{Topic: "o", Body: []byte("x")}, 0)
	require.NoError(t, err)
	m := readN(t, s, "o", 0, 1)[0]
	m.ReconsumeTimes = DefaultMaxReconsumeTimes
	require.NoError(t, s.SendBack(ctx, "g", m))
	require.NoError(t, s.SendBack(ctx, "g", m))
	require.NoError(t, s.WaitVisible(ctx))
	dead, err := s.DeadLetters("g", 0, 10)
	require.NoError(t, err)
	require.Len(t, dead, 1)
}

// TestSendBackTwiceStartsOneRetryChain: the same delivery failed twice
// (as after a crash before the consumer's commit) is retried once.
func TestSendBackTwiceStartsOneRetryChain(t *testing.T) {
	clk := clock.NewFake(t0)
	s := delayStore(t, vfs.NewMem(), clk)
	defer s.Close()
	ctx := context.Background()
	_, err := s.Put(ctx, &Message{Topic: "o", Body: []byte("x")}, 0)
	require.NoError(t, err)
	m := readN(t, s, "o", 0, 1)[0]
	require.NoError(t, s.SendBack(ctx, "g", m))
	require.NoError(t, s.SendBack(ctx, "g", m))
	clk.Advance(10 * time.Second)
	retry := readN(t, s, "%RETRY%g", 0, 1)[0]
	require.NoError(t, s.WaitVisible(ctx))
	n, err := s.MaxOffset("%RETRY%g", 0)
	require.NoError(t, err)
	require.Equal(t, int64(1), n, "one retry")
	// The retry fails in turn: a new chain link, not blocked by the first.
	require.NoError(t, s.SendBack(ctx, "g", retry))
	clk.Advance(30 * time.Second)
	require.Equal(t, int32(2), readN(t, s, "%RETRY%g", 0, 2)[1].ReconsumeTimes)
}
