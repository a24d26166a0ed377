package mqlite

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mqlite/mqlite/internal/leakcheck"
	"github.com/mqlite/mqlite/vfs"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

func inMem(t *testing.T) (vfs.FS, string) { return vfs.NewMem(), "/store" }

func TestPutReadRoundTripAllModes(t *testing.T) {
	ctx := context.Background()
	for _, md := range modes {
		t.Run(md.name, func(t *testing.T) {
			fs, dir := md.fs(t)
			s := openMode(t, md, fs, dir)
			var res []PutResult
			for i := range 400 {
				m := &Message{Topic: "orders", Tags: "created", Keys: []string{fmt.Sprintf("k%d", i)},
					Properties: map[string]string{"a": "1", "b": "2"}, Body: body(i)}
				r, err := s.Put(ctx, m, i%4)
				require.NoError(t, err)
				require.EqualValues(t, i/4, r.QueueOffset, "dense per-queue offsets")
				res = append(res, r)
			}
			check := func(s *Store) {
				for i, r := range res {
					got, err := s.MessageByID(r.MsgID())
					require.NoError(t, err)
					require.Equal(t, body(i), got.Body)
					require.Equal(t, "orders", got.Topic)
					require.Equal(t, "created", got.Tags)
					require.Equal(t, []string{fmt.Sprintf("k%d", i)}, got.Keys)
					require.Equal(t, map[string]string{"a": "1", "b": "2"}, got.Properties)
					require.Equal(t, r.UniqKey(), got.UniqKey)
					require.EqualValues(t, i%4, got.QueueID)
					require.Equal(t, r.QueueOffset, got.QueueOffset)
				}
			}
			check(s)
			require.NoError(t, s.Close())
			require.NoError(t, s.Close())
			_, err := s.Put(ctx, &Message{Topic: "t", Body: []byte("x")}, 0)
			require.ErrorIs(t, err, ErrClosed)
			_, err = s.ReadAt(0)
			require.ErrorIs(t, err, ErrClosed)

			s = openMode(t, md, fs, dir)
			defer s.Close()
			require.True(t, s.Recovery().CleanShutdown)
			check(s)
			r, err := s.Put(ctx, &Message{Topic: "orders", Body: []byte("after")}, 1)
			require.NoError(t, err)
			require.EqualValues(t, 100, r.QueueOffset, "queue table rebuilt")
		})
	}
}

func TestConcurrentPutsDenseOffsets(t *testing.T) {
	for _, md := range modes[:4] {
		t.Run(md.name, func(t *testing.T) {
			fs, dir := md.fs(t)
			s := openMode(t, md, fs, dir)
			defer s.Close()
			const goroutines, each = 16, 100
			var mu sync.Mutex
			seen := map[int][]int64{}
			var wg sync.WaitGroup
			for g := range goroutines {
				wg.Go(func() {
					for i := range each {
						r, err := s.Put(context.Background(), &Message{Topic: "t", Body: body(g*each + i)}, (g+i)%3)
						if err != nil {
							t.Error(err)
							return
						}
						mu.Lock()
						seen[r.QueueID] = append(seen[r.QueueID], r.QueueOffset)
						mu.Unlock()
						got, err := s.ReadAt(r.Offset)
						if err != nil || !bytes.Equal(got.Body, body(g*each+i)) {
							t.Errorf("read back %d: %v", r.Offset, err)
						}
					}
				})
			}
			wg.Wait()
			total := 0
			for q, offs := range seen {
				total += len(offs)
				have := map[int64]bool{}
				for _, o := range offs {
					require.False(t, have[o], "queue %d offset %d twice", q, o)
					have[o] = true
				}
				for o := range int64(len(offs)) {
					require.True(t, have[o], "queue %d missing offset %d", q, o)
				}
			}
			require.Equal(t, goroutines*each, total)
		})
	}
}

func TestBadInputChangesNothing(t *testing.T) {
	s, err := Open("ignored", &Options{InMemory: true, MaxMessageSize: 1024})
	require.NoError(t, err)
	defer s.Close()
	ctx := context.Background()
	cases := []struct {
		name string
		m    *Message
		q    int
		want error
	}{
		{"nil", nil, 0, ErrInvalidArgument},
		{"empty topic", &Message{Body: []byte("x")}, 0, ErrInvalidTopic},
		{"illegal char", &Message{Topic: "a b", Body: []byte("x")}, 0, ErrInvalidTopic},
		{"too long topic", &Message{Topic: string(bytes.Repeat([]byte{'a'}, 128)), Body: []byte("x")}, 0, ErrInvalidTopic},
		{"nil body", &Message{Topic: "t"}, 0, ErrEmptyBody},
		{"empty body", &Message{Topic: "t", Body: []byte{}}, 0, ErrEmptyBody},
		{"body too large", &Message{Topic: "t", Body: make([]byte, 1025)}, 0, ErrMessageTooLarge},
		{"key with space", &Message{Topic: "t", Body: []byte("x"), Keys: []string{"a b"}}, 0, ErrInvalidKey},
		{"reserved property", &Message{Topic: "t", Body: []byte("x"), Properties: map[string]string{"KEYS": "x"}}, 0, ErrInvalidProperty},
		{"negative delay", &Message{Topic: "t", Body: []byte("x"), DelayLevel: -1}, 0, ErrInvalidDelay},
		{"bad queue", &Message{Topic: "t", Body: []byte("x")}, -1, ErrInvalidArgument},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := s.Put(ctx, c.m, c.q)
			require.ErrorIs(t, err, c.want)
			if c.want != ErrMessageTooLarge {
				require.ErrorIs(t, err, ErrInvalidArgument, "every validation error is also an invalid argument")
			}
		})
	}
	require.Zero(t, s.log.WrotePosition(), "nothing written")
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, err = s.Put(cctx, &Message{Topic: "t", Body: []byte("x")}, 0)
	require.ErrorIs(t, err, context.Canceled)
	require.Zero(t, s.log.WrotePosition(), "cancelled context writes nothing")
	_, err = s.MessageByID("nothex")
	require.ErrorIs(t, err, ErrBadID)
	_, err = Open("x", &Options{Flush: 7, SegmentSize: 10})
	require.ErrorIs(t, err, ErrInvalidArgument)
}

func TestSecondOpenIsLocked(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, nil)
	require.NoError(t, err)
	defer s.Close()
	_, err = Open(dir, nil)
	require.ErrorIs(t, err, ErrLocked)
}
