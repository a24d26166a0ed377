package mqlite

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqlite/mqlite/clock"
	"github.com/mqlite/mqlite/vfs"
)

func putTagged(t *testing.T, s *Store, tag string, n int) []PutResult {
	t.Helper()
	var out []PutResult
	for i := range n {
		r, err := s.Put(context.Background(), &Message{Topic: "orders", Keys: []string{tag}, Body: []byte(fmt.Sprintf("%s-%d", tag, i))}, i%2)
		require.NoError(t, err)
		out = append(out, r)
	}
	return out
}

// TestOldPrimaryRejoinsAndLosesItsTail: a primary stores a tail its
// replica never got; the replica is promoted and takes sends; the old
// primary comes back as a replica of it: its tail is cut at the epoch
// boundary (reported), indexes with it, and it then follows byte for byte.
func TestOldPrimaryRejoinsAndLosesItsTail(t *testing.T) {
	clk := clock.NewFake(t0)
	afs, bfs := vfs.NewMem(), vfs.NewMem()
	o := replOpts(clk, Options{})
	a, err := openFS(afs, "/a", o)
	require.NoError(t, err)
	require.NoError(t, a.CreateTopic("orders", TopicConfig{Queues: 2}))
	b := openReplica(t, bfs, "/b", o)
	defer b.Close()
	stop := link(a, b, nil)
	putTagged(t, a, "shared", 40)
	shared := caughtUp(t, a, b)
	stop()
	lost := putTagged(t, a, "lost", 25) // never replicated
	require.NoError(t, a.Close())

	require.NoError(t, b.Promote())
	require.Equal(t, Primary, b.Role())
	_, eps := b.Epochs()
	require.Equal(t, []Epoch{{1, 0}, {2, shared}}, eps)
	kept := putTagged(t, b, "new", 30)
	require.EqualValues(t, 20, kept[0].QueueOffset, "queue offsets go on from the replicated ones")

	a = openReplica(t, afs, "/a", o)
	defer a.Close()
	stop = link(b, a, nil)
	end := caughtUp(t, b, a)
	cut := a.ReplicationStatus().LastCut
	require.Equal(t, DivergenceReport{From: shared, To: lost[len(lost)-1].End(), Messages: len(lost)}, cut)
	require.True(t, bytes.Equal(logBytes(t, bfs, b, end), logBytes(t, afs, a, end)))
	sameAnswers(t, b, a, []string{"shared", "lost", "new"})
	for _, r := range lost {
		m, err := a.MessageByID(r.MsgID())
		if err == nil {
			require.NotContains(t, string(m.Body), "lost", "a cut message is never served")
		}
	}
	got, err := a.MessagesByKey("orders", "lost", t0.Add(-1e12), t0.Add(1e12), 100)
	require.NoError(t, err)
	require.Empty(t, got)
	_, aeps := a.Epochs()
	require.Equal(t, eps, aeps)
	stop()
	rep, err := a.Verify(context.Background(), nil)
	require.NoError(t, err)
	require.True(t, rep.OK, "%+v", rep)
	// The cut survives a reopen.
	require.NoError(t, a.Close())
	a = openReplica(t, afs, "/a", o)
	require.Equal(t, end, a.log.WrotePosition())
	require.NoError(t, a.Close())
}

// TestReplicaRefusals: a replica of another store, one with a newer epoch
// than the primary, one ahead of the primary in its epoch: each is
// refused with its error on both sides, and nothing changes.
func TestReplicaRefusals(t *testing.T) {
	clk := clock.NewFake(t0)
	o := replOpts(clk, Options{})
	open := func(fs vfs.FS, dir string) *Store {
		s, err := openFS(fs, dir, o)
		require.NoError(t, err)
		require.NoError(t, s.CreateTopic("orders", TopicConfig{Queues: 2}))
		return s
	}
	refused := func(p, r *Store, want error) {
		t.Helper()
		before := r.log.WrotePosition()
		_, eps := r.Epochs()
		perr, rerr := linkEnd(p, r)
		require.ErrorIs(t, perr, want)
		require.ErrorIs(t, rerr, want)
		require.Equal(t, before, r.log.WrotePosition(), "nothing changed")
		_, eps2 := r.Epochs()
		require.Equal(t, eps, eps2)
	}

	t.Run("another store", func(t *testing.T) {
		p := open(vfs.NewMem(), "/p")
		defer p.Close()
		fs := vfs.NewMem()
		other := open(fs, "/o")
		putTagged(t, other, "x", 5)
		require.NoError(t, other.Close())
		r := openReplica(t, fs, "/o", o)
		defer r.Close()
		refused(p, r, ErrReplicaIdentity)
	})

	t.Run("newer epoch", func(t *testing.T) {
		afs, bfs := vfs.NewMem(), vfs.NewMem()
		a := open(afs, "/a")
		defer a.Close()
		b := openReplica(t, bfs, "/b", o)
		stop := link(a, b, nil)
		putTagged(t, a, "x", 5)
		caughtUp(t, a, b)
		stop()
		require.NoError(t, b.Promote())
		require.NoError(t, b.Close())
		b = openReplica(t, bfs, "/b", o) // it knows epoch 2, a only 1
		defer b.Close()
		refused(a, b, ErrReplicaDiverged)
	})

	t.Run("ahead", func(t *testing.T) {
		a := open(vfs.NewMem(), "/a")
		defer a.Close()
		b := openReplica(t, vfs.NewMem(), "/b", o)
		defer b.Close()
		stop := link(a, b, nil)
		res := putTagged(t, a, "x", 10)
		caughtUp(t, a, b)
		stop()
		// The primary lost its tail (an unflushed tail on power loss).
		require.NoError(t, a.log.TruncateTo(res[5].Offset))
		refused(a, b, ErrReplicaDiverged)
	})
}

// TestConsumersResumeAfterPromote: a group consumes part of a queue on
// the primary; the replica receives its offsets with the metadata; after
// Promote a consumer of the group starts where the primary's left off,
// and a delayed message stored on the primary is delivered by the
// promoted replica's scheduler.
func TestConsumersResumeAfterPromote(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewFake(t0)
	o := replOpts(clk, Options{})
	p, err := openFS(vfs.NewMem(), "/p", o)
	require.NoError(t, err)
	defer p.Close()
	require.NoError(t, p.CreateTopic("orders", TopicConfig{Queues: 2}))
	putTagged(t, p, "m", 20)
	_, err = p.Put(ctx, &Message{Topic: "orders", DelayLevel: 3, Body: []byte("delayed")}, 0)
	require.NoError(t, err)
	pc, err := p.NewPullConsumer("g", ConsumerOptions{ConsumeFromWhere: ConsumeFromFirstOffset})
	require.NoError(t, err)
	require.NoError(t, pc.Assign("orders", nil, 0))
	for got := 0; got < 6; {
		ms, err := pc.Poll(ctx, 6-got)
		require.NoError(t, err)
		got += len(ms)
	}
	require.NoError(t, pc.Commit())
	require.NoError(t, pc.Close())

	r := openReplica(t, vfs.NewMem(), "/r", o)
	defer r.Close()
	// The session sends the metadata first, then the CommitLog: once
	// caught up, the replica holds the offsets as they were at connect.
	stop := link(p, r, nil)
	caughtUp(t, p, r)
	stop()
	_, err = r.NewPullConsumer("g", ConsumerOptions{})
	require.ErrorIs(t, err, ErrReplica, "no consumers on a replica before Promote")
	require.NoError(t, p.Close())

	require.NoError(t, r.Promote())
	rc, err := r.NewPullConsumer("g", ConsumerOptions{ConsumeFromWhere: ConsumeFromFirstOffset})
	require.NoError(t, err)
	defer rc.Close()
	require.NoError(t, rc.Assign("orders", nil, 0))
	ms, err := rc.Poll(ctx, 1)
	require.NoError(t, err)
	require.Equal(t, "m-12", string(ms[0].Body), "resumes at the committed offset")
	require.EqualValues(t, 6, ms[0].QueueOffset)
	// The delayed message falls due on the new primary.
	clk.Advance(time.Minute)
	require.NoError(t, r.Settle(ctx))
	var bodies []string
	for m, err := range r.Messages("orders", 0, 0) {
		require.NoError(t, err)
		bodies = append(bodies, string(m.Body))
	}
	require.Contains(t, bodies, "delayed")
	// Sends are taken.
	res, err := r.Put(ctx, &Message{Topic: "orders", Body: []byte("after")}, 0)
	require.NoError(t, err)
	require.EqualValues(t, 11, res.QueueOffset)
}
