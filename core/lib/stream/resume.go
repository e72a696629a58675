package stream

import (
	"context"
	"log/slog"
	"time"
)

// Quiet is how often at most Resume logs the same failure again: an outage
// of minutes logs a line a minute, with the number of failures it did not
// log, not one a second.
const Quiet = time.Minute

// Resume runs consume until ctx is done, and runs it again after backoff
// whenever it fails before that: a broker outage pauses a consumer instead
// of ending its program. consume must make a new reader each time, so the
// records a failed run did not commit are fetched again from the group's
// committed offsets (every handler tolerates a repeat). It returns what
// the last run returned once ctx is done.
//
// A failure is logged unless the same error was logged less than Quiet
// ago; a failure after a quiet spell, or with another error, is logged at
// once.
func Resume(ctx context.Context, log *slog.Logger, name string, backoff time.Duration, consume func(context.Context) error) error {
	return resume(ctx, log, name, backoff, Quiet, time.Now, consume)
}

func resume(ctx context.Context, log *slog.Logger, name string, backoff, quiet time.Duration, now func() time.Time, consume func(context.Context) error) error {
	var (
		logged   string    // the error last logged
		loggedAt time.Time // when; zero before the first
		unlogged int       // failures since, not logged
	)
	for {
		err := consume(ctx)
		if err == nil || ctx.Err() != nil {
			return err
		}
		t := now()
		if msg := err.Error(); loggedAt.IsZero() || msg != logged || t.Sub(loggedAt) >= quiet {
			args := []any{"in", backoff.String(), "err", err}
			if unlogged > 0 {
				args = append(args, "failures_not_logged", unlogged)
			}
			log.Warn(name+" stopped; resuming", args...)
			logged, loggedAt, unlogged = msg, t, 0
		} else {
			unlogged++
		}
		if !Wait(ctx, backoff, nil) {
			return nil
		}
	}
}
