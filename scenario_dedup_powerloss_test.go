package mqlite

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mqlite/mqlite/clock"
	"github.com/mqlite/mqlite/vfs"
)

// A FlushAsync power loss loses the unflushed tail, IDs included: the
// producer re-sends everything it sent, and each ID ends up stored once:
// what survived answers as a duplicate, what was lost is stored again.
func TestPowerLossDedupResendStoresOnce(t *testing.T) {
	seed := plSeedValue(t)
	ctx := context.Background()
	const images = 30
	var dups, again int
	for img := range images {
		rng := rand.New(rand.NewPCG(seed, uint64(img)))
		ffs := vfs.NewFaulty(vfs.NewMem())
		clk := clock.NewFake(t0)
		o := plOptions(clk, 16<<10)
		o.Flush, o.DedupWindow = FlushAsync, time.Hour
		o.FlushInterval, o.FlushThoroughInterval, o.FlushLeastPages = 200*time.Millisecond, 2*time.Second, 1+rng.IntN(4)
		s, err := openFS(ffs, plDir, o)
		require.NoError(t, err)
		var ids []string
		for burst := 1 + rng.IntN(6); burst > 0; burst-- {
			for range 1 + rng.IntN(40) {
				id := fmt.Sprintf("i%d", len(ids))
				_, err := s.Put(ctx, &Message{Topic: "t", Body: []byte("body " + id), DedupID: id}, rng.IntN(2))
				require.NoError(t, err)
				ids = append(ids, id)
			}
			clk.Advance(o.FlushInterval)
		}
		image := ffs.Crash(rng, rng.Float64())
		s.Close()

		o2 := plOptions(clock.NewFake(t0.Add(time.Minute)), 16<<10)
		o2.DedupWindow = time.Hour
		s2, err := openFS(image, plDir, o2)
		require.NoError(t, err, "image %d", img)
		for _, id := range ids {
			r, err := s2.Put(ctx, &Message{Topic: "t", Body: []byte("body " + id), DedupID: id}, rng.IntN(2))
			require.NoError(t, err)
			if r.Duplicate {
				dups++
			} else {
				again++
			}
		}
		got := queueIDs(t, s2, "t")
		require.Len(t, got, len(ids), "image %d (seed %d)", img, seed)
		for id, n := range got {
			require.Equal(t, 1, n, "image %d (seed %d): %s", img, seed, id)
		}
		require.NoError(t, s2.Close())
	}
	t.Logf("%d images: %d re-sends were duplicates, %d lost messages stored again", images, dups, again)
	require.Positive(t, dups)
	require.Positive(t, again, "some images lose an unflushed tail")
}
