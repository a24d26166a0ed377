package mqlite

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mqlite/mqlite/internal/leakcheck"
	"github.com/mqlite/mqlite/vfs"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

// mode is one configuration of the conformance suite.
type mode struct {
	name string
	opts Options
	fs   func(t *testing.T) (vfs.FS, string)
}

func onDisk(t *testing.T) (vfs.FS, string) { return vfs.OS, filepath.Join(t.TempDir(), "store") }
func inMem(t *testing.T) (vfs.FS, string)  { return vfs.NewMem(), "/store" }

// The tiny modes have tiny index files too: on the in-memory file system
// every file is heap (see smallFiles). file-sync-default keeps every default.
var modes = []mode{
	{"mem-async-tiny", *smallFiles(&Options{Flush: FlushAsync, SegmentSize: 8 << 10}), inMem},
	{"mem-sync-tiny", *smallFiles(&Options{Flush: FlushSync, SegmentSize: 8 << 10}), inMem},
	{"file-async-tiny", *smallFiles(&Options{Flush: FlushAsync, SegmentSize: 16 << 10}), onDisk},
	{"file-sync-tiny", *smallFiles(&Options{Flush: FlushSync, SegmentSize: 16 << 10}), onDisk},
	{"file-sync-default", Options{Flush: FlushSync}, onDisk},
}

// smallFiles gives the file sizes o leaves at zero small values (1 MiB
// segments, 4,096-entry ConsumeQueue files, an IndexFile of 1,024 slots
// and 8,192 entries) and returns o. A test on the in-memory file system
// needs it unless it is about the default sizes: there every file is a heap
// slice of its full size (two 1 GiB segments, a 96 MiB IndexFile), copied
// whole by every crash image, and under -race the detector's shadow of that
// heap stays resident for the rest of the test binary.
func smallFiles(o *Options) *Options {
	if o.SegmentSize == 0 {
		o.SegmentSize = 1 << 20
	}
	if o.ConsumeQueueEntries == 0 {
		o.ConsumeQueueEntries = 4096
	}
	if o.IndexSlots == 0 && o.IndexEntries == 0 {
		o.IndexSlots, o.IndexEntries = 1024, 8192
	}
	return o
}

func openMode(t *testing.T, md mode, fs vfs.FS, dir string) *Store {
	t.Helper()
	o := md.opts
	s, err := openFS(fs, dir, &o)
	require.NoError(t, err)
	return s
}

func body(i int) []byte {
	return []byte(fmt.Sprintf("message-%06d-%s", i, bytes.Repeat([]byte{'x'}, i%300)))
}

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
