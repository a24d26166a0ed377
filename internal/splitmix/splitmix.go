// Package splitmix owns the one 64-bit mixing function the store's seeded
// streams share (SplitMix64's finalizer), so that seeds derived from
// related inputs (a seed and a counter) are unrelated.
package splitmix

// Gamma is SplitMix64's increment, the odd constant nearest 2^64 divided
// by the golden ratio.
const Gamma = 0x9e3779b97f4a7c15

// Mix is SplitMix64's finalizer: a bijection of the 64-bit values that
// spreads every input bit over the whole output.
func Mix(z uint64) uint64 {
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}
