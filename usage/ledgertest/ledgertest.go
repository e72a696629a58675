// Package ledgertest starts the real parts the usage tier's tests run
// against (the dev broker in memory, a ClickHouse server of the test's
// own) and makes and counts usage events and audit records. It is
// imported only by tests.
package ledgertest

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/segmentio/kafka-go"

	"github.com/slipverify/slipverify/core/api"
	"github.com/slipverify/slipverify/deploy/broker"
	"github.com/slipverify/slipverify/deploy/clickhouse"
	"github.com/slipverify/slipverify/usage/chstore"
)

// Broker starts the dev broker in memory with the platform's topics and
// returns its address; it stops when the test ends.
func Broker(tb testing.TB, partitions int) string { return broker.StartTest(tb, partitions) }

// Ledger starts a ClickHouse server and returns a migrated store on it, in
// database slip.
func Ledger(tb testing.TB) (*clickhouse.Server, *chstore.Store) {
	tb.Helper()
	srv := clickhouse.StartTest(tb)
	st, err := chstore.Open(chstore.Options{Addrs: []string{srv.Addr()}, Database: "slip", Username: "default"})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { st.Close() })
	if err := st.Migrate(context.Background()); err != nil {
		tb.Fatal(err)
	}
	return srv, st
}

// ClusterName is the cluster of ClusterLedger, as SLIP_CLICKHOUSE_CLUSTER
// names it.
const ClusterName = "ledger"

// ClusterLedger starts a ClickHouse cluster (two replicas of one shard and
// a ZooKeeper) and returns it with a store on each replica, in database
// slip on cluster ClusterName, migrated through the first.
func ClusterLedger(tb testing.TB) (*clickhouse.Cluster, []*chstore.Store) {
	tb.Helper()
	cl := clickhouse.StartTestCluster(tb)
	var stores []*chstore.Store
	for _, r := range cl.Replicas {
		stores = append(stores, Open(tb, r.Addr()))
	}
	if err := stores[0].Migrate(context.Background()); err != nil {
		tb.Fatal(err)
	}
	return cl, stores
}

// Open returns a store on the ledger of cluster ClusterName at addrs
// (comma-separated), closed when the test ends.
func Open(tb testing.TB, addrs string) *chstore.Store {
	tb.Helper()
	st, err := chstore.Open(chstore.Options{Addrs: strings.Split(addrs, ","), Database: "slip", Cluster: ClusterName, Username: "default"})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { st.Close() })
	return st
}

// Event returns a valid usage event of service and branch; every fourth is
// a wallet, every third v1, every fifth an error that consumed nothing. A
// billable one carries an amount, as core writes it: 1.00 to 9,999.99 THB
// by i, from sending bank 004 (a wallet: none).
func Event(i int, service, branch string, at time.Time) api.UsageEvent {
	e := api.UsageEvent{EventID: uuid.NewString(), OccurredAt: at, ServiceID: service, BranchID: branch,
		Kind: api.KindBank, API: "v2", Mode: api.ModeSync, Outcome: api.OutcomeOK, Billable: true,
		Amount: 100 + int64(i)*7919%999900, SendingBank: "004"}
	if i%4 == 0 {
		e.Kind, e.SendingBank = api.KindWallet, ""
	}
	if i%3 == 0 {
		e.API = "v1"
	}
	if i%5 == 0 {
		e.Outcome, e.Billable, e.Amount, e.SendingBank = "SLIP_NOT_FOUND", false, 0, ""
	}
	return e
}

// Writer returns a producer of slip.usage as core uses it: keyed by
// service, all replicas acknowledging, batched.
func Writer(tb testing.TB, addr string) *kafka.Writer {
	tb.Helper()
	w := &kafka.Writer{Addr: kafka.TCP(addr), Topic: api.TopicUsage, Balancer: &kafka.Hash{}, RequiredAcks: kafka.RequireAll,
		BatchSize: 1000, BatchTimeout: 5 * time.Millisecond, BatchBytes: 1 << 20}
	tb.Cleanup(func() { w.Close() })
	return w
}

// Messages encodes events as slip.usage messages.
func Messages(tb testing.TB, events ...api.UsageEvent) []kafka.Message {
	tb.Helper()
	out := make([]kafka.Message, len(events))
	for i, e := range events {
		v, err := json.Marshal(e)
		if err != nil {
			tb.Fatal(err)
		}
		out[i] = kafka.Message{Key: []byte(e.ServiceID), Value: v}
	}
	return out
}

// Produce writes events to slip.usage.
func Produce(tb testing.TB, w *kafka.Writer, events ...api.UsageEvent) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := w.WriteMessages(ctx, Messages(tb, events...)...); err != nil {
		tb.Fatal(err)
	}
}

// Counts is what finance would read from the ledger.
type Counts struct {
	Events   uint64 // distinct events
	Billable uint64 // distinct billable events
	Rows     uint64 // rows in usage_events, duplicates included
	Rollup   uint64 // billable events by the daily rollup
	Satang   int64  // the THB of the billable events, in satang, by thb_daily
}

// Count reads the ledger's counts.
func Count(ctx context.Context, st *chstore.Store) (Counts, error) {
	var c Counts
	err := st.Conn().QueryRow(ctx, "SELECT uniqExact(event_id), uniqExactIf(event_id, billable = 1), count() FROM slip.usage_events").
		Scan(&c.Events, &c.Billable, &c.Rows)
	if err != nil {
		return c, err
	}
	err = st.Conn().QueryRow(ctx, "SELECT sum(billable) FROM slip.billable_daily").Scan(&c.Rollup)
	if err != nil {
		return c, err
	}
	err = st.Conn().QueryRow(ctx, "SELECT sum(satang) FROM slip.thb_daily").Scan(&c.Satang)
	return c, err
}

// Rows counts the rows of usage_events, duplicates included: a cheap
// query to poll while inserts run (the distinct counts of Count read every
// event id).
func Rows(ctx context.Context, st *chstore.Store) (uint64, error) {
	var n uint64
	err := st.Conn().QueryRow(ctx, "SELECT count() FROM slip.usage_events").Scan(&n)
	return n, err
}

// Want returns the counts events make when each is counted once.
func Want(events []api.UsageEvent) Counts {
	c := Counts{Events: uint64(len(events))}
	for _, e := range events {
		if e.Billable {
			c.Billable++
			c.Satang += e.Amount
		}
	}
	c.Rollup = c.Billable
	return c
}

// WaitCounts polls the ledger until its distinct counts equal want, or
// fails after timeout with the last counts it saw.
func WaitCounts(tb testing.TB, st *chstore.Store, want Counts, timeout time.Duration) Counts {
	tb.Helper()
	var last Counts
	var err error
	ok := Eventually(timeout, func() bool {
		last, err = Count(context.Background(), st)
		return err == nil && last.Events == want.Events && last.Billable == want.Billable && last.Rollup == want.Rollup &&
			last.Satang == want.Satang
	})
	if !ok {
		tb.Fatalf("ledger counts %+v (err %v), want events %d billable %d satang %d", last, err, want.Events, want.Billable, want.Satang)
	}
	return last
}

// Eventually polls cond every 20 ms until it holds or timeout passes.
func Eventually(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond) // polling interval, not a wait for time to pass
	}
	return true
}

// String renders counts for messages.
func (c Counts) String() string {
	return fmt.Sprintf("events %d, billable %d, rows %d, rollup %d, satang %d", c.Events, c.Billable, c.Rows, c.Rollup, c.Satang)
}

// Audit returns a valid audit record of service: a plan change by an
// operator, the changed service before and after as the admin API shows it.
func Audit(i int, service string, at time.Time) api.AuditRecord {
	return api.AuditRecord{ID: uuid.NewString(), At: at, Actor: api.AuditActor{Type: api.ActorAdmin, ID: "tok-ops", Name: "ops"},
		RequestID: fmt.Sprintf("req-%d", i), Action: "service.plan", ServiceID: service,
		Target: api.AuditTarget{Type: "service", ID: service},
		Before: json.RawMessage(fmt.Sprintf(`{"id":%q,"plan":{"name":"basic","quotaLimit":%d}}`, service, 1000+i)),
		After:  json.RawMessage(fmt.Sprintf(`{"id":%q,"plan":{"name":"pro","quotaLimit":%d}}`, service, 5000+i)),
		Reason: fmt.Sprintf("upgrade %d", i)}
}

// ProduceAudit writes records to slip.audit keyed by service, as core's
// outbox does.
func ProduceAudit(tb testing.TB, addr string, records ...api.AuditRecord) {
	tb.Helper()
	msgs := make([]kafka.Message, len(records))
	for i, a := range records {
		v, err := json.Marshal(a)
		if err != nil {
			tb.Fatal(err)
		}
		msgs[i] = kafka.Message{Key: []byte(a.ServiceID), Value: v}
	}
	ProduceRaw(tb, addr, api.TopicAudit, msgs...)
}

// ProduceRaw writes messages as they are to topic.
func ProduceRaw(tb testing.TB, addr, topic string, msgs ...kafka.Message) {
	tb.Helper()
	w := &kafka.Writer{Addr: kafka.TCP(addr), Topic: topic, Balancer: &kafka.Hash{}, RequiredAcks: kafka.RequireAll,
		BatchSize: 1000, BatchTimeout: 5 * time.Millisecond, BatchBytes: 1 << 20}
	defer w.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := w.WriteMessages(ctx, msgs...); err != nil {
		tb.Fatal(err)
	}
}

// AuditCounts is what a reader of audit_events sees.
type AuditCounts struct {
	Records uint64 // rows read with FINAL: each record once
	IDs     uint64 // distinct ids
	Rows    uint64 // rows, redeliveries included until a merge folds them
	Rejects uint64 // rows of audit_rejects
}

// CountAudit reads audit_events' and audit_rejects' counts.
func CountAudit(ctx context.Context, st *chstore.Store) (AuditCounts, error) {
	var c AuditCounts
	err := st.Conn().QueryRow(ctx, "SELECT count() FROM slip.audit_events FINAL").Scan(&c.Records)
	if err == nil {
		err = st.Conn().QueryRow(ctx, "SELECT uniqExact(id), count() FROM slip.audit_events").Scan(&c.IDs, &c.Rows)
	}
	if err == nil {
		err = st.Conn().QueryRow(ctx, "SELECT count() FROM slip.audit_rejects").Scan(&c.Rejects)
	}
	return c, err
}
