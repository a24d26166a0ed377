package mqlite

// Retention meets power loss: three cases TestModel found, each pinned
// down here on the fault-injecting file seam (vfs.Faulty), whose Crash
// keeps only what was synced.

import (
	"context"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqlite/mqlite/clock"
	"github.com/mqlite/mqlite/consumequeue"
	"github.com/mqlite/mqlite/vfs"
)

// rpOptions: 16 KiB segments, no checkpoint or flush in the test's
// virtual time unless it advances the clock, retention 30 min and only
// when asked (the deletion hour is 12 hours away).
func rpOptions(clk clock.Clock, mode FlushMode) *Options {
	return &Options{Flush: mode, SegmentSize: 16 << 10, SyncFlushTimeout: time.Minute, FlowControlThreshold: -1,
		NoWarm: true, Clock: clk, CheckpointInterval: time.Hour, FlushInterval: time.Hour, FlushThoroughInterval: time.Hour,
		ConsumeQueueEntries: 1024, IndexSlots: 512, IndexEntries: 2048,
		Retention: 30 * time.Minute, DeleteHour: (clk.Now().Hour()+12)%24 + 1}
}

var rpStart = time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)

func rpPut(t *testing.T, s *Store, topic string, queue, n, size int) {
	t.Helper()
	for range n {
		_, err := s.Put(context.Background(), &Message{Topic: topic, Body: make([]byte, size)}, queue)
		require.NoError(t, err)
	}
}

// TestRetentionKeepsQueueOffsetsAcrossPowerLoss: a queue whose only
// records were in a segment retention removed keeps its next offset after
// a power loss. Before, the pass removed the records before their queue
// entries were synced, so the queue came back empty at offset 0 and handed
// out offsets its consumers had already committed.
func TestRetentionKeepsQueueOffsetsAcrossPowerLoss(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewFake(rpStart)
	ffs := vfs.NewFaulty(vfs.NewMem())
	s, err := openFS(ffs, "/rp", rpOptions(clk, FlushSync))
	require.NoError(t, err)
	require.NoError(t, s.CreateTopic("few", TopicConfig{Queues: 1}))
	require.NoError(t, s.CreateTopic("many", TopicConfig{Queues: 1}))
	rpPut(t, s, "few", 0, 2, 100)
	rpPut(t, s, "many", 0, 20, 1000) // rolls into a second segment
	require.Greater(t, s.log.WrotePosition(), int64(16<<10))
	require.NoError(t, s.WaitVisible(ctx))
	clk.Advance(31 * time.Minute) // no checkpoint: the queue entries are not synced
	rep, err := s.CleanExpired()
	require.NoError(t, err)
	require.Equal(t, 1, rep.Segments)
	minFew, err := s.MinOffset("few", 0)
	require.NoError(t, err)
	require.Equal(t, int64(2), minFew)

	img := ffs.Crash(rand.New(rand.NewPCG(1, 2)), 0) // only what was synced
	require.NoError(t, s.Close())
	s2, err := openFS(img, "/rp", rpOptions(clock.NewFake(rpStart.Add(time.Hour)), FlushSync))
	require.NoError(t, err)
	defer s2.Close()
	for _, c := range []struct {
		topic    string
		min, max int64
	}{{"few", 2, 2}, {"many", 0, 20}} {
		lo, err := s2.MinOffset(c.topic, 0)
		require.NoError(t, err)
		hi, err := s2.MaxOffset(c.topic, 0)
		require.NoError(t, err)
		require.LessOrEqual(t, lo, c.max, c.topic)
		require.Equal(t, c.max, hi, "%s keeps its next offset", c.topic)
		if c.topic == "few" {
			require.Equal(t, c.min, lo, "few: nothing left below its next offset")
		}
	}
	r, err := s2.Put(ctx, &Message{Topic: "few", Body: []byte("next")}, 0)
	require.NoError(t, err)
	require.Equal(t, int64(2), r.QueueOffset, "no offset is handed out twice")
}

// TestOpenQueueLostEntriesIntoRemovedSegment: a queue whose file lost its
// tail entries (here zeroed by the test), where those entries pointed into
// a segment retention removed, reopens; before, re-dispatching the next
// record of the queue found a gap in a non-empty queue and Open failed
// with ErrConflict, also after re-dispatching everything.
func TestOpenQueueLostEntriesIntoRemovedSegment(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewFake(rpStart)
	fs := vfs.NewMem()
	s, err := openFS(fs, "/rp", rpOptions(clk, FlushSync))
	require.NoError(t, err)
	require.NoError(t, s.CreateTopic("q", TopicConfig{Queues: 1}))
	rpPut(t, s, "q", 0, 30, 1000) // 0..14 in the first segment, the rest in later ones
	require.NoError(t, s.WaitVisible(ctx))
	clk.Advance(31 * time.Minute)
	_, err = s.CleanExpired()
	require.NoError(t, err)
	first, err := s.MinOffset("q", 0)
	require.NoError(t, err)
	require.Positive(t, first)
	require.NoError(t, s.Close())

	// Zero the entries from 4 on, and drop the checkpoint so that the
	// whole CommitLog is re-dispatched: its first record is the queue's
	// entry at first > 4.
	f, err := fs.OpenFile(s.path("consumequeue/q/0/00000000000000000000"), os.O_RDWR, 0)
	require.NoError(t, err)
	_, err = f.WriteAt(make([]byte, 26*consumequeue.EntrySize), 4*consumequeue.EntrySize)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	require.NoError(t, fs.Remove(s.path(checkpointName)))

	s2, err := openFS(fs, "/rp", rpOptions(clock.NewFake(rpStart.Add(time.Hour)), FlushSync))
	require.NoError(t, err)
	defer s2.Close()
	lo, err := s2.MinOffset("q", 0)
	require.NoError(t, err)
	hi, err := s2.MaxOffset("q", 0)
	require.NoError(t, err)
	require.Equal(t, []int64{first, 30}, []int64{lo, hi})
	ms, err := s2.ReadQueue(ctx, "q", 0, lo, 100)
	require.NoError(t, err)
	require.Len(t, ms, int(30-first))
	require.Equal(t, first, ms[0].QueueOffset)
}

// TestCleanExpiredWithEmptyLastSegment: after a power loss took the only
// record of the last segment, a retention pass removes nothing and fails
// nothing; before, it looked for that segment's first record (its
// predecessor's seal time) and returned ErrNotFound.
func TestCleanExpiredWithEmptyLastSegment(t *testing.T) {
	clk := clock.NewFake(rpStart)
	fs := vfs.NewMem()
	s, err := openFS(fs, "/rp", rpOptions(clk, FlushSync))
	require.NoError(t, err)
	require.NoError(t, s.CreateTopic("q", TopicConfig{Queues: 1}))
	rpPut(t, s, "q", 0, 3, 4000) // 3 fit in the first segment
	require.NoError(t, s.Close())

	ffs := vfs.NewFaulty(fs)
	s, err = openFS(ffs, "/rp", rpOptions(clk, FlushAsync))
	require.NoError(t, err)
	rpPut(t, s, "q", 0, 1, 4000) // rolls: the new segment's only record, not synced
	require.Equal(t, int64(16<<10), s.log.Segments()[1].Start)
	// The power loss keeps the first segment's end marker but not the
	// page of the second segment's record.
	img := ffs.Crash(rand.New(rand.NewPCG(3, 4)), 1)
	require.NoError(t, s.Close())
	f, err := img.OpenFile("/rp/commitlog/00000000000000016384", os.O_RDWR, 0)
	require.NoError(t, err)
	_, err = f.WriteAt(make([]byte, vfs.PageSize*2), 0)
	require.NoError(t, err)
	require.NoError(t, f.Close())

	clk2 := clock.NewFake(rpStart.Add(time.Hour))
	s2, err := openFS(img, "/rp", rpOptions(clk2, FlushAsync))
	require.NoError(t, err)
	defer s2.Close()
	require.Equal(t, int64(16<<10), s2.log.WrotePosition(), "the image keeps the new segment, empty")
	rep, err := s2.CleanExpired()
	require.NoError(t, err)
	require.Zero(t, rep.Segments)
	hi, err := s2.MaxOffset("q", 0)
	require.NoError(t, err)
	require.Equal(t, int64(3), hi)
}
