package mqlite

import (
	"bytes"
	"context"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/mqlite/mqlite/message"
)

// reuseBody is message i's body: its number, padded to 128 bytes.
func reuseBody(i int) []byte {
	b := []byte(fmt.Sprintf("body-%d-", i))
	return append(b, bytes.Repeat([]byte{byte('a' + i%26)}, 128-len(b))...)
}

// fillReuse sends n messages to "r" (4 queues), every third tagged "skip".
func fillReuse(t *testing.T, s *Store, n int) {
	t.Helper()
	require.NoError(t, s.CreateTopic("r", TopicConfig{Queues: 4}))
	p := newProducer(t, s, ProducerOptions{})
	for i := range n {
		tag := "keep"
		if i%3 == 2 {
			tag = "skip"
		}
		_, err := p.Send(context.Background(), &Message{Topic: "r", Tags: tag, Keys: []string{"k" + strconv.Itoa(i)},
			Properties: map[string]string{"i": strconv.Itoa(i)}, Body: reuseBody(i)})
		require.NoError(t, err)
	}
}

// checkReused reports what is wrong with a delivered message, if anything.
func checkReused(m *MessageExt) error {
	i, err := strconv.Atoi(m.Properties["i"])
	if err != nil {
		return fmt.Errorf("property i %q: %v", m.Properties["i"], err)
	}
	if !bytes.Equal(m.Body, reuseBody(i)) || m.Topic != "r" || m.Tags != "keep" || len(m.Keys) != 1 || m.Keys[0] != "k"+strconv.Itoa(i) ||
		m.MsgID != message.ID(m.CommitLogOffset) {
		return fmt.Errorf("message %d damaged: %+v", i, m)
	}
	return nil
}

// TestReuseMessagesPush consumes with recycled messages, concurrently and
// orderly (whose failed batches are retried locally with the same
// messages), through a SQL filter (so rejected messages are released in
// the store): every message arrives once and intact.
func TestReuseMessagesPush(t *testing.T) {
	const n = 6000
	s := memStore(t, Options{})
	fillReuse(t, s, n)
	sql, err := SQL("TAGS = 'keep'")
	require.NoError(t, err)
	for _, orderly := range []bool{false, true} {
		t.Run(fmt.Sprintf("orderly=%t", orderly), func(t *testing.T) {
			var mu sync.Mutex
			seen := map[string]bool{}
			failedOnce := map[[2]int64]bool{} // (queue, offset) of a batch's first message
			var bad error
			finished := false
			done := make(chan struct{})
			want := n - n/3
			c, err := s.NewPushConsumer(fmt.Sprintf("g-%t", orderly), ConsumerOptions{ConsumeFromWhere: ConsumeFromFirstOffset,
				ReuseMessages: true, Orderly: orderly, ConsumeBatchSize: 7, Goroutines: 4, SuspendInterval: time.Millisecond})
			require.NoError(t, err)
			require.NoError(t, c.Subscribe("r", sql))
			require.NoError(t, c.Start(func(_ context.Context, msgs []*MessageExt) ConsumeResult {
				mu.Lock()
				defer mu.Unlock()
				for _, m := range msgs {
					if err := checkReused(m); err != nil && bad == nil {
						bad = err
					}
				}
				if first := [2]int64{int64(msgs[0].QueueID), msgs[0].QueueOffset}; orderly && !failedOnce[first] {
					failedOnce[first] = true // every batch fails once and is retried with the same messages
					return ReconsumeLater
				}
				for _, m := range msgs {
					if seen[m.MsgID] && bad == nil {
						bad = fmt.Errorf("message %s delivered twice", m.MsgID)
					}
					seen[strings.Clone(m.MsgID)] = true // the key outlives the message
				}
				if !finished && (len(seen) == want || bad != nil) {
					finished = true
					close(done)
				}
				return ConsumeSuccess
			}))
			awaitDone(t, done, &mu, func() string { return fmt.Sprintf("%d of %d delivered; stats %+v", len(seen), want, c.Stats()) })
			require.NoError(t, c.Shutdown(context.Background()))
			require.NoError(t, bad)
		})
	}
}

// TestReuseMessagesPoll polls with recycled messages: every batch is
// intact, and a Clone taken from an earlier batch survives the Polls that
// recycle its original.
func TestReuseMessagesPoll(t *testing.T) {
	const n = 3000
	s := memStore(t, Options{})
	fillReuse(t, s, n)
	tag, err := Tag("keep")
	require.NoError(t, err)
	c, err := s.NewPullConsumer("g", ConsumerOptions{ConsumeFromWhere: ConsumeFromFirstOffset, ReuseMessages: true, AutoCommit: true})
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, c.Subscribe("r", tag))
	var clones []*MessageExt
	seen := map[string]bool{}
	for len(seen) < n-n/3 {
		msgs, err := c.Poll(context.Background(), 16)
		require.NoError(t, err)
		for _, m := range msgs {
			require.NoError(t, checkReused(m))
			require.False(t, seen[m.MsgID], "delivered twice")
			seen[strings.Clone(m.MsgID)] = true // the key outlives the message
		}
		clones = append(clones, msgs[0].Clone())
		msgs[0] = msgs[len(msgs)-1] // the caller's slice: changing it must not change what is released
	}
	for _, m := range clones {
		require.NoError(t, checkReused(m))
	}
}

// TestReuseMessagesAllocatesLess drains the same backlog with and without
// ReuseMessages and compares the bytes allocated per message: recycling
// must leave well under half (the race detector's sync.Pool drops a share
// of the recycled blocks, so the bound is loose).
func TestReuseMessagesAllocatesLess(t *testing.T) {
	const n = 20000
	s := memStore(t, Options{})
	require.NoError(t, s.CreateTopic("a", TopicConfig{Queues: 2}))
	p := newProducer(t, s, ProducerOptions{})
	for range n / 100 {
		batch := make([]*Message, 100)
		for j := range batch {
			batch[j] = &Message{Topic: "a", Body: make([]byte, 128)}
		}
		_, err := p.SendBatch(context.Background(), batch)
		require.NoError(t, err)
	}
	perMessage := func(group string, reuse bool) float64 {
		// A small read-ahead buffer: its one allocation per queue (1 MiB by
		// default) is not what this test counts.
		c, err := s.NewPullConsumer(group, ConsumerOptions{ConsumeFromWhere: ConsumeFromFirstOffset, ReuseMessages: reuse, ReadAheadBytes: 16 << 10})
		require.NoError(t, err)
		defer c.Close()
		require.NoError(t, c.Subscribe("a", nil))
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for got := 0; got < n; {
			msgs, err := c.Poll(context.Background(), 32)
			require.NoError(t, err)
			got += len(msgs)
		}
		runtime.ReadMemStats(&after)
		return float64(after.TotalAlloc-before.TotalAlloc) / n
	}
	plain := perMessage("plain", false)
	reused := perMessage("reused", true)
	t.Logf("bytes allocated per message: %.0f plain, %.0f reused", plain, reused)
	require.Less(t, reused, plain/2)
}

// TestStoreKeepsNoCallerStrings: the store keeps its own copy of a topic
// name it remembers (the registry, the next-offset tables), so a caller's
// string whose bytes change after the put (a recycled message's Topic,
// sent on) changes nothing stored. Without the copies the first topic's
// offset table would answer for the second name.
func TestStoreKeepsNoCallerStrings(t *testing.T) {
	s := memStore(t, Options{})
	buf := []byte("first")
	name := unsafe.String(&buf[0], len(buf)) // a string over bytes that will change
	ctx := context.Background()
	for range 3 {
		_, err := s.Put(ctx, &Message{Topic: name, Body: []byte("x")}, 0)
		require.NoError(t, err)
	}
	copy(buf, "other") // the caller's bytes change: name now reads "other"
	_, err := s.Topic("first")
	require.NoError(t, err, "the registry lost the topic")
	_, err = s.Topic("other")
	require.ErrorIs(t, err, ErrTopicNotFound, "the registry renamed the topic")
	res, err := s.Put(ctx, &Message{Topic: "other", Body: []byte("y")}, 0)
	require.NoError(t, err)
	require.EqualValues(t, 0, res.QueueOffset, "the new topic took the first topic's offsets")
	res, err = s.Put(ctx, &Message{Topic: "first", Body: []byte("z")}, 0)
	require.NoError(t, err)
	require.EqualValues(t, 3, res.QueueOffset)
	var names []string
	for _, ti := range s.Topics() {
		names = append(names, ti.Name)
	}
	require.Contains(t, names, "first")
	require.Contains(t, names, "other")
}
