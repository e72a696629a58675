package schema_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/slipverify/slipverify/core/api"
	"github.com/slipverify/slipverify/usage/chstore"
	"github.com/slipverify/slipverify/usage/ledgertest"
	"github.com/slipverify/slipverify/usage/schema"
)

// TestClusterSchema: on a cluster of two replicas the schema comes up on
// both from empty (migrated through the first), and again over itself
// from both at once; events inserted through one replica are counted
// through the other, by the ledger and the finance views alike (THB
// included); migration 4, which adds columns, runs again harmlessly.
func TestClusterSchema(t *testing.T) {
	_, st := ledgertest.ClusterLedger(t)
	ctx := context.Background()
	want := []string{"audit_events", "audit_events_local", "audit_rejects", "audit_rejects_local", "billable_by_period", "billable_daily",
		"schema_migrations", "schema_migrations_local", "service_anchor_history", "service_anchor_history_local",
		"service_anchors", "service_anchors_local", "thb_daily", "usage_daily", "usage_daily_local", "usage_daily_mv",
		"usage_events", "usage_events_local", "usage_rejects", "usage_rejects_local"}
	last := schema.Migrations[len(schema.Migrations)-1].Version
	check := func(when string) {
		t.Helper()
		for i, s := range st {
			var tables []string
			rows, err := s.Conn().Query(ctx, "SELECT name FROM system.tables WHERE database = 'slip' ORDER BY name")
			if err != nil {
				t.Fatal(err)
			}
			for rows.Next() {
				var n string
				rows.Scan(&n)
				tables = append(tables, n)
			}
			rows.Close()
			if !slices.Equal(tables, want) {
				t.Errorf("%s: replica %d has tables %v, want %v", when, i+1, tables, want)
			}
			// The record of the last migration reaches the other replica
			// by replication, a moment later.
			var v uint32
			if !ledgertest.Eventually(time.Minute, func() bool { v, err = schema.Version(ctx, s.Conn(), "slip"); return err == nil && v == last }) {
				t.Errorf("%s: replica %d at version %d (%v), want %d", when, i+1, v, err, last)
			}
		}
	}
	check("from empty")
	var wg sync.WaitGroup
	errs := make([]error, len(st))
	for i, s := range st {
		wg.Go(func() { errs[i] = s.Migrate(ctx) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("migrating again through replica %d: %v", i+1, err)
		}
	}
	check("over itself")

	var rows chstore.Rows
	var events []api.UsageEvent
	at := time.Now().UTC().Truncate(time.Second)
	for i := range 5000 {
		e := ledgertest.Event(i, fmt.Sprintf("svc-%d", i%3), fmt.Sprintf("br-%d", i%7), at.Add(-time.Duration(i%40)*24*time.Hour))
		events = append(events, e)
		if err := rows.Append(&e); err != nil {
			t.Fatal(err)
		}
	}
	if err := st[0].Insert(ctx, &rows); err != nil {
		t.Fatal(err)
	}
	ledgertest.WaitCounts(t, st[1], ledgertest.Want(events), time.Minute)
	// The finance views on the other replica: billable per period.
	var billable uint64
	if err := st[1].Conn().QueryRow(ctx, "SELECT sum(billable) FROM slip.billable_by_period").Scan(&billable); err != nil {
		t.Fatal(err)
	}
	if want := ledgertest.Want(events).Billable; billable != want {
		t.Errorf("billable_by_period on the second replica: %d, want %d", billable, want)
	}

	// Migration 4 run again (interrupted before its record, or by two
	// processes): its ALTERs and the Distributed table made again change
	// nothing, and each replica's tables have the amount.
	all := schema.Migrations
	i := slices.IndexFunc(all, func(m schema.Migration) bool { return m.Version == 4 })
	schema.Migrations = append(all[:len(all):len(all)], schema.Migration{Version: 99, Name: "migration 4 again", Statements: all[i].Statements})
	err := st[1].Migrate(ctx)
	schema.Migrations = all
	if err != nil {
		t.Fatalf("migration 4 run again through the second replica: %v", err)
	}
	for i, s := range st {
		var n uint64
		err := s.Conn().QueryRow(ctx, "SELECT count() FROM system.columns WHERE database = 'slip' AND table IN ('usage_events', 'usage_events_local') AND name IN ('amount', 'sending_bank')").Scan(&n)
		if err != nil || n != 4 {
			t.Errorf("replica %d: %d of the amount columns of usage_events and usage_events_local (%v), want 4", i+1, n, err)
		}
	}
	ledgertest.WaitCounts(t, st[0], ledgertest.Want(events), time.Minute)
}
