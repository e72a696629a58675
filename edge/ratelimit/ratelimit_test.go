package ratelimit

import (
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/slipverify/slipverify/core/lib/testnet"
)

// clock is a fake clock, safe for concurrent reads.
type clock = testnet.Clock

func newClock() *clock { return testnet.NewClock(time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)) }

func TestTakeBurstAndRefill(t *testing.T) {
	c := newClock()
	l := New(c.Now)
	check := func(d Decision, want Decision) {
		t.Helper()
		if d != want {
			t.Fatalf("got %+v, want %+v", d, want)
		}
	}
	// A new key starts full: ten requests at once at 10/s.
	for i := range 10 {
		check(l.Take("b1/bank", 10), Decision{Allowed: true, Limit: 10, Remaining: 9 - i, Reset: 1})
	}
	check(l.Take("b1/bank", 10), Decision{Limit: 10, Remaining: 0, Reset: 1, RetryAfter: 1})
	// The other budget and other branches are independent.
	check(l.Take("b1/wallet", 10), Decision{Allowed: true, Limit: 10, Remaining: 9, Reset: 1})
	check(l.Take("b2/bank", 10), Decision{Allowed: true, Limit: 10, Remaining: 9, Reset: 1})

	// Continuous refill, no window: one token per 100 ms.
	c.Advance(99 * time.Millisecond)
	check(l.Take("b1/bank", 10), Decision{Limit: 10, Remaining: 0, Reset: 1, RetryAfter: 1})
	c.Advance(time.Millisecond)
	check(l.Take("b1/bank", 10), Decision{Allowed: true, Limit: 10, Remaining: 0, Reset: 1})
	c.Advance(550 * time.Millisecond)
	for i := range 5 {
		check(l.Take("b1/bank", 10), Decision{Allowed: true, Limit: 10, Remaining: 4 - i, Reset: 1})
	}
	check(l.Take("b1/bank", 10), Decision{Limit: 10, Remaining: 0, Reset: 1, RetryAfter: 1})

	// Reset counts whole seconds until full, rounded up; 0 only when full.
	c.Advance(10 * time.Second)
	check(l.Take("slow", 1), Decision{Allowed: true, Limit: 1, Remaining: 0, Reset: 1})
	c.Advance(999 * time.Millisecond)
	check(l.Take("slow", 1), Decision{Limit: 1, Remaining: 0, Reset: 1, RetryAfter: 1})
	c.Advance(time.Millisecond)
	check(l.Take("slow", 1), Decision{Allowed: true, Limit: 1, Remaining: 0, Reset: 1})
}

// TestTakeLongRun checks the token-bucket bound over a long run at a steady
// overload: in any span d, at most capacity + rate×d requests pass, and the
// limiter does not pass fewer either.
func TestTakeLongRun(t *testing.T) {
	c := newClock()
	l := New(c.Now)
	const rate = 100
	allowed := 0
	var times []int64
	for range 10_000 { // one request per millisecond for 10 s
		if d := l.Take("k", rate); d.Allowed {
			allowed++
			times = append(times, c.Now().UnixNano())
		} else if d.RetryAfter < 1 || d.Remaining != 0 {
			t.Fatalf("denied with %+v", d)
		}
		c.Advance(time.Millisecond)
	}
	if want := rate + rate*10; allowed < want-1 || allowed > want {
		t.Fatalf("allowed %d in 10 s at %d/s, want about %d", allowed, rate, want)
	}
	// Sliding one-second windows after the initial burst: at most rate+1.
	for i := range times {
		j := i
		for j < len(times) && times[j]-times[i] < int64(time.Second) {
			j++
		}
		if times[i]-times[0] > int64(time.Second) && j-i > rate+1 {
			t.Fatalf("%d requests passed within one second", j-i)
		}
	}
}

func TestRateNormalised(t *testing.T) {
	l := New(newClock().Now)
	f := func(rate float64, want int) {
		t.Helper()
		if d := l.Take("k"+strconv.FormatFloat(rate, 'g', -1, 64), rate); d.Limit != want || !d.Allowed || d.Remaining != want-1 {
			t.Errorf("Take(rate %v) = %+v, want Limit %d", rate, d, want)
		}
	}
	f(10, 10)
	f(2.9, 2)
	f(1, 1)
	f(0.5, 1)
	f(0, 1)
	f(-3, 1)
	f(math.NaN(), 1)
	f(math.Inf(1), 1e9)
	f(5e9, 1e9)
}

func TestRateChange(t *testing.T) {
	c := newClock()
	l := New(c.Now)
	take := func(n int, rate float64) (last Decision) {
		for range n {
			last = l.Take("k", rate)
		}
		return last
	}
	// Half spent at 100/s, then the rate halves: still half spent (25 of 50).
	if d := take(50, 100); d.Remaining != 50 {
		t.Fatalf("%+v", d)
	}
	if d := take(1, 50); d.Remaining != 24 || d.Limit != 50 || d.Reset != 1 {
		t.Fatalf("after decrease: %+v, want 24 remaining of 50", d)
	}
	// Back up to 100/s: no free burst; the 24 tokens stay 24 (23 after this one)...
	if d := take(1, 100); d.Remaining != 23 || d.Limit != 100 {
		t.Fatalf("after increase: %+v, want 23 remaining of 100", d)
	}
	// ...and refill at the new rate: 10 ms is one more token.
	c.Advance(10 * time.Millisecond)
	if d := take(1, 100); d.Remaining != 23 {
		t.Fatalf("after 10 ms at 100/s: %+v", d)
	}
	// A full bucket stays full whatever the change.
	c.Advance(2 * time.Second)
	if d := take(1, 7); d.Remaining != 6 || d.Limit != 7 {
		t.Fatalf("full bucket after decrease: %+v", d)
	}
	c.Advance(2 * time.Second)
	if d := take(1, 1000); d.Remaining != 999 {
		t.Fatalf("full bucket after increase: %+v", d)
	}
	// An empty bucket stays empty when the rate drops.
	take(999, 1000)
	if d := take(1, 10); d.Allowed || d.RetryAfter != 1 {
		t.Fatalf("empty bucket after decrease: %+v", d)
	}
}

func TestIdleBucketsEvicted(t *testing.T) {
	c := newClock()
	l := New(c.Now)
	const keys = 100_000 // over shrinkAbove per shard, so maps are rebuilt
	for i := range keys {
		l.Take("branch-"+strconv.Itoa(i), 5)
	}
	if n := l.Len(); n != keys {
		t.Fatalf("Len = %d", n)
	}
	// One branch stays busy; the rest go idle and are full after a second.
	c.Advance(sweepEvery)
	for range 3 {
		l.Take("busy", 1)
	}
	for i := range 1000 { // touch every shard so each sweeps
		l.Take("probe-"+strconv.Itoa(i), 5)
		c.Advance(time.Microsecond)
	}
	if n := l.Len(); n > 1001 {
		t.Fatalf("Len = %d after the idle keys were full for 9 s", n)
	}
	// Shards rebuilt their maps once they shrank below a quarter of the
	// peak, so the memory of the burst of keys is given back.
	for i := range l.shards {
		if s := &l.shards[i]; s.peak != len(s.m) {
			t.Fatalf("shard %d: peak %d, len %d: map not rebuilt", i, s.peak, len(s.m))
		}
	}
	// An evicted key comes back full, as if it had been kept.
	if d := l.Take("branch-1", 5); d.Remaining != 4 {
		t.Fatalf("%+v", d)
	}
	// The busy, still-spent key was not dropped.
	if d := l.Take("busy", 1); d.Allowed {
		t.Fatalf("busy key forgot its state: %+v", d)
	}
}

func TestTakeConcurrent(t *testing.T) {
	c := newClock()
	l := New(c.Now)
	var allowed atomic.Int64
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 1000 {
				key := "shared"
				if i%2 == 0 {
					key = "own-" + strconv.Itoa(g)
				}
				if d := l.Take(key, 100); d.Allowed && key == "shared" {
					allowed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if n := allowed.Load(); n != 100 {
		t.Fatalf("%d requests passed at one instant, want the capacity 100", n)
	}
}

func TestTakeAllocs(t *testing.T) {
	c := newClock()
	l := New(c.Now)
	key := []byte("0b8f6a7e-4a43-4d7c-9d6e-6a1f3b2c9e10/bank")
	skey := string(key)
	l.Take(skey, 1e6)
	if n := testing.AllocsPerRun(1000, func() {
		c.Advance(time.Millisecond)
		l.Take(skey, 1e6)
		l.TakeAt(skey, 1e6, c.Now())
	}); n != 0 {
		t.Errorf("Take on an existing key allocates %v times", n)
	}
}

func BenchmarkTake(b *testing.B) {
	l := New(time.Now)
	b.Run("existing", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			l.Take("0b8f6a7e-4a43-4d7c-9d6e-6a1f3b2c9e10/bank", 1e6)
		}
	})
	b.Run("parallel-one-key", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				l.Take("hot/bank", 1e6)
			}
		})
	})
	b.Run("parallel-1000-keys", func(b *testing.B) {
		keys := make([]string, 1000)
		for i := range keys {
			keys[i] = "branch-" + strconv.Itoa(i) + "/bank"
			l.Take(keys[i], 1e6)
		}
		var seq atomic.Uint32
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			i := int(seq.Add(7919))
			for pb.Next() {
				i++
				l.Take(keys[i%len(keys)], 1e6)
			}
		})
	})
}

// TestPeek: PeekAt reports what the last take left, takes nothing, and
// does not keep an unknown key.
func TestPeek(t *testing.T) {
	c := newClock()
	l := New(c.Now)
	if d := l.PeekAt("unknown", 10, c.Now()); !d.Allowed || d.Limit != 10 || d.Remaining != 10 || d.Reset != 0 || l.Len() != 0 {
		t.Fatalf("unknown key: %+v, %d buckets", d, l.Len())
	}
	var last Decision
	for range 4 {
		last = l.TakeAt("a", 10, c.Now())
	}
	for range 3 {
		if d := l.PeekAt("a", 10, c.Now()); d != last {
			t.Fatalf("peek %+v after the take %+v", d, last)
		}
	}
	if d := l.TakeAt("a", 10, c.Now()); d.Remaining != last.Remaining-1 {
		t.Errorf("a take after peeks left %d, want %d", d.Remaining, last.Remaining-1)
	}
	for range 5 {
		l.TakeAt("a", 10, c.Now())
	}
	if d := l.PeekAt("a", 10, c.Now()); d.Allowed || d.Remaining != 0 || d.Reset != 1 {
		t.Errorf("empty bucket: %+v", d)
	}
	c.Advance(100 * time.Millisecond)
	if d := l.PeekAt("a", 10, c.Now()); !d.Allowed || d.Remaining != 1 {
		t.Errorf("100 ms later: %+v", d)
	}
}
