package ratelimit

import (
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// AdaptiveConfig configures an Adaptive. A zero or out-of-range field takes
// its default.
type AdaptiveConfig struct {
	Now           func() time.Time // time.Now
	Interval      time.Duration    // how often the factor moves; 1s
	LatencyTarget time.Duration    // core p90 latency above which it drops; 250ms
	MinFactor     float64          // the floor, in (0, 1]; 0.1
	Decrease      float64          // multiplier on an unhealthy interval, in (0, 1]; 0.5
	Increase      float64          // added per healthy interval, in (0, 1]; 0.1
}

const ppm = 1_000_000 // the factor is kept in millionths, so 0.1 steps add up exactly

// Adaptive is the factor applied to every plan rate: AIMD on core's health.
// Each Interval, if the interval's p90 latency of core responses exceeded
// LatencyTarget or core signalled overload, the factor is multiplied by
// Decrease (not below MinFactor); otherwise, including an interval with no
// traffic at all, Increase is added (not above 1). Intervals are aligned to
// the clock and closed lazily by the first Observe, Factor or Rate after
// they end: there is no goroutine or timer.
//
// The p90 is exact and needs no samples: with nearest-rank percentiles, the
// p90 of n latencies exceeds the target exactly when more than n/10 of them
// do, so an interval is two counters.
//
// It is safe for concurrent use. Factor and Rate are lock-free; Observe is
// two atomic adds; a mutex is taken only to close an interval.
type Adaptive struct {
	now            func() time.Time
	interval       int64 // ns
	target         time.Duration
	minPPM, incPPM int64
	dec            float64

	epoch  atomic.Int64 // index of the interval being observed (unix ns / interval)
	factor atomic.Int64 // millionths
	n      atomic.Int64 // responses observed in the interval
	slow   atomic.Int64 // of which slower than target
	over   atomic.Bool  // an overload signal in the interval
	mu     sync.Mutex   // serialises closing intervals
}

// NewAdaptive returns an Adaptive at factor 1.
func NewAdaptive(cfg AdaptiveConfig) *Adaptive {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Interval <= 0 {
		cfg.Interval = time.Second
	}
	if cfg.LatencyTarget <= 0 {
		cfg.LatencyTarget = 250 * time.Millisecond
	}
	if !(cfg.MinFactor > 0 && cfg.MinFactor <= 1) {
		cfg.MinFactor = 0.1
	}
	if !(cfg.Decrease > 0 && cfg.Decrease <= 1) {
		cfg.Decrease = 0.5
	}
	if !(cfg.Increase > 0 && cfg.Increase <= 1) {
		cfg.Increase = 0.1
	}
	a := &Adaptive{
		now:      cfg.Now,
		interval: int64(cfg.Interval),
		target:   cfg.LatencyTarget,
		minPPM:   max(1, int64(math.Round(cfg.MinFactor*ppm))),
		incPPM:   max(1, int64(math.Round(cfg.Increase*ppm))),
		dec:      cfg.Decrease,
	}
	a.epoch.Store(a.epochAt(cfg.Now()))
	a.factor.Store(ppm)
	return a
}

func (a *Adaptive) epochAt(t time.Time) int64 {
	ns := t.UnixNano()
	e := ns / a.interval
	if ns < 0 && ns%a.interval != 0 {
		e--
	}
	return e
}

// Observe records one response of core: how long it took, and whether core
// said it was overloaded (its overload header, or a 503). It allocates
// nothing and does not block except to close an interval.
func (a *Adaptive) Observe(latency time.Duration, overloaded bool) {
	a.ObserveAt(latency, overloaded, a.now())
}

// ObserveAt is Observe of a response that ended at t.
func (a *Adaptive) ObserveAt(latency time.Duration, overloaded bool, t time.Time) {
	if e := a.epochAt(t); e > a.epoch.Load() {
		a.roll(e)
	}
	a.n.Add(1)
	if latency > a.target {
		a.slow.Add(1)
	}
	if overloaded {
		a.over.Store(true)
	}
}

// Target is the latency above which an answer counts as slow.
func (a *Adaptive) Target() time.Duration { return a.target }

// Factor returns the current factor, in [MinFactor, 1].
func (a *Adaptive) Factor() float64 {
	return float64(a.current()) / ppm
}

// Rate returns the effective rate for a plan rate: max(1, floor(plan ×
// factor)), computed exactly (the factor is in millionths), ready for Take.
func (a *Adaptive) Rate(plan float64) float64 { return a.RateAt(plan, a.now()) }

// RateAt is Rate at time t.
func (a *Adaptive) RateAt(plan float64, t time.Time) float64 {
	return max(1, math.Floor(plan*float64(a.currentAt(t))/ppm))
}

func (a *Adaptive) current() int64 { return a.currentAt(a.now()) }

func (a *Adaptive) currentAt(t time.Time) int64 {
	if e := a.epochAt(t); e > a.epoch.Load() {
		a.roll(e)
	}
	return a.factor.Load()
}

// roll closes every interval before e: the one observed, judged on its
// counters, and any that passed without a call, which had no traffic and
// so count as healthy. A clock that steps back closes nothing.
func (a *Adaptive) roll(e int64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	cur := a.epoch.Load()
	if e <= cur {
		return // another goroutine closed it
	}
	n, slow, over := a.n.Swap(0), a.slow.Swap(0), a.over.Swap(false)
	f := a.factor.Load()
	if over || slow*10 > n {
		f = max(a.minPPM, int64(math.Round(float64(f)*a.dec)))
	} else {
		f = min(ppm, f+a.incPPM)
	}
	if idle := e - cur - 1; idle > 0 {
		f = min(ppm, f+a.incPPM*min(idle, ppm))
	}
	a.factor.Store(f)
	a.epoch.Store(e)
}
