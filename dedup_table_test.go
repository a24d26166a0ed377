package mqlite

import (
	"context"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The table against a map, under the window's churn: entries die as the
// live range moves on (never deleted by hand), hashes cluster (many share
// home slots), and the table sweeps and grows on its own.
func TestIDTableMatchesAMap(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var tab idTable
	ref := map[uint64]uint64{} // hash -> seq of its last insert
	var head, next uint64      // live seqs: [head, next)
	live := func(seq uint64) bool { return seq >= head && seq < next }
	key := func() uint64 {
		if rng.IntN(2) == 0 {
			return uint64(rng.IntN(64)) << 32 // clusters: same low bits
		}
		return rng.Uint64N(50000)
	}
	for i := range 300000 {
		h := key()
		if _, ok := tab.get(h, head, next); !ok {
			tab.put(h, next, head, next)
			next++
			ref[tableHash(h)] = next - 1
		}
		for next-head > 2000 || (rng.IntN(3) == 0 && head < next) { // the window moves on
			head++
		}
		if i%997 == 0 {
			for k, seq := range ref {
				got, ok := tab.get(k, head, next)
				if !live(seq) {
					require.False(t, ok, "step %d: %d is dead", i, k)
					delete(ref, k)
					continue
				}
				require.True(t, ok, "step %d: %d missing", i, k)
				require.Equal(t, seq, got)
			}
			require.LessOrEqual(t, tab.used, len(tab.slots)*3/4+1)
		}
	}
	_, ok := tab.get(1<<60, head, next)
	require.False(t, ok)
	require.Less(t, len(tab.slots), 1<<14, "sweeps keep the table near its live size")
}

// BenchmarkDedupWindow: the window's own cost for a send of a new ID
// (newClaim, claim, settle: the hash, the lookup and the insert, the
// oldest forgotten) with 1 M IDs remembered, no CommitLog.
func BenchmarkDedupWindow(b *testing.B) {
	const window = 1 << 20
	s := &Store{dedup: newDedupWindow(time.Hour, window)}
	m := &Message{Topic: "bench"}
	var buf []byte
	send := func(i int) {
		buf = strconv.AppendInt(append(buf[:0], "order-"...), int64(i), 10)
		m.DedupID = string(buf)
		var c dedupClaim
		if !s.newClaim(m, &c) {
			b.Fatal("no claim")
		}
		if _, dup, err := s.claim(context.Background(), &c, 1); dup || err != nil {
			b.Fatal("a new ID found", err)
		}
		s.settle(&c, PutResult{Offset: int64(i) * 256, StoreTime: time.UnixMilli(1)}, nil)
	}
	for i := range window {
		send(i)
	}
	b.ResetTimer()
	for i := range b.N {
		send(window + i)
	}
}
