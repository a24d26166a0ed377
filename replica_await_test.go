package mqlite

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqlite/mqlite/clock"
	"github.com/mqlite/mqlite/vfs"
)

// A ReplicationSync primary's sends leave their dispatch to the session's
// sender (shipsFirst): every record gets indexed without anything else
// waking the dispatcher, while the replica is attached and after it went.
func TestReplicationSyncSendsAreDispatchedAfterShipping(t *testing.T) {
	ctx := context.Background()
	o := replOpts(clock.Real, Options{Replication: ReplicationOptions{Mode: ReplicationSync, Timeout: time.Minute}})
	p, err := openFS(vfs.NewMem(), "/p", o)
	require.NoError(t, err)
	defer p.Close()
	r := openReplica(t, vfs.NewMem(), "/r", o)
	defer r.Close()
	stop := link(p, r, nil)
	require.NoError(t, p.WaitReplicated(ctx, 0, 1))
	require.True(t, p.repl.shipsFirst())

	const senders, each = 8, 25
	var wg sync.WaitGroup
	errc := make(chan error, senders)
	for g := range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				if _, err := p.Put(ctx, &Message{Topic: "t", Body: []byte(fmt.Sprintf("%d-%d", g, i))}, g%2); err != nil {
					errc <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		require.NoError(t, err)
	}
	dispatched(t, p)
	n := 0
	for q := range 2 {
		for _, err := range p.Messages("t", q, 0) {
			require.NoError(t, err)
			n++
		}
	}
	require.Equal(t, senders*each, n)

	// The replica goes: the sends dispatch their records themselves again.
	perr, rerr := stop()
	require.ErrorIs(t, perr, context.Canceled)
	require.ErrorIs(t, rerr, context.Canceled)
	require.False(t, p.repl.shipsFirst())
	_, err = p.Put(ctx, &Message{Topic: "t", Body: []byte("alone")}, 0)
	require.ErrorIs(t, err, ErrReplicaNotAvailable)
	dispatched(t, p)
}

// dispatched waits until s's dispatcher has indexed its whole CommitLog,
// without waking it (WaitVisible would).
func dispatched(t *testing.T, s *Store) {
	t.Helper()
	ch, err := s.disp.waitCh(nil, s.log.WrotePosition())
	require.NoError(t, err)
	select {
	case <-ch:
	case <-time.After(30 * time.Second):
		t.Fatal("the records were never dispatched")
	}
}

// Sync sends re-arm timers earlier sends stopped (waitTimer): a re-armed
// timer, and a new one after a timer fired, still time out after
// ReplicationOptions.Timeout, not before, with ErrReplicaTimeout.
func TestReplicationSyncTimeoutWithReusedTimers(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewFake(time.Date(2026, 12, 5, 0, 0, 0, 0, time.UTC))
	const timeout = time.Second
	o := replOpts(clk, Options{Replication: ReplicationOptions{Mode: ReplicationSync, Timeout: timeout}})
	p, err := openFS(vfs.NewMem(), "/p", o)
	require.NoError(t, err)
	defer p.Close()
	ro := replOpts(clock.Real, Options{})
	r := openReplica(t, vfs.NewMem(), "/r", ro)
	defer r.Close()
	sc, stop := linkStalling(p, r)
	defer stop()
	require.NoError(t, p.WaitReplicated(ctx, 0, 1))

	// Acknowledged sends: their timers stop before they fire and are kept.
	for i := range 3 {
		_, err := p.Put(ctx, &Message{Topic: "t", Body: body(i)}, 0)
		require.NoError(t, err)
	}

	sc.stall() // no more acks
	for i := range 3 {
		baseline := clk.Waiters()
		errc := make(chan error, 1)
		go func() {
			_, err := p.Put(ctx, &Message{Topic: "t", Body: []byte("slow")}, 0)
			errc <- err
		}()
		waitFor(t, "the send's timer", func() bool { return clk.Waiters() > baseline })
		clk.Advance(timeout - time.Millisecond)
		select {
		case err := <-errc:
			t.Fatalf("send %d returned before its timeout: %v", i, err)
		default:
		}
		clk.Advance(time.Millisecond)
		select {
		case err := <-errc:
			require.ErrorIs(t, err, ErrReplicaTimeout, "send %d", i)
		case <-time.After(30 * time.Second):
			t.Fatalf("send %d did not time out", i)
		}
	}
	sc.resume()
	_, err = p.Put(ctx, &Message{Topic: "t", Body: []byte("again")}, 0)
	require.NoError(t, err, "acknowledged once the replica is back")
}

// A replica that stops reading leaves the primary's sender stuck in a
// write, before it dispatches what it wrote: the sync sends, which time
// out, still make their records readable on the primary when they return.
func TestReplicationSyncStuckSenderDoesNotHideRecords(t *testing.T) {
	ctx := context.Background()
	o := replOpts(clock.Real, Options{Replication: ReplicationOptions{Mode: ReplicationSync, Timeout: 100 * time.Millisecond}})
	p, r, sc := stallingPair(t, o)

	// The replica blocks in its first ack, then reads nothing more: the
	// sender's next write (over a net.Pipe) waits for it.
	sc.stall()
	for i := range 3 {
		_, err := p.Put(ctx, &Message{Topic: "t", Body: body(i)}, 0)
		require.ErrorIs(t, err, ErrReplicaTimeout)
		n := 0
		for _, err := range p.Messages("t", 0, 0) {
			require.NoError(t, err)
			n++
		}
		require.Equal(t, i+1, n, "send %d is readable on the primary when it returns", i)
	}
	sc.resume()
	caughtUp(t, p, r)
}
