package mqlite

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqlite/mqlite/clock"
	"github.com/mqlite/mqlite/vfs"
)

// S23, the cleaning ratios: with the volume fuller than CleanRatio only
// expired segments may go (none are); above ForceCleanRatio, with
// DiskFullDeleteOldest, the oldest go
// although unexpired, outside the deletion hour, and a consumer behind
// the new minimum goes on from it and counts the skip.
func TestRetentionForcedAboveRatio(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
	mem := vfs.NewMem()
	s, err := openFS(mem, "/force", &Options{Clock: clk, Flush: FlushSync, SegmentSize: 64 << 10, NoWarm: true, DiskMaxUsedRatio: 1, DiskFullPolicy: DiskFullDeleteOldest,
		ConsumeQueueEntries: 64, IndexSlots: 64, IndexEntries: 256})
	require.NoError(t, err)
	defer s.Close()
	require.NoError(t, s.CreateTopic("ret", TopicConfig{Queues: 1}))
	// Nothing may hold a segment while the passes run, or its removal
	// waits for it and the check for spares below sees it still there:
	// no warming (which maps ahead under a pinned snapshot), FlushSync
	// (no flush in the background), and a consumer that reads one
	// message, commits and leaves; it comes back behind the new minimum.
	lateOpts := ConsumerOptions{ConsumeFromWhere: ConsumeFromFirstOffset, QueueCacheCount: 1}
	pc, err := s.NewPullConsumer("late", lateOpts)
	require.NoError(t, err)
	require.NoError(t, pc.Subscribe("ret", nil))
	_, err = s.Put(context.Background(), &Message{Topic: "ret", Body: []byte("first")}, 0)
	require.NoError(t, err)
	got, err := pc.Poll(context.Background(), 1)
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.NoError(t, pc.Commit())
	require.NoError(t, pc.Close())
	// ~37 segments, all fresh: enough that the next one, which the
	// allocator may prepare after used is read, cannot lift the ratio
	// from 0.8 past ForceCleanRatio (with ~10 it did, now and then). The
	// clock stays put, so that the store's own retention pass (every 10 s
	// of it) cannot run between the test's steps.
	for range 2400 {
		_, err := s.Put(context.Background(), &Message{Topic: "ret", Body: make([]byte, 1000)}, 0)
		require.NoError(t, err)
	}
	require.NoError(t, s.WaitVisible(context.Background()))
	used, _, _ := mem.Usage("/")

	mem.SetCapacity(uint64(float64(used) / 0.8)) // between the ratios
	rep, err := s.applyRetention(false)
	require.NoError(t, err)
	require.Zero(t, rep.Segments, "above CleanRatio only expired segments go")

	mem.SetCapacity(uint64(float64(used) / 0.92)) // above ForceCleanRatio
	rep, err = s.applyRetention(false)
	require.NoError(t, err)
	require.Positive(t, rep.Segments, "forced above ForceCleanRatio")
	require.Empty(t, spareFiles(t, s), "short of space: no segment kept for recycling")
	require.Equal(t, rep.NewMin, s.log.MinOffset())
	min, err := s.MinOffset("ret", 0)
	require.NoError(t, err)
	require.Positive(t, min)
	pc, err = s.NewPullConsumer("late", lateOpts)
	require.NoError(t, err)
	defer pc.Close()
	require.NoError(t, pc.Subscribe("ret", nil))
	for {
		msgs, err := pc.Poll(context.Background(), 10)
		require.NoError(t, err)
		if len(msgs) > 0 && msgs[0].QueueOffset >= min {
			break
		}
	}
	require.Positive(t, pc.Stats().Skipped, "the consumer is told")
}
