//go:build linux

package mqlite

// The dedup window under kill -9: a child process sends messages with
// DedupIDs and prints each acknowledgement; the parent kills it at a
// random moment and starts the next child on the same directory with every
// ID it has not seen acknowledged, as a producer that retries would. Some
// of those were stored before the kill: the rebuilt window must answer
// them as duplicates, so that every ID is stored exactly once.

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

var dedupCycles = flag.Int("dedup.cycles", 8, "kill -9 cycles of TestKill9DedupResend (CI: 50)")

const (
	dedupTodoEnv  = "MQLITE_DEDUP_TODO"
	dedupFlushEnv = "MQLITE_DEDUP_FLUSH"
	dedupTopicN   = "dedup"
)

func dedupCrashOptions(flush FlushMode) *Options {
	return &Options{Flush: flush, DedupWindow: time.Hour, SegmentSize: 64 << 10, ConsumeQueueEntries: 4096,
		IndexSlots: 1024, IndexEntries: 8192}
}

// TestDedupCrashChild sends the IDs listed in the todo file, singly and in
// batches of three, and prints "ack ID OFFSET DUP" for each.
func TestDedupCrashChild(t *testing.T) {
	dir := childDir(t, "TestDedupCrashChild")
	raw, err := os.ReadFile(os.Getenv(dedupTodoEnv))
	if err != nil {
		childFail(t, "todo: %v", err)
	}
	todo := strings.Fields(string(raw))
	flush := FlushAsync
	if os.Getenv(dedupFlushEnv) == "sync" {
		flush = FlushSync
	}
	s, err := Open(dir, dedupCrashOptions(flush))
	if err != nil {
		childFail(t, "open: %v", err)
	}
	emit("opened")
	ctx := context.Background()
	const senders = 4
	var wg sync.WaitGroup
	for g := range senders {
		wg.Go(func() {
			var mine []string
			for i := g; i < len(todo); i += senders {
				mine = append(mine, todo[i])
			}
			for len(mine) > 0 {
				n := 1
				if len(mine) >= 3 && len(mine)%2 == 0 {
					n = 3
				}
				msgs := make([]*Message, n)
				for i := range msgs {
					msgs[i] = &Message{Topic: dedupTopicN, Body: []byte("body-" + mine[i]), DedupID: mine[i]}
				}
				rs, err := s.PutBatch(ctx, msgs, g%2)
				if err != nil {
					emit("fail put: %v", err)
					return
				}
				for i, r := range rs {
					emit("ack %s %d %t", mine[i], r.Offset, r.Duplicate)
				}
				mine = mine[n:]
			}
		})
	}
	wg.Wait()
	if err := s.Close(); err != nil {
		childFail(t, "close: %v", err)
	}
	emit("done")
}

func TestKill9DedupResend(t *testing.T) {
	if testing.Short() {
		t.Skip("child processes")
	}
	seed := rand.Uint64()
	rng := rand.New(rand.NewPCG(seed, 7))
	base := t.TempDir()
	dir := filepath.Join(base, "store")
	// Each cycle adds 100 new IDs to those not acknowledged yet.
	total := 100 * (*dedupCycles + 1)
	acked := map[string]int64{} // ID -> offset of the stored message
	dups := 0
	record := func(f []string) {
		require.Len(t, f, 3, "ack line %q", f)
		off, err := strconv.ParseInt(f[1], 10, 64)
		require.NoError(t, err)
		if prev, ok := acked[f[0]]; ok {
			require.Equal(t, prev, off, "seed %d: %s acknowledged at two offsets", seed, f[0])
		}
		acked[f[0]] = off
		if f[2] == "true" {
			dups++
		}
	}
	for cycle := 0; cycle <= *dedupCycles; cycle++ {
		var todo []string
		for i := range 100 * (cycle + 1) {
			if id := fmt.Sprintf("id-%04d", i); !hasKey(acked, id) {
				todo = append(todo, id)
			}
		}
		todoPath := filepath.Join(base, "todo")
		require.NoError(t, os.WriteFile(todoPath, []byte(strings.Join(todo, "\n")), 0o600))
		flush := []string{"sync", "async"}[cycle%2]
		c, err := startChild(t, "TestDedupCrashChild", dir, nil, dedupTodoEnv+"="+todoPath, dedupFlushEnv+"="+flush)
		require.NoError(t, err)
		c.expect("opened")
		var rest []string
		if cycle < *dedupCycles {
			for range rng.IntN(len(todo) + 1) {
				record(c.expect("ack"))
			}
			rest = c.kill()
		} else {
			rest = c.wait()
		}
		for _, line := range rest {
			if f := strings.Fields(line); len(f) > 0 && f[0] == "ack" {
				record(f[1:])
			}
		}
	}

	s, err := Open(dir, dedupCrashOptions(FlushAsync))
	require.NoError(t, err)
	defer s.Close()
	stored := map[string]int64{}
	for q := range 2 {
		for m, err := range s.Messages(dedupTopicN, q, 0) {
			require.NoError(t, err)
			_, twice := stored[m.DedupID]
			require.False(t, twice, "seed %d: %s stored twice", seed, m.DedupID)
			stored[m.DedupID] = m.CommitLogOffset
			require.Equal(t, "body-"+m.DedupID, string(m.Body))
		}
	}
	require.Equal(t, acked, stored, "seed %d: every ID stored once, where its acknowledgement said", seed)
	t.Logf("seed %d: %d IDs, %d re-sends answered as duplicates", seed, total, dups)
}

func hasKey(m map[string]int64, k string) bool {
	_, ok := m[k]
	return ok
}
