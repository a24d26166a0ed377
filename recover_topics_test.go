package mqlite

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mqlite/mqlite/topic"
	"github.com/mqlite/mqlite/vfs"
)

// A lost topics.json (S16) strands nothing: Open registers every topic
// its ConsumeQueue holds again, with the queues on disk, so that sends
// and consumers keep working with auto-creation off. A registry file that
// is present is the truth: a deleted topic stays deleted.
func TestLostTopicRegistryIsRestored(t *testing.T) {
	ctx := context.Background()
	fs := vfs.NewMem()
	opts := func() *Options {
		return &Options{SegmentSize: 64 << 10, DisableAutoCreateTopics: true, ConsumeQueueEntries: 64, IndexSlots: 64, IndexEntries: 256}
	}
	s, err := openFS(fs, "/rt", opts())
	require.NoError(t, err)
	require.NoError(t, s.CreateTopic("orders", TopicConfig{Queues: 3}))
	require.NoError(t, s.CreateTopic("audit", TopicConfig{Queues: 8}))
	require.NoError(t, s.CreateTopic("unused", TopicConfig{Queues: 2}))
	for q := range 3 {
		for i := range 4 {
			_, err := s.Put(ctx, &Message{Topic: "orders", Body: []byte{byte(q), byte(i)}}, q)
			require.NoError(t, err)
		}
	}
	_, err = s.Put(ctx, &Message{Topic: "audit", Body: []byte("a5")}, 5) // queues 0-4 and 6-7 stay empty
	require.NoError(t, err)
	_, err = s.Put(ctx, &Message{Topic: "orders", Body: []byte("later"), DelayLevel: 3}, 0) // into the schedule topic
	require.NoError(t, err)
	require.NoError(t, s.WaitVisible(ctx))
	pc, err := s.NewPullConsumer("g", ConsumerOptions{ConsumeFromWhere: ConsumeFromFirstOffset})
	require.NoError(t, err)
	require.NoError(t, pc.Subscribe("orders", nil))
	require.NoError(t, pc.Close())
	require.NoError(t, s.Close())

	regPath := filepath.Join("/rt", configDir, topic.File)
	require.NoError(t, fs.Remove(regPath))

	// A read-only Store restores them in memory, and writes nothing.
	ro := opts()
	ro.ReadOnly = true
	rs, err := openFS(fs, "/rt", ro)
	require.NoError(t, err)
	require.Contains(t, rs.Recovery().RestoredTopics, "orders")
	got, err := rs.ReadQueue(ctx, "orders", 1, 0, 10)
	require.NoError(t, err)
	require.Len(t, got, 4)
	require.NoError(t, rs.Close())
	require.False(t, vfs.Exists(fs, regPath), "a read-only Store wrote the registry")

	s, err = openFS(fs, "/rt", opts())
	require.NoError(t, err)
	defer s.Close()
	rep := s.Recovery()
	require.Contains(t, rep.RestoredTopics, "orders")
	require.Contains(t, rep.RestoredTopics, "audit")
	require.NotContains(t, rep.RestoredTopics, "unused", "a topic without messages leaves no trace to restore")
	cfg, err := s.Topic("orders")
	require.NoError(t, err)
	require.Equal(t, 3, cfg.Queues)
	cfg, err = s.Topic("audit")
	require.NoError(t, err)
	require.Equal(t, 6, cfg.Queues, "as many queues as the ConsumeQueue shows")
	_, err = s.Topic("unused")
	require.ErrorIs(t, err, ErrTopicNotFound)
	require.Contains(t, rep.RestoredTopics, topic.Schedule)
	for _, ti := range s.Topics() {
		require.Equal(t, topic.IsSystem(ti.Name), ti.System, ti.Name)
		if ti.Name == topic.Schedule {
			require.Equal(t, s.sched().Levels(), ti.Config.Queues, "the scheduler grows it back to one queue per level")
		}
	}

	// Sends continue each queue's offsets; every message is still there.
	r, err := s.Put(ctx, &Message{Topic: "orders", Body: []byte("after")}, 2)
	require.NoError(t, err)
	require.EqualValues(t, 4, r.QueueOffset)
	require.NoError(t, s.WaitVisible(ctx))
	for q := range 3 {
		got, err := s.ReadQueue(ctx, "orders", q, 0, 10)
		require.NoError(t, err)
		require.Len(t, got, 4+map[bool]int{true: 1}[q == 2])
		for i := range 4 {
			require.Equal(t, []byte{byte(q), byte(i)}, got[i].Body)
		}
	}
	pc, err = s.NewPullConsumer("g", ConsumerOptions{ConsumeFromWhere: ConsumeFromFirstOffset})
	require.NoError(t, err)
	require.NoError(t, pc.Subscribe("orders", nil))
	msgs, err := pc.Poll(ctx, 32)
	require.NoError(t, err)
	require.NotEmpty(t, msgs)
	require.NoError(t, pc.Close())

	// The file was written again: the next Open restores nothing, and a
	// deleted topic is not brought back while the file is there.
	require.True(t, vfs.Exists(fs, regPath))
	require.NoError(t, s.DeleteTopic("audit"))
	require.NoError(t, s.Close())
	s, err = openFS(fs, "/rt", opts())
	require.NoError(t, err)
	defer s.Close()
	require.Empty(t, s.Recovery().RestoredTopics)
	_, err = s.Topic("audit")
	require.ErrorIs(t, err, ErrTopicNotFound)
	_, err = s.Topic("orders")
	require.NoError(t, err)
}

// A lost registry with a queue directory lost too, and the CommitLog
// gone (so that nothing can be re-dispatched and the checkpoint's counts
// cannot be held against the queues): the checkpoint still names the
// queue, and the topic keeps it (found by FuzzOpenCorruptedDir).
func TestLostRegistryKeepsQueuesTheCheckpointNames(t *testing.T) {
	fs, o := vfs.NewMem(), lostFilesOptions()
	s, err := openFS(fs, "/rn", o())
	require.NoError(t, err)
	putBodies(t, s, "t", 0, 3)
	putBodies(t, s, "t", 1, 3)
	require.NoError(t, s.Close())
	for _, p := range []string{"commitlog", "consumequeue/t/1", "config/" + topic.File} {
		require.NoError(t, fs.RemoveAll(filepath.Join("/rn", p)))
	}
	s, err = openFS(fs, "/rn", o())
	require.NoError(t, err)
	defer s.Close()
	require.Positive(t, s.Recovery().LostFlushedBytes, "the loss is reported")
	require.Contains(t, s.Recovery().RestoredTopics, "t")
	cfg, err := s.Topic("t")
	require.NoError(t, err)
	require.Equal(t, 2, cfg.Queues)
	mo, err := s.MaxOffset("t", 1)
	require.NoError(t, err)
	require.Zero(t, mo)
}
