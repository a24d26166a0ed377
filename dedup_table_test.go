package mqlite

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// The table against a map, under the window's churn and with clustered
// hashes (many sharing home slots), deletions of stale offsets included.
func TestIDTableMatchesAMap(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var tab idTable
	ref := map[uint64]int64{}
	key := func() uint64 {
		if rng.IntN(2) == 0 {
			return uint64(rng.IntN(64)) << 32 // clusters: same low bits
		}
		return rng.Uint64N(5000)
	}
	for i := range 200000 {
		h := key()
		switch rng.IntN(3) {
		case 0, 1:
			tab.put(h, int64(i))
			ref[tableHash(h)] = int64(i)
		case 2:
			off := ref[tableHash(h)]
			if rng.IntN(4) == 0 {
				off++ // stale: must not delete
			}
			tab.del(h, off)
			if ref[tableHash(h)] == off {
				delete(ref, tableHash(h))
			}
		}
		if i%997 == 0 {
			require.Equal(t, len(ref), tab.len())
			for k, v := range ref {
				got, ok := tab.get(k)
				require.True(t, ok, "step %d: %d missing", i, k)
				require.Equal(t, v, got)
			}
		}
	}
	_, ok := tab.get(1 << 60)
	require.False(t, ok)
}
