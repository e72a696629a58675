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
	// refused at once (API_SERVER_ERROR). Zero: no cap.
	MaxConcurrent int
	// PerSecond is the most lookups started per second, in a bucket of
	// one second's worth; a lookup beyond it is refused. Zero: no cap.
	PerSecond int
	// FailuresToOpen is how many upstream errors in a row open the
	// circuit; zero means DefaultFailuresToOpen.
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
// Guard refused without asking the bank: over a cap, or the circuit open.
var ErrRefused = errors.New("refused before asking the bank")

// Guard runs the lookups of one upstream: it applies the caps and the
// circuit and records the metrics. It is safe for concurrent use.
type Guard struct {
	name string
	lim  Limits
	now  func() time.Time
	sem  chan struct{}

	mu       sync.Mutex
	tokens   float64 // rate bucket
	filled   time.Time
	failures int
	openTill time.Time
	probing  bool

	found, notFound, pending, failed     *metrics.Counter
	refusedCap, refusedRate, refusedOpen *metrics.Counter
	refreshes                            *metrics.Counter
	latency                              *metrics.Histogram
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
	g := &Guard{name: name, lim: lim, now: now, tokens: float64(lim.PerSecond), filled: now()}
	if lim.MaxConcurrent > 0 {
		g.sem = make(chan struct{}, lim.MaxConcurrent)
	}
	outcome := func(o string) *metrics.Counter {
		return set.GetOrCreateCounter(fmt.Sprintf(`slip_core_bank_lookups_total{upstream=%q,outcome=%q}`, name, o))
	}
	refused := func(r string) *metrics.Counter {
		return set.GetOrCreateCounter(fmt.Sprintf(`slip_core_bank_refused_total{upstream=%q,reason=%q}`, name, r))
	}
	g.found, g.notFound, g.pending, g.failed = outcome("found"), outcome("not_found"), outcome("pending"), outcome("error")
	g.refusedCap, g.refusedRate, g.refusedOpen = refused("concurrency"), refused("rate"), refused("circuit")
	g.refreshes = set.GetOrCreateCounter(fmt.Sprintf(`slip_core_bank_token_refreshes_total{upstream=%q}`, name))
	g.latency = set.GetOrCreateHistogram(fmt.Sprintf(`slip_core_bank_lookup_duration_seconds{upstream=%q}`, name))
	return g
}

// Lookup asks the upstream for a slip: its identity checked first (a
// malformed one never reaches the bank), then fn under the guard (Do),
// within timeout.
func (g *Guard) Lookup(ctx context.Context, timeout time.Duration, bankCode, transRef string,
	fn func(ctx context.Context) (bank.Slip, error)) (bank.Slip, error) {
	if err := CheckLookup(bankCode, transRef); err != nil {
		return bank.Slip{}, fmt.Errorf("%w: %s: %w", bank.ErrUpstream, g.name, err)
	}
	var s bank.Slip
	err := g.Do(ctx, func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		var err error
		s, err = fn(ctx)
		return err
	})
	return s, err
}

// NoWallet is the answer of an upstream that looks up no wallet slips.
func (g *Guard) NoWallet() (bank.WalletSlip, error) {
	return bank.WalletSlip{}, fmt.Errorf("%w: %s: wallet lookups are not supported", bank.ErrUpstream, g.name)
}

// TokenFetched counts a token refresh; pass it to NewTokens.
func (g *Guard) TokenFetched() { g.refreshes.Inc() }

// Do runs lookup unless a cap or the open circuit refuses it, and records
// its outcome. bank.ErrNotFound and bank.ErrPending are answers, not
// failures; every other error counts toward opening the circuit, except
// the caller's own cancellation.
func (g *Guard) Do(ctx context.Context, lookup func(context.Context) error) error {
	// The concurrency cap first: a call it refuses takes no rate token
	// and is no circuit probe.
	if g.sem != nil {
		select {
		case g.sem <- struct{}{}:
			defer func() { <-g.sem }()
		default:
			g.refusedCap.Inc()
			return fmt.Errorf("%w: %s: %w: %d lookups in flight", bank.ErrUpstream, g.name, ErrRefused, g.lim.MaxConcurrent)
		}
	}
	if err := g.admit(); err != nil {
		return err
	}
	start := g.now()
	err := lookup(ctx)
	g.latency.Update(g.now().Sub(start).Seconds())
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
	g.release(err)
	return err
}

// admit applies the circuit and the rate cap.
func (g *Guard) admit() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.now()
	if g.failures >= g.lim.FailuresToOpen {
		if now.Before(g.openTill) || g.probing {
			g.refusedOpen.Inc()
			return fmt.Errorf("%w: %s: %w: circuit open after %d failures in a row", bank.ErrUpstream, g.name, ErrRefused, g.failures)
		}
		g.probing = true // half open: this call is the probe
	}
	if g.lim.PerSecond > 0 {
		rate := float64(g.lim.PerSecond)
		g.tokens = min(rate, g.tokens+now.Sub(g.filled).Seconds()*rate)
		g.filled = now
		if g.tokens < 1 {
			g.refusedRate.Inc()
			g.probing = false
			return fmt.Errorf("%w: %s: %w: over %d lookups a second", bank.ErrUpstream, g.name, ErrRefused, g.lim.PerSecond)
		}
		g.tokens--
	}
	return nil
}

// release records the end of a call that asked the bank. A call the
// caller cancelled says nothing of the bank and changes nothing.
func (g *Guard) release(err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.probing = false
	switch {
	case err == nil || errors.Is(err, bank.ErrNotFound) || errors.Is(err, bank.ErrPending):
		g.failures = 0
		return
	case errors.Is(err, context.Canceled):
		return
	}
	g.failures++
	if g.failures >= g.lim.FailuresToOpen {
		g.openTill = g.now().Add(g.lim.OpenFor)
	}
}
