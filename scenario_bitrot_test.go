package mqlite

// S12 of the reliability plan: bit rot while the store is open. A byte of
// a stored record changes under the running store, through another file
// handle (the mapping shares the page cache).

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestBitRotWhileOpen: reads of the damaged record fail with ErrCorrupt;
// a consumer gets every good message of the queue before it and of the
// other queue, never the damaged bytes, shows the failure in its stats,
// and goes on once it seeks past it; writes go on.
func TestBitRotWhileOpen(t *testing.T) {
	failed := make(chan error, 64)
	log := slog.New(logFunc(func(msg string, attrs []slog.Attr) {
		if msg != "mqlite/consumer: pull failed" {
			return
		}
		for _, a := range attrs {
			if err, ok := a.Value.Any().(error); ok {
				select {
				case failed <- err:
				default:
				}
			}
		}
	}))
	s, dir, rs := rotStore(t, log, false)
	ctx := context.Background()
	bad := rs[6] // queue 0, offset 3
	require.EqualValues(t, 3, bad.QueueOffset)
	flipLogByte(t, dir, bad.Offset+28+56, 'b') // a byte of the body

	_, err := s.ReadAt(bad.Offset)
	require.ErrorIs(t, err, ErrCorrupt)
	_, err = s.MessageByID(bad.MsgID())
	require.ErrorIs(t, err, ErrCorrupt)
	ms, err := s.ReadQueue(ctx, "t", 0, 0, 10)
	require.ErrorIs(t, err, ErrCorrupt, "a queue read stops at the damaged record and says so")
	require.Equal(t, []string{"body-00", "body-02", "body-04"}, bodies(ms))

	pc, err := s.NewPullConsumer("g", ConsumerOptions{ConsumeFromWhere: ConsumeFromFirstOffset})
	require.NoError(t, err)
	defer pc.Close()
	require.NoError(t, pc.Subscribe("t", nil))
	got := map[int][]string{}
	pctx, cancel := context.WithTimeout(ctx, time.Minute) // bounds a failure only
	defer cancel()
	for len(got[0])+len(got[1]) < 13 {
		ms, err := pc.Poll(pctx, 32)
		require.NoError(t, err)
		for _, m := range ms {
			got[m.QueueID] = append(got[m.QueueID], string(m.Body))
		}
	}
	require.Equal(t, []string{"body-00", "body-02", "body-04"}, got[0])
	require.Len(t, got[1], 10)
	select {
	case err := <-failed:
		require.ErrorIs(t, err, ErrCorrupt)
	case <-pctx.Done():
		t.Fatal("the consumer's failed pull was not logged")
	}
	st := pc.Stats()
	require.Len(t, st.Queues, 3) // t:0, t:1 and the group's retry queue
	q0 := st.Queues[1]
	require.Equal(t, "t", q0.Topic)
	require.Equal(t, 0, q0.ID)
	require.ErrorIs(t, q0.FetchError, ErrCorrupt)
	require.EqualValues(t, 3, q0.NextOffset, "the queue waits at the damaged record")
	require.Positive(t, st.FetchErrors)

	require.NoError(t, pc.Seek("t", 0, 4))
	for len(got[0]) < 9 {
		ms, err := pc.Poll(pctx, 32)
		require.NoError(t, err)
		for _, m := range ms {
			got[m.QueueID] = append(got[m.QueueID], string(m.Body))
		}
	}
	require.Equal(t, []string{"body-00", "body-02", "body-04", "body-08", "body-10", "body-12", "body-14", "body-16", "body-18"}, got[0])
	for _, q := range pc.Stats().Queues {
		if q.ID == 0 && q.FetchError != nil && !errors.Is(q.FetchError, ErrCorrupt) {
			t.Fatalf("queue 0 after the seek: %v", q.FetchError)
		}
	}

	rep, err := s.Verify(ctx, nil)
	require.NoError(t, err)
	require.False(t, rep.OK)
	_, err = s.Put(ctx, &Message{Topic: "t", Body: []byte("after")}, 1)
	require.NoError(t, err, "damage found by a read does not stop writes")
}

// rotStore opens a store in a directory of its own (logging to log, if
// set) with 20 messages in topic t, alternately in its two queues:
// "body-00" at queue 0 offset 0, "body-01" at queue 1 offset 0, and so
// on. With held, nothing of them is dispatched yet and the caller
// unlocks s.disp.run.
func rotStore(t *testing.T, log *slog.Logger, held bool) (s *Store, dir string, rs []PutResult) {
	t.Helper()
	dir = filepath.Join(t.TempDir(), "s")
	s, err := Open(dir, &Options{SegmentSize: 64 << 10, NoWarm: true, Logger: log})
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	require.NoError(t, s.CreateTopic("t", TopicConfig{Queues: 2}))
	if held {
		s.disp.run.Lock() // neither the dispatcher nor a sender dispatches meanwhile
	}
	for i := range 20 {
		r, err := s.Put(context.Background(), &Message{Topic: "t", Body: []byte(fmt.Sprintf("body-%02d", i))}, i%2)
		require.NoError(t, err)
		rs = append(rs, r)
	}
	if !held {
		require.NoError(t, s.WaitVisible(context.Background()))
	}
	return s, dir, rs
}

// TestBitRotBeforeDispatch: a record whose frame changes before the
// dispatcher reaches it (here, its size byte) stops dispatch with a typed
// error and fences the store: writes fail with ErrFenced naming the
// damage, and what was dispatched before it still reads.
func TestBitRotBeforeDispatch(t *testing.T) {
	s, dir, rs := rotStore(t, nil, true)
	ctx := context.Background()
	flipLogByte(t, dir, rs[6].Offset, byte(rs[6].Size))
	s.disp.run.Unlock()

	err := s.WaitVisible(ctx)
	require.ErrorIs(t, err, ErrFenced)
	require.ErrorIs(t, err, ErrCorrupt)
	_, err = s.Put(ctx, &Message{Topic: "t", Body: []byte("after")}, 1)
	require.ErrorIs(t, err, ErrFenced)
	require.ErrorIs(t, err, ErrCorrupt)
	for q, want := range [][]string{{"body-00", "body-02", "body-04"}, {"body-01", "body-03", "body-05"}} {
		ms, err := s.ReadQueue(ctx, "t", q, 0, 32)
		require.NoError(t, err)
		require.Equal(t, want, bodies(ms), "queue %d: the records before the damaged one were dispatched", q)
	}
}

// TestBitRotSkipDamaged: with SkipDamaged a push consumer steps over the
// damaged record, counts it and delivers everything else.
func TestBitRotSkipDamaged(t *testing.T) {
	s, dir, rs := rotStore(t, nil, false)
	ctx := context.Background()
	flipLogByte(t, dir, rs[6].Offset+28+56, 'b')

	c, collect := bodyConsumer(t, s, ConsumerOptions{ConsumeFromWhere: ConsumeFromFirstOffset, SkipDamaged: true})
	seen := collect(19)
	require.False(t, seen["body-06"])
	require.EqualValues(t, 1, c.Stats().SkippedDamaged)
	require.NoError(t, c.Shutdown(ctx))
	lag, err := s.ConsumerLag("g")
	require.NoError(t, err)
	for _, l := range lag {
		if l.Topic == "t" {
			require.Zero(t, l.Lag, "queue %d: the committed offset went past the damaged record", l.ID)
		}
	}
}

// TestBitRotPushSeek: a push consumer waits at the damaged record until a
// Seek past it, then delivers the rest of the queue.
func TestBitRotPushSeek(t *testing.T) {
	s, dir, rs := rotStore(t, nil, false)
	ctx := context.Background()
	flipLogByte(t, dir, rs[6].Offset+28+56, 'b') // queue 0, offset 3

	c, collect := bodyConsumer(t, s, ConsumerOptions{ConsumeFromWhere: ConsumeFromFirstOffset})
	seen := collect(13) // queue 1's ten, and queue 0 up to the damage
	require.False(t, seen["body-08"], "delivered past the damage")
	require.NoError(t, c.Seek("t", 0, 4))
	collect(19)
	require.False(t, seen["body-06"])
	require.NoError(t, c.Shutdown(ctx))
	lag, err := s.ConsumerLag("g")
	require.NoError(t, err)
	for _, l := range lag {
		if l.Topic == "t" {
			require.Zero(t, l.Lag, "queue %d", l.ID)
		}
	}
}

// bodyConsumer starts a push consumer of group g on topic t (closed with
// the test); collect(n) waits until n distinct bodies were delivered,
// none twice, and returns them all.
func bodyConsumer(t *testing.T, s *Store, o ConsumerOptions) (*PushConsumer, func(n int) map[string]bool) {
	c, err := s.NewPushConsumer("g", o)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	require.NoError(t, c.Subscribe("t", nil))
	got := make(chan string, 32)
	require.NoError(t, c.Start(func(_ context.Context, ms []*MessageExt) ConsumeResult {
		for _, m := range ms {
			got <- string(m.Body)
		}
		return ConsumeSuccess
	}))
	seen := map[string]bool{}
	return c, func(n int) map[string]bool {
		for len(seen) < n {
			select {
			case b := <-got:
				require.False(t, seen[b], "%s twice", b)
				seen[b] = true
			case <-time.After(time.Minute): // bounds a failure only
				t.Fatalf("delivered %d of %d", len(seen), n)
			}
		}
		return seen
	}
}
