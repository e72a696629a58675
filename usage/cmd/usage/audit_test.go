package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/slipverify/slipverify/core/api"
	"github.com/slipverify/slipverify/core/lib/stream"
	"github.com/slipverify/slipverify/core/lib/testnet"
	"github.com/slipverify/slipverify/usage/ledgertest"
)

// TestAuditIntoClickHouse: the usage program carries core's audit records
// from slip.audit into audit_events (each once, though some were sent
// twice; a message that is not a record set aside in audit_rejects) in its
// own consumer group, beside the usage events it carries into the ledger,
// and commits the group's offsets to the end.
func TestAuditIntoClickHouse(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the usage program against a broker and ClickHouse")
	}
	broker := ledgertest.Broker(t, 3)
	ch, st := ledgertest.Ledger(t)
	at := time.Now().UTC()
	var records []api.AuditRecord
	for i := range 50 {
		records = append(records, ledgertest.Audit(i, []string{"svc-a", "svc-b", ""}[i%3], at))
	}
	ledgertest.ProduceAudit(t, broker, records...)
	ledgertest.ProduceRaw(t, broker, api.TopicAudit, kafka.Message{Key: []byte("svc-a"), Value: []byte(`{"id":"x"}`)})
	ledgertest.ProduceAudit(t, broker, records[:10]...) // core's outbox resends after a crash
	var events []api.UsageEvent
	for i := range 100 {
		events = append(events, ledgertest.Event(i, "svc-a", "br-1", at))
	}
	ledgertest.Produce(t, ledgertest.Writer(t, broker), events...)

	p := testnet.StartUsage(t, broker, ch.Addr(), usageEnv(broker, ch.Addr())...)
	var c ledgertest.AuditCounts
	if !ledgertest.Eventually(time.Minute, func() bool {
		c, _ = ledgertest.CountAudit(context.Background(), st)
		return c.Records == uint64(len(records)) && c.Rejects == 1
	}) {
		t.Fatalf("audit counts %+v, want %d records and 1 reject\n%s", c, len(records), p.Output())
	}
	if c.IDs != uint64(len(records)) {
		t.Errorf("distinct ids %d, want %d", c.IDs, len(records))
	}
	ledgertest.WaitCounts(t, st, ledgertest.Want(events), time.Minute)

	lag := &stream.Lag{Brokers: []string{broker}, Group: "usage-audit", Topic: api.TopicAudit}
	var n int64
	if !ledgertest.Eventually(30*time.Second, func() bool { n, _ = lag.Measure(context.Background()); return n == 0 }) {
		t.Errorf("group usage-audit's lag on slip.audit: %d, want 0", n)
	}
	var metrics string
	ledgertest.Eventually(30*time.Second, func() bool {
		_, metrics, _ = get(p.URL() + "/metrics")
		return strings.Contains(metrics, "usage_audit_consumer_lag_messages 0\n")
	})
	for _, m := range []string{"usage_audit_consumer_lag_messages 0\n", "usage_audit_rows_rejected_total 1\n", "usage_audit_rows_inserted_total 60\n"} {
		if !strings.Contains(metrics, m) {
			t.Errorf("/metrics lacks %q", m)
		}
	}
}
