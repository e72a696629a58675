package ratelimit

import (
	"sync"
	"testing"
	"time"
)

func newTestAdaptive(c *clock) *Adaptive {
	return NewAdaptive(AdaptiveConfig{
		Now:       c.Now,
		Interval:  time.Second,
		MinFactor: 0.1,
		Decrease:  0.5,
		Increase:  0.1,
	})
}

// TestAdaptiveOverload: an interval with core's overload signal halves the
// factor at its end, not before, down to the floor; intervals without one
// add 0.1 back.
func TestAdaptiveOverload(t *testing.T) {
	c := newClock()
	a := newTestAdaptive(c)
	if f := a.Factor(); f != 1 {
		t.Fatalf("starting factor %v", f)
	}
	for range 100 {
		a.Overload(c.Now())
		c.Advance(5 * time.Millisecond)
	}
	if f := a.Factor(); f != 1 {
		t.Fatalf("factor %v moved inside the interval", f)
	}
	c.Advance(500 * time.Millisecond) // the next interval has begun
	if f := a.Factor(); f != 0.5 {
		t.Fatalf("factor %v after an interval with an overload signal, want 0.5", f)
	}
	// Still overloaded: 0.25, 0.125, then the floor.
	for _, w := range []float64{0.25, 0.125, 0.1, 0.1} {
		a.Overload(c.Now())
		c.Advance(time.Second)
		if f := a.Factor(); f != w {
			t.Fatalf("factor %v, want %v", f, w)
		}
	}
	// No signal: +0.1 per interval, back to exactly 1 in nine intervals.
	for i := range 9 {
		c.Advance(time.Second)
		if f, w := a.Factor(), 0.1*float64(i+2); abs(f-w) > 1e-12 {
			t.Fatalf("interval %d: factor %v, want %v", i, f, w)
		}
	}
	c.Advance(time.Second)
	if f := a.Factor(); f != 1 {
		t.Fatalf("factor %v above 1", f)
	}
}

func abs(x float64) float64 { return max(x, -x) }

func TestAdaptiveIdleRecovery(t *testing.T) {
	c := newClock()
	a := newTestAdaptive(c)
	a.Overload(c.Now())
	c.Advance(time.Second)
	a.Overload(c.Now())
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
	a.Overload(c.Now())
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
		a.Overload(c.Now())
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
		a.Overload(c.Now())
		c.Advance(time.Second) // the default interval
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
	a.Overload(c.Now())
	c.Advance(time.Second)
	if f := a.Factor(); f != 1 {
		t.Fatalf("factor %v with MinFactor 1", f)
	}
}

func TestAdaptiveConcurrent(t *testing.T) {
	c := newClock()
	a := newTestAdaptive(c)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for i := range 2000 {
				if i%500 == 0 {
					a.Overload(c.Now())
				}
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
		a.Overload(c.Now())
		c.Advance(10 * time.Millisecond)
		_ = a.Factor()
		_ = a.Rate(50)
	}); n != 0 {
		t.Errorf("Overload/Factor allocate %v times", n)
	}
}

func BenchmarkOverload(b *testing.B) {
	a := NewAdaptive(AdaptiveConfig{})
	now := time.Now()
	b.Run("serial", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			a.Overload(now)
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				a.Overload(now)
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
