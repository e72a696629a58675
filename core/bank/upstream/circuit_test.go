package upstream

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/slipverify/slipverify/core/bank"
)

// TestBreaker is the circuit's rule, with FailuresToOpen 10. In each row
// the lookups start together; answered other lookups get the bank's
// answer while they wait; then they end in order.
func TestBreaker(t *testing.T) {
	type ev struct {
		o       outcome
		service string
	}
	times := func(n int, o outcome, service string) []ev {
		out := make([]ev, n)
		for i := range out {
			out[i] = ev{o, service}
		}
		return out
	}
	cat := func(parts ...[]ev) []ev {
		var out []ev
		for _, p := range parts {
			out = append(out, p...)
		}
		return out
	}
	for _, tc := range []struct {
		name     string
		lookups  []ev
		answered int
		open     bool
	}{
		{"ten errors of the bank's", times(10, failed, "a"), 0, true},
		{"nine errors", times(9, failed, "a"), 0, false},
		{"an answer clears the errors before it", cat(times(9, failed, "a"), times(1, answered, "b"), times(9, failed, "a")), 0, false},
		{"one service's timeouts, however many", times(64, timedOut, "a"), 0, false},
		{"two services' timeouts", cat(times(5, timedOut, "a"), times(5, timedOut, "c")), 0, true},
		{"two services' timeouts while the bank answered another lookup",
			cat(times(32, timedOut, "a"), times(32, timedOut, "c")), 1, false},
		{"timeouts that waited on an answer another lookup got before they ended",
			cat(times(1, answered, "b"), times(10, timedOut, "a"), times(10, timedOut, "c")), 0, false},
		{"errors and two services' timeouts add up", cat(times(5, failed, "a"), times(3, timedOut, "a"), times(2, timedOut, "c")), 0, true},
		{"one service's timeouts do not add to errors", cat(times(9, failed, "a"), times(20, timedOut, "a")), 0, false},
		{"a second service's timeout makes the first's count", cat(times(9, timedOut, "a"), times(1, timedOut, "c")), 0, true},
		{"errors while the bank answered others still count", times(10, failed, "a"), 1, true},
		{"cancelled lookups tell nothing", cat(times(9, failed, "a"), times(5, left, "a"), times(1, failed, "a")), 0, true},
		{"nor do they clear anything", cat(times(9, failed, "a"), times(5, left, "b")), 0, false},
	} {
		var b breaker
		since := b.answers // every lookup of the row starts now
		for range tc.answered {
			b.record(answered, "b", b.answers)
		}
		for _, e := range tc.lookups {
			b.record(e.o, e.service, since)
		}
		if open := b.failures() >= 10; open != tc.open {
			t.Errorf("%s: open %v (%d failures: %+v), want %v", tc.name, open, b.failures(), b, tc.open)
		}
	}
}

func TestOutcomeOf(t *testing.T) {
	live := context.Background()
	cancelled, cancel := context.WithCancel(live)
	cancel()
	expired, cancel2 := context.WithTimeout(live, -time.Second)
	defer cancel2()
	bankErr := fmt.Errorf("%w: kbank: HTTP 503", bank.ErrUpstream)
	for _, tc := range []struct {
		name      string
		ctx, lctx context.Context
		err       error
		want      outcome
	}{
		{"a slip", live, live, nil, answered},
		{"not found", live, live, fmt.Errorf("%w: kbank: status 8404", bank.ErrNotFound), answered},
		{"pending", live, live, bank.ErrPending, answered},
		{"HTTP 503", live, live, bankErr, failed},
		{"the lookup's deadline passed", live, expired, fmt.Errorf("%w: %w: read reply: unexpected EOF", bank.ErrUpstream, ErrMaybeSent), timedOut},
		{"the caller's deadline passed", expired, expired, fmt.Errorf("%w: %w", bank.ErrUpstream, context.DeadlineExceeded), timedOut},
		{"a token fetch timed out", live, live, fmt.Errorf("%w: token: %w", bank.ErrUpstream, context.DeadlineExceeded), timedOut},
		{"the caller cancelled", cancelled, cancelled, fmt.Errorf("%w: %w", bank.ErrUpstream, context.Canceled), left},
		{"the caller cancelled as the bank failed", cancelled, cancelled, bankErr, left},
		{"cancelled otherwise", live, live, fmt.Errorf("%w: %w", bank.ErrUpstream, context.Canceled), left},
	} {
		if got := outcomeOf(tc.ctx, tc.lctx, tc.err); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestCircuitIgnoresRefusals: lookups refused for want of a slot never
// reached the bank and count for nothing.
func TestCircuitIgnoresRefusals(t *testing.T) {
	g := NewGuard("test", Limits{MaxConcurrent: 1, FailuresToOpen: 2}, new(clock).Now, nil)
	ctx := context.Background()
	inside, leave, done := make(chan struct{}), make(chan struct{}), make(chan error)
	go func() { done <- g.Do(ctx, 0, func(context.Context) error { close(inside); <-leave; return errBank }) }()
	<-inside
	for range 5 {
		if err := g.Do(ctx, 0, nothing); err == nil {
			t.Fatal("a second lookup on one slot ran")
		}
	}
	close(leave)
	<-done
	if err := g.Do(ctx, 0, nothing); err != nil {
		t.Errorf("after one failure and five refusals: %v, want the circuit closed", err)
	}
}
