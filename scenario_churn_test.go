//go:build linux

package mqlite

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// churnCycles is the number of Open/Put/Poll/Close cycles of
// TestOpenCloseChurn (CI asks for 200).
var churnCycles = flag.Int("churn.cycles", 60, "Open/Put/Poll/Close cycles of TestOpenCloseChurn")

// S27: Open -> Put -> Poll -> Close, over and over on real files, leaves
// no descriptor, mapping or goroutine behind; Close twice is a no-op; and
// a Close racing with blocked readers and running senders ends them with
// ErrClosed, not a fault in an unmapped segment.
func TestOpenCloseChurn(t *testing.T) {
	cycles := *churnCycles
	if testing.Short() {
		cycles = min(cycles, 40)
	}
	dir := filepath.Join(t.TempDir(), "store")
	opts := func() *Options {
		return &Options{SegmentSize: 64 << 10, ConsumeQueueEntries: 256, IndexSlots: 64, IndexEntries: 1024}
	}
	baseFDs, baseG := openFDs(t), mqliteGoroutines()
	ctx := context.Background()
	body := make([]byte, 3000) // a segment roll every ~20 puts
	var sent int64
	for c := range cycles {
		s, err := Open(dir, opts())
		require.NoError(t, err, "cycle %d", c)
		for range 7 {
			_, err := s.Put(ctx, &Message{Topic: "churn", Body: body}, 0)
			require.NoError(t, err, "cycle %d", c)
			sent++
		}
		pc, err := s.NewPullConsumer("g", ConsumerOptions{ConsumeFromWhere: ConsumeFromFirstOffset})
		require.NoError(t, err)
		require.NoError(t, pc.Subscribe("churn", nil))
		msgs, err := pc.Poll(ctx, 32)
		require.NoError(t, err)
		require.NotEmpty(t, msgs, "cycle %d", c)
		require.NoError(t, pc.Commit())
		if c%2 == 0 {
			require.NoError(t, pc.Close()) // else Close closes it
		}
		require.NoError(t, s.Close(), "cycle %d", c)
		require.NoError(t, s.Close(), "a second Close")
		_, err = s.Put(ctx, &Message{Topic: "churn", Body: body}, 0)
		require.ErrorIs(t, err, ErrClosed)
	}
	require.Equal(t, baseFDs, openFDs(t), "descriptors left after %d cycles", cycles)
	require.Zero(t, mappingsUnder(t, dir), "mappings left")
	require.LessOrEqual(t, mqliteGoroutines(), baseG, "goroutines left")

	s, err := Open(dir, opts())
	require.NoError(t, err)
	n, err := s.MaxOffset("churn", 0)
	require.NoError(t, err)
	require.Equal(t, sent, n, "every message of every cycle is there")
	rep, err := s.Verify(ctx, nil)
	require.NoError(t, err)
	require.True(t, rep.OK, "%v", rep.Problems)
	require.NoError(t, s.Close())
}

// S27: Close while readers wait on empty queues and senders are sending.
func TestCloseRacingReadersAndSenders(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	for round := range 20 {
		s, err := Open(dir, &Options{SegmentSize: 64 << 10, ConsumeQueueEntries: 256, IndexSlots: 64, IndexEntries: 1024})
		require.NoError(t, err)
		for _, name := range []string{"race", "idle"} {
			if err := s.CreateTopic(name, TopicConfig{Queues: 8}); err != nil {
				require.ErrorIs(t, err, ErrTopicExists)
			}
		}
		ctx := context.Background()
		var wg sync.WaitGroup
		errs := make(chan error, 64)
		ready := make(chan struct{}, 16)
		for q := range 8 { // readers at the end of queues nobody sends to
			wg.Go(func() {
				ready <- struct{}{}
				from, err := s.MaxOffset("idle", q)
				if err == nil {
					_, err = s.ReadQueue(ctx, "idle", q, from, 1)
				}
				errs <- err
			})
		}
		for g := range 8 { // senders until the store closes
			wg.Go(func() {
				ready <- struct{}{}
				for i := 0; ; i++ {
					_, err := s.Put(ctx, &Message{Topic: "race", Body: []byte(fmt.Sprint(g, i))}, g)
					if err != nil {
						errs <- err
						return
					}
				}
			})
		}
		for range 16 {
			<-ready
		}
		require.NoError(t, s.Close(), "round %d", round)
		wg.Wait()
		close(errs)
		for err := range errs {
			if !errors.Is(err, ErrClosed) {
				t.Fatalf("round %d: %v, want ErrClosed", round, err)
			}
		}
	}
	require.Zero(t, mappingsUnder(t, dir))
}
