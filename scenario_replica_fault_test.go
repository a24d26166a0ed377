package mqlite

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqlite/mqlite/clock"
	"github.com/mqlite/mqlite/vfs"
)

// faultConn is the replica's end of a stream that breaks: it fails every
// read once dropAt bytes were read, and flips the byte at flipAt.
type faultConn struct {
	io.ReadWriteCloser
	mu     sync.Mutex
	n      int64
	dropAt int64 // -1: never
	flipAt int64 // -1: never
}

var errDropped = errors.New("test: connection dropped")

func (c *faultConn) Read(b []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dropAt >= 0 {
		if c.n >= c.dropAt {
			c.ReadWriteCloser.Close()
			return 0, errDropped
		}
		b = b[:min(int64(len(b)), c.dropAt-c.n)]
	}
	n, err := c.ReadWriteCloser.Read(b)
	if c.flipAt >= c.n && c.flipAt < c.n+int64(n) {
		b[c.flipAt-c.n] ^= 0x10
	}
	c.n += int64(n)
	return n, err
}

func faultWrap(drop, flip int64) func(io.ReadWriteCloser) io.ReadWriteCloser {
	return func(c io.ReadWriteCloser) io.ReadWriteCloser {
		return &faultConn{ReadWriteCloser: c, dropAt: drop, flipAt: flip}
	}
}

// replicateUntilFailure runs a session through wrap until the replica's
// side fails by itself, and returns the replica's error.
func replicateUntilFailure(p, r *Store, wrap func(io.ReadWriteCloser) io.ReadWriteCloser) error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pe := make(chan error, 1)
	a, b := net.Pipe()
	go func() { pe <- p.ServeReplica(ctx, a) }()
	err := r.ReplicateFrom(ctx, wrap(b))
	cancel()
	<-pe
	return err
}

func TestReplicaSurvivesStreamFaults(t *testing.T) {
	for _, tc := range []struct {
		name       string
		drop, flip int64
		want       error
	}{
		{"dropped mid-chunk", 9_011, -1, errDropped},
		{"corrupted chunk", -1, 9_011, ErrCorrupt},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := clock.NewFake(t0)
			pfs, rfs := vfs.NewMem(), vfs.NewMem()
			o := replOpts(clk, Options{})
			p, err := openFS(pfs, "/p", o)
			require.NoError(t, err)
			defer p.Close()
			require.NoError(t, p.CreateTopic("orders", TopicConfig{Queues: 4}))
			keys := mixedSends(t, p, clk, 0)
			require.Greater(t, p.log.WrotePosition(), int64(15_000))
			r := openReplica(t, rfs, "/r", o)
			defer r.Close()
			err = replicateUntilFailure(p, r, faultWrap(tc.drop, tc.flip))
			require.ErrorIs(t, err, tc.want)
			got := r.log.WrotePosition()
			require.Less(t, got, int64(9_011), "nothing past the fault was taken")
			require.True(t, r.log.IsBoundary(got))
			// Reconnected, it resumes from its end and ends identical.
			stop := link(p, r, nil)
			end := caughtUp(t, p, r)
			stop()
			require.True(t, bytes.Equal(logBytes(t, pfs, p, end), logBytes(t, rfs, r, end)))
			sameAnswers(t, p, r, keys)
		})
	}
}

// TestReplicaDiskFull: the replica cannot create its next segment; its
// ReplicateFrom fails with ErrDiskFull, nothing is lost on either side,
// and it resumes once there is room.
func TestReplicaDiskFull(t *testing.T) {
	clk := clock.NewFake(t0)
	pfs := vfs.NewMem()
	ffs := vfs.NewFaulty(vfs.NewMem())
	o := replOpts(clk, Options{})
	p, err := openFS(pfs, "/p", o)
	require.NoError(t, err)
	defer p.Close()
	require.NoError(t, p.CreateTopic("orders", TopicConfig{Queues: 4}))
	keys := mixedSends(t, p, clk, 0)
	var full sync.Mutex
	isFull := true
	ffs.SetInjector(func(op vfs.Op, path string) error {
		full.Lock()
		defer full.Unlock()
		if isFull && (op == vfs.OpAllocate || op == vfs.OpOpen) && strings.Contains(path, "commitlog") &&
			!strings.HasSuffix(path, "00000000000000000000") {
			return syscall.ENOSPC
		}
		return nil
	})
	r := openReplica(t, ffs, "/r", o)
	defer r.Close()
	err = replicateUntilFailure(p, r, func(c io.ReadWriteCloser) io.ReadWriteCloser { return c })
	require.ErrorIs(t, err, ErrDiskFull)
	require.Equal(t, o.SegmentSize, r.log.WrotePosition(), "the first segment is full")
	full.Lock()
	isFull = false
	full.Unlock()
	stop := link(p, r, nil)
	end := caughtUp(t, p, r)
	stop()
	require.True(t, bytes.Equal(logBytes(t, pfs, p, end), logBytes(t, ffs, r, end)))
	sameAnswers(t, p, r, keys)
}

// TestNewReplicaOfATrimmedPrimary: retention removed the primary's first
// segments; a new replica starts its log where the primary's now starts.
func TestNewReplicaOfATrimmedPrimary(t *testing.T) {
	clk := clock.NewFake(t0)
	pfs, rfs := vfs.NewMem(), vfs.NewMem()
	o := replOpts(clk, Options{MaxStoreBytes: 4 * 8 << 10, NoRecycle: true})
	p, err := openFS(pfs, "/p", o)
	require.NoError(t, err)
	defer p.Close()
	require.NoError(t, p.CreateTopic("orders", TopicConfig{Queues: 4}))
	mixedSends(t, p, clk, 0)
	putTagged(t, p, "bulk", 300)
	_, err = p.CleanExpired()
	require.NoError(t, err)
	require.Positive(t, p.log.MinOffset())
	r := openReplica(t, rfs, "/r", o)
	defer r.Close()
	stop := link(p, r, nil)
	putTagged(t, p, "later", 50)
	end := caughtUp(t, p, r)
	stop()
	require.Equal(t, p.log.MinOffset(), r.log.MinOffset())
	require.True(t, bytes.Equal(logBytes(t, pfs, p, end), logBytes(t, rfs, r, end)))
	// A queue whose records all went before the replica started is
	// unknown to it (see replication.go); the queues that kept records
	// answer the same.
	for q := range 2 {
		var pl, rl []string
		for m, err := range p.Messages("orders", q, 0) {
			require.NoError(t, err)
			pl = append(pl, m.MsgID)
		}
		for m, err := range r.Messages("orders", q, 0) {
			require.NoError(t, err)
			rl = append(rl, m.MsgID)
		}
		require.NotEmpty(t, pl)
		require.Equal(t, pl, rl)
	}
	for _, k := range []string{"bulk", "later"} {
		far := time.Unix(1<<40, 0)
		pk, err := p.MessagesByKey("orders", k, time.Time{}, far, 1000)
		require.NoError(t, err)
		rk, err := r.MessagesByKey("orders", k, time.Time{}, far, 1000)
		require.NoError(t, err)
		require.Equal(t, len(pk), len(rk), k)
	}
}
