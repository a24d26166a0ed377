package mqlite

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
)

type observer chan Stats

func (o observer) ObserveStats(st Stats) {
	select {
	case o <- st:
	default:
	}
}

// TestStatsObserverAndThroughput: the observer gets snapshots on the
// store's clock, with put and get counts, rates and flush latencies.
func TestStatsObserverAndThroughput(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		obs := make(observer, 1)
		s, err := Open("/obs", &Options{InMemory: true, Flush: FlushSync, StatsObserver: obs, StatsInterval: 5 * time.Second})
		require.NoError(t, err)
		defer s.Close()
		ctx := context.Background()
		time.Sleep(time.Second) // a first rate sample at zero
		synctest.Wait()
		for range 100 {
			_, err := s.Put(ctx, &Message{Topic: "m", Body: []byte("x")}, 0)
			require.NoError(t, err)
		}
		require.NoError(t, s.WaitVisible(ctx))
		got, err := s.ReadQueue(ctx, "m", 0, 0, 40)
		require.NoError(t, err)
		require.Len(t, got, 40)
		st := <-obs // after 5 s of virtual time
		require.Equal(t, int64(100), st.Throughput.Puts)
		require.Equal(t, int64(40), st.Throughput.Gets)
		require.Positive(t, st.Throughput.Flushes, "FlushSync flushed")
		require.InDelta(t, 0, st.Throughput.PutTPS, 0.01, "rates cover the last second only")
		require.False(t, st.Throughput.DiskFull)
		for _, ts := range st.Topics {
			if ts.Name == "m" {
				require.Equal(t, int64(100), ts.Messages)
			}
		}
	})
}
