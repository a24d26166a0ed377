package mqlite

// Issue 35 item 11: a damaged frame under an indexed record, in whichever
// header field, reads as ErrCorrupt, never as "not found".

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// requireCorrupt asserts that err is an ErrCorrupt and not an ErrNotFound.
func requireCorrupt(t *testing.T, err error, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	require.ErrorIs(t, err, ErrCorrupt, msg)
	require.False(t, errors.Is(err, ErrNotFound), msg)
}

// TestHeaderBitFlipReadsCorrupt flips each bit of the 28-byte frame of a
// record that a ConsumeQueue entry, the IndexFile (its key) and its
// message ID point at, one at a time, under the open store: ReadAt,
// MessageByID, ReadQueue, Messages and MessagesByKey fail with ErrCorrupt,
// never ErrNotFound and never another message; the queue's other messages
// read before and after it.
func TestHeaderBitFlipReadsCorrupt(t *testing.T) {
	s, dir, rs := rotStore(t, nil, false)
	ctx := context.Background()
	bad := rs[6] // queue 0, offset 3
	require.EqualValues(t, 3, bad.QueueOffset)
	m, err := s.ReadAt(bad.Offset)
	require.NoError(t, err)
	key := m.UniqKey
	require.NotEmpty(t, key)
	from, to := m.StoreTimestamp.Add(-time.Hour), m.StoreTimestamp.Add(time.Hour)
	for bit := 0; bit < 28*8; bit++ {
		at := bad.Offset + int64(bit/8)
		flipLogBit(t, dir, at, uint(bit%8))
		_, err := s.ReadAt(bad.Offset)
		requireCorrupt(t, err, "bit %d: ReadAt", bit)
		_, err = s.MessageByID(bad.MsgID())
		requireCorrupt(t, err, "bit %d: MessageByID", bit)
		ms, err := s.ReadQueue(ctx, "t", 0, 0, 10)
		requireCorrupt(t, err, "bit %d: ReadQueue", bit)
		require.Equal(t, []string{"body-00", "body-02", "body-04"}, bodies(ms), "bit %d", bit)
		var got []string
		for m, err := range s.Messages("t", 0, 2) {
			if err != nil {
				requireCorrupt(t, err, "bit %d: Messages", bit)
				break
			}
			got = append(got, string(m.Body))
		}
		require.Equal(t, []string{"body-04"}, got, "bit %d", bit)
		_, err = s.MessagesByKey("t", key, from, to, 4)
		requireCorrupt(t, err, "bit %d: MessagesByKey", bit)
		ms, err = s.ReadQueue(ctx, "t", 0, 4, 10)
		require.NoError(t, err, "bit %d: after the damaged record", bit)
		require.Len(t, ms, 6, "bit %d", bit)
		flipLogBit(t, dir, at, uint(bit%8))
	}
	ms, err := s.ReadQueue(ctx, "t", 0, 0, 10)
	require.NoError(t, err)
	require.Len(t, ms, 10)
}

// TestMagicBitFlipSkipDamaged is the reproduction: 400 messages
// of 1 KiB in 64 KiB segments, bit 1 of byte 5 (the magic) of message 10
// flipped, the store reopened. Reads say ErrCorrupt naming the segment;
// a push consumer with SkipDamaged skips that one message, counts it and
// delivers the 399 others.
func TestMagicBitFlipSkipDamaged(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "s")
	opts := &Options{SegmentSize: 64 << 10, NoWarm: true}
	s, err := Open(dir, opts)
	require.NoError(t, err)
	require.NoError(t, s.CreateTopic("t", TopicConfig{Queues: 4}))
	ctx := context.Background()
	body := make([]byte, 1024)
	var rs []PutResult
	for i := range 400 {
		copy(body, fmt.Sprintf("body-%03d", i))
		r, err := s.Put(ctx, &Message{Topic: "t", Body: body}, i%4)
		require.NoError(t, err)
		rs = append(rs, r)
	}
	require.NoError(t, s.Close())
	bad := rs[10]
	flipLogBit(t, dir, bad.Offset+5, 1)

	s, err = Open(dir, opts)
	require.NoError(t, err)
	defer s.Close()
	_, err = s.MessageByID(bad.MsgID())
	requireCorrupt(t, err, "MessageByID")
	var ce *CorruptError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, filepath.Join(dir, "commitlog", fmt.Sprintf("%020d", 0)), ce.Path)
	require.Equal(t, bad.Offset, ce.Offset)
	_, err = s.ReadQueue(ctx, "t", bad.QueueID, bad.QueueOffset, 1)
	requireCorrupt(t, err, "ReadQueue")

	c, err := s.NewPushConsumer("g", ConsumerOptions{ConsumeFromWhere: ConsumeFromFirstOffset, SkipDamaged: true})
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, c.Subscribe("t", nil))
	got := make(chan string, 400)
	require.NoError(t, c.Start(func(_ context.Context, ms []*MessageExt) ConsumeResult {
		for _, m := range ms {
			got <- string(m.Body[:8])
		}
		return ConsumeSuccess
	}))
	seen := map[string]bool{}
	for len(seen) < 399 {
		select {
		case b := <-got:
			require.False(t, seen[b], "%s twice", b)
			seen[b] = true
		case <-time.After(time.Minute): // bounds a failure only
			t.Fatalf("delivered %d of 399", len(seen))
		}
	}
	require.False(t, seen["body-010"])
	require.EqualValues(t, 1, c.Stats().SkippedDamaged)
	require.NoError(t, c.Shutdown(ctx))
}
