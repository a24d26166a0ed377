package mqlite

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// waiterCount is the number of positions the dispatcher holds waiters for
// on topic's queues, or on a dispatched position (the store's own services
// wait on their queues all the time).
func waiterCount(s *Store, topic string) int {
	s.disp.mu.Lock()
	defer s.disp.mu.Unlock()
	n := 0
	for k := range s.disp.mu.waiters {
		if k.q == nil || filepath.Base(filepath.Dir(k.q.Dir())) == topic {
			n++
		}
	}
	return n
}

// S29: readers that give up leave nothing behind. A ReadQueue waiting for
// an offset the queue never reaches, whose context ends, used to leave its
// waiter registered for good (and every later publish ranged over it).
func TestCancelledReadersLeaveNoWaiter(t *testing.T) {
	s := memStore(t, Options{})
	require.NoError(t, s.CreateTopic("t", TopicConfig{Queues: 1000}))
	for i := range 1000 {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		// At the end of queues nobody sends to, one position each: no
		// publish ever releases them. (Past the end a read fails at once
		// with ErrOffsetOutOfRange, registering nothing.)
		_, err := s.ReadQueue(ctx, "t", i, 0, 1)
		require.ErrorIs(t, err, context.Canceled)
	}
	require.Zero(t, waiterCount(s, "t"), "cancelled readers left waiters")
}

// S29: 1000 long polls pending on empty queues, half of them cancelled at
// random: the cancelled ones return ctx.Err() (or the message, if it came
// first) and leave, every other one is woken by the sends, and nothing
// stays registered.
func TestManyPendingReadsCancelledAtRandom(t *testing.T) {
	s := memStore(t, Options{})
	const queues, readers = 4, 1000
	require.NoError(t, s.CreateTopic("t", TopicConfig{Queues: queues}))
	rng := rand.New(rand.NewPCG(29, 29))
	cancels := make([]context.CancelFunc, readers)
	cut := make([]bool, readers)
	results := make([]chan error, readers)
	started := make(chan struct{}, readers)
	for i := range readers {
		ctx, cancel := context.WithCancel(context.Background())
		cancels[i], cut[i], results[i] = cancel, rng.IntN(2) == 0, make(chan error, 1)
		q := i % queues
		go func() {
			started <- struct{}{}
			msgs, err := s.ReadQueue(ctx, "t", q, 0, 1)
			if err == nil && (len(msgs) != 1 || string(msgs[0].Body) != fmt.Sprint(q)) {
				err = fmt.Errorf("queue %d: got %d messages", q, len(msgs))
			}
			results[i] <- err
		}()
	}
	for range readers {
		<-started
	}
	for i, c := range cut {
		if c {
			cancels[i]()
		}
	}
	for q := range queues {
		_, err := s.Put(context.Background(), &Message{Topic: "t", Body: []byte(fmt.Sprint(q))}, q)
		require.NoError(t, err)
	}
	woken := 0
	for i := range readers {
		var err error
		select {
		case err = <-results[i]:
		case <-time.After(time.Minute): // bounds a failure only
			t.Fatalf("reader %d (cancelled %t) never returned", i, cut[i])
		}
		if !cut[i] {
			require.NoError(t, err, "reader %d was not cancelled", i)
			woken++
			continue
		}
		if err != nil {
			require.ErrorIs(t, err, context.Canceled, "reader %d", i)
		}
	}
	for _, c := range cancels {
		c()
	}
	require.Greater(t, woken, 0)
	require.Zero(t, waiterCount(s, "t"), "waiters left after every reader returned")
}

// S29: a ReadQueue returns at most MaxReadBytes of records, and always at
// least one message, however large.
func TestReadQueueBoundsBytes(t *testing.T) {
	s := memStore(t, Options{})
	require.NoError(t, s.CreateTopic("big", TopicConfig{Queues: 1}))
	ctx := context.Background()
	body := make([]byte, 100<<10)
	for range 6 {
		_, err := s.Put(ctx, &Message{Topic: "big", Body: body}, 0)
		require.NoError(t, err)
	}
	huge := make([]byte, 3<<20)
	_, err := s.Put(ctx, &Message{Topic: "big", Body: huge}, 0)
	require.NoError(t, err)
	require.NoError(t, s.WaitVisible(ctx))
	var sizes []int
	for from := int64(0); from < 7; {
		msgs, err := s.ReadQueue(ctx, "big", 0, from, 100)
		require.NoError(t, err)
		total := 0
		for _, m := range msgs {
			total += int(m.StoreSize)
		}
		require.True(t, len(msgs) == 1 || total <= MaxReadBytes, "%d messages, %d bytes", len(msgs), total)
		sizes = append(sizes, len(msgs))
		from += int64(len(msgs))
	}
	require.Equal(t, []int{2, 2, 2, 1}, sizes, "100 KiB records two at a time, then the 3 MiB one alone")
}
