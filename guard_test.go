package mqlite

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqlite/mqlite/clock"
	"github.com/mqlite/mqlite/vfs"
)

// TestDiskLimitFailsSendsFast fills a volume past DiskMaxUsedRatio: sends
// fail with ErrDiskFull and store nothing, reads keep working, and sends
// resume once there is room again.
func TestDiskLimitFailsSendsFast(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := vfs.NewMem()
		s, err := openFS(mem, "/full", smallFiles(&Options{SegmentSize: 1 << 20, DiskMaxUsedRatio: 0.5}))
		require.NoError(t, err)
		defer s.Close()
		ctx := context.Background()
		r, err := s.Put(ctx, &Message{Topic: "t", Body: []byte("before")}, 0)
		require.NoError(t, err)
		used, _, _ := mem.Usage("/")
		mem.SetCapacity(used + used/2) // now two thirds full
		time.Sleep(2 * time.Second)    // virtual: the monitor samples the disk every second
		synctest.Wait()
		before := s.log.WrotePosition()
		_, err = s.Put(ctx, &Message{Topic: "t", Body: []byte("refused")}, 0)
		require.ErrorIs(t, err, ErrDiskFull)
		p, err := s.NewProducer(ProducerOptions{})
		require.NoError(t, err)
		_, err = p.Send(ctx, &Message{Topic: "t", Body: []byte("refused")})
		require.ErrorIs(t, err, ErrDiskFull)
		_, err = s.PutBatch(ctx, []*Message{{Topic: "t", Body: []byte("refused")}}, 0)
		require.ErrorIs(t, err, ErrDiskFull)
		require.Equal(t, before, s.log.WrotePosition(), "nothing stored")
		m, err := s.MessageByID(r.MsgID())
		require.NoError(t, err, "reads keep working")
		require.Equal(t, "before", string(m.Body))

		mem.SetCapacity(1 << 40)
		time.Sleep(2 * time.Second)
		synctest.Wait()
		_, err = s.Put(ctx, &Message{Topic: "t", Body: []byte("after")}, 0)
		require.NoError(t, err)
	})
}

// TestStalledSyncTriggersFlowControl stalls the disk under FlushSync: the
// waiting send is bounded by SyncFlushTimeout, and once the stall is
// older than FlowControlThreshold new sends fail at once with
// ErrFlowControl instead of piling up.
func TestStalledSyncTriggersFlowControl(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ffs := vfs.NewFaulty(vfs.NewMem())
		s, err := openFS(ffs, "/stall", smallFiles(&Options{Flush: FlushSync, SegmentSize: 1 << 20, SyncFlushTimeout: 5 * time.Second}))
		require.NoError(t, err)
		defer s.Close()
		release := make(chan struct{})
		var once sync.Once
		ffs.SetInjector(func(op vfs.Op, path string) error {
			if op == vfs.OpMapSync && strings.Contains(path, "commitlog") {
				once.Do(func() { <-release })
			}
			return nil
		})
		ctx := context.Background()
		first := make(chan error)
		go func() {
			_, err := s.Put(ctx, &Message{Topic: "t", Body: []byte("stuck")}, 0)
			first <- err
		}()
		time.Sleep(500 * time.Millisecond)
		synctest.Wait()
		_, err = s.Put(ctx, &Message{Topic: "t", Body: []byte("queued")}, 0)
		require.ErrorIs(t, err, ErrFlushTimeout, "below the threshold a send still waits (and times out)")
		before := s.log.WrotePosition()
		_, err = s.Put(ctx, &Message{Topic: "t", Body: []byte("fast fail")}, 0)
		require.ErrorIs(t, err, ErrFlowControl, "the stall passed the 1 s threshold meanwhile")
		require.Equal(t, before, s.log.WrotePosition())
		require.ErrorIs(t, <-first, ErrFlushTimeout)
		close(release)
		time.Sleep(time.Second)
		synctest.Wait()
		_, err = s.Put(ctx, &Message{Topic: "t", Body: []byte("recovered")}, 0)
		require.NoError(t, err)
	})
}

// TestStalledAppendTriggersFlowControl stalls the append path itself: the
// next segment's allocation hangs, so the send that must roll waits under
// the append lock and the sends behind it queue. Once that is older than
// FlowControlThreshold, new sends fail at once with ErrFlowControl; when
// the disk comes back, everything queued is stored and sends flow again.
func TestStalledAppendTriggersFlowControl(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ffs := vfs.NewFaulty(vfs.NewMem())
		s, err := openFS(ffs, "/stall", smallFiles(&Options{SegmentSize: 64 << 10, NoWarm: true}))
		require.NoError(t, err)
		defer s.Close()
		synctest.Wait() // the allocator has prepared the second segment
		release := make(chan struct{})
		var once sync.Once
		ffs.SetInjector(func(op vfs.Op, path string) error {
			if op == vfs.OpAllocate && strings.Contains(path, "commitlog") {
				once.Do(func() { <-release }) // the third segment hangs
			}
			return nil
		})
		ctx := context.Background()
		body := make([]byte, 1000)
		for s.log.WrotePosition() < 64<<10 { // into the second segment
			_, err := s.Put(ctx, &Message{Topic: "t", Body: body}, 0)
			require.NoError(t, err)
		}
		synctest.Wait() // the allocator is stuck on the third
		// One sender fills the segment and waits for the next under the
		// append lock. (More would block on the lock itself, which
		// synctest does not count as idle.)
		stuck := make(chan error)
		go func() {
			var err error
			for err == nil {
				_, err = s.Put(ctx, &Message{Topic: "t", Body: body}, 0)
			}
			stuck <- err
		}()
		time.Sleep(500 * time.Millisecond)
		synctest.Wait()
		require.False(t, s.guard.busy.Load(), "below the threshold sends wait")
		time.Sleep(time.Second)
		synctest.Wait()
		before := s.log.WrotePosition()
		_, err = s.Put(ctx, &Message{Topic: "t", Body: []byte("fast fail")}, 0)
		require.ErrorIs(t, err, ErrFlowControl, "the append path has been stuck past the 1 s threshold")
		require.Equal(t, before, s.log.WrotePosition(), "nothing stored by a refused send")
		close(release)
		require.ErrorIs(t, <-stuck, ErrFlowControl, "the stuck send completed, the next one was refused while the flag stayed up")
		require.Greater(t, s.log.WrotePosition(), before, "the stuck send was stored once the segment came")
		time.Sleep(time.Second)
		synctest.Wait()
		_, err = s.Put(ctx, &Message{Topic: "t", Body: []byte("recovered")}, 0)
		require.NoError(t, err)
	})
}

// TestDiskFullOnAllocationResumes (S21 with an injected ENOSPC): when the
// next segment (or a ConsumeQueue file) cannot be allocated, sends fail
// with ErrDiskFull, nothing is fenced (dispatch waits), reads go on,
// sends and dispatch resume once there is room, and a reopen finds every
// acknowledged message.
func TestDiskFullOnAllocationResumes(t *testing.T) {
	mem := vfs.NewMem()
	ffs := vfs.NewFaulty(mem)
	s, err := openFS(ffs, "/e", smallFiles(&Options{SegmentSize: 64 << 10}))
	require.NoError(t, err)
	var full atomic.Bool
	ffs.SetInjector(func(op vfs.Op, path string) error {
		if op == vfs.OpAllocate && full.Load() {
			return syscall.ENOSPC
		}
		return nil
	})
	full.Store(true) // before the first send: the queue's file cannot be created either
	ctx := context.Background()
	var acked []string
	for {
		r, err := s.Put(ctx, &Message{Topic: "t", Body: make([]byte, 1000)}, 0)
		if err != nil {
			require.ErrorIs(t, err, ErrDiskFull)
			break
		}
		acked = append(acked, r.MsgID())
		require.Less(t, len(acked), 10_000, "the disk never filled")
	}
	require.Nil(t, s.log.Fenced(), "a full disk does not fence the store")
	_, err = s.MessageByID(acked[0])
	require.NoError(t, err, "reads go on")
	full.Store(false)
	// The first send that needs a segment asks the allocator again and
	// waits for it: sends resume at once, without reopening.
	r, err := s.Put(ctx, &Message{Topic: "t", Body: make([]byte, 1000)}, 0)
	require.NoError(t, err, "the first send once there is room")
	acked = append(acked, r.MsgID())
	msgs := readN(t, s, "t", 0, len(acked)) // dispatch caught up (it retries every second)
	require.Equal(t, acked[len(acked)-1], msgs[len(msgs)-1].MsgID)
	require.NoError(t, s.Close())

	s, err = openFS(mem, "/e", smallFiles(&Options{SegmentSize: 64 << 10}))
	require.NoError(t, err)
	defer s.Close()
	for _, id := range acked {
		_, err := s.MessageByID(id)
		require.NoError(t, err, "acknowledged %s", id)
	}
}

// S30: with MaxDispatchLag set, a dispatcher that falls behind (here: its
// next ConsumeQueue file hangs on the disk) shows at the producers: once
// the CommitLog is more than that far ahead of the queues, sends fail fast
// with ErrFlowControl and store nothing; once it catches up they flow
// again, and consumers see every message. (Not under synctest: the
// checkpoint waits for the hung queue's lock, which is not a durable
// block.)
func TestDispatchLagTriggersFlowControl(t *testing.T) {
	ffs := vfs.NewFaulty(vfs.NewMem())
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	s, err := openFS(ffs, "/lag", &Options{SegmentSize: 1 << 20, ConsumeQueueEntries: 64, MaxDispatchLag: 64 << 10, Clock: clk})
	require.NoError(t, err)
	defer s.Close()
	ctx := context.Background()
	body := make([]byte, 1000)
	_, err = s.Put(ctx, &Message{Topic: "t", Body: body}, 0) // the queue's first file
	require.NoError(t, err)
	require.NoError(t, s.WaitVisible(ctx))
	release := make(chan struct{})
	var hung atomic.Bool
	ffs.SetInjector(func(op vfs.Op, path string) error {
		if op == vfs.OpAllocate && strings.Contains(path, "consumequeue") {
			hung.Store(true)
			<-release // the queue's second file: dispatch waits for the disk
		}
		return nil
	})
	// A batch too large for the sender to dispatch itself: the loop does,
	// and hangs at entry 64.
	batch := make([]*Message, 100)
	for i := range batch {
		batch[i] = &Message{Topic: "t", Body: body}
	}
	_, err = s.PutBatch(ctx, batch, 0)
	require.NoError(t, err)
	n := 1 + len(batch)
	waitFor(t, "the dispatcher to hang", hung.Load)
	require.Greater(t, s.log.WrotePosition()-s.disp.dispatched(), int64(64<<10))
	_, err = s.Put(ctx, &Message{Topic: "t", Body: body}, 0)
	require.NoError(t, err, "the monitor has not sampled the lag yet")
	n++
	clk.Advance(time.Second) // the monitor samples it
	waitFor(t, "the monitor to see the lag", func() bool { return s.guard.lagging.Load() > 0 })
	before := s.log.WrotePosition()
	_, err = s.Put(ctx, &Message{Topic: "t", Body: body}, 0)
	require.ErrorIs(t, err, ErrFlowControl)
	require.Contains(t, err.Error(), "MaxDispatchLag")
	require.Equal(t, before, s.log.WrotePosition(), "a refused send stores nothing")

	close(release)
	require.NoError(t, s.WaitVisible(ctx))
	clk.Advance(time.Second)
	waitFor(t, "the monitor to see the catch-up", func() bool { return s.guard.lagging.Load() == 0 })
	_, err = s.Put(ctx, &Message{Topic: "t", Body: body}, 0)
	require.NoError(t, err, "the dispatcher caught up")
	n++
	require.NoError(t, s.WaitVisible(ctx))
	max, err := s.MaxOffset("t", 0)
	require.NoError(t, err)
	require.EqualValues(t, n, max)
}
