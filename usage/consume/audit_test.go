package consume

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/slipverify/slipverify/core/api"
	"github.com/slipverify/slipverify/core/lib/stream"
	"github.com/slipverify/slipverify/usage/chstore"
	"github.com/slipverify/slipverify/usage/ledgertest"
)

// waitAudit polls audit_events and audit_rejects until cond holds, or
// fails after timeout with the last counts seen.
func waitAudit(t *testing.T, st *chstore.Store, timeout time.Duration, cond func(ledgertest.AuditCounts) bool) ledgertest.AuditCounts {
	t.Helper()
	var c ledgertest.AuditCounts
	var err error
	if !ledgertest.Eventually(timeout, func() bool {
		c, err = ledgertest.CountAudit(context.Background(), st)
		return err == nil && cond(c)
	}) {
		t.Fatalf("audit counts %+v (err %v)", c, err)
	}
	return c
}

// waitLag polls the group's lag on slip.audit until it is want.
func waitLag(t *testing.T, addr, group string, want int64) {
	t.Helper()
	lag := &stream.Lag{Brokers: []string{addr}, Group: group, Topic: api.TopicAudit}
	var n int64
	var err error
	if !ledgertest.Eventually(time.Minute, func() bool {
		n, err = lag.Measure(context.Background())
		return err == nil && n == want
	}) {
		t.Fatalf("group %s: lag %d (err %v), want %d", group, n, err, want)
	}
}

// TestAuditExactlyOnce: audit records published to slip.audit are in
// audit_events once each, read with FINAL, though core's outbox sent some
// twice and a second consumer group inserted them all again; after a merge
// the table holds one row per record. Messages that are not audit records
// are kept in audit_rejects with every problem named, and the records
// behind them on their partition arrive.
func TestAuditExactlyOnce(t *testing.T) {
	addr := ledgertest.Broker(t, 3)
	_, st := ledgertest.Ledger(t)
	at := time.Date(2026, 11, 20, 3, 4, 5, 678_900_000, time.UTC)
	var first, second []api.AuditRecord
	for i := range 200 {
		a := ledgertest.Audit(i, []string{"svc-a", "svc-b", "svc-c", ""}[i%4], at.Add(time.Duration(i)*time.Millisecond))
		if i < 100 {
			first = append(first, a)
		} else {
			second = append(second, a)
		}
	}
	first[0].Before = []byte(`{"id":"svc-a","name":"ร้าน"}`)
	first[0].After = nil // a deletion: after is null
	ledgertest.ProduceAudit(t, addr, first...)
	ledgertest.ProduceRaw(t, addr, api.TopicAudit,
		kafka.Message{Key: []byte("svc-a"), Value: []byte(`{"id":"nope","at":"2026-11-20T00:00:00Z","before":{"a":1}}`)},
		kafka.Message{Key: []byte("svc-a"), Value: []byte(`{`)})
	ledgertest.ProduceAudit(t, addr, second...)
	ledgertest.ProduceAudit(t, addr, first[:50]...) // core's outbox resends after a crash

	startTopic(t, addr, api.TopicAudit, "audit", st, 40)
	waitAudit(t, st, time.Minute, func(c ledgertest.AuditCounts) bool { return c.Records == 200 && c.Rejects == 2 })
	waitLag(t, addr, "audit", 0)

	// Another group reads the topic from its start into the same table:
	// every record is inserted again, as after a crash between insert and
	// commit.
	startTopic(t, addr, api.TopicAudit, "audit-again", st, 40)
	waitLag(t, addr, "audit-again", 0)
	c := waitAudit(t, st, time.Minute, func(c ledgertest.AuditCounts) bool { return c.Rejects == 4 })
	if c.Records != 200 || c.IDs != 200 {
		t.Errorf("after a redelivery of everything: %+v, want 200 records and ids", c)
	}
	if c.Rows <= 200 {
		t.Logf("rows %d: the redelivered rows were merged away already", c.Rows)
	}
	// OPTIMIZE does nothing, and says nothing, while a background merge
	// holds some of the parts: it is asked again until a merge of them all
	// has run.
	optimizes := 0
	merged := ledgertest.Eventually(time.Minute, func() bool {
		optimizes++
		if err := st.Conn().Exec(context.Background(), "OPTIMIZE TABLE slip.audit_events FINAL"); err != nil {
			t.Fatal(err)
		}
		c, _ = ledgertest.CountAudit(context.Background(), st)
		return c.Rows == 200
	})
	if !merged {
		t.Errorf("rows after %d merges: %d, want 200", optimizes, c.Rows)
	}

	// Each column holds what the record said.
	var (
		id, actorType, actorID, actorName, requestID, action, service, targetType, targetID, before, after, reason, atText string
		ms                                                                                                                 uint16
	)
	err := st.Conn().QueryRow(context.Background(), `SELECT id, toString(at, 'UTC'), at_ms, actor_type, actor_id, actor_name, request_id,
		action, service_id, target_type, target_id, before, after, reason FROM slip.audit_events FINAL WHERE id = ?`, first[0].ID).
		Scan(&id, &atText, &ms, &actorType, &actorID, &actorName, &requestID, &action, &service, &targetType, &targetID, &before, &after, &reason)
	if err != nil {
		t.Fatal(err)
	}
	got := []any{id, atText, ms, actorType, actorID, actorName, requestID, action, service, targetType, targetID, before, after, reason}
	want := []any{first[0].ID, "2026-11-20 03:04:05", uint16(678), "admin", "tok-ops", "ops", "req-0", "service.plan", "svc-a", "service", "svc-a",
		`{"id":"svc-a","name":"ร้าน"}`, "null", "upgrade 0"}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("column %d: %q, want %q", i, got[i], want[i])
		}
	}

	var reason1, reason2 string
	st.Conn().QueryRow(context.Background(), "SELECT error FROM slip.audit_rejects WHERE value LIKE '%nope%' LIMIT 1").Scan(&reason1)
	for _, w := range []string{"id", "actor.type", "action"} {
		if !strings.Contains(reason1, w+":") {
			t.Errorf("reject reason %q does not name %s", reason1, w)
		}
	}
	st.Conn().QueryRow(context.Background(), "SELECT error FROM slip.audit_rejects WHERE value = '{' LIMIT 1").Scan(&reason2)
	if !strings.Contains(reason2, "not an audit record") {
		t.Errorf("reject reason of a broken message: %q", reason2)
	}
}

// TestAuditCommitsAfterInsert: while audit_events cannot take an insert,
// the consumer holds its batch and commits nothing (the group's lag stays
// at every record); once the table is back the batch goes in and the lag
// falls to 0.
func TestAuditCommitsAfterInsert(t *testing.T) {
	addr := ledgertest.Broker(t, 3)
	_, st := ledgertest.Ledger(t)
	ctx := context.Background()
	if err := st.Conn().Exec(ctx, "RENAME TABLE slip.audit_events TO slip.audit_events_away"); err != nil {
		t.Fatal(err)
	}
	var records []api.AuditRecord
	for i := range 60 {
		records = append(records, ledgertest.Audit(i, []string{"svc-a", "svc-b"}[i%2], time.Now().UTC()))
	}
	ledgertest.ProduceAudit(t, addr, records...)
	failures := auditMetrics.failures.Get()
	startTopic(t, addr, api.TopicAudit, "audit", st, 1000)
	if !ledgertest.Eventually(time.Minute, func() bool { return auditMetrics.failures.Get() >= failures+3 }) {
		t.Fatal("no insert was attempted")
	}
	lag := &stream.Lag{Brokers: []string{addr}, Group: "audit", Topic: api.TopicAudit}
	if n, err := lag.Measure(ctx); err != nil || n != int64(len(records)) {
		t.Fatalf("lag while inserts fail: %d (err %v), want %d: offsets were committed before the insert", n, err, len(records))
	}
	if err := st.Conn().Exec(ctx, "RENAME TABLE slip.audit_events_away TO slip.audit_events"); err != nil {
		t.Fatal(err)
	}
	waitAudit(t, st, time.Minute, func(c ledgertest.AuditCounts) bool { return c.Records == uint64(len(records)) })
	waitLag(t, addr, "audit", 0)
}

// TestAuditDecode: what a slip.audit message becomes, and every problem
// of one that is not an audit record.
func TestAuditDecode(t *testing.T) {
	f := func(value string, want ...string) *chstore.AuditRows {
		t.Helper()
		var a auditRows
		err := a.add([]byte(value))
		if len(want) == 0 {
			if err != nil || a.len() != 1 {
				t.Fatalf("%s: %v, %d rows", value, err, a.len())
			}
			return &a.rows
		}
		for _, w := range want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %v does not name %s", value, err, w)
			}
		}
		if a.len() != 0 {
			t.Errorf("%s: appended though invalid", value)
		}
		return nil
	}
	const id = `"id":"3f1c2a4e-9b7d-4c1e-8a2b-0d9e8f7a6b5c"`
	r := f(`{"id":"3F1C2A4E-9B7D-4C1E-8A2B-0D9E8F7A6B5C","at":"2026-11-20T10:00:00.5+07:00","actor":{"type":"seed","id":""},` +
		`"action":"service.create","target":{"type":"service","id":"s"},"before":null,"after":{ "id" : "s",` + "\n" + ` "name" : "ร้าน" }}`)
	got := []any{r.ID[0], r.At[0], r.AtMS[0], r.Before[0], r.After[0]}
	want := []any{"3f1c2a4e-9b7d-4c1e-8a2b-0d9e8f7a6b5c", time.Date(2026, 11, 20, 3, 0, 0, 0, time.UTC), uint16(500), "null", `{"id":"s","name":"ร้าน"}`}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("field %d: %v, want %v", i, got[i], want[i])
		}
	}
	r = f(`{` + id + `,"at":"2026-11-20T10:00:00Z","actor":{"type":"system","id":"expiry"},"action":"service.state","future":[1,2]}`)
	if r.Before[0] != "null" || r.After[0] != "null" || r.ServiceID[0] != "" {
		t.Errorf("absent fields: before %q after %q service %q", r.Before[0], r.After[0], r.ServiceID[0])
	}
	f(`{"id":"3f1c2a4e","at":"1999-01-01T00:00:00Z","actor":{"id":"x"}}`, "id:", "at:", "actor.type:", "action:")
	f(`{`+id+`,"at":"2026-11-20T10:00:00Z","actor":{"type":"admin"},"action":"`+strings.Repeat("x", 1025)+`"}`, "action: longer")
	f(`{`+id+`,"at":"nope"}`, "not an audit record")
	f(`[]`, "not an audit record")
	f(``, "not an audit record")
}
