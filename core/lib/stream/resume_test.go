package stream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"testing"
	"time"
)

// TestResumeLogsOutageQuietly: a consumer failing every second through an
// outage logs its first failure, then the same failure at most once a
// Quiet with the number it did not log; another error, or a failure after
// a long run, is logged at once. Every failure is retried.
func TestResumeLogsOutageQuietly(t *testing.T) {
	var out bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&out, nil))
	clock := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	now := func() time.Time { return clock }
	type run struct {
		took time.Duration // on the clock, before it fails
		err  string
	}
	runs := []run{
		{10 * time.Second, "broker down"}, // logged: the first
		{10 * time.Second, "broker down"},
		{10 * time.Second, "broker down"},
		{10 * time.Second, "broker down"},
		{10 * time.Second, "broker down"},
		{10 * time.Second, "broker down"},
		{10 * time.Second, "broker down"},     // logged: a minute after the first, 5 not logged
		{10 * time.Second, "clickhouse down"}, // logged: another error
		{10 * time.Second, "clickhouse down"},
		{5 * time.Minute, "clickhouse down"}, // logged: after a long run, 1 not logged
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	calls := 0
	err := resume(ctx, log, "test consumer", time.Nanosecond, time.Minute, now, func(ctx context.Context) error {
		if calls == len(runs) {
			cancel()
			return ctx.Err()
		}
		r := runs[calls]
		calls++
		clock = clock.Add(r.took)
		return errors.New(r.err)
	})
	if !errors.Is(err, context.Canceled) || calls != len(runs) {
		t.Fatalf("resume returned %v after %d runs, want context.Canceled after %d", err, calls, len(runs))
	}
	type line struct {
		Msg     string `json:"msg"`
		Err     string `json:"err"`
		Skipped int    `json:"failures_not_logged"`
	}
	var got []line
	for _, b := range bytes.Split(bytes.TrimSpace(out.Bytes()), []byte("\n")) {
		var l line
		if err := json.Unmarshal(b, &l); err != nil {
			t.Fatalf("log line %q: %v", b, err)
		}
		got = append(got, l)
	}
	msg := "test consumer stopped; resuming"
	want := []line{{msg, "broker down", 0}, {msg, "broker down", 5}, {msg, "clickhouse down", 0}, {msg, "clickhouse down", 1}}
	if len(got) != len(want) {
		t.Fatalf("logged %d lines, want %d:\n%s", len(got), len(want), out.String())
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("line %d: %+v, want %+v", i, got[i], want[i])
		}
	}
}
