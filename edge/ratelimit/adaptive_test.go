package ratelimit

import (
	"sync"
	"testing"
	"time"
)

func newTestAdaptive(c *clock) *Adaptive {
	return NewAdaptive(AdaptiveConfig{
		Now:           c.Now,
		Interval:      time.Second,
		LatencyTarget: 250 * time.Millisecond,
		MinFactor:     0.1,
		Decrease:      0.5,
		Increase:      0.1,
	})
}

func TestAdaptiveSlowUpstream(t *testing.T) {
	c := newClock()
	a := newTestAdaptive(c)
	if f := a.Factor(); f != 1 {
		t.Fatalf("starting factor %v", f)
	}
	// Core slows down: the factor halves at the end of the interval, not before.
	for range 100 {
		a.Observe(400*time.Millisecond, false)
		c.Advance(5 * time.Millisecond)
	}
	if f := a.Factor(); f != 1 {
		t.Fatalf("factor %v moved inside the interval", f)
	}
	c.Advance(500 * time.Millisecond) // the next interval has begun
	if f := a.Factor(); f != 0.5 {
		t.Fatalf("factor %v after a slow interval, want 0.5", f)
	}
	// Still slow: 0.25, 0.125, then the floor.
	want := []float64{0.25, 0.125, 0.1, 0.1}
	for _, w := range want {
		a.Observe(time.Second, false)
		c.Advance(time.Second)
		if f := a.Factor(); f != w {
			t.Fatalf("factor %v, want %v", f, w)
		}
	}
	// Healthy again: +0.1 per interval, back to exactly 1 in nine intervals.
	for i := range 9 {
		for range 50 {
			a.Observe(20*time.Millisecond, false)
		}
		c.Advance(time.Second)
		if f, w := a.Factor(), 0.1*float64(i+2); abs(f-w) > 1e-12 {
			t.Fatalf("interval %d: factor %v, want %v", i, f, w)
		}
	}
	if f := a.Factor(); f != 1 {
		t.Fatalf("recovered to %v, want 1", f)
	}
	c.Advance(time.Second)
	if f := a.Factor(); f != 1 {
		t.Fatalf("factor %v above 1", f)
	}
}

func abs(x float64) float64 { return max(x, -x) }

// TestAdaptiveP90 pins the percentile rule: the nearest-rank p90 of n
// latencies is above the target exactly when more than n/10 are.
func TestAdaptiveP90(t *testing.T) {
	f := func(fast, slow int, want float64) {
		t.Helper()
		c := newClock()
		a := newTestAdaptive(c)
		for range fast {
			a.Observe(100*time.Millisecond, false)
		}
		for range slow {
			a.Observe(251*time.Millisecond, false)
		}
		c.Advance(time.Second)
		if got := a.Factor(); got != want {
			t.Errorf("%d fast, %d slow: factor %v, want %v", fast, slow, got, want)
		}
	}
	f(9, 1, 1)   // p90 is the 9th of 10: fast
	f(8, 2, 0.5) // p90 is slow
	f(90, 10, 1) // exactly 10%
	f(89, 11, 0.5)
	f(0, 1, 0.5)
	f(1, 0, 1)
	f(0, 0, 1)
	// Exactly the target is not above it.
	c := newClock()
	a := newTestAdaptive(c)
	a.Observe(250*time.Millisecond, false)
	c.Advance(time.Second)
	if got := a.Factor(); got != 1 {
		t.Errorf("latency at target: factor %v", got)
	}
}

func TestAdaptiveOverloadSignal(t *testing.T) {
	c := newClock()
	a := newTestAdaptive(c)
	for range 1000 {
		a.Observe(time.Millisecond, false)
	}
	a.Observe(time.Millisecond, true) // one 503 among fast answers
	c.Advance(time.Second)
	if f := a.Factor(); f != 0.5 {
		t.Fatalf("factor %v after an overload signal, want 0.5", f)
	}
}

func TestAdaptiveIdleRecovery(t *testing.T) {
	c := newClock()
	a := newTestAdaptive(c)
	a.Observe(time.Second, true)
	c.Advance(time.Second)
	a.Observe(time.Second, true)
	c.Advance(time.Second)
	if f := a.Factor(); f != 0.25 {
		t.Fatalf("factor %v", f)
	}
	// No traffic for three intervals counts as three healthy ones.
	c.Advance(3 * time.Second)
	if f := a.Factor(); abs(f-0.55) > 1e-12 {
		t.Fatalf("factor %v after 3 idle intervals, want 0.55", f)
	}
	c.Advance(time.Hour)
	if f := a.Factor(); f != 1 {
		t.Fatalf("factor %v after an idle hour", f)
	}
	// A clock stepping back closes nothing and changes nothing.
	c.Advance(-time.Minute)
	a.Observe(time.Second, true)
	if f := a.Factor(); f != 1 {
		t.Fatalf("factor %v after the clock stepped back", f)
	}
}

func TestAdaptiveRate(t *testing.T) {
	c := newClock()
	a := newTestAdaptive(c)
	l := New(c.Now)
	f := func(plan float64, want int) {
		t.Helper()
		if got := a.Rate(plan); got != float64(want) {
			t.Errorf("factor %v: Rate(%v) = %v, want %d", a.Factor(), plan, got, want)
		}
		c.Advance(time.Nanosecond)
		if d := l.Take("k", a.Rate(plan)); d.Limit != want {
			t.Errorf("factor %v, plan %v: Limit %d, want %d", a.Factor(), plan, d.Limit, want)
		}
	}
	f(10, 10)
	f(0.5, 1)
	// Drive the factor to 0.1, then up in 0.1 steps; floor(plan×factor) must
	// be exact at every step (no 6.999… for 0.7×10).
	for range 4 {
		a.Observe(time.Second, true)
		c.Advance(time.Second)
	}
	f(10, 1)
	f(3, 1)
	f(25, 2)
	for step := 2; step <= 10; step++ {
		c.Advance(time.Second)
		f(10, step)
		f(100, 10*step)
		f(7, max(1, 7*step/10))
	}
}

func TestAdaptiveDefaults(t *testing.T) {
	c := newClock()
	a := NewAdaptive(AdaptiveConfig{Now: c.Now, MinFactor: 7, Decrease: -1})
	for range 10 {
		a.Observe(300*time.Millisecond, false) // over the default 250 ms target
		c.Advance(time.Second)                 // the default interval
	}
	if f := a.Factor(); f != 0.1 {
		t.Fatalf("factor %v, want the default floor 0.1", f)
	}
	c.Advance(time.Second)
	if f := a.Factor(); abs(f-0.2) > 1e-12 {
		t.Fatalf("factor %v, want 0.2 after the default increase", f)
	}
	// MinFactor 1 switches adaptation off.
	a = NewAdaptive(AdaptiveConfig{Now: c.Now, MinFactor: 1})
	a.Observe(time.Hour, true)
	c.Advance(time.Second)
	if f := a.Factor(); f != 1 {
		t.Fatalf("factor %v with MinFactor 1", f)
	}
}

func TestAdaptiveConcurrent(t *testing.T) {
	c := newClock()
	a := newTestAdaptive(c)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 2000 {
				a.Observe(time.Duration(g*100)*time.Millisecond, i%500 == 0)
				if f := a.Factor(); f < 0.1 || f > 1 {
					t.Errorf("factor %v out of range", f)
					return
				}
				if i%100 == 0 {
					c.Advance(100 * time.Millisecond)
				}
			}
		})
	}
	wg.Wait()
}

func TestAdaptiveAllocs(t *testing.T) {
	c := newClock()
	a := newTestAdaptive(c)
	if n := testing.AllocsPerRun(1000, func() {
		a.Observe(300*time.Millisecond, false)
		c.Advance(10 * time.Millisecond)
		_ = a.Factor()
		_ = a.Rate(50)
	}); n != 0 {
		t.Errorf("Observe/Factor allocate %v times", n)
	}
}

func BenchmarkObserve(b *testing.B) {
	a := NewAdaptive(AdaptiveConfig{})
	b.Run("serial", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			a.Observe(100*time.Millisecond, false)
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				a.Observe(100*time.Millisecond, false)
			}
		})
	})
}

func BenchmarkFactor(b *testing.B) {
	a := NewAdaptive(AdaptiveConfig{})
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			_ = a.Rate(100)
		}
	})
}
