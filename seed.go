package mqlite

import "github.com/mqlite/mqlite/internal/splitmix"

// Options.Seed: every random choice of the store and its producers comes
// from here. Each consumer of randomness gets its own stream, derived
// from the seed and a purpose (and, for producers, their creation
// order), so that one stream's draws never shift another's: a script
// that creates the same producers in the same order draws the same
// values whatever runs in the background. The CommitLog's end at Open
// is mixed in too: a store reopened with the same seed after it stored
// something does not repeat the unique keys and transaction IDs of its
// previous run, and the same runs still give the same values.

// Purposes of derived seeds: the second argument of deriveSeed.
const (
	seedUniqPrefix = iota + 1
	seedProducer
	seedTxn
	seedOpen
)

// deriveSeed returns a non-zero 64-bit value from seed, purpose and n
// (two SplitMix64 steps over their combination): distinct inputs give
// unrelated outputs.
func deriveSeed(seed int64, purpose, n uint64) uint64 {
	z := uint64(seed) ^ purpose*splitmix.Gamma ^ n*0xbf58476d1ce4e5b9
	for range 2 {
		z = splitmix.Mix(z + splitmix.Gamma)
	}
	return max(z, 1)
}

// seedAt sets the store's seeds once the CommitLog is recovered, its end
// at end: the base of every derived seed, and the unique-key prefix. A
// store without a seed keeps its random prefix.
func (s *Store) seedAt(end int64) {
	if s.opts.Seed == 0 {
		return
	}
	s.seedBase = int64(deriveSeed(s.opts.Seed, seedOpen, uint64(end)))
	s.uniqPrefix = uint32(deriveSeed(s.seedBase, seedUniqPrefix, 0) >> 32)
	putHex(s.uniqHex[:], uint64(s.uniqPrefix))
}

// Seed gives each new producer its own round-robin seed, derived from
// Options.Seed and the producer's creation order; 0 when the store has
// no seed (the producer then starts at random). See producer.Seeder.
func (p producerStore) Seed() uint64 {
	if p.s.seedBase == 0 {
		return 0
	}
	return deriveSeed(p.s.seedBase, seedProducer, p.s.producerSeq.Add(1))
}

// txnSeed is the transaction service's seed (0: none).
func (s *Store) txnSeed() uint64 {
	if s.seedBase == 0 {
		return 0
	}
	return deriveSeed(s.seedBase, seedTxn, 0)
}
