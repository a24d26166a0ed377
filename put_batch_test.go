package mqlite

import (
	"context"
	"math"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestPutBatchChecksTheQueueOfEachTopic: the queue is checked once per
// run of one topic, so a later message of another topic that lacks the
// queue still fails the whole batch, and nothing is stored.
func TestPutBatchChecksTheQueueOfEachTopic(t *testing.T) {
	ctx := context.Background()
	s := memStore(t, Options{})
	require.NoError(t, s.CreateTopic("wide", TopicConfig{Queues: 8}))
	require.NoError(t, s.CreateTopic("narrow", TopicConfig{Queues: 2}))
	batch := []*Message{
		{Topic: "wide", Body: []byte("a")},
		{Topic: "wide", Body: []byte("b")},
		{Topic: "narrow", Body: []byte("c")},
	}
	before := s.log.WrotePosition()
	_, err := s.PutBatch(ctx, batch, 5)
	require.ErrorIs(t, err, ErrInvalidArgument)
	require.ErrorContains(t, err, "batch message 2")
	require.Equal(t, before, s.log.WrotePosition(), "nothing appended")
	rs, err := s.PutBatch(ctx, batch[:2], 5) // the valid part alone
	require.NoError(t, err)
	require.EqualValues(t, 0, rs[0].QueueOffset, "the failed batch took no queue offset")
	require.EqualValues(t, 1, rs[1].QueueOffset)
}

// TestPutBatchReusesNoStateAcrossBatches: jobs come from a pooled
// scratch; a batch after a larger one, with and without unique keys of
// the caller's, gets its own keys, offsets and bodies.
func TestPutBatchReusesNoStateAcrossBatches(t *testing.T) {
	ctx := context.Background()
	s := memStore(t, Options{})
	big := make([]*Message, 5)
	for i := range big {
		big[i] = &Message{Topic: "t", Body: []byte{byte('a' + i)}, UniqKey: "OWNKEY" + string(rune('0'+i))}
	}
	first, err := s.PutBatch(ctx, big, 0)
	require.NoError(t, err)
	small := []*Message{{Topic: "t", Body: []byte("x")}, {Topic: "t", Body: []byte("y")}}
	second, err := s.PutBatch(ctx, small, 0)
	require.NoError(t, err)
	require.Len(t, second, 2)
	for i, r := range second {
		require.EqualValues(t, 5+i, r.QueueOffset)
		require.NotContains(t, r.UniqKey(), "OWNKEY")
		require.Len(t, r.UniqKey(), uniqLen)
	}
	require.NotEqual(t, second[0].UniqKey(), second[1].UniqKey())
	require.Equal(t, first[4].End(), second[0].Offset)
	require.Equal(t, "OWNKEY4", first[4].UniqKey())
	require.NoError(t, s.WaitVisible(ctx))
	ms, err := s.ReadQueue(ctx, "t", 0, 0, 10)
	require.NoError(t, err)
	require.Len(t, ms, 7)
	require.Equal(t, "y", string(ms[6].Body))
	require.Equal(t, second[1].UniqKey(), ms[6].UniqKey)
}

// TestPutBatchIntoReusesTheResults: PutBatchInto writes the results into
// the slice passed in when it has room (the same memory, every field
// overwritten, flags of a reused result cleared), allocates when it has
// not, and stores and reads back like PutBatch.
func TestPutBatchIntoReusesTheResults(t *testing.T) {
	ctx := context.Background()
	s := memStore(t, Options{})
	batch := []*Message{
		{Topic: "t", Body: []byte("a")},
		{Topic: "t", Body: []byte("b"), UniqKey: "own-key"},
		{Topic: "t", Body: []byte("c")},
	}
	small := make([]PutResult, 1)
	rs, err := s.PutBatchInto(ctx, batch, 1, small)
	require.NoError(t, err)
	require.Len(t, rs, 3)
	require.NotSame(t, &small[0], &rs[0], "too small: a new slice")

	dst := make([]PutResult, 4)
	dst[0].Duplicate, dst[1].Delayed = true, true
	again, err := s.PutBatchInto(ctx, batch, 1, dst)
	require.NoError(t, err)
	require.Len(t, again, 3)
	require.Same(t, &dst[0], &again[0], "the results are in dst's memory")
	for i, r := range again {
		require.False(t, r.Duplicate || r.Delayed, "result %d: a reused result's flags are cleared", i)
		require.Equal(t, int64(3+i), r.QueueOffset)
		require.Equal(t, 1, r.QueueID)
		require.Equal(t, rs[i].End()+rs[2].End()-rs[0].Offset, r.End(), "result %d: stored right after the first batch", i)
	}
	require.Equal(t, "own-key", again[1].UniqKey())
	require.NotEqual(t, rs[0].UniqKey(), again[0].UniqKey(), "a generated key is the new message's")
	got, err := s.ReadQueue(ctx, "t", 1, 3, 10)
	require.NoError(t, err)
	require.Len(t, got, 3)
	for i, m := range got {
		require.Equal(t, batch[i].Body, m.Body)
		require.Equal(t, again[i].MsgID(), m.MsgID)
		require.Equal(t, again[i].UniqKey(), m.UniqKey)
	}

	_, err = s.PutBatchInto(ctx, nil, 1, dst)
	require.ErrorIs(t, err, ErrInvalidArgument, "an empty batch")
	before := s.log.WrotePosition()
	_, err = s.PutBatchInto(ctx, []*Message{{Topic: "t", Body: []byte("x")}, {Topic: ""}}, 1, dst)
	require.ErrorIs(t, err, ErrInvalidArgument, "an invalid message")
	require.Equal(t, before, s.log.WrotePosition(), "nothing stored")
	var nilStore *Store
	_, err = nilStore.PutBatchInto(ctx, batch, 0, dst)
	require.Error(t, err)
}

// TestPutBatchIntoWithDedupIDs: a batch with DedupIDs goes through
// PutBatch's dedup check; the results land in dst all the same.
func TestPutBatchIntoWithDedupIDs(t *testing.T) {
	ctx := context.Background()
	s := memStore(t, Options{})
	batch := []*Message{
		{Topic: "t", Body: []byte("a"), DedupID: "1"},
		{Topic: "t", Body: []byte("b"), DedupID: "1"},
	}
	dst := make([]PutResult, 2)
	rs, err := s.PutBatchInto(ctx, batch, 0, dst)
	require.NoError(t, err)
	require.Same(t, &dst[0], &rs[0])
	require.False(t, rs[0].Duplicate)
	require.True(t, rs[1].Duplicate)
	require.Equal(t, rs[0].Offset, rs[1].Offset)
}

// TestProducerSendBatchIntoReusesTheResults: the producer's batch send
// writes its results into the caller's slice and, once warm, allocates
// nothing a batch for them; too small a slice gets a new one; bad input
// stores nothing.
func TestProducerSendBatchIntoReusesTheResults(t *testing.T) {
	ctx := context.Background()
	s := memStore(t, Options{})
	p, err := s.NewProducer(ProducerOptions{AutoCreateQueues: 1})
	require.NoError(t, err)
	batch := make([]*Message, 100)
	for i := range batch {
		batch[i] = &Message{Topic: "t", Body: []byte{byte(i)}}
	}
	small := make([]SendResult, 1)
	rs, err := p.SendBatchInto(ctx, batch, small)
	require.NoError(t, err)
	require.Len(t, rs, 100)
	require.NotSame(t, &small[0], &rs[0], "too small: a new slice")

	dst := make([]SendResult, 100)
	dst[0].Status = FlushDiskTimeout
	again, err := p.SendBatchInto(ctx, batch, dst)
	require.NoError(t, err)
	require.Same(t, &dst[0], &again[0], "the results are in dst's memory")
	for i, r := range again {
		require.Equal(t, SendOK, r.Status, "result %d", i)
		require.Equal(t, "t", r.Topic)
		require.Equal(t, int64(100+i), r.QueueOffset)
	}
	// Bytes, not allocation counts: under the race detector sync.Pool
	// drops a share of what it is given, which changes counts but leaves
	// the results' 26 KB a plain batch allocates far above the rest.
	into := bytesPerRun(20, func() {
		if _, err := p.SendBatchInto(ctx, batch, dst); err != nil {
			t.Fatal(err)
		}
	})
	plain := bytesPerRun(20, func() {
		if _, err := p.SendBatch(ctx, batch); err != nil {
			t.Fatal(err)
		}
	})
	require.Less(t, into+into/2, plain, "SendBatchInto allocates no results (%d bytes a batch against %d)", into, plain)

	before := s.log.WrotePosition()
	_, err = p.SendBatchInto(ctx, []*Message{{Topic: "t", Body: []byte("x")}, {Topic: ""}}, dst)
	require.ErrorIs(t, err, ErrInvalidArgument, "an invalid message")
	require.Equal(t, before, s.log.WrotePosition(), "nothing stored")
	var nilProducer *Producer
	_, err = nilProducer.SendBatchInto(ctx, batch, dst)
	require.Error(t, err)
}

// bytesPerRun is the heap bytes f allocates per call, averaged over runs
// (after one warm-up call). The heap's counters are the process's: other
// goroutines (a store's background work, other tests) add to them, never
// take away, so the least of five rounds is taken.
func bytesPerRun(runs int, f func()) uint64 {
	f()
	least := uint64(math.MaxUint64)
	for range 5 {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for range runs {
			f()
		}
		runtime.ReadMemStats(&after)
		least = min(least, (after.TotalAlloc-before.TotalAlloc)/uint64(runs))
	}
	return least
}
