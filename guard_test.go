package mqlite

import (
	"context"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqlite/mqlite/internal/vfs"
)

// TestDiskLimitFailsSendsFast fills a volume past DiskMaxUsedRatio: sends
// fail with ErrDiskFull and store nothing, reads keep working, and sends
// resume once there is room again.
func TestDiskLimitFailsSendsFast(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := vfs.NewMem()
		s, err := openFS(mem, "/full", &Options{SegmentSize: 1 << 20, DiskMaxUsedRatio: 0.5})
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
		s, err := openFS(ffs, "/stall", &Options{Flush: FlushSync, SegmentSize: 1 << 20, SyncFlushTimeout: 5 * time.Second})
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
