package mqlite

import (
	"context"
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
