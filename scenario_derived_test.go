package mqlite

// S9 of the reliability plan: the derived structures (ConsumeQueue,
// IndexFile) behind or ahead of the CommitLog at Open.

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqlite/mqlite/clock"
	"github.com/mqlite/mqlite/vfs"
)

// TestIndexesBehindAreRebuilt: with the dispatcher held, 10,000 messages
// are stored and acknowledged (FlushSync) and the process is killed: the
// image has the CommitLog, no queue entry or index hit for them. Open
// rebuilds both up to the CommitLog end.
func TestIndexesBehindAreRebuilt(t *testing.T) {
	const n = 10000
	ffs := vfs.NewFaulty(vfs.NewMem())
	s, err := openFS(ffs, plDir, plOptions(clock.NewFake(t0), 256<<10))
	require.NoError(t, err)
	require.NoError(t, s.CreateTopic("t", TopicConfig{Queues: 4}))
	ctx := context.Background()
	s.disp.run.Lock() // neither the dispatcher nor a sender dispatches
	for i := range n {
		_, err := s.Put(ctx, &Message{Topic: "t", Keys: []string{fmt.Sprintf("k%d", i)}, Body: []byte(fmt.Sprintf("m%d", i))}, i%4)
		require.NoError(t, err)
	}
	for q := range 4 {
		mo, err := s.MaxOffset("t", q)
		require.NoError(t, err)
		require.Zero(t, mo, "nothing dispatched before the kill")
	}
	img := ffs.Crash(rand.New(rand.NewPCG(9, 9)), 1) // kill -9: everything written is kept
	s.disp.run.Unlock()
	s.Close()

	s2, err := openFS(img, plDir, plOptions(clock.NewFake(t0.Add(time.Minute)), 256<<10))
	require.NoError(t, err)
	defer s2.Close()
	require.NoError(t, s2.WaitVisible(ctx))
	require.Positive(t, s2.Recovery().Redispatched)
	for q := range 4 {
		i := q
		for m, err := range s2.Messages("t", q, 0) {
			require.NoError(t, err)
			require.Equal(t, fmt.Sprintf("m%d", i), string(m.Body))
			i += 4
		}
		require.Equal(t, n+q, i, "queue %d rebuilt whole", q)
	}
	for _, i := range []int{0, 1, n / 2, n - 1} {
		got, err := s2.MessagesByKey("t", fmt.Sprintf("k%d", i), t0.Add(-time.Hour), t0.Add(time.Hour), 10)
		require.NoError(t, err)
		require.Len(t, got, 1, "key k%d", i)
		require.Equal(t, fmt.Sprintf("m%d", i), string(got[0].Body))
	}
	rep, err := s2.Verify(ctx, nil)
	require.NoError(t, err)
	require.True(t, rep.OK, "%v", rep.Problems)
}

// TestIndexesAheadAreCut: the ConsumeQueue and IndexFile kept entries for
// the last records while the CommitLog lost them (zeroed from a record on,
// across a segment boundary), after a clean Close and after a crash. Open
// drops the queue entries past the CommitLog end, says how much flushed
// data is gone, never returns an index hit past the end, and new messages
// take the lost queue offsets.
func TestIndexesAheadAreCut(t *testing.T) {
	for _, crashed := range []bool{false, true} {
		t.Run(fmt.Sprintf("crashed=%v", crashed), func(t *testing.T) {
			const seg, n, keep = 8 << 10, 120, 70
			fs := vfs.NewMem()
			s, err := openFS(fs, plDir, plOptions(clock.NewFake(t0), seg))
			require.NoError(t, err)
			require.NoError(t, s.CreateTopic("t", TopicConfig{Queues: 2}))
			ctx := context.Background()
			var rs []PutResult
			for i := range n {
				r, err := s.Put(ctx, &Message{Topic: "t", Keys: []string{fmt.Sprintf("k%d", i)}, Body: make([]byte, 100+i)}, i%2)
				require.NoError(t, err)
				rs = append(rs, r)
			}
			require.NoError(t, s.WaitVisible(ctx))
			require.NoError(t, s.Close())
			require.Greater(t, rs[n-1].Offset/seg, rs[keep].Offset/seg, "the lost records span a segment boundary")
			if crashed {
				plWrite(t, fs, plDir+"/"+abortName, nil)
			}
			// Zero every segment from record keep's offset on.
			for start := rs[keep].Offset / seg * seg; start <= rs[n-1].Offset; start += seg {
				f, err := fs.OpenFile(fmt.Sprintf("%s/commitlog/%020d", plDir, start), os.O_RDWR, 0)
				require.NoError(t, err)
				from := max(rs[keep].Offset-start, 0)
				_, err = f.WriteAt(make([]byte, seg-from), from)
				require.NoError(t, err)
				require.NoError(t, f.Close())
			}

			s2, err := openFS(fs, plDir, plOptions(clock.NewFake(t0.Add(time.Minute)), seg))
			require.NoError(t, err)
			defer s2.Close()
			rec := s2.Recovery()
			require.Equal(t, rs[keep].Offset, rec.CommitLogEnd)
			require.Positive(t, rec.LostFlushedBytes, "flushed records are gone: said, not hidden")
			for q := range 2 {
				mo, err := s2.MaxOffset("t", q)
				require.NoError(t, err)
				want := int64(keep/2 + keep%2*(1-q))
				require.Equal(t, want, mo, "queue %d cut to the CommitLog end", q)
			}
			for _, i := range []int{keep, keep + 1, n - 1} {
				got, err := s2.MessagesByKey("t", fmt.Sprintf("k%d", i), t0.Add(-time.Hour), t0.Add(time.Hour), 10)
				require.NoError(t, err)
				require.Empty(t, got, "no index hit for lost record %d", i)
			}
			got, err := s2.MessagesByKey("t", fmt.Sprintf("k%d", keep-1), t0.Add(-time.Hour), t0.Add(time.Hour), 10)
			require.NoError(t, err)
			require.Len(t, got, 1)
			r, err := s2.Put(ctx, &Message{Topic: "t", Keys: []string{"new"}, Body: []byte("new")}, keep%2)
			require.NoError(t, err)
			require.Equal(t, rs[keep].QueueOffset, r.QueueOffset, "the new message takes the first lost queue offset")
			require.NoError(t, s2.WaitVisible(ctx))
			ms, err := s2.ReadQueue(ctx, "t", keep%2, r.QueueOffset, 10)
			require.NoError(t, err)
			require.Len(t, ms, 1)
			require.Equal(t, "new", string(ms[0].Body))
			rep, err := s2.Verify(ctx, nil)
			require.NoError(t, err)
			require.True(t, rep.OK, "%v", rep.Problems)
		})
	}
}

// TestLostQueueDirectoryIsRebuilt: a queue's directory removed under a
// group that committed on it. Open sees the queue end below the commit and
// re-dispatches the whole CommitLog: the queue holds its messages again,
// the commit stands, and the next put takes the next offset, not 0.
func TestLostQueueDirectoryIsRebuilt(t *testing.T) {
	fs := vfs.NewMem()
	o := plOptions(clock.NewFake(t0), 8<<10)
	s, err := openFS(fs, plDir, o)
	require.NoError(t, err)
	require.NoError(t, s.CreateTopic("t", TopicConfig{Queues: 2}))
	ctx := context.Background()
	for i := range 20 {
		_, err := s.Put(ctx, &Message{Topic: "t", Body: []byte(fmt.Sprintf("m%d", i))}, i%2)
		require.NoError(t, err)
	}
	require.NoError(t, s.WaitVisible(ctx))
	pc, err := s.NewPullConsumer("g", ConsumerOptions{ConsumeFromWhere: ConsumeFromFirstOffset})
	require.NoError(t, err)
	require.NoError(t, pc.Assign("t", nil, 0))
	pollCommit(t, pc, "t", 5)
	require.NoError(t, s.Close())
	require.NoError(t, fs.RemoveAll(plDir+"/consumequeue/t/0"))

	s2, err := openFS(fs, plDir, plOptions(clock.NewFake(t0.Add(time.Minute)), 8<<10))
	require.NoError(t, err)
	defer s2.Close()
	mo, err := s2.MaxOffset("t", 0)
	require.NoError(t, err)
	require.EqualValues(t, 10, mo, "the queue was rebuilt")
	offs, err := s2.consumers().Offsets("g")
	require.NoError(t, err)
	found := false
	for _, o := range offs {
		if o.Topic == "t" && o.ID == 0 {
			require.EqualValues(t, 5, o.Offset, "the commit stands")
			found = true
		}
	}
	require.True(t, found)
	r, err := s2.Put(ctx, &Message{Topic: "t", Body: []byte("next")}, 0)
	require.NoError(t, err)
	require.EqualValues(t, 10, r.QueueOffset)
}
