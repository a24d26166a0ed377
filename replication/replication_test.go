package replication_test

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqlite/mqlite"
	"github.com/mqlite/mqlite/internal/leakcheck"
	"github.com/mqlite/mqlite/replication"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

func openPair(t *testing.T) (p, r *mqlite.Store) {
	t.Helper()
	o := &mqlite.Options{InMemory: true, SegmentSize: 64 << 10}
	p, err := mqlite.Open("/p", o)
	require.NoError(t, err)
	ro := *o
	ro.Role = mqlite.Replica
	r, err = mqlite.Open("/r", &ro)
	require.NoError(t, err)
	return p, r
}

func put(t *testing.T, s *mqlite.Store, n int) int64 {
	t.Helper()
	var end int64
	for i := range n {
		res, err := s.Put(context.Background(), &mqlite.Message{Topic: "t", Body: []byte{byte(i), 1, 2, 3}}, 0)
		require.NoError(t, err)
		end = res.End()
	}
	return end
}

// TestFollowReconnects: a replica follows over TCP; the primary's server
// goes away and comes back on the same address; the replica reconnects
// by itself and catches up.
func TestFollowReconnects(t *testing.T) {
	p, r := openPair(t)
	defer p.Close()
	defer r.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sctx, stopServe := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- replication.Serve(sctx, ln, p, nil) }()
	fctx, stopFollow := context.WithCancel(ctx)
	followed := make(chan error, 1)
	failures := make(chan error, 100)
	go func() {
		followed <- replication.Follow(fctx, addr, r, &replication.FollowOptions{MinBackoff: 10 * time.Millisecond,
			OnError: func(err error) {
				select {
				case failures <- err:
				default:
				}
			}})
	}()
	require.NoError(t, p.WaitReplicated(ctx, put(t, p, 50), 1))

	stopServe()
	require.ErrorIs(t, <-served, context.Canceled)
	<-failures // the replica saw the session end
	end := put(t, p, 50)
	ln, err = net.Listen("tcp", addr)
	require.NoError(t, err)
	sctx, stopServe = context.WithCancel(ctx)
	go func() { served <- replication.Serve(sctx, ln, p, nil) }()
	require.NoError(t, p.WaitReplicated(ctx, end, 1))
	require.NoError(t, r.WaitVisible(ctx))
	n, err := r.MaxOffset("t", 0)
	require.NoError(t, err)
	require.EqualValues(t, 100, n)

	stopFollow()
	require.ErrorIs(t, <-followed, context.Canceled)
	stopServe()
	require.ErrorIs(t, <-served, context.Canceled)
}

func TestFollowGivesUp(t *testing.T) {
	p, r := openPair(t)
	defer p.Close()
	require.NoError(t, r.Close())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	served := make(chan error, 1)
	go func() { served <- replication.Serve(ctx, ln, p, nil) }()
	// A primary does not follow: ReplicateFrom fails at once.
	q, err := mqlite.Open("/q", &mqlite.Options{InMemory: true, SegmentSize: 64 << 10})
	require.NoError(t, err)
	defer q.Close()
	err = replication.Follow(ctx, ln.Addr().String(), q, &replication.FollowOptions{
		GiveUp: func(err error) bool { return errors.Is(err, mqlite.ErrInvalidArgument) }})
	require.ErrorIs(t, err, mqlite.ErrInvalidArgument)
	cancel()
	<-served
}

func TestPipe(t *testing.T) {
	p, r := openPair(t)
	defer p.Close()
	defer r.Close()
	stop := replication.Pipe(context.Background(), p, r)
	ctx := context.Background()
	require.NoError(t, p.WaitReplicated(ctx, put(t, p, 10), 1))
	perr, rerr := stop()
	require.ErrorIs(t, perr, context.Canceled)
	require.ErrorIs(t, rerr, context.Canceled)
}
