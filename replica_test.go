package mqlite

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqlite/mqlite/clock"
	"github.com/mqlite/mqlite/vfs"
)

// link runs ServeReplica on p and ReplicateFrom on r over the two ends of
// a net.Pipe (each wrapped by wrap, if not nil); stop cancels both and
// returns their errors.
func link(p, r *Store, wrap func(io.ReadWriteCloser) io.ReadWriteCloser) (stop func() (perr, rerr error)) {
	ctx, cancel := context.WithCancel(context.Background())
	a, b := net.Pipe()
	var pc, rc io.ReadWriteCloser = a, b
	if wrap != nil {
		rc = wrap(rc)
	}
	pe, re := make(chan error, 1), make(chan error, 1)
	go func() { pe <- p.ServeReplica(ctx, pc) }()
	go func() { re <- r.ReplicateFrom(ctx, rc) }()
	return func() (error, error) {
		cancel()
		return <-pe, <-re
	}
}

func replOpts(clk clock.Clock, o Options) *Options {
	o.Clock = clk
	if o.SegmentSize == 0 {
		o.SegmentSize = 8 << 10
	}
	return smallFiles(&o)
}

func openReplica(t *testing.T, fs vfs.FS, dir string, o *Options) *Store {
	t.Helper()
	c := *o
	c.Role = Replica
	s, err := openFS(fs, dir, &c)
	require.NoError(t, err)
	return s
}

// linkEnd runs ServeReplica on p and ReplicateFrom on r over a net.Pipe
// until both return by themselves (a refusal), and returns their errors.
func linkEnd(p, r *Store) (perr, rerr error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	a, b := net.Pipe()
	pe := make(chan error, 1)
	go func() { pe <- p.ServeReplica(ctx, a) }()
	rerr = r.ReplicateFrom(ctx, b)
	return <-pe, rerr
}

// caughtUp waits until r holds and has dispatched everything p stored.
func caughtUp(t *testing.T, p, r *Store) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, p.WaitVisible(ctx))
	end := p.log.WrotePosition()
	require.NoError(t, p.WaitReplicated(ctx, end, 1))
	require.NoError(t, r.WaitVisible(ctx))
	require.Equal(t, end, r.log.WrotePosition())
	return end
}

// logBytes returns the CommitLog of s from its first segment up to end.
func logBytes(t *testing.T, fs vfs.FS, s *Store, end int64) []byte {
	t.Helper()
	var all []byte
	for _, seg := range s.log.Segments() {
		b, err := vfs.ReadFile(fs, seg.Path)
		require.NoError(t, err)
		all = append(all, b...)
	}
	return all[:end-s.log.MinOffset()]
}

// sameAnswers checks that every query answers the same on both stores.
func sameAnswers(t *testing.T, p, r *Store, keys []string) {
	t.Helper()
	for _, ti := range p.Topics() {

		for q := range ti.Config.Queues {
			pm, perr := p.MaxOffset(ti.Name, q)
			rm, rerr := r.MaxOffset(ti.Name, q)
			require.Equal(t, perr == nil, rerr == nil, "topic %s queue %d", ti.Name, q)
			require.Equal(t, pm, rm, "topic %s queue %d", ti.Name, q)
			var pl, rl []string
			for m, err := range p.Messages(ti.Name, q, 0) {
				require.NoError(t, err)
				pl = append(pl, fmt.Sprintf("%s/%d/%s", m.MsgID, m.QueueOffset, m.Body))
				got, err := r.MessageByID(m.MsgID)
				require.NoError(t, err)
				require.Equal(t, m.Body, got.Body)
			}
			for m, err := range r.Messages(ti.Name, q, 0) {
				require.NoError(t, err)
				rl = append(rl, fmt.Sprintf("%s/%d/%s", m.MsgID, m.QueueOffset, m.Body))
			}
			require.Equal(t, pl, rl, "topic %s queue %d", ti.Name, q)
		}
	}
	far := time.Unix(1<<40, 0)
	for _, k := range keys {
		pk, err := p.MessagesByKey("orders", k, time.Time{}, far, 100)
		require.NoError(t, err)
		rk, err := r.MessagesByKey("orders", k, time.Time{}, far, 100)
		require.NoError(t, err)
		require.Equal(t, len(pk), len(rk), "key %s", k)
		for i := range pk {
			require.Equal(t, pk[i].MsgID, rk[i].MsgID)
		}
	}
}

// mixedSends stores plain, batched, delayed, transactional and retried
// messages and returns the keys used.
func mixedSends(t *testing.T, s *Store, clk *clock.Fake, round int) []string {
	t.Helper()
	ctx := context.Background()
	var keys []string
	for i := range 60 {
		k := fmt.Sprintf("k%d-%d", round, i%7)
		keys = append(keys, k)
		_, err := s.Put(ctx, &Message{Topic: "orders", Keys: []string{k}, Body: body(round*1000 + i)}, i%4)
		require.NoError(t, err)
	}
	var batch []*Message
	for i := range 6 {
		batch = append(batch, &Message{Topic: "orders", Body: body(round*1000 + 500 + i)})
	}
	_, err := s.PutBatch(ctx, batch, 1)
	require.NoError(t, err)
	_, err = s.Put(ctx, &Message{Topic: "orders", DelayLevel: 1, Body: []byte("later")}, 2)
	require.NoError(t, err)
	tp, err := s.NewTransactionProducer(never(t), TransactionOptions{Group: "g"})
	require.NoError(t, err)
	_, err = tp.SendInTransaction(ctx, &Message{Topic: "orders", Body: []byte("tx commit")},
		func(context.Context, *Message) TxState { return CommitMessage })
	require.NoError(t, err)
	_, err = tp.SendInTransaction(ctx, &Message{Topic: "orders", Body: []byte("tx rollback")},
		func(context.Context, *Message) TxState { return RollbackMessage })
	require.NoError(t, err)
	require.NoError(t, tp.Close())
	first := readN(t, s, "orders", 0, 1)[0]
	require.NoError(t, s.SendBack(ctx, "g", first))
	clk.Advance(time.Minute) // the delayed message and the retry fall due
	require.NoError(t, s.Settle(ctx))
	return keys
}

func TestReplicaByteIdenticalAfterMixedSends(t *testing.T) {
	for _, flush := range []FlushMode{FlushAsync, FlushSync} {
		t.Run(flush.String(), func(t *testing.T) {
			clk := clock.NewFake(t0)
			pfs, rfs := vfs.NewMem(), vfs.NewMem()
			o := replOpts(clk, Options{Flush: flush})
			p, err := openFS(pfs, "/p", o)
			require.NoError(t, err)
			defer p.Close()
			require.NoError(t, p.CreateTopic("orders", TopicConfig{Queues: 4}))
			// A backlog before the replica exists: it catches up from 0.
			keys := mixedSends(t, p, clk, 0)
			r := openReplica(t, rfs, "/r", o)
			defer r.Close()
			stop := link(p, r, nil)
			keys = append(keys, mixedSends(t, p, clk, 1)...)
			end := caughtUp(t, p, r)
			require.Greater(t, len(p.log.Segments()), 2, "the log rolled segments")
			require.True(t, bytes.Equal(logBytes(t, pfs, p, end), logBytes(t, rfs, r, end)), "byte-identical CommitLogs")
			sameAnswers(t, p, r, keys)

			// A replica takes no writes.
			_, err = r.Put(context.Background(), &Message{Topic: "orders", Body: []byte("x")}, 0)
			require.ErrorIs(t, err, ErrReplica)
			require.ErrorIs(t, r.CreateTopic("other", TopicConfig{Queues: 1}), ErrReplica)
			require.Equal(t, Replica, r.Role())
			infos := p.Replicas()
			require.Len(t, infos, 1)
			require.True(t, infos[0].InSync)
			require.Equal(t, end, infos[0].Written)
			pid, pe := p.Epochs()
			rid, re := r.Epochs()
			require.Equal(t, pid, rid)
			require.Equal(t, pe, re)

			perr, rerr := stop()
			require.ErrorIs(t, perr, context.Canceled)
			require.ErrorIs(t, rerr, context.Canceled)
			rep, err := r.Verify(context.Background(), nil)
			require.NoError(t, err)
			require.True(t, rep.OK, "%+v", rep)
		})
	}
}
