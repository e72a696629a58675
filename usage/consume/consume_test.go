package consume

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/slipverify/slipverify/core/api"
	"github.com/slipverify/slipverify/usage/chstore"
	"github.com/slipverify/slipverify/usage/ledgertest"
)

// start runs a consumer of group on slip.usage until the test ends.
func start(t *testing.T, addr, group string, st *chstore.Store, batch int) (*Consumer, func()) {
	t.Helper()
	r := kafka.NewReader(kafka.ReaderConfig{Brokers: []string{addr}, GroupID: group, Topic: api.TopicUsage,
		StartOffset: kafka.FirstOffset, MaxWait: 50 * time.Millisecond, SessionTimeout: 6 * time.Second, QueueCapacity: 4 * batch})
	c := &Consumer{Reader: r, Store: st, Batch: batch, Flush: 50 * time.Millisecond, RetryMax: 100 * time.Millisecond,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			cancel()
			if err := <-done; err != nil {
				t.Errorf("consumer: %v", err)
			}
			r.Close()
		}
	}
	t.Cleanup(stop)
	return c, stop
}

// TestCountsEqualEvents: every event produced is in the ledger once, a
// redelivered event counts once, and a message that is not a usage event
// is set aside in usage_rejects.
func TestCountsEqualEvents(t *testing.T) {
	addr := ledgertest.Broker(t, 3)
	_, st := ledgertest.Ledger(t)
	w := ledgertest.Writer(t, addr)
	now := time.Now().UTC().Truncate(time.Second)
	var events []api.UsageEvent
	for i := range 5000 {
		events = append(events, ledgertest.Event(i, []string{"svc-a", "svc-b"}[i%2], []string{"br-1", "br-2", "br-3"}[i%3], now))
	}
	ledgertest.Produce(t, w, events...)
	ledgertest.Produce(t, w, events[:100]...) // core's outbox resends after a crash
	bad := []kafka.Message{{Key: []byte("svc-a"), Value: []byte(`{"eventId":"nope","kind":"fax"}`)}, {Value: []byte("{")}}
	if err := w.WriteMessages(context.Background(), bad...); err != nil {
		t.Fatal(err)
	}
	start(t, addr, "usage", st, 1000)
	got := ledgertest.WaitCounts(t, st, ledgertest.Want(events), time.Minute)
	if got.Rows < uint64(len(events)) {
		t.Errorf("rows %d < events %d", got.Rows, len(events))
	}
	var rejects uint64
	if !ledgertest.Eventually(10*time.Second, func() bool {
		st.Conn().QueryRow(context.Background(), "SELECT count() FROM slip.usage_rejects").Scan(&rejects)
		return rejects == 2
	}) {
		t.Errorf("rejects: %d, want 2", rejects)
	}
	var reason string
	st.Conn().QueryRow(context.Background(), "SELECT error FROM slip.usage_rejects WHERE key = 'svc-a'").Scan(&reason)
	for _, want := range []string{"eventId", "occurredAt", "serviceId", "kind", "api", "mode"} {
		if !strings.Contains(reason, want) {
			t.Errorf("reject reason %q does not name %s", reason, want)
		}
	}
}
