package mqlite

import (
	"context"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqlite/mqlite/clock"
	"github.com/mqlite/mqlite/vfs"
)

// stallConn is a stream whose writes block while stalled: a replica that
// stops acknowledging, and then taking bytes (a slow disk, a full network
// buffer). A write already under way when it stalls goes through.
type stallConn struct {
	io.ReadWriteCloser
	mu      sync.Mutex
	open    chan struct{} // closed while not stalled
	stalled bool
}

// linkStalling is link with the replica's end of the stream a stallConn,
// for the test to stall and resume.
func linkStalling(p, r *Store) (*stallConn, func() (perr, rerr error)) {
	var sc *stallConn
	stop := link(p, r, func(c io.ReadWriteCloser) io.ReadWriteCloser { sc = newStallConn(c); return sc })
	return sc, stop
}

// stallingPair opens a primary and a replica with o on in-memory file
// systems, links them through a stallConn and waits until the replica is
// attached; the test's cleanup unlinks and closes both.
func stallingPair(t *testing.T, o *Options) (p, r *Store, sc *stallConn) {
	t.Helper()
	p, err := openFS(vfs.NewMem(), "/p", o)
	require.NoError(t, err)
	t.Cleanup(func() { p.Close() })
	r = openReplica(t, vfs.NewMem(), "/r", o)
	t.Cleanup(func() { r.Close() })
	sc, stop := linkStalling(p, r)
	t.Cleanup(func() { stop() })
	require.NoError(t, p.WaitReplicated(context.Background(), 0, 1))
	return p, r, sc
}

func newStallConn(c io.ReadWriteCloser) *stallConn {
	s := &stallConn{ReadWriteCloser: c, open: make(chan struct{})}
	close(s.open)
	return s
}

func (s *stallConn) stall() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.stalled {
		s.stalled, s.open = true, make(chan struct{})
	}
}

func (s *stallConn) resume() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stalled {
		s.stalled = false
		close(s.open)
	}
}

func (s *stallConn) Write(b []byte) (int, error) {
	s.mu.Lock()
	open := s.open
	s.mu.Unlock()
	<-open
	return s.ReadWriteCloser.Write(b)
}

func (s *stallConn) Close() error {
	s.resume()
	return s.ReadWriteCloser.Close()
}

func TestReplicationSyncWaitsForTheReplica(t *testing.T) {
	ctx := context.Background()
	o := replOpts(clock.Real, Options{Replication: ReplicationOptions{Mode: ReplicationSync, Timeout: 200 * time.Millisecond}})
	p, err := openFS(vfs.NewMem(), "/p", o)
	require.NoError(t, err)
	defer p.Close()

	// No replica: stored locally, not replicated, at once.
	res, err := p.Put(ctx, &Message{Topic: "t", Body: []byte("alone")}, 0)
	require.ErrorIs(t, err, ErrReplicaNotAvailable)
	got, rerr := p.ReadAt(res.Offset)
	require.NoError(t, rerr)
	require.Equal(t, "alone", string(got.Body), "stored locally")

	r := openReplica(t, vfs.NewMem(), "/r", o)
	defer r.Close()
	sc, stop := linkStalling(p, r)
	require.NoError(t, p.WaitReplicated(ctx, p.log.WrotePosition(), 1))
	for i := range 50 {
		res, err := p.Put(ctx, &Message{Topic: "t", Body: body(i)}, 0)
		require.NoError(t, err)
		// The replica holds it when the send returns.
		infos := p.Replicas()
		require.Len(t, infos, 1)
		require.GreaterOrEqual(t, infos[0].Written, res.End())
	}

	// A replica that stops taking bytes: sync sends time out with the
	// status and are stored locally.
	sc.stall()
	res, err = p.Put(ctx, &Message{Topic: "t", Body: []byte("slow")}, 0)
	require.ErrorIs(t, err, ErrReplicaTimeout)
	got, rerr = p.ReadAt(res.Offset)
	require.NoError(t, rerr)
	require.Equal(t, "slow", string(got.Body))
	sc.resume()
	caughtUp(t, p, r)
	got, err = r.ReadAt(res.Offset)
	require.NoError(t, err)
	require.Equal(t, "slow", string(got.Body), "the replica catches up")
	stop()
}

func TestReplicationAsyncIgnoresAStalledReplica(t *testing.T) {
	ctx := context.Background()
	o := replOpts(clock.Real, Options{})
	p, r, sc := stallingPair(t, o)
	sc.stall()
	for i := range 200 {
		_, err := p.Put(ctx, &Message{Topic: "t", Body: body(i)}, 0)
		require.NoError(t, err)
	}
	infos := p.Replicas()
	require.Len(t, infos, 1)
	require.Positive(t, infos[0].Lag, "the replica lags; sends went on")
	sc.resume()
	caughtUp(t, p, r)
}

func TestReplicationSyncTooFarBehindIsNotInSync(t *testing.T) {
	ctx := context.Background()
	o := replOpts(clock.Real, Options{Replication: ReplicationOptions{Mode: ReplicationSync, MaxGap: 4096, Timeout: time.Minute}})
	p, r, sc := stallingPair(t, o)
	_, err := p.Put(ctx, &Message{Topic: "t", Body: []byte("in sync")}, 0)
	require.NoError(t, err)
	sc.stall()
	// Sends pile up behind the stalled replica (each gives up waiting at
	// its context's end); once MaxGap is passed it is no longer in sync
	// and a send says so at once.
	start := p.log.WrotePosition()
	for p.log.WrotePosition()-start <= 4096 {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Millisecond)
		_, err := p.Put(cctx, &Message{Topic: "t", Body: body(300)}, 0)
		cancel()
		require.Error(t, err)
	}
	_, err = p.Put(ctx, &Message{Topic: "t", Body: []byte("out of sync")}, 0)
	require.ErrorIs(t, err, ErrReplicaNotAvailable)
	require.False(t, p.Replicas()[0].InSync)
	sc.resume()
	caughtUp(t, p, r)
	require.True(t, p.Replicas()[0].InSync)
}

// TestRetentionKeepsWhatAnInSyncReplicaNeeds: with a replica attached and
// stalled (but within MaxGap), retention past MaxStoreBytes keeps the
// segments from the one holding the replica's acknowledged end; once the
// replica catches up they go.
func TestRetentionKeepsWhatAnInSyncReplicaNeeds(t *testing.T) {
	ctx := context.Background()
	o := replOpts(clock.Real, Options{MaxStoreBytes: 4 * 8 << 10, NoRecycle: true})
	p, err := openFS(vfs.NewMem(), "/p", o)
	require.NoError(t, err)
	defer p.Close()
	r := openReplica(t, vfs.NewMem(), "/r", o)
	defer r.Close()
	sc, stop := linkStalling(p, r)
	defer stop()
	_, err = p.Put(ctx, &Message{Topic: "t", Body: []byte("first")}, 0)
	require.NoError(t, err)
	caughtUp(t, p, r)
	held := p.Replicas()[0].Written
	sc.stall()
	for i := range 300 {
		_, err := p.Put(ctx, &Message{Topic: "t", Body: body(i)}, 0)
		require.NoError(t, err)
	}
	require.NoError(t, p.WaitVisible(ctx))
	require.Greater(t, len(p.log.Segments()), 5, "past MaxStoreBytes")
	_, err = p.CleanExpired()
	require.NoError(t, err)
	require.LessOrEqual(t, p.log.MinOffset(), held, "the segment the replica needs is kept")
	sc.resume()
	caughtUp(t, p, r)
	_, err = p.CleanExpired()
	require.NoError(t, err)
	require.Greater(t, p.log.MinOffset(), held, "then it goes")
	require.LessOrEqual(t, len(p.log.Segments()), 5)
}
