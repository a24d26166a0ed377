package mqlite

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/mqlite/mqlite/commitlog"
	"github.com/mqlite/mqlite/consumer"
	"github.com/mqlite/mqlite/message"
	"github.com/stretchr/testify/require"
)

// raBody is message i's body: n bytes, all of them different from every
// other message's at the same position, so that a body overwritten by a
// later record shows.
func raBody(i, n int) []byte {
	b := make([]byte, n)
	for j := range b {
		b[j] = byte(i*7 + j)
	}
	copy(b, fmt.Sprintf("m%05d", i))
	return b
}

// raPut stores n messages of size bytes on queue 0 of topic "t".
func raPut(t *testing.T, s *Store, n, size int, tags func(i int) string) {
	t.Helper()
	ctx := context.Background()
	for i := range n {
		m := &Message{Topic: "t", Body: raBody(i, size)}
		if tags != nil {
			m.Tags = tags(i)
		}
		_, err := s.Put(ctx, m, 0)
		require.NoError(t, err)
	}
}

// pollHeld polls want messages and keeps every one of them.
func pollHeld(t *testing.T, pc *PullConsumer, want int) []*MessageExt {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a watchdog
	defer cancel()
	var held []*MessageExt
	for len(held) < want {
		ms, err := pc.Poll(ctx, 32)
		require.NoError(t, err)
		held = append(held, ms...)
	}
	return held
}

// TestReadAheadHeldMessagesKeepTheirBytes: a read-ahead buffer of 8 KiB
// is refilled many times over 400 messages of 300 bytes; every message
// held from the first Poll on still has its own body, topic and ID, so
// none shares memory with the buffer (an alias would show a later
// record's bytes). The message larger than the buffer comes through too.
func TestReadAheadHeldMessagesKeepTheirBytes(t *testing.T) {
	s := memStore(t, Options{})
	require.NoError(t, s.CreateTopic("t", TopicConfig{Queues: 1}))
	const n, size = 400, 300
	raPut(t, s, n, size, nil)
	big := raBody(n, 20<<10) // larger than the buffer
	_, err := s.Put(context.Background(), &Message{Topic: "t", Body: big}, 0)
	require.NoError(t, err)
	pc, err := s.NewPullConsumer("g", ConsumerOptions{ConsumeFromWhere: ConsumeFromFirstOffset, ReadAheadBytes: 8 << 10})
	require.NoError(t, err)
	defer pc.Close()
	require.NoError(t, pc.Subscribe("t", nil))
	held := pollHeld(t, pc, n+1)
	require.Len(t, held, n+1)
	for i, m := range held[:n] {
		require.Equal(t, int64(i), m.QueueOffset)
		require.True(t, bytes.Equal(raBody(i, size), m.Body), "message %d's body changed", i)
		require.Equal(t, "t", m.Topic)
		require.Equal(t, message.ID(m.CommitLogOffset), m.MsgID)
		require.Greater(t, int(m.StoreSize), size)
	}
	require.True(t, bytes.Equal(big, held[n].Body), "the message larger than the buffer")
}

// TestReadAheadFilter: a tag filter through the read-ahead delivers only
// the matching messages, in order, and the committed offset passes the
// rest.
func TestReadAheadFilter(t *testing.T) {
	s := memStore(t, Options{})
	require.NoError(t, s.CreateTopic("t", TopicConfig{Queues: 1}))
	const n = 200
	raPut(t, s, n, 64, func(i int) string { return []string{"a", "b", "c"}[i%3] })
	f, err := Tag("a || c")
	require.NoError(t, err)
	pc, err := s.NewPullConsumer("g", ConsumerOptions{ConsumeFromWhere: ConsumeFromFirstOffset, ReadAheadBytes: 2 << 10})
	require.NoError(t, err)
	defer pc.Close()
	require.NoError(t, pc.Subscribe("t", f))
	var want []int64
	for i := range n {
		if i%3 != 1 {
			want = append(want, int64(i))
		}
	}
	held := pollHeld(t, pc, len(want))
	got := make([]int64, len(held))
	for i, m := range held {
		got[i] = m.QueueOffset
		require.NotEqual(t, "b", m.Tags)
	}
	require.Equal(t, want, got)
}

// TestReadAheadPushOrder: a push consumer with a small read-ahead buffer
// gets every message once, in order per queue (orderly), with its bytes.
func TestReadAheadPushOrder(t *testing.T) {
	s := memStore(t, Options{})
	require.NoError(t, s.CreateTopic("t", TopicConfig{Queues: 1}))
	const n, size = 500, 100
	raPut(t, s, n, size, nil)
	c, err := s.NewPushConsumer("g", ConsumerOptions{ConsumeFromWhere: ConsumeFromFirstOffset, Orderly: true, ReadAheadBytes: 3 << 10})
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, c.Subscribe("t", nil))
	got := make(chan *MessageExt, n)
	require.NoError(t, c.Start(func(_ context.Context, ms []*MessageExt) ConsumeResult {
		for _, m := range ms {
			got <- m
		}
		return ConsumeSuccess
	}))
	timeout := time.After(time.Minute) // a watchdog
	var held []*MessageExt
	for len(held) < n {
		select {
		case m := <-got:
			held = append(held, m)
		case <-timeout:
			t.Fatalf("got %d of %d messages", len(held), n)
		}
	}
	for i, m := range held {
		require.Equal(t, int64(i), m.QueueOffset)
		require.True(t, bytes.Equal(raBody(i, size), m.Body), "message %d", i)
	}
}

// TestReadAheadOptions: -1 turns the read-ahead off (messages still come),
// other negative sizes and sizes past 1 GiB are refused; 0 is the default;
// a buffer too small for any record still delivers everything in order.
func TestReadAheadOptions(t *testing.T) {
	s := memStore(t, Options{})
	require.NoError(t, s.CreateTopic("t", TopicConfig{Queues: 1}))
	for _, bad := range []int{-2, 1<<30 + 1} {
		_, err := s.NewPullConsumer("g", ConsumerOptions{ReadAheadBytes: bad})
		require.ErrorIs(t, err, ErrInvalidArgument, "ReadAheadBytes %d", bad)
	}
	raPut(t, s, 50, 32, nil)
	pc, err := s.NewPullConsumer("g", ConsumerOptions{ConsumeFromWhere: ConsumeFromFirstOffset, ReadAheadBytes: -1})
	require.NoError(t, err)
	defer pc.Close()
	require.NoError(t, pc.Subscribe("t", nil))
	held := pollHeld(t, pc, 50)
	for i, m := range held {
		require.True(t, bytes.Equal(raBody(i, 32), m.Body), "message %d", i)
	}

	// A buffer smaller than every record: each fetch is a plain Pull.
	tiny, err := s.NewPullConsumer("tiny", ConsumerOptions{ConsumeFromWhere: ConsumeFromFirstOffset, ReadAheadBytes: 1})
	require.NoError(t, err)
	defer tiny.Close()
	require.NoError(t, tiny.Subscribe("t", nil))
	held = pollHeld(t, tiny, 50)
	require.Len(t, held, 50)
	for i, m := range held {
		require.Equal(t, int64(i), m.QueueOffset)
		require.True(t, bytes.Equal(raBody(i, 32), m.Body), "message %d", i)
	}
}

// raSize is message i's body size in the mixed-size tests: every third
// one is large enough to be decoded as it is read, the others are copied.
func raSize(i int) int {
	if i%3 == 0 {
		return consumer.DirectDecodeBytes + 100*i
	}
	return 200
}

// TestPullRawDecodesLargeRecords: with a Batch, PullRaw decodes the
// records of DirectDecodeBytes or more as it reads them and copies the
// others, in queue order, within one budget for both; without one it
// copies them all.
func TestPullRawDecodesLargeRecords(t *testing.T) {
	s := memStore(t, Options{})
	require.NoError(t, s.CreateTopic("t", TopicConfig{Queues: 1}))
	const n = 30
	for i := range n {
		_, err := s.Put(context.Background(), &Message{Topic: "t", Body: raBody(i, raSize(i))}, 0)
		require.NoError(t, err)
	}
	require.NoError(t, s.Settle(context.Background())) // every entry dispatched
	const budget = 16 << 10
	dst := consumer.RawRecords{Buf: make([]byte, 0, budget), Batch: new(message.Batch)}
	next, err := s.pullRaw(context.Background(), "t", 0, 0, nil, &dst)
	require.NoError(t, err)
	require.True(t, dst.Full, "30 records do not fit in 16 KiB")
	require.Equal(t, int64(len(dst.Recs)), next)
	used := len(dst.Buf)
	for i, r := range dst.Recs {
		require.EqualValues(t, i, r.QueueOffset)
		if raSize(i) < consumer.DirectDecodeBytes {
			require.Zero(t, r.Msg, "record %d is copied", i)
			m, err := s.decodeRaw(new(message.Batch), dst.Buf[r.Start:r.End], r)
			require.NoError(t, err)
			require.Equal(t, raBody(i, raSize(i)), m.Body)
			continue
		}
		require.NotZero(t, r.Msg, "record %d is decoded", i)
		m := dst.Msgs[r.Msg-1]
		require.Equal(t, raBody(i, raSize(i)), m.Body)
		require.EqualValues(t, i, m.QueueOffset)
		require.Equal(t, r.CommitLogOffset, m.CommitLogOffset)
		require.Equal(t, r.StoreSize, m.StoreSize)
		require.Equal(t, message.ID(m.CommitLogOffset), m.MsgID)
		used += int(r.StoreSize) // a bound on its payload
	}
	require.LessOrEqual(t, used, budget+len(dst.Recs)*commitlog.FrameSize)

	plain := consumer.RawRecords{Buf: make([]byte, 0, budget)}
	_, err = s.pullRaw(context.Background(), "t", 0, 0, nil, &plain)
	require.NoError(t, err)
	require.Empty(t, plain.Msgs)
	require.Equal(t, len(dst.Recs), len(plain.Recs), "the same records fit either way")
}

// TestReadAheadMixedSizesKeepTheirBytes: large records (decoded as they
// are read) and small ones (copied, decoded at hand-over) come in queue
// order through a small buffer refilled many times, each with its own
// bytes while all are held; a tag filter leaves out large and small ones
// alike.
func TestReadAheadMixedSizesKeepTheirBytes(t *testing.T) {
	s := memStore(t, Options{})
	require.NoError(t, s.CreateTopic("t", TopicConfig{Queues: 1}))
	const n = 120
	for i := range n {
		m := &Message{Topic: "t", Body: raBody(i, raSize(i)), Tags: []string{"a", "b"}[i/2%2]}
		_, err := s.Put(context.Background(), m, 0)
		require.NoError(t, err)
	}
	pc, err := s.NewPullConsumer("g", ConsumerOptions{ConsumeFromWhere: ConsumeFromFirstOffset, ReadAheadBytes: 40 << 10})
	require.NoError(t, err)
	defer pc.Close()
	require.NoError(t, pc.Subscribe("t", nil))
	held := pollHeld(t, pc, n)
	require.Len(t, held, n)
	for i, m := range held {
		require.EqualValues(t, i, m.QueueOffset)
		require.True(t, bytes.Equal(raBody(i, raSize(i)), m.Body), "message %d's body changed", i)
		require.Equal(t, "t", m.Topic)
		require.Equal(t, message.ID(m.CommitLogOffset), m.MsgID)
	}

	f, err := Tag("a")
	require.NoError(t, err)
	fc, err := s.NewPullConsumer("f", ConsumerOptions{ConsumeFromWhere: ConsumeFromFirstOffset, ReadAheadBytes: 40 << 10})
	require.NoError(t, err)
	defer fc.Close()
	require.NoError(t, fc.Subscribe("t", f))
	var want []int64
	for i := range n {
		if i/2%2 == 0 {
			want = append(want, int64(i))
		}
	}
	held = pollHeld(t, fc, len(want))
	got := make([]int64, len(held))
	for i, m := range held {
		got[i] = m.QueueOffset
		require.True(t, bytes.Equal(raBody(int(m.QueueOffset), raSize(int(m.QueueOffset))), m.Body))
	}
	require.Equal(t, want, got)
}
