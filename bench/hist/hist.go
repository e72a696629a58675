// Package hist is the latency histogram of the load generator: HDR-style
// logarithmic buckets (each power of two split into 128 linear
// sub-buckets, so a value is kept within 1/128 of itself) over nanoseconds
// from 1 ns to about 68 s, with lock-free recording from many goroutines.
//
// Recording is the generator's hot path: Record is a few integer operations
// and two atomic adds, and allocates nothing.
package hist

import (
	"math"
	"math/bits"
	"sync/atomic"
	"time"
)

const (
	subBits  = 7 // 2^7 sub-buckets per power of two: relative error below 0.8 %
	subCount = 1 << subBits
	maxShift = 29 // values up to 2^(subBits+1+maxShift) - 1 ns, about 68.7 s
	// Buckets is the number of buckets of a Histogram.
	Buckets = (maxShift + 2) << subBits
	// MaxValue is the largest value a Histogram tells apart; larger values
	// are counted in the last bucket (and still reach Max exactly).
	MaxValue = int64(1)<<(subBits+1+maxShift) - 1
)

// Histogram counts durations. The zero value is empty and ready; it is
// safe for concurrent use.
type Histogram struct {
	counts [Buckets]atomic.Uint64
	total  atomic.Uint64
	sum    atomic.Int64
	max    atomic.Int64
	min    atomic.Int64 // stored as MaxValue-min+1 so that the zero value means none
}

// index returns the bucket of v (0 <= v <= MaxValue).
func index(v int64) int {
	if v < subCount {
		return int(v)
	}
	shift := bits.Len64(uint64(v)) - subBits - 1
	return (shift+1)<<subBits + int(v>>shift) - subCount
}

// bounds returns the smallest and largest value of bucket i.
func bounds(i int) (lo, hi int64) {
	if i < subCount {
		return int64(i), int64(i)
	}
	shift := i>>subBits - 1
	sub := int64(i - (shift+1)<<subBits + subCount)
	lo = sub << shift
	return lo, lo + 1<<shift - 1
}

// Record counts one duration; negative durations count as 0.
func (h *Histogram) Record(d time.Duration) {
	v := int64(d)
	if v < 0 {
		v = 0
	}
	i := Buckets - 1
	if v <= MaxValue {
		i = index(v)
	}
	h.counts[i].Add(1)
	h.total.Add(1)
	h.sum.Add(v)
	for m := h.max.Load(); v > m && !h.max.CompareAndSwap(m, v); m = h.max.Load() {
	}
	enc := MaxValue - min(v, MaxValue) + 1
	for m := h.min.Load(); enc > m && !h.min.CompareAndSwap(m, enc); m = h.min.Load() {
	}
}

// Count returns how many durations were recorded.
func (h *Histogram) Count() uint64 { return h.total.Load() }

// Max returns the largest recorded duration, exactly.
func (h *Histogram) Max() time.Duration { return time.Duration(h.max.Load()) }

// Min returns the smallest recorded duration (0 when empty), within the
// bucket precision for values above MaxValue.
func (h *Histogram) Min() time.Duration {
	enc := h.min.Load()
	if enc == 0 {
		return 0
	}
	return time.Duration(MaxValue - enc + 1)
}

// Mean returns the average recorded duration (0 when empty).
func (h *Histogram) Mean() time.Duration {
	n := h.total.Load()
	if n == 0 {
		return 0
	}
	return time.Duration(h.sum.Load() / int64(n))
}

// Quantile returns the smallest duration d such that at least a fraction q
// (0 < q <= 1) of the recorded durations are at most d, within the bucket
// precision: it answers the upper bound of the bucket holding that rank,
// never more than Max. It returns 0 when the histogram is empty.
func (h *Histogram) Quantile(q float64) time.Duration {
	n := h.total.Load()
	if n == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(n)))
	rank = max(1, min(rank, n))
	var seen uint64
	for i := range h.counts {
		seen += h.counts[i].Load()
		if seen >= rank {
			_, hi := bounds(i)
			return time.Duration(min(hi, h.max.Load()))
		}
	}
	return h.Max()
}

// Merge adds every count of o to h. o should not change meanwhile.
func (h *Histogram) Merge(o *Histogram) {
	for i := range o.counts {
		if c := o.counts[i].Load(); c != 0 {
			h.counts[i].Add(c)
		}
	}
	h.total.Add(o.total.Load())
	h.sum.Add(o.sum.Load())
	if m := o.max.Load(); m > h.max.Load() {
		h.max.Store(m)
	}
	if m := o.min.Load(); m > h.min.Load() {
		h.min.Store(m)
	}
}

// Summary is a histogram's digest as reports show it.
type Summary struct {
	Count uint64        `json:"count"`
	Min   time.Duration `json:"minNs"`
	Mean  time.Duration `json:"meanNs"`
	P50   time.Duration `json:"p50Ns"`
	P90   time.Duration `json:"p90Ns"`
	P99   time.Duration `json:"p99Ns"`
	P999  time.Duration `json:"p999Ns"`
	Max   time.Duration `json:"maxNs"`
}

// Summarize returns h's digest.
func (h *Histogram) Summarize() Summary {
	return Summary{
		Count: h.Count(), Min: h.Min(), Mean: h.Mean(),
		P50: h.Quantile(0.50), P90: h.Quantile(0.90), P99: h.Quantile(0.99), P999: h.Quantile(0.999),
		Max: h.Max(),
	}
}
