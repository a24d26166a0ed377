package mqlite

import (
	"context"
	"math"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
)

// TestReadQueuePastTheNextOffset: ReadQueue from past the next offset the
// queue will assign fails at once with ErrOffsetOutOfRange; from exactly
// that offset it is the long poll and waits for the next Put; a negative
// from (below the queue's minimum) is ErrNotFound, at once too. Under
// synctest, "at once" means no goroutine was left blocked.
func TestReadQueuePastTheNextOffset(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s, err := Open("/range", &Options{InMemory: true})
		require.NoError(t, err)
		defer s.Close()
		require.NoError(t, s.CreateTopic("t", TopicConfig{Queues: 2}))
		ctx := context.Background()
		for i := range 3 {
			r, err := s.Put(ctx, &Message{Topic: "t", Body: []byte{byte('a' + i)}}, 0)
			require.NoError(t, err)
			require.EqualValues(t, i, r.QueueOffset)
		}
		require.NoError(t, s.WaitVisible(ctx))

		for _, c := range []struct {
			queue int
			from  int64
			want  error
		}{
			{0, 4, ErrOffsetOutOfRange},
			{0, 100, ErrOffsetOutOfRange},
			{0, math.MaxInt64, ErrOffsetOutOfRange},
			{1, 1, ErrOffsetOutOfRange}, // a queue never written to: its next offset is 0
			{0, -1, ErrNotFound},
			{0, math.MinInt64, ErrNotFound},
		} {
			_, err := s.ReadQueue(ctx, "t", c.queue, c.from, 10)
			require.ErrorIs(t, err, c.want, "queue %d from %d", c.queue, c.from)
			if c.want == ErrOffsetOutOfRange {
				require.NotErrorIs(t, err, ErrNotFound)
				require.Contains(t, err.Error(), "past the next offset")
			}
		}
		msgs, err := s.ReadQueue(ctx, "t", 0, 1, 10)
		require.NoError(t, err)
		require.Len(t, msgs, 2)

		// From the next offset (3, and 0 of the empty queue): the long
		// poll, which the next Put ends.
		for _, q := range []int{0, 1} {
			from := int64(3)
			if q == 1 {
				from = 0
			}
			got := make(chan []*MessageExt, 1)
			go func() {
				msgs, err := s.ReadQueue(ctx, "t", q, from, 10)
				require.NoError(t, err)
				got <- msgs
			}()
			synctest.Wait()
			select {
			case msgs := <-got:
				t.Fatalf("queue %d: the read from the next offset returned %d messages before a Put", q, len(msgs))
			default:
			}
			r, err := s.Put(ctx, &Message{Topic: "t", Body: []byte("next")}, q)
			require.NoError(t, err)
			require.Equal(t, from, r.QueueOffset)
			msgs := <-got
			require.Len(t, msgs, 1)
			require.Equal(t, from, msgs[0].QueueOffset)
			require.Equal(t, "next", string(msgs[0].Body))
		}
	})
}

// TestReadQueueOffsetPutReturnedWaits: the range check compares with the
// offsets Put assigned, not with what the dispatcher has put in the queue
// yet. With the dispatcher held, reading the offset a Put just returned,
// or the one after it (the next to assign), waits; one further fails at
// once. Let go, the dispatcher wakes the waiting read.
func TestReadQueueOffsetPutReturnedWaits(t *testing.T) {
	s, err := Open("/lag", &Options{InMemory: true})
	require.NoError(t, err)
	defer s.Close()
	require.NoError(t, s.CreateTopic("t", TopicConfig{Queues: 1}))
	ctx := context.Background()
	_, err = s.Put(ctx, &Message{Topic: "t", Body: []byte("visible")}, 0)
	require.NoError(t, err)
	require.NoError(t, s.WaitVisible(ctx))

	s.disp.run.Lock() // neither the loop nor a sender dispatches
	held := true
	defer func() {
		if held {
			s.disp.run.Unlock()
		}
	}()
	var last int64
	for range 2 {
		r, err := s.Put(ctx, &Message{Topic: "t", Body: []byte("lagging")}, 0)
		require.NoError(t, err)
		last = r.QueueOffset
	}
	require.EqualValues(t, 2, last)
	max, err := s.MaxOffset("t", 0)
	require.NoError(t, err)
	require.EqualValues(t, 1, max, "the dispatcher is held")

	_, err = s.ReadQueue(ctx, "t", 0, last+2, 10)
	require.ErrorIs(t, err, ErrOffsetOutOfRange)
	for _, from := range []int64{last, last + 1} {
		short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
		_, err = s.ReadQueue(short, "t", 0, from, 10)
		cancel()
		require.ErrorIs(t, err, context.DeadlineExceeded, "from %d waits for the dispatcher", from)
	}

	got := make(chan []*MessageExt, 1)
	go func() {
		msgs, err := s.ReadQueue(ctx, "t", 0, last, 10)
		if err != nil {
			t.Error(err)
		}
		got <- msgs
	}()
	held = false
	s.disp.run.Unlock()
	s.disp.notify()
	msgs := <-got
	require.Len(t, msgs, 1)
	require.Equal(t, last, msgs[0].QueueOffset)
}
