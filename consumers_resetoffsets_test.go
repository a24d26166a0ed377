package mqlite

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqlite/mqlite/clock"
	"github.com/mqlite/mqlite/consumer"
)

// ResetConsumerOffsets moves a stopped group to a time on every queue of a
// topic, the reset survives a reopen, and the store refuses it while the
// group runs, when read-only and after Close.
func TestResetConsumerOffsets(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	clk := clock.NewFake(t0)
	o := &Options{Clock: clk}
	s, err := Open(dir, o)
	require.NoError(t, err)
	ctx := context.Background()
	require.NoError(t, s.CreateTopic("t", TopicConfig{Queues: 2}))
	for i := range 6 { // queue i%2, offset i/2, stored at t0 + i s
		_, err := s.Put(ctx, &Message{Topic: "t", Body: []byte("m")}, i%2)
		require.NoError(t, err)
		clk.Advance(time.Second)
	}
	c, err := s.NewPullConsumer("g", ConsumerOptions{ConsumeFromWhere: ConsumeFromFirstOffset, AutoCommit: true})
	require.NoError(t, err)
	require.NoError(t, c.Subscribe("t", nil))
	for n := 0; n < 6; {
		msgs, err := c.Poll(ctx, 10)
		require.NoError(t, err)
		n += len(msgs)
	}
	_, err = s.ResetConsumerOffsets("g", "t", t0)
	require.ErrorIs(t, err, ErrGroupActive)
	require.ErrorIs(t, s.SetConsumerOffset("g", "t", 0, 0), ErrGroupActive)
	require.NoError(t, c.Close())

	// Queue 0 holds t0, t0+2s, t0+4s; queue 1 t0+1s, t0+3s, t0+5s.
	offs, err := s.ResetConsumerOffsets("g", "t", t0.Add(2*time.Second))
	require.NoError(t, err)
	want := []ConsumerOffset{{Queue: consumer.Queue{Topic: "t", ID: 0}, Offset: 1}, {Queue: consumer.Queue{Topic: "t", ID: 1}, Offset: 1}}
	require.Equal(t, want, offs)
	require.NoError(t, s.SetConsumerOffset("g", "t", 1, 3))
	require.ErrorIs(t, s.SetConsumerOffset("g", "t", 1, 4), ErrInvalidArgument)
	_, err = s.ResetConsumerOffsets("nope", "t", t0)
	require.ErrorIs(t, err, ErrGroupNotFound)
	require.NoError(t, s.Close())
	_, err = s.ResetConsumerOffsets("g", "t", t0)
	require.ErrorIs(t, err, ErrClosed)

	// A clustering group also tracks its retry topic, which the reset leaves alone.
	want[1].Offset = 3
	want = append([]ConsumerOffset{{Queue: consumer.Queue{Topic: "%RETRY%g", ID: 0}}}, want...)
	ro, err := Open(dir, &Options{ReadOnly: true})
	require.NoError(t, err)
	got, err := ro.ConsumerOffsets("g")
	require.NoError(t, err)
	require.Equal(t, want, got)
	_, err = ro.ResetConsumerOffsets("g", "t", t0)
	require.ErrorIs(t, err, ErrReadOnly)
	require.ErrorIs(t, ro.SetConsumerOffset("g", "t", 0, 0), ErrReadOnly)
	require.NoError(t, ro.Close())

	// The group's next consumer starts where the reset put it.
	s, err = Open(dir, o)
	require.NoError(t, err)
	defer s.Close()
	c, err = s.NewPullConsumer("g", ConsumerOptions{})
	require.NoError(t, err)
	require.NoError(t, c.Subscribe("t", nil))
	seen := map[int][]int64{}
	for n := 0; n < 2; {
		msgs, err := c.Poll(ctx, 10)
		require.NoError(t, err)
		for _, m := range msgs {
			seen[m.QueueID] = append(seen[m.QueueID], m.QueueOffset)
		}
		n += len(msgs)
	}
	require.Equal(t, map[int][]int64{0: {1, 2}}, seen)
	require.NoError(t, c.Close())
}
