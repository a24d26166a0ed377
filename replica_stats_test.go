package mqlite

import (
	"context"
	"io"
	"net"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mqlite/mqlite/clock"
	"github.com/mqlite/mqlite/vfs"
)

func TestStatsReplication(t *testing.T) {
	ctx := context.Background()
	o := replOpts(clock.Real, Options{})
	p, err := openFS(vfs.NewMem(), "/p", o)
	require.NoError(t, err)
	defer p.Close()
	r := openReplica(t, vfs.NewMem(), "/r", o)
	defer r.Close()

	ps, err := p.Stats()
	require.NoError(t, err)
	require.Equal(t, ReplicationStats{Role: Primary, Mode: ReplicationAsync}, ps.Replication, "never replicated")
	rs, err := r.Stats()
	require.NoError(t, err)
	require.Equal(t, ReplicationStats{Role: Replica, Mode: ReplicationAsync}, rs.Replication)

	sc, stop := linkStalling(p, r)
	for i := range 20 {
		_, err := p.Put(ctx, &Message{Topic: "t", Body: body(i)}, i%2)
		require.NoError(t, err)
	}
	end := caughtUp(t, p, r)
	ps, err = p.Stats()
	require.NoError(t, err)
	pr := ps.Replication
	require.Equal(t, Primary, pr.Role)
	require.EqualValues(t, 1, pr.Epoch, "the first epoch")
	require.Equal(t, 1, pr.InSync)
	require.Len(t, pr.Replicas, 1)
	require.Equal(t, end, pr.Replicas[0].Written)
	require.Zero(t, pr.Replicas[0].Lag)
	require.True(t, pr.Replicas[0].InSync)
	require.Zero(t, pr.ReplicatedOffset, "replica fields stay empty on a primary")
	require.Empty(t, pr.PrimaryAddr)

	rs, err = r.Stats()
	require.NoError(t, err)
	rr := rs.Replication
	require.Equal(t, Replica, rr.Role)
	require.EqualValues(t, 1, rr.Epoch)
	require.True(t, rr.Following)
	require.Empty(t, rr.PrimaryAddr, "a wrapped stream without RemoteAddr")
	require.Equal(t, end, rr.ReplicatedOffset)
	require.Equal(t, end, rr.PrimaryEnd)
	require.Zero(t, rr.Lag)
	require.Empty(t, rr.Replicas)

	// The replica's acks stall: the primary's view of it falls behind by
	// what is put meanwhile.
	sc.stall()
	for i := range 10 {
		_, err := p.Put(ctx, &Message{Topic: "t", Body: body(100 + i)}, 0)
		require.NoError(t, err)
	}
	ps, err = p.Stats()
	require.NoError(t, err)
	now := p.log.WrotePosition()
	ri := ps.Replication.Replicas[0]
	require.LessOrEqual(t, ri.Written, end, "no ack got through")
	require.Equal(t, now-ri.Written, ri.Lag)
	require.GreaterOrEqual(t, ri.Lag, now-end)
	require.Equal(t, 1, ps.Replication.InSync, "far within MaxGap")
	sc.resume()
	stop()

	rs, err = r.Stats()
	require.NoError(t, err)
	require.False(t, rs.Replication.Following)
	require.NoError(t, r.Promote())
	rs, err = r.Stats()
	require.NoError(t, err)
	require.Equal(t, Primary, rs.Replication.Role)
	require.EqualValues(t, 2, rs.Replication.Epoch, "Promote starts a new epoch")
	require.Zero(t, rs.Replication.ReplicatedOffset)
}

func TestStatsReplicationPrimaryAddr(t *testing.T) {
	o := replOpts(clock.Real, Options{})
	p, err := openFS(vfs.NewMem(), "/p", o)
	require.NoError(t, err)
	defer p.Close()
	r := openReplica(t, vfs.NewMem(), "/r", o)
	defer r.Close()
	stop := link(p, r, nil)
	require.NoError(t, p.WaitReplicated(context.Background(), 0, 1))
	rs, err := r.Stats()
	require.NoError(t, err)
	require.Equal(t, "pipe", rs.Replication.PrimaryAddr, "net.Pipe's RemoteAddr")
	stop()
	rs, err = r.Stats()
	require.NoError(t, err)
	require.Equal(t, "pipe", rs.Replication.PrimaryAddr, "the last primary stays known")
}

type nilAddrConn struct{ io.ReadWriteCloser }

func (nilAddrConn) RemoteAddr() *net.TCPAddr { return nil }

type oddAddrConn struct{ io.ReadWriteCloser }

func (oddAddrConn) RemoteAddr(int) string { return "no" }

func TestRemoteAddr(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	require.Equal(t, "pipe", remoteAddr(a))
	require.Empty(t, remoteAddr(struct{ io.ReadWriteCloser }{a}), "no method")
	require.Empty(t, remoteAddr(nilAddrConn{a}), "a nil address")
	require.Empty(t, remoteAddr(oddAddrConn{a}), "another signature")
	require.Equal(t, "127.0.0.1:7", remoteAddr(struct{ net.Conn }{fakeAddrConn{addr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 7}}}))
}

// fakeAddrConn is a net.Conn that only knows its remote address.
type fakeAddrConn struct {
	net.Conn
	addr net.Addr
}

func (f fakeAddrConn) RemoteAddr() net.Addr { return f.addr }
