//go:build linux

package mqlite

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func retentionOptions() *Options {
	return &Options{SegmentSize: 16 << 10, ConsumeQueueEntries: 64, IndexSlots: 64, IndexEntries: 256,
		Retention: time.Nanosecond, DeleteHour: farHour(), CleanRatio: 1, ForceCleanRatio: 1}
}

// TestChildRetention sends to two queues, deletes expired segments in a
// loop (everything sealed is expired) printing "min log q0 q1 deleted"
// after each pass, and reads the oldest messages all the while, until it is killed.
func TestChildRetention(t *testing.T) {
	dir := childDir(t, "TestChildRetention")
	s, err := Open(dir, retentionOptions())
	if err != nil {
		childFail(t, "open: %v", err)
	}
	defer s.Close()
	ctx := context.Background()
	if _, err := s.Put(ctx, &Message{Topic: "r", Body: []byte("first")}, 0); err != nil && !errors.Is(err, ErrTopicExists) {
		childFail(t, "put: %v", err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	defer func() { close(stop); wg.Wait() }()
	wg.Go(func() { // producer
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := s.Put(ctx, &Message{Topic: "r", Body: body(i)}, i%2); err != nil {
				childFail(t, "put: %v", err)
			}
		}
	})
	wg.Go(func() { // a reader of old data, racing the deletions
		for {
			select {
			case <-stop:
				return
			default:
			}
			min, err := s.MinOffset("r", 0)
			if err != nil {
				childFail(t, "min: %v", err)
			}
			for m, err := range s.Messages("r", 0, min) {
				if errors.Is(err, ErrNotFound) {
					break // deleted under the reader: the documented outcome
				}
				if err != nil || m.QueueOffset < min {
					childFail(t, "read at %d: %v", min, err)
				}
			}
		}
	})
	for pass := 0; ; pass++ {
		rep, err := s.CleanExpired()
		if err != nil {
			childFail(t, "clean: %v", err)
		}
		q0, err0 := s.MinOffset("r", 0)
		q1, err1 := s.MinOffset("r", 1)
		if err := errors.Join(err0, err1); err != nil {
			childFail(t, "min: %v", err)
		}
		emit("min %d %d %d %d", s.log.MinOffset(), q0, q1, rep.Segments)
	}
}

// S36: retention deletes segments under load while a reader walks the
// oldest messages, and the process is killed at random, often in the
// middle of a deletion. After each kill the store opens, its minimum
// offsets (CommitLog and ConsumeQueue) are at or past the last ones
// printed, it verifies clean, and the reader gets messages from there.
func TestRetentionKill9(t *testing.T) {
	seed := crashSeedValue(t)
	rng := rand.New(rand.NewPCG(seed, 36))
	dir := filepath.Join(t.TempDir(), "store")
	var last [3]int64
	passes, deleted := 0, 0
	const cycles = 6
	for cycle := range cycles {
		c, err := startChild(t, "TestChildRetention", dir, nil)
		require.NoError(t, err)
		// Killed after 2 to 16 passes that deleted segments.
		for n := 2 + rng.IntN(15); n > 0; passes++ {
			f := c.expect("min")
			if d, _ := strconv.Atoi(f[3]); d > 0 {
				deleted += d
				n--
			}
			var got [3]int64
			for i := range got {
				got[i], err = strconv.ParseInt(f[i], 10, 64)
				require.NoError(t, err)
				require.GreaterOrEqual(t, got[i], last[i], "cycle %d: min %d moved back while running", cycle, i)
			}
			last = got
		}
		for _, line := range c.kill() {
			if f := splitWord(line, "min"); len(f) == 4 {
				for i := range last {
					v, _ := strconv.ParseInt(f[i], 10, 64)
					last[i] = max(last[i], v)
				}
			}
		}
		what := fmt.Sprintf("seed %d cycle %d", seed, cycle)
		s, err := Open(dir, retentionOptions())
		require.NoError(t, err, what)
		require.GreaterOrEqual(t, s.log.MinOffset(), last[0], "%s: the CommitLog minimum moved back", what)
		for q := range 2 {
			min, err := s.MinOffset("r", q)
			require.NoError(t, err)
			require.GreaterOrEqual(t, min, last[1+q], "%s: the minimum of queue %d moved back", what, q)
			for m, err := range s.Messages("r", q, min) {
				require.NoError(t, err, what)
				require.Equal(t, min, m.QueueOffset, what)
				break
			}
		}
		rep, err := s.Verify(context.Background(), nil)
		require.NoError(t, err)
		require.True(t, rep.OK, "%s: %v", what, rep.Problems)
		require.NoError(t, s.Close())
	}
	t.Logf("%d kill -9 cycles, %d retention passes, %d segments deleted, CommitLog minimum %d at the end, SIGBUS 0",
		cycles, passes, deleted, last[0])
}
