package hist

import (
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"
)

// TestBuckets checks that buckets tile the range without gaps or overlaps
// and that each value lands in the bucket whose bounds hold it.
func TestBuckets(t *testing.T) {
	var prevHi int64 = -1
	for i := range Buckets {
		lo, hi := bounds(i)
		if lo != prevHi+1 || hi < lo {
			t.Fatalf("bucket %d = [%d, %d], previous ended at %d", i, lo, hi, prevHi)
		}
		if index(lo) != i || index(hi) != i {
			t.Fatalf("bucket %d = [%d, %d]: index(lo) = %d, index(hi) = %d", i, lo, hi, index(lo), index(hi))
		}
		if lo >= subCount && float64(hi-lo+1)/float64(lo) > 1.0/subCount {
			t.Fatalf("bucket %d = [%d, %d] is wider than 1/%d of its values", i, lo, hi, subCount)
		}
		prevHi = hi
	}
	if prevHi != MaxValue {
		t.Fatalf("last bucket ends at %d, want MaxValue %d", prevHi, MaxValue)
	}
}

// exactQuantile is the nearest-rank quantile of sorted values.
func exactQuantile(sorted []time.Duration, q float64) time.Duration {
	rank := max(1, int(math.Ceil(q*float64(len(sorted)))))
	return sorted[rank-1]
}

// TestQuantilesKnownDistributions compares the histogram's percentiles with
// the exact ones of a uniform, an exponential and a bimodal sample.
func TestQuantilesKnownDistributions(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	samples := map[string]func() time.Duration{
		"uniform 1ms..100ms": func() time.Duration { return time.Millisecond + time.Duration(r.Int64N(int64(99*time.Millisecond))) },
		"exponential mean 2ms": func() time.Duration {
			return time.Duration(r.ExpFloat64() * float64(2*time.Millisecond))
		},
		"bimodal 300µs / 40ms": func() time.Duration {
			if r.IntN(100) < 97 {
				return 300*time.Microsecond + time.Duration(r.Int64N(int64(50*time.Microsecond)))
			}
			return 40*time.Millisecond + time.Duration(r.Int64N(int64(10*time.Millisecond)))
		},
	}
	for name, draw := range samples {
		t.Run(name, func(t *testing.T) {
			var h Histogram
			vals := make([]time.Duration, 200_000)
			for i := range vals {
				vals[i] = draw()
				h.Record(vals[i])
			}
			slices.Sort(vals)
			for _, q := range []float64{0.5, 0.9, 0.99, 0.999, 1} {
				got, want := h.Quantile(q), exactQuantile(vals, q)
				if got < want || float64(got-want) > float64(want)/subCount+1 {
					t.Errorf("q%.3f = %v, exact %v: off by more than 1/%d", q, got, want, subCount)
				}
			}
			if h.Max() != vals[len(vals)-1] || h.Min() != vals[0] || h.Count() != uint64(len(vals)) {
				t.Errorf("max %v min %v count %d, want %v %v %d", h.Max(), h.Min(), h.Count(), vals[len(vals)-1], vals[0], len(vals))
			}
		})
	}
}

// TestSmallCounts checks the nearest-rank rule where rounding matters.
func TestSmallCounts(t *testing.T) {
	var h Histogram
	if h.Quantile(0.5) != 0 || h.Max() != 0 || h.Min() != 0 || h.Mean() != 0 {
		t.Fatal("an empty histogram reports values")
	}
	for _, v := range []time.Duration{10, 20, 30, 40, 50, 60, 70, 80, 90, 100} {
		h.Record(v)
	}
	f := func(q float64, want time.Duration) {
		t.Helper()
		if got := h.Quantile(q); got != want {
			t.Errorf("Quantile(%v) = %v, want %v", q, got, want)
		}
	}
	f(0.5, 50)
	f(0.9, 90)
	f(0.91, 100)
	f(0.999, 100)
	f(1, 100)
	if h.Mean() != 55 {
		t.Errorf("mean %v, want 55", h.Mean())
	}
}

// TestOutOfRange checks that negative and huge values are kept, clamped.
func TestOutOfRange(t *testing.T) {
	var h Histogram
	h.Record(-5)
	h.Record(time.Duration(MaxValue) * 4)
	if h.Min() != 0 || h.Max() != time.Duration(MaxValue)*4 || h.Quantile(1) != time.Duration(MaxValue) {
		t.Errorf("min %v max %v q1 %v", h.Min(), h.Max(), h.Quantile(1))
	}
}

// TestConcurrentMerge records from many goroutines into shards and merges
// them: nothing is lost.
func TestConcurrentMerge(t *testing.T) {
	var shared, merged Histogram
	shards := make([]Histogram, 8)
	var wg sync.WaitGroup
	for s := range shards {
		wg.Go(func() {
			for i := range 10_000 {
				d := time.Duration(i*(s+1)) * time.Microsecond
				shared.Record(d)
				shards[s].Record(d)
			}
		})
	}
	wg.Wait()
	for s := range shards {
		merged.Merge(&shards[s])
	}
	if shared.Summarize() != merged.Summarize() || shared.Count() != 80_000 {
		t.Errorf("shared %+v\nmerged %+v", shared.Summarize(), merged.Summarize())
	}
}

func TestRecordAllocs(t *testing.T) {
	var h Histogram
	if n := testing.AllocsPerRun(1000, func() { h.Record(1234567) }); n != 0 {
		t.Errorf("Record allocates %v times", n)
	}
}

func BenchmarkRecord(b *testing.B) {
	var h Histogram
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		d := time.Duration(1)
		for pb.Next() {
			h.Record(d)
			d = d*7 + 12345 // spread over buckets
			d %= time.Second
		}
	})
}
