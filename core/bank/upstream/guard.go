package upstream

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/slipverify/slipverify/core/bank"
)

// Limits caps the calls to one upstream and sets its circuit.
type Limits struct {
	// MaxConcurrent is the most lookups in flight at once; another is
	// refused at once (API_SERVER_ERROR). The services asking share them
	// (mayTake): Reserve of them are kept for services below their share.
	// Zero: no cap.
	MaxConcurrent int
	// PerSecond is the most lookups started per second, in a bucket of
	// one second's worth; a lookup beyond it is refused. Zero: no cap.
	PerSecond int
	// FailuresToOpen is how many failures of the bank's, with no answer
	// between them, open the circuit (breaker has the rule); zero means
	// DefaultFailuresToOpen.
	FailuresToOpen int
	// OpenFor is how long an open circuit refuses calls before it lets one
	// probe through; zero means DefaultOpenFor.
	OpenFor time.Duration
}

// Circuit defaults.
const (
	DefaultFailuresToOpen = 10
	DefaultOpenFor        = 30 * time.Second
)

// ErrRefused is wrapped (with bank.ErrUpstream) by the errors of lookups
// Guard refused without asking the bank: no slot for them, over the rate,
// or the circuit open.
var ErrRefused = errors.New("refused before asking the bank")

// Guard runs the lookups of one upstream: it shares the slots among the
// services asking, applies the rate cap and the circuit, and records the
// metrics. It is safe for concurrent use.
type Guard struct {
	name string
	lim  Limits
	now  func() time.Time

	mu       sync.Mutex
	slots    slots
	tokens   float64 // rate bucket
	filled   time.Time
	circuit  breaker
	openTill time.Time
	probing  bool

	found, notFound, pending, failed                   *metrics.Counter
	refusedCap, refusedShare, refusedRate, refusedOpen *metrics.Counter
	refreshes                                          *metrics.Counter
	latency                                            *metrics.Histogram
}

// NewGuard returns a guard for the upstream name (kbank, scb), recording
// into set (nil: a set of its own, unexported).
func NewGuard(name string, lim Limits, now func() time.Time, set *metrics.Set) *Guard {
	if set == nil {
		set = metrics.NewSet()
	}
	if lim.FailuresToOpen <= 0 {
		lim.FailuresToOpen = DefaultFailuresToOpen
	}
	if lim.OpenFor <= 0 {
		lim.OpenFor = DefaultOpenFor
	}
	g := &Guard{name: name, lim: lim, now: now, slots: newSlots(lim.MaxConcurrent), tokens: float64(lim.PerSecond), filled: now()}
	outcome := func(o string) *metrics.Counter {
		return set.GetOrCreateCounter(fmt.Sprintf(`slip_core_bank_lookups_total{upstream=%q,outcome=%q}`, name, o))
	}
	refused := func(r string) *metrics.Counter {
		return set.GetOrCreateCounter(fmt.Sprintf(`slip_core_bank_refused_total{upstream=%q,reason=%q}`, name, r))
	}
	g.found, g.notFound, g.pending, g.failed = outcome("found"), outcome("not_found"), outcome("pending"), outcome("error")
	g.refusedCap, g.refusedShare = refused("concurrency"), refused("share")
	g.refusedRate, g.refusedOpen = refused("rate"), refused("circuit")
	g.refreshes = set.GetOrCreateCounter(fmt.Sprintf(`slip_core_bank_token_refreshes_total{upstream=%q}`, name))
	g.latency = set.GetOrCreateHistogram(fmt.Sprintf(`slip_core_bank_lookup_duration_seconds{upstream=%q}`, name))
	set.GetOrCreateGauge(fmt.Sprintf(`slip_core_bank_inflight_lookups{upstream=%q}`, name), func() float64 {
		g.mu.Lock()
		defer g.mu.Unlock()
		return float64(g.slots.inUse)
	})
	return g
}

// NoWallet is the answer of an upstream that looks up no wallet slips.
func (g *Guard) NoWallet() (bank.WalletSlip, error) {
	return bank.WalletSlip{}, fmt.Errorf("%w: %s: wallet lookups are not supported", bank.ErrUpstream, g.name)
}

// TokenFetched counts a token refresh; pass it to NewTokens.
func (g *Guard) TokenFetched() { g.refreshes.Inc() }

// Do runs lookup, within timeout (zero: none of its own), for the service
// ctx names (bank.Service) unless the slots, the rate cap or the open
// circuit refuse it, and records its outcome. bank.ErrNotFound and
// bank.ErrPending are answers, not failures; which other errors count
// toward opening the circuit is breaker's rule.
//
// Fast path: one lock to take a slot and pass the circuit and the rate,
// one to give it back; nothing is allocated but the timeout's context.
func (g *Guard) Do(ctx context.Context, timeout time.Duration, lookup func(context.Context) error) error {
	service := bank.Service(ctx)
	since, err := g.admit(service)
	if err != nil {
		return err
	}
	lctx, cancel := ctx, context.CancelFunc(nil)
	if timeout > 0 {
		lctx, cancel = context.WithTimeout(ctx, timeout)
	}
	start := g.now()
	err = lookup(lctx)
	g.latency.Update(g.now().Sub(start).Seconds())
	o := outcomeOf(ctx, lctx, err)
	if cancel != nil {
		cancel()
	}
	switch {
	case err == nil:
		g.found.Inc()
	case errors.Is(err, bank.ErrNotFound):
		g.notFound.Inc()
	case errors.Is(err, bank.ErrPending):
		g.pending.Inc()
	default:
		g.failed.Inc()
	}
	g.release(service, since, o)
	return err
}

// admit takes a slot for service and applies the circuit and the rate
// cap, in that order: a call refused for want of a slot takes no rate
// token and is no circuit probe. It returns the bank's answers so far,
// for the circuit's rule.
func (g *Guard) admit(service string) (uint64, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.slots.take(service) {
		if g.slots.inUse >= g.slots.n {
			g.refusedCap.Inc()
			return 0, fmt.Errorf("%w: %s: %w: %d lookups in flight", bank.ErrUpstream, g.name, ErrRefused, g.slots.inUse)
		}
		g.refusedShare.Inc()
		return 0, fmt.Errorf("%w: %s: %w: %d of %d lookups in flight, %d of them this service's; the rest are kept for other services",
			bank.ErrUpstream, g.name, ErrRefused, g.slots.inUse, g.slots.n, g.slots.held[service])
	}
	now := g.now()
	if n := g.circuit.failures(); n >= g.lim.FailuresToOpen {
		if now.Before(g.openTill) || g.probing {
			g.slots.give(service)
			g.refusedOpen.Inc()
			return 0, fmt.Errorf("%w: %s: %w: circuit open after %d failures in a row", bank.ErrUpstream, g.name, ErrRefused, n)
		}
		g.probing = true // half open: this call is the probe
	}
	if g.lim.PerSecond > 0 {
		rate := float64(g.lim.PerSecond)
		g.tokens = min(rate, g.tokens+now.Sub(g.filled).Seconds()*rate)
		g.filled = now
		if g.tokens < 1 {
			g.slots.give(service)
			g.refusedRate.Inc()
			g.probing = false
			return 0, fmt.Errorf("%w: %s: %w: over %d lookups a second", bank.ErrUpstream, g.name, ErrRefused, g.lim.PerSecond)
		}
		g.tokens--
	}
	return g.circuit.answers, nil
}

// release gives back the slot of a lookup of service that asked the bank
// and records its outcome in the circuit.
func (g *Guard) release(service string, since uint64, o outcome) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.slots.give(service)
	g.probing = false
	if g.circuit.record(o, service, since) && g.circuit.failures() >= g.lim.FailuresToOpen {
		g.openTill = g.now().Add(g.lim.OpenFor)
	}
}
