package mqlite

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqlite/mqlite/clock"
	"github.com/mqlite/mqlite/vfs"
)

// fillHours writes n messages per virtual hour for hours hours into
// queue 0 of "ret", returning their IDs.
func fillHours(t *testing.T, s *Store, clk *clock.Fake, hours, n int) []string {
	t.Helper()
	var ids []string
	for range hours {
		for range n {
			r, err := s.Put(context.Background(), &Message{Topic: "ret", Body: make([]byte, 1000)}, 0)
			require.NoError(t, err)
			ids = append(ids, r.MsgID())
		}
		clk.Advance(time.Hour)
	}
	require.NoError(t, s.WaitVisible(context.Background()))
	return ids
}

// TestRetentionDeletesExpiredSegments: with a 2 h retention, a pass
// deletes the segments sealed more than 2 h ago and keeps the rest; reads
// of removed messages fail clearly, queue minimums advance, and a consumer
// that was behind continues from the new minimum.
func TestRetentionDeletesExpiredSegments(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
	s, err := openFS(vfs.NewMem(), "/ret", &Options{Clock: clk, SegmentSize: 64 << 10, Retention: 2 * time.Hour,
		ConsumeQueueEntries: 64, IndexEntries: 256, IndexSlots: 64})
	require.NoError(t, err)
	defer s.Close()
	require.NoError(t, s.CreateTopic("ret", TopicConfig{Queues: 1}))
	pc, err := s.NewPullConsumer("late", ConsumerOptions{ConsumeFromWhere: ConsumeFromFirstOffset, QueueCacheCount: 1})
	require.NoError(t, err)
	require.NoError(t, pc.Subscribe("ret", nil))
	_, err = s.Put(context.Background(), &Message{Topic: "ret", Body: []byte("first")}, 0)
	require.NoError(t, err)
	got, err := pc.Poll(context.Background(), 1) // starts reading, then falls behind
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.NoError(t, pc.Commit())

	ids := fillHours(t, s, clk, 6, 150) // ~150 KiB an hour: about 2.3 segments
	before := s.log.MinOffset()
	rep, err := s.CleanExpired()
	require.NoError(t, err)
	require.Positive(t, rep.Segments)
	require.Greater(t, rep.NewMin, before)
	require.Equal(t, rep.NewMin, s.log.MinOffset())
	require.Positive(t, rep.QueueFile, "ConsumeQueue files below the minimum go too")
	require.LessOrEqual(t, len(spareFiles(t, s)), 2, "at most two dropped segments are kept to be recycled")

	// Messages of the last 2 hours are all there; the oldest are gone.
	_, err = s.MessageByID(ids[0])
	require.ErrorIs(t, err, ErrNotFound)
	require.Contains(t, err.Error(), "removed")
	for _, id := range ids[len(ids)-300:] {
		_, err := s.MessageByID(id)
		require.NoError(t, err)
	}
	min, err := s.MinOffset("ret", 0)
	require.NoError(t, err)
	require.Positive(t, min)

	// A second pass right away deletes nothing more.
	rep2, err := s.CleanExpired()
	require.NoError(t, err)
	require.Zero(t, rep2.Segments)

	// The consumer behind the minimum gets what it had already fetched (its
	// one-message cache and the records its read-ahead buffer, 16 KiB at
	// first, had copied: at most 16 of 1 KB), in order, then goes on from
	// the minimum and counts the skip.
	var early []int64
	for {
		msgs, err := pc.Poll(context.Background(), 10)
		require.NoError(t, err)
		if len(msgs) > 0 && msgs[0].QueueOffset >= min {
			break
		}
		for _, m := range msgs {
			early = append(early, m.QueueOffset)
		}
	}
	require.LessOrEqual(t, len(early), 2+16, "only what was cached or read ahead before the deletion")
	for i, off := range early {
		require.Equal(t, early[0]+int64(i), off, "in order, none twice")
	}
	require.Positive(t, pc.Stats().Skipped)
}

// spareFiles lists the CommitLog segments kept for recycling.
func spareFiles(t *testing.T, s *Store) []string {
	t.Helper()
	names, err := s.fs.ReadDir(s.path("commitlog"))
	require.NoError(t, err)
	var spares []string
	for _, n := range names {
		if strings.HasSuffix(n, ".spare") {
			spares = append(spares, n)
		}
	}
	return spares
}

// TestRetentionSizeCapAndHour: past MaxStoreBytes the oldest segments go
// even unexpired; without it nothing expired is deleted outside the hour.
func TestRetentionSizeCapAndHour(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
	s, err := openFS(vfs.NewMem(), "/cap", smallFiles(&Options{Clock: clk, SegmentSize: 64 << 10, MaxStoreBytes: 256 << 10}))
	require.NoError(t, err)
	defer s.Close()
	require.NoError(t, s.CreateTopic("ret", TopicConfig{Queues: 1}))
	fillHours(t, s, clk, 1, 600)     // ~600 KiB, all fresh
	_, err = s.applyRetention(false) // the background pass may have run already
	require.NoError(t, err)
	require.Positive(t, s.log.MinOffset(), "over the size cap")
	var total int64
	for _, sg := range s.log.Segments() {
		total += sg.Size
	}
	require.LessOrEqual(t, total, int64(256<<10)+64<<10)

	clk2 := clock.NewFake(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
	s2, err := openFS(vfs.NewMem(), "/hour", smallFiles(&Options{Clock: clk2, SegmentSize: 64 << 10, Retention: time.Hour}))
	require.NoError(t, err)
	defer s2.Close()
	require.NoError(t, s2.CreateTopic("ret", TopicConfig{Queues: 1}))
	fillHours(t, s2, clk2, 4, 150) // now 16:00, expired segments exist
	_, err = s2.applyRetention(false)
	require.NoError(t, err)
	require.Zero(t, s2.log.MinOffset(), "not the deletion hour, disk not short")
	clk2.Set(time.Date(2026, 11, 30, 4, 0, 0, 0, time.UTC))
	_, err = s2.applyRetention(false) // or the background pass, woken by the clock
	require.NoError(t, err)
	require.Positive(t, s2.log.MinOffset(), "at 04:00")
}

// An in-memory store removes what retention drops: a spare kept for
// recycling would hold a segment of memory.
func TestRetentionInMemoryKeepsNoSpare(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
	s, err := Open("mem", &Options{InMemory: true, Clock: clk, SegmentSize: 64 << 10, Retention: 2 * time.Hour,
		ConsumeQueueEntries: 64, IndexEntries: 256, IndexSlots: 64})
	require.NoError(t, err)
	defer s.Close()
	require.NoError(t, s.CreateTopic("ret", TopicConfig{Queues: 1}))
	fillHours(t, s, clk, 6, 150)
	rep, err := s.CleanExpired()
	require.NoError(t, err)
	require.Positive(t, rep.Segments)
	require.Empty(t, spareFiles(t, s))
}

// TestLookupsSkipRecordsRetentionRemoved: an IndexFile outlives the first
// records it names, so key lookups meet entries whose records retention
// removed. They are skipped: before, MessagesByKey failed with ErrNotFound,
// and so did the unique-key check of delayed deliveries and retries after
// a restart, which then retried for ever and stalled their delay level.
func TestLookupsSkipRecordsRetentionRemoved(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
	s, err := openFS(vfs.NewMem(), "/ret", &Options{Clock: clk, SegmentSize: 16 << 10, Retention: 30 * time.Minute, IndexEntries: 4096})
	require.NoError(t, err)
	defer s.Close()
	require.NoError(t, s.CreateTopic("ret", TopicConfig{Queues: 1}))
	ctx := context.Background()
	old, err := s.Put(ctx, &Message{Topic: "ret", Keys: []string{"k"}, Body: []byte("old")}, 0)
	require.NoError(t, err)
	fillHours(t, s, clk, 2, 40) // about 2.5 segments an hour
	_, err = s.CleanExpired()
	require.NoError(t, err)
	require.Greater(t, s.log.MinOffset(), old.Offset, "the first segment went")
	ms, err := s.MessagesByKey("ret", "k", time.Time{}, clk.Now(), 10)
	require.NoError(t, err)
	require.Empty(t, ms)
	found, err := s.hasUniqKey("ret", old.UniqKey(), old.StoreTime.Add(-time.Second), nil)
	require.NoError(t, err)
	require.False(t, found)
}
