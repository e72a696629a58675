package consume

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/slipverify/slipverify/core/api"
	"github.com/slipverify/slipverify/core/lib/stream"
	"github.com/slipverify/slipverify/usage/chstore"
	"github.com/slipverify/slipverify/usage/ledgertest"
)

// start runs a consumer of group on slip.usage until the test ends.
func start(t *testing.T, addr, group string, st *chstore.Store, batch int) (*Consumer, func()) {
	t.Helper()
	return startTopic(t, addr, api.TopicUsage, group, st, batch)
}

// startTopic runs a consumer of group on topic until the test ends.
func startTopic(t *testing.T, addr, topic, group string, st *chstore.Store, batch int) (*Consumer, func()) {
	t.Helper()
	r := kafka.NewReader(kafka.ReaderConfig{Brokers: []string{addr}, GroupID: group, Topic: topic,
		StartOffset: kafka.FirstOffset, MaxWait: 50 * time.Millisecond, SessionTimeout: 6 * time.Second, QueueCapacity: 4 * batch})
	c := &Consumer{Reader: r, Topic: topic, Store: st, Batch: batch, Flush: 50 * time.Millisecond, RetryMax: 100 * time.Millisecond,
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

// TestClickHouseOutage: ClickHouse stops and starts again while events
// keep coming; the consumer holds its batch, stops fetching, and drains the
// backlog when ClickHouse returns, losing nothing and counting nothing
// twice.
func TestClickHouseOutage(t *testing.T) {
	addr := ledgertest.Broker(t, 3)
	ch, st := ledgertest.Ledger(t)
	w := ledgertest.Writer(t, addr)
	start(t, addr, "usage", st, 500)
	lag := &stream.Lag{Brokers: []string{addr}, Group: "usage", Topic: api.TopicUsage}
	measure := func() int64 {
		n, err := lag.Measure(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return n
	}

	var mu sync.Mutex
	var produced []api.UsageEvent
	stop, done := make(chan struct{}), make(chan struct{})
	go func() { // a steady load until told to stop, at most 400 rounds
		defer close(done)
		for round := 0; round < 400; round++ {
			select {
			case <-stop:
				return
			default:
			}
			batch := make([]api.UsageEvent, 100)
			for i := range batch {
				batch[i] = ledgertest.Event(round*100+i, "svc-a", []string{"br-1", "br-2"}[i%2], time.Now().UTC())
			}
			if err := w.WriteMessages(context.Background(), ledgertest.Messages(t, batch...)...); err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			produced = append(produced, batch...)
			mu.Unlock()
		}
	}()
	rows := func() uint64 { n, _ := ledgertest.Count(context.Background(), st); return n.Rows }
	if !ledgertest.Eventually(time.Minute, func() bool { return rows() > 0 }) {
		t.Fatal("nothing inserted before the outage")
	}
	failures := usageMetrics.failures.Get()
	if err := ch.Stop(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	if !ledgertest.Eventually(time.Minute, func() bool { return usageMetrics.failures.Get() > failures }) {
		t.Fatal("no insert failed while ClickHouse was down")
	}
	// The lag grows while ClickHouse is down: nothing is committed.
	lagDuring := measure()
	if !ledgertest.Eventually(time.Minute, func() bool { return measure() > lagDuring+1000 }) {
		t.Errorf("the lag did not grow during the outage: %d then %d", lagDuring, measure())
	}
	if err := ch.Restart(context.Background()); err != nil {
		t.Fatal(err)
	}
	before := rows()
	if !ledgertest.Eventually(time.Minute, func() bool { return rows() > before }) {
		t.Fatal("no insert after ClickHouse came back")
	}
	close(stop)
	<-done
	mu.Lock()
	defer mu.Unlock()
	got := ledgertest.WaitCounts(t, st, ledgertest.Want(produced), time.Minute)
	t.Logf("%d events through an outage (lag during it: %d messages); ledger: %v", len(produced), lagDuring, got)
	if !ledgertest.Eventually(10*time.Second, func() bool { return measure() == 0 }) {
		t.Errorf("lag after the drain: %d", measure())
	}
}
