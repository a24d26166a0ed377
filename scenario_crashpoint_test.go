package mqlite

// S7 of the reliability plan, crash at every failpoint, taken further: at
// every operation of the file seam. The script of scenario_ioerr_test.go (Open, 50
// FlushSync Puts across two segment rolls, a Poll and an offset commit, a
// committed transaction, Close) runs once per operation index i with no
// fault; as operation i begins, two crash images of the directory are
// taken: what a kill -9 leaves (every byte written and every directory
// change, synced or not) and what a power loss leaves (the synced state
// plus a random share of the rest). Each must open, hold every message
// acknowledged before the image intact, pass Verify, and hold no committed
// offset beyond the commit under way (under FlushAsync, a power-loss image
// need not hold what no flush covered). Unlike RocketMQ's named failpoints,
// no point can be forgotten: a new file operation is a new crash point.

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mqlite/mqlite/vfs"
)

// crashImage is a directory as a crash at one operation leaves it, with
// what had been acknowledged and committed when it was taken.
type crashImage struct {
	fs         *vfs.MemFS
	kind       string // "kill" or "power loss"
	acked      int    // the first acked messages of the run were acknowledged
	committing int64
}

// crashAt takes the images as operation at begins.
type crashAt struct {
	mu    sync.Mutex
	at    int
	ops   int
	where string
	imgs  []crashImage
	ffs   *vfs.Faulty
	run   *ioRun
	rng   *rand.Rand
}

func (c *crashAt) inject(op vfs.Op, path string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	i := c.ops
	c.ops++
	if i != c.at {
		return nil
	}
	c.where = fmt.Sprintf("op %d (%s %s)", i, opName(op), path)
	acked, committing := c.run.progress()
	c.imgs = append(c.imgs,
		crashImage{fs: c.ffs.Crash(c.rng, 1), kind: "kill", acked: acked, committing: committing},
		crashImage{fs: c.ffs.Crash(c.rng, c.rng.Float64()), kind: "power loss", acked: acked, committing: committing})
	return nil
}

func TestCrashAtEveryOperation(t *testing.T) {
	t.Run("plain", func(t *testing.T) { crashAtEveryOperation(t, false, false) })
	// With a retention pass at the end removing the oldest segments (the
	// cap is two): a crash in the middle of the removal.
	t.Run("retention", func(t *testing.T) { crashAtEveryOperation(t, true, false) })
	// FlushAsync: a kill -9 still loses nothing acknowledged (the page
	// cache keeps what was written through the mappings); a power loss may
	// lose what no flush covered, but what the store then returns is
	// intact and consistent.
	t.Run("async", func(t *testing.T) { crashAtEveryOperation(t, false, true) })
}

func crashAtEveryOperation(t *testing.T, capped, async bool) {
	count := &ioInjector{at: -1}
	ffs := vfs.NewFaulty(vfs.NewMem())
	ffs.SetInjector(count.inject)
	base := newIORun()
	base.capped, base.async = capped, async
	ioScriptRun(t, ffs, rand.New(rand.NewPCG(7, 0)), base)
	require.Empty(t, base.problems)
	require.Len(t, base.acked, ioPuts+1)
	if capped {
		require.Positive(t, base.cleaned, "the retention pass removes segments")
	}
	n := count.ops
	require.Greater(t, n, 150, "the script runs through the fault seam")

	var points, images, checked int
	var violations []string
	for i := 0; ; i++ {
		ffs := vfs.NewFaulty(vfs.NewMem())
		run := newIORun()
		run.capped, run.async = capped, async
		c := &crashAt{at: i, ffs: ffs, run: run, rng: rand.New(rand.NewPCG(7, uint64(i)))}
		ffs.SetInjector(c.inject)
		ioScriptRun(t, ffs, rand.New(rand.NewPCG(7, uint64(i))), run)
		ffs.SetInjector(nil)
		require.Zero(t, mqliteGoroutines(), "crash at %s: goroutines left", c.where)
		for _, p := range run.problems {
			violations = append(violations, fmt.Sprintf("run with a crash image at %s: %s", c.where, p))
		}
		if len(c.imgs) == 0 {
			if i >= n {
				break // the interleaving of background work varies the count a little
			}
			continue
		}
		points++
		require.Len(t, run.acked, ioPuts+1, "no fault: every put is acknowledged")
		require.Equal(t, base.cleaned, run.cleaned, "no fault: the retention pass removes as much")
		for _, img := range c.imgs {
			images++
			at := &ioRun{acked: run.acked[:img.acked], committed: img.committing, capped: capped}
			if async && img.kind != "kill" {
				at.acked = nil
			}
			checked += len(at.acked)
			for _, p := range ioReopen(img.fs, at, false) {
				violations = append(violations, fmt.Sprintf("%s at %s: %s", img.kind, c.where, p))
			}
		}
	}
	t.Logf("%d operations counted, crash points %d, images %d, acknowledged messages checked %d, violations %d",
		n, points, images, checked, len(violations))
	for j, v := range violations {
		if j == 50 {
			t.Errorf("... and %d more", len(violations)-j)
			break
		}
		t.Error(v)
	}
}
