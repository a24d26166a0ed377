package mqlite

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// statsFixture fills a store: "orders" (4 queues) gets 10 messages
// round robin, "audit" (1 queue) 5, and group "g" commits offset 2 of
// orders queue 0 after polling it with a pull consumer.
func statsFixture(t *testing.T, s *Store) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, s.CreateTopic("orders", TopicConfig{Queues: 4}))
	require.NoError(t, s.CreateTopic("audit", TopicConfig{Queues: 1}))
	for i := range 10 {
		_, err := s.Put(ctx, &Message{Topic: "orders", Tags: "t", Keys: []string{fmt.Sprint("o", i)}, Body: []byte("x")}, i%4)
		require.NoError(t, err)
	}
	for range 5 {
		_, err := s.Put(ctx, &Message{Topic: "audit", Body: []byte("a")}, 0)
		require.NoError(t, err)
	}
	require.NoError(t, s.WaitVisible(ctx))
	pc, err := s.NewPullConsumer("g", ConsumerOptions{ConsumeFromWhere: ConsumeFromFirstOffset})
	require.NoError(t, err)
	require.NoError(t, pc.Assign("orders", nil, 0))
	pctx, cancel := context.WithTimeout(ctx, time.Minute) // a failure bound, not synchronisation
	defer cancel()
	for got := 0; got < 3; {
		msgs, err := pc.Poll(pctx, 3)
		require.NoError(t, err)
		got += len(msgs)
	}
	require.NoError(t, pc.CommitOffset("orders", 0, 2))
	require.NoError(t, pc.Close())
}

func TestStatsCountsAndLag(t *testing.T) {
	s := memStore(t, Options{})
	statsFixture(t, s)
	st, err := s.Stats()
	require.NoError(t, err)

	cl := st.CommitLog
	require.Zero(t, cl.MinOffset)
	require.Positive(t, cl.WrotePosition)
	require.Equal(t, cl.WrotePosition, cl.DispatchedPosition, "WaitVisible was called")
	require.Zero(t, cl.DispatchLag)
	require.LessOrEqual(t, cl.FlushedPosition, cl.WrotePosition)

	byName := map[string]TopicStats{}
	var names []string
	for _, ts := range st.Topics {
		byName[ts.Name] = ts
		names = append(names, ts.Name)
	}
	require.IsIncreasing(t, names)
	orders := byName["orders"]
	require.False(t, orders.System)
	require.EqualValues(t, 10, orders.Messages)
	require.Equal(t, []QueueStats{{0, 0, 3, 3}, {1, 0, 3, 3}, {2, 0, 2, 2}, {3, 0, 2, 2}}, orders.Queues)
	require.EqualValues(t, 5, byName["audit"].Messages)
	retry, ok := byName["%RETRY%g"]
	require.True(t, ok, "the group's retry topic: %v", names)
	require.True(t, retry.System)
	require.Equal(t, []QueueStats{{ID: 0}}, retry.Queues, "a queue that never received a message")

	require.Len(t, st.Groups, 1)
	g := st.Groups[0]
	require.Equal(t, "g", g.Name)
	// queue 0: 3 - 2 committed; queues 1..3: nothing committed, all count.
	require.EqualValues(t, 1+3+2+2, g.Lag)
	lag, err := s.ConsumerLag("g")
	require.NoError(t, err)
	require.Equal(t, lag, g.Queues)
	require.Zero(t, st.PendingTransactions)
}

func TestStatsDeletedTopicAndClosed(t *testing.T) {
	s := memStore(t, Options{})
	statsFixture(t, s)
	require.NoError(t, s.DeleteTopic("audit"))
	st, err := s.Stats()
	require.NoError(t, err)
	for _, ts := range st.Topics {
		require.NotEqual(t, "audit", ts.Name, "a deleted topic's messages are gone for readers")
	}

	require.NoError(t, s.Close())
	_, err = s.Stats()
	require.ErrorIs(t, err, ErrClosed)
}
