package mqlite

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqlite/mqlite/clock"
)

func sendMix(t *testing.T, s *Store, n int, clk *clock.Fake) []sent {
	t.Helper()
	for _, name := range []string{"orders", "payments", "audit"} {
		if err := s.CreateTopic(name, TopicConfig{Queues: 5}); err != nil {
			require.ErrorIs(t, err, ErrTopicExists)
		}
	}
	var out []sent
	for i := range n {
		topic := []string{"orders", "payments", "audit"}[i%3]
		key := fmt.Sprintf("k%d", i%17)
		m := &Message{Topic: topic, Tags: "t", Keys: []string{key, fmt.Sprintf("u%d", i)}, Body: body(i)}
		r, err := s.Put(context.Background(), m, i%5)
		require.NoError(t, err)
		out = append(out, sent{topic, i % 5, r.QueueOffset, r.Offset, string(body(i)), key})
		if clk != nil && i%50 == 49 {
			clk.Advance(time.Second)
		}
	}
	return out
}

// queueContents reads every queue the sends touched, in order.
func queueContents(t *testing.T, s *Store, msgs []sent) map[string][]int64 {
	t.Helper()
	out := map[string][]int64{}
	for _, m := range msgs {
		k := fmt.Sprintf("%s/%d", m.topic, m.queue)
		if _, ok := out[k]; ok {
			continue
		}
		out[k] = []int64{}
		for msg, err := range s.Messages(m.topic, m.queue, 0) {
			require.NoError(t, err)
			out[k] = append(out[k], msg.CommitLogOffset)
		}
	}
	return out
}

func expectedContents(msgs []sent) map[string][]int64 {
	out := map[string][]int64{}
	for _, m := range msgs {
		k := fmt.Sprintf("%s/%d", m.topic, m.queue)
		out[k] = append(out[k], m.off)
	}
	return out
}

// waitDispatched blocks (in ReadQueue, which the dispatcher wakes) until
// the last message of every queue is visible, so all are dispatched.
func waitDispatched(t *testing.T, s *Store, msgs []sent) {
	t.Helper()
	last := map[string]sent{}
	for _, m := range msgs {
		last[fmt.Sprintf("%s/%d", m.topic, m.queue)] = m
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, m := range last {
		_, err := s.ReadQueue(ctx, m.topic, m.queue, m.qoff, 1)
		require.NoError(t, err)
	}
}

func TestQueuesPointAtTheRightRecords(t *testing.T) {
	for _, md := range modes[:4] {
		t.Run(md.name, func(t *testing.T) {
			fs, dir := md.fs(t)
			s := openMode(t, md, fs, dir)
			defer s.Close()
			msgs := sendMix(t, s, 600, nil)
			waitDispatched(t, s, msgs)
			require.Equal(t, expectedContents(msgs), queueContents(t, s, msgs))
			for _, m := range msgs[:50] {
				got, err := s.ReadQueue(context.Background(), m.topic, m.queue, m.qoff, 1)
				require.NoError(t, err)
				require.Equal(t, m.body, string(got[0].Body))
				max, err := s.MaxOffset(m.topic, m.queue)
				require.NoError(t, err)
				require.EqualValues(t, 40, max, "600 messages / 3 topics / 5 queues")
			}
		})
	}
}

func TestLookupByKeyIDAndTime(t *testing.T) {
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	s, err := Open("mem", &Options{InMemory: true, SegmentSize: 32 << 10, Clock: clk, IndexSlots: 8, IndexEntries: 64})
	require.NoError(t, err)
	defer s.Close()
	start := clk.Now()
	msgs := sendMix(t, s, 510, clk)
	waitDispatched(t, s, msgs)

	// A key shared by many messages, with tiny slot counts forcing collisions.
	want := map[int64]bool{}
	for _, m := range msgs {
		if m.topic == "orders" && m.key == "k3" {
			want[m.off] = true
		}
	}
	got, err := s.MessagesByKey("orders", "k3", start, clk.Now(), 64)
	require.NoError(t, err)
	require.Len(t, got, len(want))
	for i, m := range got {
		require.True(t, want[m.CommitLogOffset])
		if i > 0 {
			require.Greater(t, got[i-1].CommitLogOffset, m.CommitLogOffset, "newest first")
		}
	}
	got, err = s.MessagesByKey("orders", "k3", start, clk.Now(), 2)
	require.NoError(t, err)
	require.Len(t, got, 2)
	got, err = s.MessagesByKey("payments", "u1", start, clk.Now(), 10)
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.Equal(t, msgs[1].off, got[0].CommitLogOffset)
	got, err = s.MessagesByKey("orders", "nope", start, clk.Now(), 10)
	require.NoError(t, err)
	require.Empty(t, got)
	// Time window: only the messages of the first two seconds (100 messages).
	got, err = s.MessagesByKey("orders", "k3", start, start.Add(1999*time.Millisecond), 64)
	require.NoError(t, err)
	for _, m := range got {
		require.Less(t, m.CommitLogOffset, msgs[100].off)
	}
	_, err = s.MessagesByKey("orders", "", start, clk.Now(), 1)
	require.ErrorIs(t, err, ErrInvalidArgument)

	// By ID.
	for _, m := range msgs[:20] {
		got, err := s.MessageByID(fmt.Sprintf("%016X", m.off))
		require.NoError(t, err)
		require.Equal(t, m.body, string(got.Body))
	}
	// By time: queue orders/0 gets every 15th message; 50 messages per second.
	off, err := s.OffsetForTime("orders", 0, start.Add(3*time.Second))
	require.NoError(t, err)
	first, err := s.ReadQueue(context.Background(), "orders", 0, off, 1)
	require.NoError(t, err)
	require.False(t, first[0].StoreTimestamp.Before(start.Add(3*time.Second)))
	if off > 0 {
		prev, err := s.ReadQueue(context.Background(), "orders", 0, off-1, 1)
		require.NoError(t, err)
		require.True(t, prev[0].StoreTimestamp.Before(start.Add(3*time.Second)))
	}
	max, _ := s.MaxOffset("orders", 0)
	off, err = s.OffsetForTime("orders", 0, clk.Now().Add(time.Hour))
	require.NoError(t, err)
	require.Equal(t, max, off)
}

func TestRebuildIndexesFromCommitLog(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "s")
	opts := &Options{Flush: FlushSync, SegmentSize: 16 << 10, ConsumeQueueEntries: 16, IndexSlots: 16, IndexEntries: 128}
	s, err := Open(dir, opts)
	require.NoError(t, err)
	msgs := sendMix(t, s, 300, nil)
	require.NoError(t, s.Close())
	for _, damage := range []string{"delete", "garbage"} {
		t.Run(damage, func(t *testing.T) {
			switch damage {
			case "delete":
				require.NoError(t, os.RemoveAll(filepath.Join(dir, "consumequeue")))
				require.NoError(t, os.RemoveAll(filepath.Join(dir, "index")))
			case "garbage":
				filepath.Walk(filepath.Join(dir, "consumequeue"), func(p string, fi os.FileInfo, err error) error {
					if err == nil && !fi.IsDir() && filepath.Base(p) != "meta" {
						f, _ := os.OpenFile(p, os.O_RDWR, 0)
						f.WriteAt([]byte("garbage garbage garbage!"), 40)
						f.Close()
					}
					return nil
				})
				idx, _ := os.ReadDir(filepath.Join(dir, "index"))
				for _, e := range idx {
					os.WriteFile(filepath.Join(dir, "index", e.Name()), []byte("junk"), 0o644)
				}
			}
			s, err := Open(dir, opts)
			require.NoError(t, err)
			defer s.Close()
			require.Equal(t, expectedContents(msgs), queueContents(t, s, msgs))
			got, err := s.MessagesByKey("audit", "u2", time.Unix(0, 0), time.Now().Add(time.Hour), 5)
			require.NoError(t, err)
			require.Len(t, got, 1)
			require.Equal(t, msgs[2].off, got[0].CommitLogOffset)
			r, err := s.Put(context.Background(), &Message{Topic: "orders", Body: []byte("next")}, 0)
			require.NoError(t, err)
			require.EqualValues(t, len(expectedContents(msgs)["orders/0"]), r.QueueOffset, "queue table rebuilt from the ConsumeQueue")
			msgs = append(msgs, sent{"orders", 0, r.QueueOffset, r.Offset, "next", ""})
		})
	}
}

func TestBlockedReaderIsWokenBySend(t *testing.T) {
	for _, md := range []mode{modes[0], modes[1]} {
		t.Run(md.name, func(t *testing.T) {
			fs, dir := md.fs(t)
			s := openMode(t, md, fs, dir)
			defer s.Close()
			_, err := s.ReadQueue(context.Background(), "t", 0, 0, 10)
			require.ErrorIs(t, err, ErrTopicNotFound, "no such topic yet")
			require.NoError(t, s.CreateTopic("t", TopicConfig{Queues: 2}))
			_, err = s.ReadQueue(context.Background(), "t", 2, 0, 10)
			require.ErrorIs(t, err, ErrInvalidArgument, "queue 2 of a 2-queue topic")
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
			defer cancel()
			_, err = s.ReadQueue(ctx, "t", 0, 0, 10)
			require.ErrorIs(t, err, context.DeadlineExceeded, "empty queue blocks until the deadline")

			got := make(chan []*MessageExt, 1)
			go func() {
				msgs, err := s.ReadQueue(context.Background(), "t", 0, 0, 10)
				require.NoError(t, err)
				got <- msgs
			}()
			_, err = s.Put(context.Background(), &Message{Topic: "t", Body: []byte("wake")}, 0)
			require.NoError(t, err)
			msgs := <-got
			require.Len(t, msgs, 1)
			require.Equal(t, "wake", string(msgs[0].Body))
		})
	}
}

func TestCloseReleasesBlockedReaders(t *testing.T) {
	s, err := Open("m", &Options{InMemory: true})
	require.NoError(t, err)
	require.NoError(t, s.CreateTopic("t", TopicConfig{Queues: 1}))
	errc := make(chan error, 1)
	ready := make(chan struct{})
	go func() {
		close(ready)
		_, err := s.ReadQueue(context.Background(), "t", 0, 0, 1)
		errc <- err
	}()
	<-ready
	require.NoError(t, s.Close())
	require.ErrorIs(t, <-errc, ErrClosed)
}
