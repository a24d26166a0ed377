package mqlite

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqlite/mqlite/clock"
	"github.com/mqlite/mqlite/vfs"
)

func TestTopicRetentionAge(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewFake(t0)
	fs := vfs.NewMem()
	s := dedupStore(t, fs, clk, nil)
	require.NoError(t, s.CreateTopic("short", TopicConfig{Queues: 2, RetentionAge: time.Minute}))
	require.NoError(t, s.CreateTopic("long", TopicConfig{Queues: 2}))
	putStrings(t, s, "short", "s-old-0", "s-old-1", "s-old-2")
	putStrings(t, s, "long", "l-old-0", "l-old-1")
	early, err := s.NewPullConsumer("early", ConsumerOptions{ConsumeFromWhere: ConsumeFromFirstOffset})
	require.NoError(t, err)
	require.NoError(t, early.Subscribe("short", nil))
	require.NoError(t, s.Settle(ctx))
	got, err := early.TryPoll(1)
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.NoError(t, early.Commit())
	require.NoError(t, early.Close())
	clk.Advance(61 * time.Second)
	putStrings(t, s, "short", "s-new-0", "s-new-1")
	putStrings(t, s, "long", "l-new-0")

	require.Equal(t, []string{"s-new-0", "s-new-1"}, pollAll(t, s, "g", "short"))
	require.Equal(t, []string{"l-new-0", "l-old-0", "l-old-1"}, pollAll(t, s, "g", "long"))

	lo, err := s.MinOffset("short", 0)
	require.NoError(t, err)
	require.Equal(t, int64(2), lo, "queue 0 held s-old-0 and s-old-2")
	_, err = s.ReadQueue(ctx, "short", 0, 0, 10)
	require.ErrorIs(t, err, ErrNotFound)
	var seen []string
	for m, err := range s.Messages("short", 1, 0) {
		require.NoError(t, err)
		seen = append(seen, string(m.Body))
	}
	require.Equal(t, []string{"s-new-1"}, seen)

	// A group behind the retained start: its lag counts from there.
	lag, err := s.ConsumerLag("early")
	require.NoError(t, err)
	var total int64
	for _, l := range lag {
		total += l.Lag
	}
	require.Equal(t, int64(2), total)

	// The limit applies at read time, also to messages that age while
	// waiting, and survives a restart.
	clk.Advance(61 * time.Second)
	require.NoError(t, s.Close())
	s = dedupStore(t, fs, clk, nil)
	cfg, err := s.Topic("short")
	require.NoError(t, err)
	require.Equal(t, time.Minute, cfg.RetentionAge)
	require.Empty(t, pollAll(t, s, "g2", "short"))
	require.Len(t, pollAll(t, s, "g2", "long"), 3)
}

func TestTopicRetentionBytes(t *testing.T) {
	clk := clock.NewFake(t0)
	s := dedupStore(t, vfs.NewMem(), clk, nil)
	r, err := s.Put(context.Background(), &Message{Topic: "probe1", Body: make([]byte, 100)}, 0)
	require.NoError(t, err)
	size := int64(r.Size)
	require.NoError(t, s.CreateTopic("capped", TopicConfig{Queues: 1, RetentionBytes: 3 * size}))
	for i := range 10 {
		_, err := s.Put(context.Background(), &Message{Topic: "capped", Body: fmt.Appendf(make([]byte, 0, 100), "%0100d", i)}, 0)
		require.NoError(t, err)
	}
	require.NoError(t, s.WaitVisible(context.Background()))
	lo, err := s.MinOffset("capped", 0)
	require.NoError(t, err)
	require.Equal(t, int64(7), lo, "the newest three fit in the bound")
	got := pollAll(t, s, "g", "capped")
	require.Len(t, got, 3)
	require.Equal(t, fmt.Sprintf("%0100d", 7), got[0])
	// Raising the bound does not bring hidden messages back.
	require.NoError(t, s.UpdateTopic("capped", TopicConfig{Queues: 1, RetentionBytes: 100 * size}))
	lo, err = s.MinOffset("capped", 0)
	require.NoError(t, err)
	require.Equal(t, int64(7), lo)
	require.ErrorIs(t, s.UpdateTopic("capped", TopicConfig{Queues: 1, RetentionBytes: -1}), ErrInvalidArgument)
}

func TestPurgeTopic(t *testing.T) {
	clk := clock.NewFake(t0)
	fs := vfs.NewMem()
	s := dedupStore(t, fs, clk, nil)
	require.NoError(t, s.CreateTopic("t", TopicConfig{Queues: 2}))
	putStrings(t, s, "t", "a", "b", "c")
	require.Equal(t, []string{"a"}, pollAll(t, s, "g", "t")[:1])
	putStrings(t, s, "t", "d")
	require.NoError(t, s.PurgeTopic("t"))
	for q := range 2 {
		lo, err := s.MinOffset("t", q)
		require.NoError(t, err)
		hi, err := s.MaxOffset("t", q)
		require.NoError(t, err)
		require.Equal(t, hi, lo)
	}
	putStrings(t, s, "t", "e")
	require.Equal(t, []string{"e"}, pollAll(t, s, "g", "t"), "a group behind the purge resumes after it")
	require.Equal(t, []string{"e"}, pollAll(t, s, "new", "t"))

	require.ErrorIs(t, s.PurgeTopic("nope"), ErrTopicNotFound)
	require.ErrorIs(t, s.PurgeTopic("%RETRY%g"), ErrInvalidTopic)
	require.NoError(t, s.Close())
	s = dedupStore(t, fs, clk, nil)
	require.Equal(t, []string{"e"}, pollAll(t, s, "other", "t"), "the purge survives a restart")
	require.NoError(t, s.Close())
	ro, err := openFS(fs, "/store", smallFiles(&Options{ReadOnly: true, Clock: clk}))
	require.NoError(t, err)
	defer ro.Close()
	require.ErrorIs(t, ro.PurgeTopic("t"), ErrReadOnly)
	lo, err := ro.MinOffset("t", 0)
	require.NoError(t, err)
	require.Equal(t, int64(3), lo, "a read-only view applies the floors")
}

func TestDeleteTopic(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewFake(t0)
	fs := vfs.NewMem()
	s := dedupStore(t, fs, clk, nil)
	require.NoError(t, s.CreateTopic("t", TopicConfig{Queues: 2}))
	putStrings(t, s, "t", "a", "b", "c")
	require.Len(t, pollAll(t, s, "g", "t"), 3)
	require.True(t, hasOffsetOn(t, s, "g", "t"))

	require.NoError(t, s.DeleteTopic("t"))
	_, err := s.Topic("t")
	require.ErrorIs(t, err, ErrTopicNotFound)
	require.False(t, hasOffsetOn(t, s, "g", "t"), "the groups' offsets on it are gone")
	require.ErrorIs(t, s.DeleteTopic("t"), ErrTopicNotFound)
	require.ErrorIs(t, s.DeleteTopic("%DLQ%g"), ErrTopicNotFound)

	// Sending again creates it afresh: new offsets after the old ones, and
	// none of the old messages.
	r, err := s.Put(ctx, &Message{Topic: "t", Body: []byte("d")}, 0)
	require.NoError(t, err)
	require.Equal(t, int64(2), r.QueueOffset)
	require.Equal(t, []string{"d"}, pollAll(t, s, "g", "t"))
	require.NoError(t, s.Close())
	s = dedupStore(t, fs, clk, nil)
	require.Equal(t, []string{"d"}, pollAll(t, s, "h", "t"))
}

// Segments go before the store's retention age once every queue's
// retained start has moved past them, and not while one queue still
// holds a message in them.
//
// It runs in a bubble: the background pass the clock's advance wakes
// would otherwise race the purge and free the segments first.
func TestTopicRetentionFreesSegments(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk := clock.NewFake(t0)
		s := dedupStore(t, vfs.NewMem(), clk, &Options{SegmentSize: 8 << 10, NoRecycle: true})
		require.NoError(t, s.CreateTopic("short", TopicConfig{Queues: 1, RetentionAge: time.Minute}))
		require.NoError(t, s.CreateTopic("long", TopicConfig{Queues: 1}))
		putStrings(t, s, "long", "pinned")
		body := string(make([]byte, 1000))
		for range 30 {
			putStrings(t, s, "short", body)
		}
		clk.Advance(2 * time.Minute)
		// The advance fires the background retention pass; let it finish
		// now, so the passes below are the only ones after the purge.
		synctest.Wait()
		putStrings(t, s, "short", "fresh")
		before := s.log.MinOffset()
		rep, err := s.CleanExpired()
		require.NoError(t, err)
		require.Zero(t, rep.Segments, "long's message pins the first segment")
		require.Equal(t, before, s.log.MinOffset())

		require.NoError(t, s.PurgeTopic("long"))
		rep, err = s.CleanExpired()
		require.NoError(t, err)
		require.Positive(t, rep.Segments)
		require.Greater(t, s.log.MinOffset(), before)
		require.Equal(t, []string{"fresh"}, pollAll(t, s, "g", "short"))
		st, err := s.Stats()
		require.NoError(t, err)
		require.Zero(t, st.Retention.EarlySegments, "freed segments are not deleted early")
	})
}

// A message hidden by a purge, a deletion or its topic's retention is not
// found by its ID or a key either, while its segment is still on disk;
// the messages of other topics in the same segment are.
func TestHiddenMessagesNotFoundByIDOrKey(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewFake(t0)
	s := dedupStore(t, vfs.NewMem(), clk, nil)
	require.NoError(t, s.CreateTopic("short", TopicConfig{Queues: 1, RetentionAge: time.Minute}))
	put := func(topicName, key string) string {
		t.Helper()
		r, err := s.Put(ctx, &Message{Topic: topicName, Keys: []string{key}, Body: []byte(key)}, 0)
		require.NoError(t, err)
		require.NoError(t, s.WaitVisible(ctx))
		return r.ID()
	}
	byKey := func(topicName, key string) int {
		t.Helper()
		got, err := s.MessagesByKey(topicName, key, t0.Add(-time.Hour), t0.Add(time.Hour), 10)
		require.NoError(t, err)
		return len(got)
	}
	found := func(id string) bool {
		t.Helper()
		m, err := s.MessageByID(id)
		if errors.Is(err, ErrNotFound) {
			require.Nil(t, m)
			return false
		}
		require.NoError(t, err)
		return true
	}

	purged, deleted, aged, kept := put("p", "k1"), put("d", "k2"), put("short", "k3"), put("long", "k4")
	for _, id := range []string{purged, deleted, aged, kept} {
		require.True(t, found(id))
	}
	require.NoError(t, s.PurgeTopic("p"))
	require.NoError(t, s.DeleteTopic("d"))
	clk.Advance(2 * time.Minute)
	require.False(t, found(purged))
	require.False(t, found(deleted))
	require.False(t, found(aged))
	require.True(t, found(kept))
	require.Zero(t, byKey("p", "k1"))
	require.Zero(t, byKey("d", "k2"))
	require.Zero(t, byKey("short", "k3"))
	require.Equal(t, 1, byKey("long", "k4"))

	// What is sent after the purge or to the topic created again is found.
	after, again := put("p", "k1"), put("d", "k2")
	require.True(t, found(after))
	require.True(t, found(again))
	require.Equal(t, 1, byKey("p", "k1"))
	require.Equal(t, 1, byKey("d", "k2"))
}
