package mqlite

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqlite/mqlite/clock"
	"github.com/mqlite/mqlite/vfs"
)

// TestDelayedSendResult is issue 35 item 4: the result of a delayed send
// (a delay level, a producer's send, a deliver-at time) names the real
// topic and the queue the message will be delivered to, QueueOffset -1
// and Delayed; MessageByID of its ID returns the waiting message as it
// will be delivered, and once delivered the very message a reader gets.
func TestDelayedSendResult(t *testing.T) {
	clk := clock.NewFake(t0)
	s := delayStore(t, vfs.NewMem(), clk)
	defer s.Close()
	ctx := context.Background()
	require.NoError(t, s.CreateTopic("d", TopicConfig{Queues: 4}))
	_, err := s.Put(ctx, &Message{Topic: "d", Body: []byte("plain")}, 2)
	require.NoError(t, err)

	r, err := s.Put(ctx, &Message{Topic: "d", DelayLevel: 5, Body: []byte("delayed")}, 2)
	require.NoError(t, err)
	require.True(t, r.Delayed)
	require.Equal(t, 2, r.QueueID, "the queue it will be delivered to, not the delay level's")
	require.EqualValues(t, -1, r.QueueOffset, "assigned at delivery")

	p, err := s.NewProducer(ProducerOptions{})
	require.NoError(t, err)
	defer p.Close()
	sr, err := p.Send(ctx, &Message{Topic: "d", DelayLevel: 5, Body: []byte("sent")})
	require.NoError(t, err)
	require.Equal(t, "d", sr.Topic)
	require.True(t, sr.Delayed)
	require.Less(t, sr.QueueID, 4)
	require.EqualValues(t, -1, sr.QueueOffset)

	tr, err := s.Put(ctx, &Message{Topic: "d", DeliverAt: t0.Add(90 * time.Second), Body: []byte("timer")}, 3)
	require.NoError(t, err)
	require.True(t, tr.Delayed)
	require.Equal(t, 3, tr.QueueID)
	require.EqualValues(t, -1, tr.QueueOffset)

	plain, err := s.Put(ctx, &Message{Topic: "d", Body: []byte("plain")}, 2)
	require.NoError(t, err)
	require.False(t, plain.Delayed)
	require.EqualValues(t, 1, plain.QueueOffset)
	require.NoError(t, s.WaitVisible(ctx))

	// Waiting: the message as it will be delivered.
	for _, c := range []struct {
		r     PutResult
		queue int
		body  string
	}{{r, 2, "delayed"}, {sr.PutResult, sr.QueueID, "sent"}, {tr, 3, "timer"}} {
		m, err := s.MessageByID(c.r.MsgID())
		require.NoError(t, err)
		require.Equal(t, "d", m.Topic)
		require.Equal(t, c.queue, m.QueueID)
		require.EqualValues(t, -1, m.QueueOffset)
		require.Equal(t, c.body, string(m.Body))
		require.NotContains(t, m.Properties, "REAL_TOPIC")
		require.Equal(t, c.r.UniqKey(), m.UniqKey)
	}

	// Delivered: the message in the queue, with its own ID and offset.
	clk.Advance(2 * time.Minute) // level 5 is 1 minute; the timer 90 s
	got := readRange(t, s, "d", 2, 2, 3)[0]
	require.Equal(t, "delayed", string(got.Body))
	m, err := s.MessageByID(r.MsgID())
	require.NoError(t, err)
	require.Equal(t, got.CommitLogOffset, m.CommitLogOffset)
	require.Equal(t, got.MsgID, m.MsgID)
	require.NotEqual(t, r.MsgID(), m.MsgID)
	require.EqualValues(t, 2, m.QueueOffset)
	require.EqualValues(t, 2, m.QueueID)
	require.Zero(t, m.DelayLevel)

	// The round robin may have sent "sent" to queue 3 too: the delay
	// levels and the timer service then deliver to it in either order.
	n := 1
	if sr.QueueID == 3 {
		n = 2
	}
	inQ3 := readRange(t, s, "d", 3, 0, n)
	timerOff := slices.IndexFunc(inQ3, func(m *MessageExt) bool { return string(m.Body) == "timer" })
	require.GreaterOrEqual(t, timerOff, 0, "no timer message in queue 3")
	got = inQ3[timerOff]
	m, err = s.MessageByID(tr.MsgID())
	require.NoError(t, err)
	require.Equal(t, got.CommitLogOffset, m.CommitLogOffset)
	require.EqualValues(t, timerOff, m.QueueOffset)
}
