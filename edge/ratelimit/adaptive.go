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
	Now       func() time.Time // time.Now
	Interval  time.Duration    // how often the factor moves; 1s
	MinFactor float64          // the floor, in (0, 1]; 0.1
	Decrease  float64          // multiplier on an interval with an overload signal, in (0, 1]; 0.5
	Increase  float64          // added per interval without one, in (0, 1]; 0.1
}

const ppm = 1_000_000 // the factor is kept in millionths, so 0.1 steps add up exactly

// Adaptive is the factor applied to every plan rate: AIMD on core's own
// overload signal. Each Interval in which core signalled overload (its
// overload header, or a 503), the factor is multiplied by Decrease (not
// below MinFactor); after any other interval, one with no traffic at all
// too, Increase is added (not above 1). Nothing else moves it: a slow
// answer (a client's big picture, a slow bank) or a failed connection is
// not core saying it is overloaded, and every tenant's limit would pay for
// it. Intervals are aligned to the clock and closed lazily by the first
// Overload, Factor or Rate after they end: there is no goroutine or timer.
//
// It is safe for concurrent use. Factor and Rate are lock-free; Overload is
// an atomic store; a mutex is taken only to close an interval.
type Adaptive struct {
	now            func() time.Time
	interval       int64 // ns
	minPPM, incPPM int64
	dec            float64

	epoch  atomic.Int64 // index of the interval being observed (unix ns / interval)
	factor atomic.Int64 // millionths
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

// Overload records core's overload signal on an answer that ended at t.
// It allocates nothing and does not block except to close an interval.
func (a *Adaptive) Overload(t time.Time) {
	if e := a.epochAt(t); e > a.epoch.Load() {
		a.roll(e)
	}
	a.over.Store(true)
}

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
// overload signal, and any that passed without a call, which had none. A clock that steps back closes nothing.
func (a *Adaptive) roll(e int64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	cur := a.epoch.Load()
	if e <= cur {
		return // another goroutine closed it
	}
	f := a.factor.Load()
	if a.over.Swap(false) {
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
