package stream

import (
	"context"
	"log/slog"
	"time"
)

// Resume runs consume until ctx is done, and runs it again after backoff
// whenever it fails before that: a broker outage pauses a consumer instead
// of ending its program. consume must make a new reader each time, so the
// records a failed run did not commit are fetched again from the group's
// committed offsets (every handler tolerates a repeat). It returns what
// the last run returned once ctx is done.
func Resume(ctx context.Context, log *slog.Logger, name string, backoff time.Duration, consume func(context.Context) error) error {
	for {
		err := consume(ctx)
		if err == nil || ctx.Err() != nil {
			return err
		}
		log.Warn(name+" stopped; resuming", "in", backoff.String(), "err", err)
		if !wait(ctx, backoff, nil) {
			return nil
		}
	}
}
