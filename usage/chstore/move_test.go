package chstore_test

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/slipverify/slipverify/core/api"
	"github.com/slipverify/slipverify/deploy/clickhouse"
	"github.com/slipverify/slipverify/usage/chstore"
	"github.com/slipverify/slipverify/usage/ledgertest"
	"github.com/slipverify/slipverify/usage/schema"
)

// TestMoveToCluster: a ledger made on one server by an older usage (before
// amounts), its events in it twice (a retried batch), with billing anchors
// and audit records, is moved into a cluster that server joined; through
// the other replica every event, billable period and audit record counts
// once, and moving again changes nothing.
func TestMoveToCluster(t *testing.T) {
	cl := clickhouse.StartTestCluster(t)
	ctx := context.Background()
	single, err := chstore.Open(chstore.Options{Addrs: []string{cl.Replicas[0].Addr()}, Database: "slip", Username: "default"})
	if err != nil {
		t.Fatal(err)
	}
	defer single.Close()
	// Made by a usage before migration 4 (events without amounts), moved
	// by this one: the old tables are migrated before their partitions
	// are attached.
	all := schema.Migrations
	schema.Migrations = all[:slices.IndexFunc(all, func(m schema.Migration) bool { return m.Version == 4 })]
	err = single.Migrate(ctx)
	schema.Migrations = all
	if err != nil {
		t.Fatal(err)
	}
	var events []api.UsageEvent
	at := time.Now().UTC()
	for i := range 4000 {
		e := ledgertest.Event(i, fmt.Sprintf("svc-%d", i%3), fmt.Sprintf("br-%d", i%7), at.Add(-time.Duration(i%90)*24*time.Hour))
		e.Amount, e.SendingBank = 0, ""
		events = append(events, e)
	}
	for range 2 {
		b, err := single.Conn().PrepareBatch(ctx, "INSERT INTO slip.usage_events (event_id, occurred_at, service_id, branch_id, kind, api, mode, outcome, billable, job_id)")
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range events {
			billable := uint8(0)
			if e.Billable {
				billable = 1
			}
			if err := b.Append(e.EventID, e.OccurredAt, e.ServiceID, e.BranchID, e.Kind, e.API, e.Mode, e.Outcome, billable, e.JobID); err != nil {
				t.Fatal(err)
			}
		}
		if err := b.Send(); err != nil {
			t.Fatal(err)
		}
	}
	if err := single.SetAnchors(ctx, map[string]chstore.Anchor{"svc-1": {Day: 15}}, at); err != nil {
		t.Fatal(err)
	}
	var audit chstore.AuditRows
	for i := range 10 {
		a := ledgertest.Audit(i, "svc-1", at)
		audit.Append(&a)
	}
	if err := single.InsertAudit(ctx, &audit); err != nil {
		t.Fatal(err)
	}
	periods := billableByPeriod(t, single)

	st := ledgertest.Open(t, cl.Replicas[0].Addr())
	var out bytes.Buffer
	if err := st.MoveToCluster(ctx, &out); err != nil {
		t.Fatalf("%v\n%s", err, &out)
	}
	t.Logf("move:\n%s", &out)
	other := ledgertest.Open(t, cl.Replicas[1].Addr())
	check := func(when string) {
		t.Helper()
		ledgertest.WaitCounts(t, other, ledgertest.Want(events), time.Minute)
		if got := billableByPeriod(t, other); fmt.Sprint(got) != fmt.Sprint(periods) {
			t.Errorf("%s: billable by period %v, before the move %v", when, got, periods)
		}
		var c ledgertest.AuditCounts
		if !ledgertest.Eventually(time.Minute, func() bool { c, err = ledgertest.CountAudit(ctx, other); return err == nil && c.Records == 10 }) {
			t.Errorf("%s: audit records %+v (%v), want 10", when, c, err)
		}
	}
	check("after the move")
	out.Reset()
	if err := st.MoveToCluster(ctx, &out); err != nil {
		t.Fatalf("again: %v\n%s", err, &out)
	}
	check("after moving again")
}

// billableByPeriod reads the finance view: billable events per service,
// branch and billing period.
func billableByPeriod(t *testing.T, st *chstore.Store) map[string]uint64 {
	t.Helper()
	res, err := st.Conn().Query(context.Background(), "SELECT service_id, branch_id, toString(period_start), billable FROM slip.billable_by_period")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Close()
	out := map[string]uint64{}
	for res.Next() {
		var s, b, p string
		var n uint64
		if err := res.Scan(&s, &b, &p, &n); err != nil {
			t.Fatal(err)
		}
		out[s+"/"+b+"/"+p] = n
	}
	return out
}
