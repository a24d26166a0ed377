package mqlite

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqlite/mqlite/clock"
	"github.com/mqlite/mqlite/delay"
	"github.com/mqlite/mqlite/vfs"
)

// TestSchedulerIsOneGoroutine: the delay levels share one goroutine,
// however many there are, idle or delivering: the scheduler starts two
// (the levels' and the one that saves their progress).
func TestSchedulerIsOneGoroutine(t *testing.T) {
	for _, n := range []int{len(DefaultDelayLevels), delay.MaxLevels} {
		levels := make([]time.Duration, n)
		for i := range levels {
			levels[i] = time.Duration(i+1) * time.Second
		}
		clk := clock.NewFake(t0)
		s, err := openFS(vfs.NewMem(), "/d", smallFiles(&Options{Clock: clk, SegmentSize: 1 << 20, DelayLevels: levels}))
		require.NoError(t, err)
		require.Equal(t, 2, goroutinesBy("github.com/mqlite/mqlite/delay.(*Scheduler).Start"), "%d levels", len(levels))
		require.NoError(t, s.CreateTopic("d", TopicConfig{Queues: 1}))
		for level := 1; level <= len(levels); level++ {
			_, err := s.Put(context.Background(), &Message{Topic: "d", DelayLevel: level, Body: []byte("x")}, 0)
			require.NoError(t, err)
		}
		clk.Advance(levels[len(levels)-1])
		readN(t, s, "d", 0, len(levels))
		require.Equal(t, 2, goroutinesBy("github.com/mqlite/mqlite/delay.(*Scheduler).Start"), "%d levels, delivered", len(levels))
		require.NoError(t, s.Close())
		require.Zero(t, goroutinesBy("github.com/mqlite/mqlite/delay.(*Scheduler).Start"), "after Close")
	}
}

// TestDelayBacklogDoesNotHoldUpOtherLevels: with a backlog due at level 1
// and one message due at level 2, level 2's is delivered after at most
// delay.ServeBatch of level 1's: the loop takes the levels in turn. The messages
// are sent to a store that is then closed and opened again once both
// levels are due, so that the scheduler's first pass finds them all due.
func TestDelayBacklogDoesNotHoldUpOtherLevels(t *testing.T) {
	clk := clock.NewFake(t0)
	fs := vfs.NewMem()
	s := delayStore(t, fs, clk)
	require.NoError(t, s.CreateTopic("one", TopicConfig{Queues: 1}))
	require.NoError(t, s.CreateTopic("two", TopicConfig{Queues: 1}))
	const backlog = 5 * delay.ServeBatch
	for range backlog {
		_, err := s.Put(context.Background(), &Message{Topic: "one", DelayLevel: 1, Body: []byte("1")}, 0)
		require.NoError(t, err)
	}
	_, err := s.Put(context.Background(), &Message{Topic: "two", DelayLevel: 2, Body: []byte("2")}, 0)
	require.NoError(t, err)
	require.NoError(t, s.Close())
	clk.Advance(DefaultDelayLevels[1]) // both levels due
	s = delayStore(t, fs, clk)
	defer s.Close()
	two := readN(t, s, "two", 0, 1)[0]
	ones := readN(t, s, "one", 0, backlog)
	before := 0
	for _, m := range ones {
		if m.CommitLogOffset < two.CommitLogOffset {
			before++
		}
	}
	require.Equal(t, delay.ServeBatch, before, "level 1 deliveries ahead of level 2's")
}
