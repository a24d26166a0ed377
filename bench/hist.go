package bench

import (
	"math/bits"
	"time"
)

// histSub is the number of sub-buckets per power of two: values are kept
// with 1/64 (~1.6%) relative precision.
const (
	histSubBits = 6
	histSub     = 1 << histSubBits
	histBuckets = (64-histSubBits)*histSub + 2*histSub
)

// Hist is a log-linear latency histogram in nanoseconds (HDR-style): no
// allocation per record, mergeable, quantiles within ~1.6%. Not safe for
// concurrent use: give each goroutine its own and Merge them.
type Hist struct {
	counts [histBuckets]uint64
	n      uint64
	sum    uint64
	max    uint64
}

func histIndex(v uint64) int {
	if v < 2*histSub {
		return int(v)
	}
	shift := bits.Len64(v) - histSubBits - 1
	return shift*histSub + int(v>>shift)
}

// histLow is the smallest value of bucket i.
func histLow(i int) uint64 {
	if i < 2*histSub {
		return uint64(i)
	}
	shift := i/histSub - 1
	return uint64(i-shift*histSub) << shift
}

// Record adds one duration (negative counts as zero).
func (h *Hist) Record(d time.Duration) {
	v := uint64(max(d, 0))
	h.counts[histIndex(v)]++
	h.n++
	h.sum += v
	h.max = max(h.max, v)
}

// Merge adds o's records to h.
func (h *Hist) Merge(o *Hist) {
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.n += o.n
	h.sum += o.sum
	h.max = max(h.max, o.max)
}

// Count is the number of records.
func (h *Hist) Count() uint64 { return h.n }

// Mean is the average record (0 if none).
func (h *Hist) Mean() time.Duration {
	if h.n == 0 {
		return 0
	}
	return time.Duration(h.sum / h.n)
}

// Quantile returns the q-quantile (0 < q <= 1): the midpoint of the bucket
// holding it, capped at the largest record; the exact largest record for
// q = 1. 0 if empty.
func (h *Hist) Quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	rank := uint64(q*float64(h.n) + 0.5)
	rank = min(max(rank, 1), h.n)
	if rank == h.n {
		return time.Duration(h.max)
	}
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			lo, hi := histLow(i), histLow(i+1)
			return time.Duration(min(lo+(hi-lo)/2, h.max))
		}
	}
	return time.Duration(h.max)
}
