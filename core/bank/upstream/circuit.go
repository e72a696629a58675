package upstream

import (
	"context"
	"errors"

	"github.com/slipverify/slipverify/core/bank"
)

// outcome is what a lookup that asked the bank tells of the bank.
type outcome int

const (
	answered outcome = iota // a slip, not found or pending: the bank works
	failed                  // the bank's error: connection refused or reset, TLS, 5xx, 429, a malformed reply, a status that is no answer
	timedOut                // no answer within the lookup's deadline
	left                    // its caller cancelled it: nothing is known
)

// outcomeOf classifies the error of a lookup run under lctx, the lookup's
// own context (with its timeout), made from ctx, its caller's.
func outcomeOf(ctx, lctx context.Context, err error) outcome {
	switch {
	case err == nil || errors.Is(err, bank.ErrNotFound) || errors.Is(err, bank.ErrPending):
		return answered
	case errors.Is(ctx.Err(), context.Canceled):
		return left
	case lctx.Err() != nil || errors.Is(err, context.DeadlineExceeded):
		return timedOut
	case errors.Is(err, context.Canceled):
		return left
	}
	return failed
}

// breaker is the rule that opens an upstream's circuit: on evidence that
// the bank itself is failing, never on what one service's lookups met
// alone. Its state is a few counters; the caller serialises its use.
//
//   - An answer (a slip, not found, pending) clears the evidence.
//   - An error of the bank's counts: a connection refused or reset, a
//     failed TLS handshake, an HTTP 5xx or 429, a malformed reply, a
//     status that is no answer.
//   - A timeout counts only when the bank answered no other lookup while
//     it waited: a bank that answers others is slow for some slips, not
//     failing. And timeouts count toward opening only once they are
//     several services': one service's slow slips, or its flood, are no
//     sign that the bank fails for everyone.
//   - A lookup its caller cancelled, and one refused without asking the
//     bank (no slot for it, over the rate, the circuit open), tell nothing.
//
// The circuit opens when the failures since the last answer, the errors
// and the timeouts that count, reach Limits.FailuresToOpen.
type breaker struct {
	answers  uint64 // the bank's answers so far: a lookup notes them as it starts
	errors   int    // the bank's errors since the last answer
	timeouts int    // timeouts since the last answer while the bank answered none
	first    string // the service of the first of those timeouts
	several  bool   // those timeouts are more than one service's
}

// record takes the outcome of a lookup of service that started after the
// bank's answer number since (answers, as it started), and reports
// whether it was a failure.
func (b *breaker) record(o outcome, service string, since uint64) bool {
	switch o {
	case answered:
		*b = breaker{answers: b.answers + 1}
	case failed:
		b.errors++
		return true
	case timedOut:
		if b.answers != since {
			return false // the bank answered others meanwhile
		}
		if b.timeouts == 0 {
			b.first = service
		} else if service != b.first {
			b.several = true
		}
		b.timeouts++
		return true
	}
	return false
}

// failures returns the failures that count toward opening the circuit.
func (b *breaker) failures() int {
	if b.several {
		return b.errors + b.timeouts
	}
	return b.errors
}
