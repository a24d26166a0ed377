package mqlite

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqlite/mqlite/clock"
	"github.com/mqlite/mqlite/internal/vfs"
)

// S23, the cleaning ratios: with the volume fuller than CleanRatio only
// expired segments may go (none are); above ForceCleanRatio the oldest go
// although unexpired, outside the deletion hour, and a consumer behind
// the new minimum goes on from it and counts the skip.
func TestRetentionForcedAboveRatio(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
	mem := vfs.NewMem()
	s, err := openFS(mem, "/force", &Options{Clock: clk, SegmentSize: 64 << 10, DiskMaxUsedRatio: 1,
		ConsumeQueueEntries: 64, IndexSlots: 64, IndexEntries: 256})
	require.NoError(t, err)
	defer s.Close()
	require.NoError(t, s.CreateTopic("ret", TopicConfig{Queues: 1}))
	pc, err := s.NewPullConsumer("late", ConsumerOptions{ConsumeFromWhere: ConsumeFromFirstOffset, QueueCacheCount: 1})
	require.NoError(t, err)
	require.NoError(t, pc.Subscribe("ret", nil))
	fillHours(t, s, clk, 1, 600) // ~10 segments, all fresh
	used, _, _ := mem.Usage("/")

	mem.SetCapacity(uint64(float64(used) / 0.67)) // between the ratios
	rep, err := s.applyRetention(false)
	require.NoError(t, err)
	require.Zero(t, rep.Segments, "above CleanRatio only expired segments go")

	mem.SetCapacity(uint64(float64(used) / 0.8)) // above ForceCleanRatio
	rep, err = s.applyRetention(false)
	require.NoError(t, err)
	require.Positive(t, rep.Segments, "forced above ForceCleanRatio")
	require.Empty(t, spareFiles(t, s), "short of space: no segment kept for recycling")
	require.Equal(t, rep.NewMin, s.log.MinOffset())
	min, err := s.MinOffset("ret", 0)
	require.NoError(t, err)
	require.Positive(t, min)
	for {
		msgs, err := pc.Poll(context.Background(), 10)
		require.NoError(t, err)
		if len(msgs) > 0 && msgs[0].QueueOffset >= min {
			break
		}
	}
	require.Positive(t, pc.Stats().Skipped, "the consumer is told")
}
