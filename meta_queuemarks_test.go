package mqlite

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqlite/mqlite/clock"
	"github.com/mqlite/mqlite/consumequeue"
	"github.com/mqlite/mqlite/topic"
	"github.com/mqlite/mqlite/vfs"
)

// encodeV1 writes a checkpoint as version 1 did: 36 bytes, no marks.
func encodeV1(flushed, dispatched int64) []byte {
	b := make([]byte, checkpointV1Size)
	le := binary.LittleEndian
	le.PutUint32(b[0:], checkpointMagic)
	le.PutUint32(b[4:], 1)
	le.PutUint64(b[8:], uint64(flushed))
	le.PutUint64(b[16:], uint64(dispatched))
	le.PutUint32(b[32:], crc32.Checksum(b[:32], crcTable))
	return b
}

// resum rewrites the trailing CRC of a version 2 checkpoint.
func resum(b []byte) []byte {
	binary.LittleEndian.PutUint32(b[len(b)-4:], crc32.Checksum(b[:len(b)-4], crcTable))
	return b
}

func TestCheckpointFormat(t *testing.T) {
	cp := checkpoint{flushed: 4096, dispatched: 4000, marksAt: 4100, marks: []queueMark{
		{consumequeue.QueueID{Topic: "a", ID: 0}, 7}, {consumequeue.QueueID{Topic: "a", ID: 3}, 1}, {consumequeue.QueueID{Topic: "orders", ID: 1}, 1 << 40},
	}}
	got, err := decodeCheckpoint("cp", cp.encode())
	require.NoError(t, err)
	require.Equal(t, cp, got)

	empty, err := decodeCheckpoint("cp", checkpoint{flushed: 1, dispatched: 2}.encode())
	require.NoError(t, err)
	require.NotNil(t, empty.marks, "a version 2 checkpoint of a store with no queue has marks: none")
	require.Empty(t, empty.marks)

	v1, err := decodeCheckpoint("cp", encodeV1(4096, 4000))
	require.NoError(t, err, "version 1 files are still read")
	require.Equal(t, checkpoint{flushed: 4096, dispatched: 4000}, v1)
	require.Nil(t, v1.marks, "version 1 has no marks")

	le := binary.LittleEndian
	for name, b := range map[string][]byte{
		"short":          cp.encode()[:20],
		"cut":            resum(cp.encode()[:len(cp.encode())-9]),
		"crc":            func() []byte { b := cp.encode(); b[40] ^= 1; return b }(),
		"version 3":      func() []byte { b := cp.encode(); le.PutUint32(b[4:], 3); return resum(b) }(),
		"version 1 long": func() []byte { b := cp.encode(); le.PutUint32(b[4:], 1); return resum(b) }(),
		"huge count":     func() []byte { b := cp.encode(); le.PutUint32(b[checkpointCountAt:], 1<<31); return resum(b) }(),
		"count high":     func() []byte { b := cp.encode(); le.PutUint32(b[checkpointCountAt:], 4); return resum(b) }(),
		"count low":      func() []byte { b := cp.encode(); le.PutUint32(b[checkpointCountAt:], 2); return resum(b) }(),
		"unordered": checkpoint{marks: []queueMark{
			{consumequeue.QueueID{Topic: "b", ID: 0}, 1}, {consumequeue.QueueID{Topic: "a", ID: 0}, 1}}}.encode(),
		"duplicate": checkpoint{marks: []queueMark{
			{consumequeue.QueueID{Topic: "a", ID: 0}, 1}, {consumequeue.QueueID{Topic: "a", ID: 0}, 1}}}.encode(),
		"negative next": checkpoint{marks: []queueMark{{consumequeue.QueueID{Topic: "a", ID: 0}, -1}}}.encode(),
		"empty topic":   checkpoint{marks: []queueMark{{consumequeue.QueueID{Topic: "", ID: 0}, 1}}}.encode(),
		"negative":      checkpoint{flushed: -1}.encode(),
		"marks below": func() []byte {
			b := checkpoint{dispatched: 10}.encode()
			le.PutUint64(b[24:], 9)
			return resum(b)
		}(),
		"version 2 short": func() []byte {
			b := encodeV1(1, 2)
			le.PutUint32(b[4:], 2)
			return resum(b)
		}(),
	} {
		_, err := decodeCheckpoint("cp", b)
		require.ErrorIs(t, err, ErrCorrupt, name)
	}
}

// Any bytes decode to a checkpoint that encodes back to them, or to
// ErrCorrupt; decoding never panics.
func FuzzDecodeCheckpoint(f *testing.F) {
	f.Add(checkpoint{flushed: 4096, dispatched: 4000, marksAt: 4000, marks: []queueMark{
		{consumequeue.QueueID{Topic: "a", ID: 0}, 7}, {consumequeue.QueueID{Topic: "orders", ID: 1}, 1 << 40}}}.encode())
	f.Add(checkpoint{flushed: 1, dispatched: 2}.encode())
	f.Add(encodeV1(4096, 4000))
	f.Fuzz(func(t *testing.T, b []byte) {
		cp, err := decodeCheckpoint("cp", b)
		switch {
		case err != nil:
			require.ErrorIs(t, err, ErrCorrupt)
		case cp.marks == nil:
			require.Equal(t, encodeV1(cp.flushed, cp.dispatched), b)
		default:
			require.Equal(t, b, cp.encode())
		}
	})
}

// A store whose checkpoint a build before queue marks wrote opens as it
// did (only the last record re-dispatched after a clean shutdown), and its next
// checkpoint carries the marks.
func TestVersion1CheckpointOpens(t *testing.T) {
	fs, o := vfs.NewMem(), lostFilesOptions()
	s, err := openFS(fs, "/v1", o())
	require.NoError(t, err)
	putBodies(t, s, "t", 0, 10)
	require.NoError(t, s.Close())
	path := filepath.Join("/v1", checkpointName)
	b, err := vfs.ReadFile(fs, path)
	require.NoError(t, err)
	cp, err := decodeCheckpoint(path, b)
	require.NoError(t, err)
	require.Equal(t, []queueMark{{consumequeue.QueueID{Topic: "t", ID: 0}, 10}}, cp.marks)
	require.NoError(t, writeWhole(fs, path, encodeV1(cp.flushed, cp.dispatched)))

	s, err = openFS(fs, "/v1", o())
	require.NoError(t, err)
	require.True(t, s.Recovery().CheckpointFound)
	requireLastRecordOnly(t, s)
	requireBodies(t, s, "t", 0, 10)
	require.NoError(t, s.Close())
	b, err = vfs.ReadFile(fs, path)
	require.NoError(t, err)
	cp, err = decodeCheckpoint(path, b)
	require.NoError(t, err)
	require.Len(t, cp.marks, 1)
}

// requireLastRecordOnly checks that Open re-dispatched no more than the
// last record (the index ends where that record starts), not the
// CommitLog: these tests' records are under 256 bytes.
func requireLastRecordOnly(t *testing.T, s *Store) {
	t.Helper()
	require.Less(t, s.Recovery().Redispatched, int64(256))
	require.Less(t, int64(1000), s.Recovery().CommitLogEnd)
}

func lostFilesOptions() func() *Options {
	return func() *Options {
		return &Options{SegmentSize: 64 << 10, DisableAutoCreateTopics: true, ConsumeQueueEntries: 16, IndexSlots: 64, IndexEntries: 256,
			Clock: clock.NewFake(time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)), Retention: time.Hour}
	}
}

// putBodies puts n messages "q<queue>-<i>" into a queue of topic, made
// with 2 queues if it does not exist.
func putBodies(t *testing.T, s *Store, topicName string, queue, n int) {
	t.Helper()
	if _, err := s.Topic(topicName); err != nil {
		require.NoError(t, s.CreateTopic(topicName, TopicConfig{Queues: 2}))
	}
	ctx := context.Background()
	for i := range n {
		_, err := s.Put(ctx, &Message{Topic: topicName, Body: fmt.Appendf(nil, "q%d-%d", queue, i)}, queue)
		require.NoError(t, err)
	}
	require.NoError(t, s.WaitVisible(ctx))
}

// requireBodies checks that a queue holds exactly the n messages
// putBodies put, in order.
func requireBodies(t *testing.T, s *Store, topicName string, queue, n int) {
	t.Helper()
	mo, err := s.MaxOffset(topicName, queue)
	require.NoError(t, err)
	require.EqualValues(t, n, mo)
	ms, err := s.ReadQueue(context.Background(), topicName, queue, 0, n+1)
	require.NoError(t, err)
	require.Len(t, ms, n)
	for i, m := range ms {
		require.Equal(t, fmt.Sprintf("q%d-%d", queue, i), string(m.Body))
		require.EqualValues(t, i, m.QueueOffset)
	}
}

// A queue that lost files below the checkpoint, with no consumer group
// having committed on it, is rebuilt from the CommitLog, and its next put
// takes the next offset, not one its records already have: a lost queue
// directory, a lost last file after a full one (recovery saw a full file
// as the end), and a lost queue directory with the topic registry gone
// too (the topic came back with too few queues; found by
// FuzzOpenCorruptedDir).
func TestLostQueueFilesAreRebuilt(t *testing.T) {
	for _, tc := range []struct {
		name   string
		n      int // messages in queue 1
		remove []string
	}{
		{"directory", 20, []string{"consumequeue/t/1"}},
		{"last file after a full one", 16 + 3, []string{"consumequeue/t/1/00000000000000000320"}},
		{"directory and registry", 20, []string{"consumequeue/t/1", "config/" + topic.File}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs, o := vfs.NewMem(), lostFilesOptions()
			s, err := openFS(fs, "/lost", o())
			require.NoError(t, err)
			putBodies(t, s, "t", 0, 5)
			putBodies(t, s, "t", 1, tc.n)
			require.NoError(t, s.Close())
			for _, p := range tc.remove {
				require.True(t, vfs.Exists(fs, filepath.Join("/lost", p)), p)
				require.NoError(t, fs.RemoveAll(filepath.Join("/lost", p)))
			}

			s, err = openFS(fs, "/lost", o())
			require.NoError(t, err)
			defer s.Close()
			require.Equal(t, s.Recovery().CommitLogEnd, s.Recovery().Redispatched, "the whole CommitLog is re-dispatched")
			cfg, err := s.Topic("t")
			require.NoError(t, err)
			require.Equal(t, 2, cfg.Queues)
			requireBodies(t, s, "t", 0, 5)
			requireBodies(t, s, "t", 1, tc.n)
			r, err := s.Put(context.Background(), &Message{Topic: "t", Body: []byte("next")}, 1)
			require.NoError(t, err)
			require.EqualValues(t, tc.n, r.QueueOffset)
			require.NoError(t, s.WaitVisible(context.Background()))
			requireVerified(t, s)
		})
	}
}

// Only the last record is re-dispatched when no queue lost anything: the marks of a
// healthy store match its queues, after a clean and after an unclean
// shutdown.
func TestMarksMatchAHealthyStore(t *testing.T) {
	fs, o := vfs.NewMem(), lostFilesOptions()
	s, err := openFS(fs, "/ok", o())
	require.NoError(t, err)
	putBodies(t, s, "t", 0, 40)
	putBodies(t, s, "t", 1, 3)
	cp, err := s.currentCheckpoint()
	require.NoError(t, err)
	require.NoError(t, s.writeCheckpoint(cp))
	require.NoError(t, s.Close())
	for _, crashed := range []bool{false, true} {
		if crashed {
			require.NoError(t, writeWhole(fs, filepath.Join("/ok", abortName), nil))
		}
		s, err = openFS(fs, "/ok", o())
		require.NoError(t, err)
		requireLastRecordOnly(t, s)
		requireBodies(t, s, "t", 0, 40)
		requireBodies(t, s, "t", 1, 3)
		require.NoError(t, s.Close())
	}
}

// A queue whose directory is gone with every one of its records (removed
// by retention) keeps its next offset: a consumer that read up to it is
// not sent back, and the topic registry, lost too, keeps the queue.
func TestLostQueueOffsetsDoNotGoBack(t *testing.T) {
	fs, o := vfs.NewMem(), lostFilesOptions()
	opts := o()
	clk := opts.Clock.(*clock.Fake)
	s, err := openFS(fs, "/back", opts)
	require.NoError(t, err)
	putBodies(t, s, "t", 1, 30)
	expireQueue1(t, s, clk, 30)
	require.NoError(t, s.Close())
	require.NoError(t, fs.RemoveAll("/back/consumequeue/t/1"))
	require.NoError(t, fs.Remove("/back/config/"+topic.File))

	for range 2 { // and again: the next checkpoint carries the offset on
		s, err = openFS(fs, "/back", o())
		require.NoError(t, err)
		cfg, err := s.Topic("t")
		require.NoError(t, err)
		require.Equal(t, 2, cfg.Queues)
		mo, err := s.MaxOffset("t", 1)
		require.NoError(t, err)
		require.EqualValues(t, 30, mo)
		requireVerified(t, s)
		require.NoError(t, s.Close())
	}
	s, err = openFS(fs, "/back", o())
	require.NoError(t, err)
	defer s.Close()
	r, err := s.Put(context.Background(), &Message{Topic: "t", Body: []byte("next")}, 1)
	require.NoError(t, err)
	require.EqualValues(t, 30, r.QueueOffset)
	require.NoError(t, s.WaitVisible(context.Background()))
	ms, err := s.ReadQueue(context.Background(), "t", 1, 30, 2)
	require.NoError(t, err)
	require.Len(t, ms, 1)
	require.Equal(t, "next", string(ms[0].Body))
	requireVerified(t, s)
}

func requireVerified(t *testing.T, s *Store) {
	t.Helper()
	vr, err := s.Verify(context.Background(), nil)
	require.NoError(t, err)
	require.True(t, vr.OK, "%v", vr.Problems)
}

// Lowering the dispatched offset before a re-dispatch keeps the marks and
// the offset they were taken at: an Open that crashes before the rebuild
// ends leaves the next one the same marks to hold the queues against.
func TestLoweredCheckpointKeepsMarks(t *testing.T) {
	fs, o := vfs.NewMem(), lostFilesOptions()
	s, err := openFS(fs, "/low", o())
	require.NoError(t, err)
	defer s.Close()
	putBodies(t, s, "t", 1, 7)
	cp, err := s.currentCheckpoint()
	require.NoError(t, err)
	require.Equal(t, cp.dispatched, cp.marksAt)
	require.NoError(t, s.lowerDispatched(cp, true, 100))
	b, err := vfs.ReadFile(fs, filepath.Join("/low", checkpointName))
	require.NoError(t, err)
	got, err := decodeCheckpoint("", b)
	require.NoError(t, err)
	require.Equal(t, checkpoint{flushed: cp.flushed, dispatched: 100, marks: cp.marks, marksAt: cp.marksAt}, got)
	require.Equal(t, []queueMark{{consumequeue.QueueID{Topic: "t", ID: 1}, 7}}, got.marks)
	require.True(t, marksTrusted(got, true, cp.marksAt))
	require.False(t, marksTrusted(got, true, cp.marksAt-1), "the CommitLog lost records the marks count")
}

// A queue left with its meta file alone, of which the CommitLog holds no
// record, is rebuilt from the CommitLog's start once: the rebuild gives it
// its first file, and the next Open finds an empty queue, not one that
// lost its files again.
func TestEmptyRepairedQueueIsRebuiltOnce(t *testing.T) {
	fs, o := vfs.NewMem(), lostFilesOptions()
	s, err := openFS(fs, "/once", o())
	require.NoError(t, err)
	putBodies(t, s, "t", 0, 20)
	require.NoError(t, s.Close())
	meta, err := vfs.ReadFile(fs, "/once/consumequeue/t/0/meta")
	require.NoError(t, err)
	require.NoError(t, fs.MkdirAll("/once/consumequeue/t/1", 0o755))
	require.NoError(t, writeWhole(fs, "/once/consumequeue/t/1/meta", meta))

	for open := range 2 {
		s, err = openFS(fs, "/once", o())
		require.NoError(t, err)
		if open == 0 {
			require.Equal(t, s.Recovery().CommitLogEnd, s.Recovery().Redispatched, "the whole CommitLog re-dispatched")
		} else {
			requireLastRecordOnly(t, s)
		}
		requireBodies(t, s, "t", 0, 20)
		mo, err := s.MaxOffset("t", 1)
		require.NoError(t, err)
		require.Zero(t, mo)
		requireVerified(t, s)
		require.NoError(t, s.Close())
	}
}

// An Open whose CommitLog lost records the checkpoint's marks count (a
// crash lost its tail) drops the marks from the checkpoint at once: the
// log grows past marksAt again with other records, and a crash before the
// next checkpoint would have the next Open trust them and move a queue
// whose records were lost on to a count it no longer has (found by
// TestModel with -model.asynctimers, 4 failures in 300 runs of a seed).
func TestUntrustedMarksAreDropped(t *testing.T) {
	fs, o := vfs.NewMem(), lostFilesOptions()
	s, err := openFS(fs, "/um", o())
	require.NoError(t, err)
	putBodies(t, s, "t", 0, 5)
	r, err := s.Put(context.Background(), &Message{Topic: "t", Body: []byte("lost")}, 1)
	require.NoError(t, err)
	require.NoError(t, s.Close())
	cpPath := filepath.Join("/um", checkpointName)
	b, err := vfs.ReadFile(fs, cpPath)
	require.NoError(t, err)
	cp, err := decodeCheckpoint(cpPath, b)
	require.NoError(t, err)
	require.Len(t, cp.marks, 2)

	// The crash lost the last record, t/1's only one: zeros from its start.
	seg := filepath.Join("/um", "commitlog", fmt.Sprintf("%020d", 0))
	img, err := vfs.ReadFile(fs, seg)
	require.NoError(t, err)
	clear(img[r.Offset:])
	require.NoError(t, writeWhole(fs, seg, img))
	require.NoError(t, writeWhole(fs, filepath.Join("/um", abortName), nil))

	s, err = openFS(fs, "/um", o())
	require.NoError(t, err)
	defer s.Close()
	require.Equal(t, r.Offset, s.Recovery().CommitLogEnd)
	require.Positive(t, s.Recovery().LostFlushedBytes)
	b, err = vfs.ReadFile(fs, cpPath)
	require.NoError(t, err)
	got, err := decodeCheckpoint(cpPath, b)
	require.NoError(t, err)
	require.Empty(t, got.marks, "marks the CommitLog no longer covers stay in the checkpoint")
	mo, err := s.MaxOffset("t", 1)
	require.NoError(t, err)
	require.Zero(t, mo, "the lost record's queue starts again at 0")
}
