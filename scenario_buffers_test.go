package mqlite

import (
	"bytes"
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// S28: what a producer hands over is copied when the call returns, and
// what a reader gets back is its own: a body changed right after Put or
// SendAsync returns is stored as it was at the call, and messages kept
// by a reader stay intact after retention removed their segment and the
// store closed (they are copies, not views of the mapping).
func TestMessageBuffersAreCopies(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	s, err := Open(dir, &Options{SegmentSize: 64 << 10, ConsumeQueueEntries: 256, IndexSlots: 64, IndexEntries: 1024,
		Retention: time.Nanosecond, DeleteHour: farHour(), CleanRatio: 1, ForceCleanRatio: 1})
	require.NoError(t, err)
	defer s.Close()
	ctx := context.Background()
	require.NoError(t, s.CreateTopic("buf", TopicConfig{Queues: 1}))
	pattern := func(i int) []byte { return bytes.Repeat([]byte{byte('a' + i%26)}, 3000) }

	// The producer reuses one buffer: Put, then SendAsync, overwriting it
	// as soon as each call returns.
	buf := make([]byte, 3000)
	p, err := s.NewProducer(ProducerOptions{})
	require.NoError(t, err)
	defer p.Close()
	done := make(chan error, 100)
	for i := range 100 {
		copy(buf, pattern(i))
		m := &Message{Topic: "buf", Body: buf}
		if i%2 == 0 {
			_, err = s.Put(ctx, m, 0)
		} else {
			err = p.SendAsync(ctx, m, func(_ SendResult, err error) { done <- err })
		}
		require.NoError(t, err)
		clear(buf) // the caller's buffer is its own again
	}
	for range 50 {
		require.NoError(t, <-done)
	}
	require.NoError(t, s.WaitVisible(ctx))

	var kept []*MessageExt
	for m, err := range s.Messages("buf", 0, 0) {
		require.NoError(t, err)
		kept = append(kept, m)
	}
	require.Len(t, kept, 100)
	for i, m := range kept {
		require.Equal(t, pattern(i), m.Body, "message %d: stored as the buffer was when the call returned", i)
	}

	// Retention removes every sealed segment the kept messages came from.
	rep, err := s.CleanExpired()
	require.NoError(t, err)
	require.NotZero(t, rep.Segments, "retention removed nothing: %+v", rep)
	_, err = s.ReadAt(kept[0].CommitLogOffset)
	require.ErrorIs(t, err, ErrNotFound, "the first segment is gone")
	require.NoError(t, s.Close())
	for i, m := range kept {
		require.Equal(t, pattern(i), m.Body, "kept message %d after its segment was removed and the store closed", i)
	}
}
