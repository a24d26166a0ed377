package mqlite

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqlite/mqlite/clock"
	"github.com/mqlite/mqlite/vfs"
)

// caughtUpReplica opens a primary with n messages on "orders" and a
// replica that holds them all, still following; stop ends the link.
func caughtUpReplica(t *testing.T, n int) (p, r *Store, rfs vfs.FS, sent []PutResult, stop func() (error, error)) {
	t.Helper()
	o := replOpts(clock.NewFake(t0), Options{})
	p, err := openFS(vfs.NewMem(), "/p", o)
	require.NoError(t, err)
	require.NoError(t, p.CreateTopic("orders", TopicConfig{Queues: 2}))
	sent = putTagged(t, p, "m", n)
	rfs = vfs.NewMem()
	r = openReplica(t, rfs, "/r", o)
	stop = link(p, r, nil)
	caughtUp(t, p, r)
	return p, r, rfs, sent, stop
}

// TestPromoteBesideReaders: reads, Stats, Settle and the consumer and
// transaction calls run on a replica while it is promoted: the race
// detector sees no unsynchronised access, every read answers the stored
// values, and a write is refused (ErrReplica) or taken, never anything
// else.
func TestPromoteBesideReaders(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p, r, _, sent, stop := caughtUpReplica(t, 40)
	defer p.Close()
	defer r.Close()

	readers := map[string]func() error{
		"MessageByID": func() error {
			for i, res := range sent {
				m, err := r.MessageByID(res.MsgID())
				if err != nil {
					return err
				}
				if want := fmt.Sprintf("m-%d", i); string(m.Body) != want {
					return fmt.Errorf("message %d: body %q, want %q", i, m.Body, want)
				}
			}
			return nil
		},
		"ReadQueue": func() error {
			ms, err := r.ReadQueue(ctx, "orders", 1, 0, 5)
			if err != nil {
				return err
			}
			if got, want := fmt.Sprint(bodies(ms)), "[m-1 m-3 m-5 m-7 m-9]"; got != want {
				return fmt.Errorf("queue 1: %s, want %s", got, want)
			}
			return nil
		},
		"Stats": func() error {
			st, err := r.Stats()
			if err == nil && st.PendingTransactions != 0 {
				err = fmt.Errorf("%d pending transactions", st.PendingTransactions)
			}
			return err
		},
		"Settle": func() error { return r.Settle(ctx) },
		"Consumers": func() error {
			r.ConsumerGroups()
			c, err := r.NewPullConsumer("g", ConsumerOptions{})
			if errors.Is(err, ErrReplica) {
				return nil
			}
			if err != nil {
				return err
			}
			return c.Close()
		},
		"Put": func() error {
			_, err := r.Put(ctx, &Message{Topic: "orders", Body: []byte("new")}, 0)
			if errors.Is(err, ErrReplica) {
				return nil
			}
			return err
		},
	}
	promoted := make(chan struct{})
	var started, wg sync.WaitGroup
	errc := make(chan error, len(readers))
	for name, read := range readers {
		started.Add(1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				if err := read(); err != nil {
					errc <- fmt.Errorf("%s, round %d: %w", name, i, err)
					if i == 0 {
						started.Done()
					}
					return
				}
				if i == 0 {
					started.Done()
				}
				select {
				case <-promoted:
					if err := read(); err != nil { // once more on the primary
						errc <- fmt.Errorf("%s after Promote: %w", name, err)
					}
					return
				default:
				}
			}
		}()
	}
	started.Wait() // every reader has run once on the replica
	err := r.Promote()
	close(promoted)
	wg.Wait()
	close(errc)
	require.NoError(t, err)
	for err := range errc {
		require.NoError(t, err)
	}
	stop()
	require.Equal(t, Primary, r.Role())
	res, err := r.Put(ctx, &Message{Topic: "orders", Body: []byte("after")}, 1)
	require.NoError(t, err)
	require.EqualValues(t, 20, res.QueueOffset, "queue 1 held m-1 ... m-39")
}

// TestPromoteConcurrently: of four Promotes started together exactly one
// promotes; the others return ErrInvalidArgument, and one epoch is added.
func TestPromoteConcurrently(t *testing.T) {
	p, r, _, _, stop := caughtUpReplica(t, 10)
	defer p.Close()
	defer r.Close()
	_, before := r.Epochs()
	const n = 4
	errc := make(chan error, n)
	gate := make(chan struct{})
	for range n {
		go func() {
			<-gate
			errc <- r.Promote()
		}()
	}
	close(gate)
	won := 0
	for range n {
		err := <-errc
		if err == nil {
			won++
			continue
		}
		require.ErrorIs(t, err, ErrInvalidArgument)
	}
	stop()
	require.Equal(t, 1, won, "exactly one Promote wins")
	_, after := r.Epochs()
	require.Len(t, after, len(before)+1, "one new epoch")
	require.Equal(t, Primary, r.Role())
}

// TestPromoteBesideClose: Promote and Close race on a following replica:
// Promote either finishes first (nil, and its epoch is on disk) or finds
// the store closed (ErrClosed, no new epoch); Close always succeeds, and
// no goroutine of either store is left once both are closed, even when
// Promote started the delay, transaction and consumer services.
func TestPromoteBesideClose(t *testing.T) {
	baseline := mqliteGoroutines()
	outcomes := map[string]int{}
	for i := range 16 {
		p, r, rfs, _, stop := caughtUpReplica(t, 6)
		_, before := r.Epochs()
		gate := make(chan struct{})
		perr, cerr := make(chan error, 1), make(chan error, 1)
		go func() { <-gate; perr <- r.Promote() }()
		go func() { <-gate; cerr <- r.Close() }()
		close(gate)
		pe, ce := <-perr, <-cerr
		stop()
		require.NoError(t, p.Close())
		require.NoError(t, ce, "round %d", i)
		st, err := ReadReplicationState("/r", rfs)
		require.NoError(t, err)
		switch {
		case pe == nil:
			outcomes["promoted"]++
			require.Len(t, st.Epochs, len(before)+1, "round %d: the new epoch is saved", i)
		case errors.Is(pe, ErrClosed):
			outcomes["closed"]++
			require.Len(t, st.Epochs, len(before), "round %d: no epoch added", i)
		default:
			t.Fatalf("round %d: Promote beside Close: %v", i, pe)
		}
		require.ErrorIs(t, r.Promote(), ErrClosed, "round %d: Promote after Close", i)
		require.Equal(t, baseline, mqliteGoroutines(), "round %d (%v): goroutines left", i, pe)
	}
	t.Logf("outcomes: %v", outcomes)
}

// TestReplicateFromRefusedWhilePromoting: a ReplicateFrom that begins
// while Promote runs is refused, so that nothing is appended after
// Promote settled what it received.
func TestReplicateFromRefusedWhilePromoting(t *testing.T) {
	o := replOpts(clock.NewFake(t0), Options{})
	r := openReplica(t, vfs.NewMem(), "/r", o)
	defer r.Close()
	_, err := r.repl.beginPromote()
	require.NoError(t, err)
	p, err := openFS(vfs.NewMem(), "/p", o)
	require.NoError(t, err)
	defer p.Close()
	_, rerr := linkEnd(p, r)
	require.ErrorIs(t, rerr, ErrInvalidArgument)
	require.Contains(t, rerr.Error(), "being promoted")
	r.repl.endPromote()
	require.Equal(t, Replica, r.Role(), "nothing changed")
}

// TestPromoteFailureLeavesAReplica: a Promote whose epoch file cannot be
// written fails with ErrIO and leaves a replica: no epoch added, writes
// refused, no goroutine of the services it made left running; a Promote
// once the disk works again succeeds.
func TestPromoteFailureLeavesAReplica(t *testing.T) {
	ctx := context.Background()
	o := replOpts(clock.NewFake(t0), Options{})
	p, err := openFS(vfs.NewMem(), "/p", o)
	require.NoError(t, err)
	require.NoError(t, p.CreateTopic("orders", TopicConfig{Queues: 2}))
	putTagged(t, p, "m", 10)
	ffs := vfs.NewFaulty(vfs.NewMem())
	r := openReplica(t, ffs, "/r", o)
	defer r.Close()
	stop := link(p, r, nil)
	caughtUp(t, p, r)
	stop()
	require.NoError(t, p.Close())
	_, before := r.Epochs()
	require.Zero(t, serviceGoroutines(0), "a replica runs no delay, transaction or consumer goroutine")

	ffs.SetInjector(func(op vfs.Op, path string) error {
		if op == vfs.OpRename && strings.Contains(path, epochFile) {
			return errors.New("injected rename failure")
		}
		return nil
	})
	require.ErrorIs(t, r.Promote(), ErrIO)
	require.Equal(t, Replica, r.Role())
	_, after := r.Epochs()
	require.Equal(t, before, after, "no epoch added")
	_, err = r.Put(ctx, &Message{Topic: "orders", Body: []byte("x")}, 0)
	require.ErrorIs(t, err, ErrReplica)
	_, err = r.NewPullConsumer("g", ConsumerOptions{})
	require.ErrorIs(t, err, ErrReplica)
	require.Zero(t, serviceGoroutines(0), "the services the failed Promote made are stopped")

	ffs.SetInjector(nil)
	require.NoError(t, r.Promote())
	_, after = r.Epochs()
	require.Len(t, after, len(before)+1)
	res, err := r.Put(ctx, &Message{Topic: "orders", Body: []byte("x")}, 0)
	require.NoError(t, err)
	require.EqualValues(t, 5, res.QueueOffset)
	require.Equal(t, 5, serviceGoroutines(5), "a primary runs them (the scheduler two)")
}

// serviceGoroutines counts the goroutines of the delay scheduler, the
// timer service, the transaction service and the consumer groups (one
// on a primary, two for the scheduler), giving them a moment to reach want
// (stopped ones to go).
func serviceGoroutines(want int) int {
	count := func() int {
		n := 0
		for _, fn := range []string{"consumer.NewManager", "txn.(*Service).Start", "delay.(*Scheduler).Start", "delay.(*Timers).Start"} {
			n += goroutinesBy("github.com/mqlite/mqlite/" + fn)
		}
		return n
	}
	n := count()
	for i := 0; n != want && i < 1000; i++ {
		runtime.Gosched()
		n = count()
	}
	return n
}
