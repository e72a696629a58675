package suite

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/slipverify/slipverify/bench/report"
)

// TestShortSuite starts a real stack with make run and runs the suite's
// short form against it: every sync scenario answers, the async ones run or
// are reported pending with a reason, and the table, JSON and HTML are
// written and read back.
func TestShortSuite(t *testing.T) {
	out := t.TempDir()
	var log strings.Builder
	rep, err := Run(context.Background(), Options{Repo: filepath.Join("..", ".."), Out: out, Short: true,
		Only: []string{"bank-v2", "bank-v2-signed", "bank-v1", "wallet-v2", "duplicates", "overload", "async-single"}, Log: &log})
	if err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	for _, name := range []string{"bank-v2", "bank-v2-signed", "bank-v1", "wallet-v2", "duplicates"} {
		s := rep.Find(name)
		if s == nil || s.OK < 90 || s.Failed != 0 || s.Latency.P50 <= 0 {
			t.Errorf("%s: %+v", name, s)
		}
	}
	if s := rep.Find("overload"); s == nil || s.Requests < 300 {
		t.Errorf("overload: %+v", s)
	}
	if s := rep.Find("async-single"); s == nil || (s.Pending == "" && (s.Callbacks == nil || s.Callbacks.Stats.Delivered != s.OK || s.Callbacks.Stats.BadSig != 0)) {
		t.Errorf("async-single: %+v %+v", s, s.Callbacks)
	}
	// The stack settled after every scenario it ran: core's outbox and
	// usage's lag drained, the edge's rate factor back at 1 after overload.
	for _, s := range rep.Scenarios {
		if s.Pending == "" && (s.Settle == nil || !s.Settle.Settled) {
			t.Errorf("%s: settle %+v", s.Name, s.Settle)
		}
	}
	// Edge, core, dispatcher, usage, and PostgreSQL when core is planned
	// on it (the short run's low rate makes core look dear).
	if rep.Capacity == nil || len(rep.Capacity.Tiers) != 4 && (len(rep.Capacity.Tiers) != 5 || rep.Capacity.Store != "postgres") {
		t.Errorf("capacity: %+v", rep.Capacity)
	}
	json, html := filepath.Join(out, "bench.json"), filepath.Join(out, "bench.html")
	if err := rep.WriteJSON(json); err != nil {
		t.Fatal(err)
	}
	if err := rep.WriteHTML(html); err != nil {
		t.Fatal(err)
	}
	back, err := report.Read(json)
	if err != nil || len(back.Scenarios) != len(rep.Scenarios) {
		t.Fatalf("read back: %v", err)
	}
	page, _ := os.ReadFile(html)
	if !strings.Contains(string(page), "<svg") || strings.Contains(string(page), "http://") && !strings.Contains(string(page), "http://www.w3.org/2000/svg") {
		t.Error("the HTML has no chart, or refers to the network")
	}
	var table strings.Builder
	rep.Table(&table)
	if !strings.Contains(table.String(), "bank-v2-signed") || !strings.Contains(table.String(), "Capacity for 5000") ||
		!strings.Contains(table.String(), "settling: after each scenario the suite waited for core outbox 0, usage Kafka lag 0, edge rate factor 1") {
		t.Errorf("table:\n%s", table.String())
	}
}

// TestShortSuitePostgres runs the suite's short form against a stack on
// PostgreSQL (SLIP_STORE=postgres make run, two cores): the run says so,
// both cores' outboxes settle, and what a verification cost core and
// PostgreSQL (its primary and standby apart) and core's commits are
// measured.
func TestShortSuitePostgres(t *testing.T) {
	if _, err := os.Stat("/usr/lib/postgresql/15/bin/postgres"); err != nil {
		t.Skip("no PostgreSQL 15 (apt-get install postgresql-15)")
	}
	var log strings.Builder
	rep, err := Run(context.Background(), Options{Repo: filepath.Join("..", ".."), Out: t.TempDir(), Short: true,
		Only: []string{"bank-v2"}, Store: "postgres", Log: &log})
	if err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	s := rep.Find("bank-v2")
	if rep.Store != "postgres" || rep.Cores != 2 || s == nil || s.OK < 90 || s.Failed != 0 {
		t.Fatalf("store %q, %d cores, bank-v2 %+v", rep.Store, rep.Cores, s)
	}
	if s.Settle == nil || !s.Settle.Settled || strings.Count(rep.Settling, " outbox 0") != 2 {
		t.Errorf("settle %+v after waiting for %s", s.Settle, rep.Settling)
	}
	for _, tier := range []string{"core", "postgres", "postgres/primary", "postgres/standby"} {
		if s.CPUPer(tier) <= 0 {
			t.Errorf("no CPU per verification of %s: %v", tier, s.CPU)
		}
	}
	if c := s.Commits; c == nil || c.Writes < float64(s.OK) || c.Commits <= 0 {
		t.Errorf("commits %+v for %d verifications", c, s.OK)
	}
	if rep.Capacity == nil || rep.Capacity.Input.Source.CorePostgres != "measured: bank-v2 on PostgreSQL" {
		t.Errorf("capacity from a run on PostgreSQL: %+v", rep.Capacity)
	}
}
