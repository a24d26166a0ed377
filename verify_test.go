package mqlite

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqlite/mqlite/consumequeue"
)

func TestVerifyHealthy(t *testing.T) {
	s := memStore(t, Options{SegmentSize: 16 << 10})
	statsFixture(t, s)
	var calls, lastDone, lastTotal int64
	rep, err := s.Verify(context.Background(), func(done, total int64) {
		calls++
		require.LessOrEqual(t, done, total)
		lastDone, lastTotal = done, total
	})
	require.NoError(t, err)
	require.True(t, rep.OK, "%v", rep.Problems)
	require.Empty(t, rep.Problems)
	require.EqualValues(t, 15, rep.Records)
	require.EqualValues(t, 15, rep.Entries)
	// The scheduler creates the delay levels' (empty) queues in the
	// background: Verify saw at most what exists now.
	require.LessOrEqual(t, rep.Queues, len(s.disp.cq.Queues()))
	require.Positive(t, rep.Queues)
	require.Equal(t, s.log.WrotePosition(), rep.Bytes)
	require.GreaterOrEqual(t, calls, int64(2))
	require.Equal(t, lastTotal, lastDone)
	require.Equal(t, rep.Bytes, lastTotal)
}

// TestVerifyFlippedByte flips a body byte of one record, and a size byte
// of another's frame, through a separate file handle while the store runs
// (the mapping shares the page cache): Verify names each record's offset
// and the entries pointing at them, and goes on at the next record.
func TestVerifyFlippedByte(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "s")
	s, err := Open(dir, &Options{SegmentSize: 64 << 10, NoWarm: true})
	require.NoError(t, err)
	defer s.Close()
	ctx := context.Background()
	var body, frame PutResult
	for i := range 40 {
		r, err := s.Put(ctx, &Message{Topic: "t", Body: []byte(fmt.Sprintf("body-%02d", i))}, 0)
		require.NoError(t, err)
		switch i {
		case 17:
			body = r
		case 25:
			frame = r
		}
	}
	require.NoError(t, s.WaitVisible(ctx))
	flipLogByte(t, dir, body.Offset+28+56, 'b') // frame, then the payload's fixed fields and body length
	flipLogByte(t, dir, frame.Offset, byte(frame.Size))

	rep, err := s.Verify(ctx, nil)
	require.NoError(t, err)
	require.False(t, rep.OK)
	require.EqualValues(t, 38, rep.Records, "the scan went on after each damaged record")
	require.Len(t, rep.Problems, 4, "%q", rep.Problems)
	for i, r := range []PutResult{body, frame} {
		p := rep.Problems[i]
		require.Contains(t, p, fmt.Sprintf("commitlog offset %d ", r.Offset))
		require.Contains(t, p, fmt.Sprintf("%d bytes up to the next valid record, at offset %d", r.Size, r.Offset+int64(r.Size)))
		require.Contains(t, rep.Problems[2+i], fmt.Sprintf("consumequeue t/0@%d: points at commitlog offset %d", r.QueueOffset, r.Offset))
	}
	require.Contains(t, rep.Problems[0], "checksum mismatch")
}

// TestVerifyEntryPointingElsewhere appends, as the dispatcher would, an
// entry of queue a/0 that points at b's message.
func TestVerifyEntryPointingElsewhere(t *testing.T) {
	s := memStore(t, Options{})
	ctx := context.Background()
	_, err := s.Put(ctx, &Message{Topic: "a", Body: []byte("a0")}, 0)
	require.NoError(t, err)
	b0, err := s.Put(ctx, &Message{Topic: "b", Body: []byte("b0")}, 0)
	require.NoError(t, err)
	require.NoError(t, s.WaitVisible(ctx))
	q, err := s.disp.cq.Queue("a", 0, false)
	require.NoError(t, err)
	require.NoError(t, q.Append(1, consumequeue.Entry{Offset: b0.Offset, Size: int32(b0.Size)}))

	rep, err := s.Verify(ctx, nil)
	require.NoError(t, err)
	require.False(t, rep.OK)
	require.EqualValues(t, 3, rep.Entries)
	require.Equal(t, []string{fmt.Sprintf("consumequeue a/0@1: points at commitlog offset %d (size %d), which holds b/0@0 (size %d)",
		b0.Offset, b0.Size, b0.Size)}, rep.Problems)
}

func TestVerifyCancelledAndClosed(t *testing.T) {
	s := memStore(t, Options{})
	statsFixture(t, s)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := s.Verify(ctx, nil)
	require.ErrorIs(t, err, context.Canceled)
	require.NoError(t, s.Close())
	_, err = s.Verify(context.Background(), nil)
	require.ErrorIs(t, err, ErrClosed)
}

func TestVerifyRebuildIndexes(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "s")
	opts := &Options{SegmentSize: 64 << 10, NoWarm: true}
	s, err := Open(dir, opts)
	require.NoError(t, err)
	statsFixture(t, s)
	before, err := s.Stats()
	require.NoError(t, err)
	end := s.log.WrotePosition()

	_, err = RebuildIndexes(dir, opts)
	require.ErrorIs(t, err, ErrLocked, "the store is open")
	require.NoError(t, s.Close())

	rep, err := RebuildIndexes(dir, opts)
	require.NoError(t, err)
	require.Equal(t, end, rep.Redispatched, "everything re-dispatched")

	s, err = Open(dir, opts)
	require.NoError(t, err)
	defer s.Close()
	after, err := s.Stats()
	require.NoError(t, err)
	require.Equal(t, before.Topics, after.Topics)
	require.Equal(t, before.Groups, after.Groups, "committed offsets still fit the queues")
	hits, err := s.MessagesByKey("orders", "o7", time.Unix(0, 0), time.Now().Add(time.Hour), 4)
	require.NoError(t, err)
	require.Len(t, hits, 1)
	vr, err := s.Verify(context.Background(), nil)
	require.NoError(t, err)
	require.True(t, vr.OK, "%v", vr.Problems)

	_, err = RebuildIndexes(filepath.Join(t.TempDir(), "none"), nil)
	require.ErrorIs(t, err, ErrNotFound)
	_, err = RebuildIndexes(dir, &Options{InMemory: true})
	require.ErrorIs(t, err, ErrInvalidArgument)
}

func TestVerifyRebuildRefusesAfterRetention(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "s")
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "commitlog"), 0o755))
	name := filepath.Join(dir, "commitlog", fmt.Sprintf("%020d", 64<<10))
	require.NoError(t, os.WriteFile(name, nil, 0o644))
	_, err := RebuildIndexes(dir, nil)
	require.ErrorIs(t, err, ErrInvalidArgument)
	require.True(t, strings.Contains(err.Error(), "retention"), err.Error())
}

// TestVerifyWhileWriting runs Verify beside a writer: what is written
// meanwhile is outside the snapshot, and nothing is reported.
func TestVerifyWhileWriting(t *testing.T) {
	s := memStore(t, Options{SegmentSize: 16 << 10})
	statsFixture(t, s)
	ctx := context.Background()
	done := make(chan error)
	go func() {
		var err error
		for i := 0; i < 2000 && err == nil; i++ {
			_, err = s.Put(ctx, &Message{Topic: "orders", Keys: []string{"k"}, Body: []byte("concurrent")}, i%4)
		}
		done <- err
	}()
	for range 5 {
		rep, err := s.Verify(ctx, nil)
		require.NoError(t, err)
		require.True(t, rep.OK, "%q", rep.Problems)
	}
	require.NoError(t, <-done)
	require.NoError(t, s.WaitVisible(ctx))
	rep, err := s.Verify(ctx, nil)
	require.NoError(t, err)
	require.True(t, rep.OK, "%q", rep.Problems)
	require.EqualValues(t, 2015, rep.Records)
	require.EqualValues(t, 2015, rep.Entries)
}
