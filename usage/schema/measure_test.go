package schema_test

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/slipverify/slipverify/usage/chstore"
	"github.com/slipverify/slipverify/usage/ledgertest"
)

// TestMeasureDesign measures the ledger's design choices on a real server
// (README, usage ledger): insert cost with and without the rollup's
// materialized view, the same batches into the ledger on a cluster of two
// replicas (one replica's local tables, replicated to the other), and the
// billable count per service and branch read three ways (FINAL, exact
// distinct over the events, the rollup). It runs only when
// USAGE_MEASURE_EVENTS is set.
func TestMeasureDesign(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("USAGE_MEASURE_EVENTS"))
	if n <= 0 {
		t.Skip("set USAGE_MEASURE_EVENTS (for example 2000000) to measure")
	}
	srv, st := ledgertest.Ledger(t)
	ctx := context.Background()
	exec := func(q string) {
		if err := st.Conn().Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	exec("CREATE DATABASE plain")
	exec("CREATE TABLE plain.usage_events AS slip.usage_events ENGINE = MergeTree PARTITION BY toYYYYMM(occurred_at) ORDER BY (service_id, branch_id, event_id)")
	plain, err := chstore.Open(chstore.Options{Addrs: []string{srv.Addr()}, Database: "plain", Username: "default"})
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	at := time.Now().UTC()
	var rows chstore.Rows
	batch := func(done int) {
		rows.Reset()
		for i := range 20000 {
			e := ledgertest.Event(done+i, "svc-"+strconv.Itoa(i%50), "br-"+strconv.Itoa(i%500), at.Add(-time.Duration(i%30)*24*time.Hour))
			rows.Append(&e)
		}
	}
	var withMV, without, onCluster time.Duration
	for done := 0; done < n; done += 20000 {
		batch(done)
		start := time.Now()
		if err := st.Insert(ctx, &rows); err != nil {
			t.Fatal(err)
		}
		withMV += time.Since(start)
		start = time.Now()
		if err := plain.Insert(ctx, &rows); err != nil {
			t.Fatal(err)
		}
		without += time.Since(start)
	}
	// The cluster after the single server, so that its replication and
	// merges do not take the cores from the single server's inserts.
	_, cluster := ledgertest.ClusterLedger(t)
	for done := 0; done < n; done += 20000 {
		batch(done)
		start := time.Now()
		if err := cluster[0].Insert(ctx, &rows); err != nil {
			t.Fatal(err)
		}
		onCluster += time.Since(start)
	}
	t.Logf("insert %d events in 20k batches: %.0f events/s with the rollup view, %.0f/s into a plain MergeTree, %.0f/s on the cluster (with the view)",
		n, float64(n)/withMV.Seconds(), float64(n)/without.Seconds(), float64(n)/onCluster.Seconds())
	for _, q := range []struct{ name, sql string }{
		{"FINAL + count", "SELECT service_id, branch_id, count() FROM slip.usage_events FINAL WHERE billable = 1 GROUP BY service_id, branch_id"},
		{"uniqExactIf over events", "SELECT service_id, branch_id, uniqExactIf(event_id, billable = 1) FROM slip.usage_events GROUP BY service_id, branch_id"},
		{"rollup uniqExactIfMerge", "SELECT service_id, branch_id, uniqExactIfMerge(billable) FROM slip.usage_daily GROUP BY service_id, branch_id"},
	} {
		best := time.Hour
		for range 3 {
			start := time.Now()
			res, err := st.Conn().Query(ctx, q.sql)
			if err != nil {
				t.Fatal(err)
			}
			for res.Next() {
			}
			res.Close()
			best = min(best, time.Since(start))
		}
		t.Logf("%-26s best of 3: %v", q.name, best)
	}
}
