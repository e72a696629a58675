package report

import (
	"strings"
	"testing"
	"time"
)

// storeRun is a report of one run of bank-v2 peak on store.
func storeRun(store string, cores int, verif, best float64, cpu map[string]time.Duration, c *Commits) *Report {
	s := &Scenario{Name: "bank-v2 peak", Elapsed: 10, Units: 1, Verifications: verif, OKRate: verif,
		Steps: []Step{{OKRate: best / 2}, {OKRate: best}}, Commits: c}
	s.SetCPU(cpu)
	return &Report{Version: Version, Store: store, Cores: cores, Scenarios: []*Scenario{s}}
}

// TestStores puts runs on two stores side by side: each run's row, each
// store's medians, and the ratio a reader is after.
func TestStores(t *testing.T) {
	sec := time.Second
	runs := []*Report{
		storeRun("bbolt", 1, 4000, 6000, map[string]time.Duration{"core": 6 * sec}, &Commits{Commits: 5000, Writes: 40000}),
		storeRun("postgres", 2, 1000, 1500, map[string]time.Duration{"core": 7 * sec, "postgres": 8 * sec, "postgres/primary": 7 * sec, "postgres/standby": sec}, &Commits{Commits: 500, Writes: 10000}),
		storeRun("bbolt", 1, 3000, 5000, map[string]time.Duration{"core": 6 * sec}, nil),
		storeRun("postgres", 2, 1200, 1600, map[string]time.Duration{"core": 9 * sec, "postgres": 9 * sec, "postgres/primary": 8 * sec, "postgres/standby": sec}, nil),
	}
	var b strings.Builder
	Stores(&b, runs)
	out := b.String()
	// The table's columns, one space apart: run, store, cores, verif/s,
	// best step, p50, p99, core µs, postgres µs, primary, standby,
	// writes/commit, commits/s.
	spaced := strings.Join(strings.Fields(out), " ")
	for _, want := range []string{
		"stores side by side: bbolt, postgres, 2 cores, 4 runs in turn",
		// 40,000 verifications in 6 CPU-seconds of core: 150 µs each;
		// on PostgreSQL 10,000 in 7 s of core, 8 of PostgreSQL.
		"1 bbolt 1 4000 6000 0 0 150 - - - 8.0 500",
		"2 postgres 2 1000 1500 0 0 700 800 700 100 20.0 50",
		// Medians: bbolt 3,500/s, best 5,500; PostgreSQL 1,100, best
		// 1,550; writes per commit of the runs that counted them.
		"median bbolt 3500 5500 0 0 175 - - - 8.0 500",
		"median postgres, 2 cores 1100 1550 0 0 725 775 683 92 20.0 50",
		"postgres, 2 cores / bbolt: verif/s 0.31, best step 0.28 (of the medians; each round's best steps: 0.25, 0.32)",
	} {
		if !strings.Contains(spaced, want) {
			t.Errorf("lacks %q:\n%s", want, out)
		}
	}
}

// TestCPUPerVerification: a run's table says what a verification cost
// core and PostgreSQL, each server apart, and what core's store committed.
func TestCPUPerVerification(t *testing.T) {
	r := storeRun("postgres", 2, 1000, 1500, map[string]time.Duration{"core": 7 * time.Second, "postgres": 8 * time.Second,
		"postgres/primary": 7 * time.Second, "postgres/standby": time.Second}, &Commits{Commits: 500, Writes: 10000})
	var b strings.Builder
	r.Table(&b)
	for _, want := range []string{"core on postgres (2 processes)", "CPU per verification: core 700 µs, postgres 800 µs (primary 700, standby 100)",
		"core's store: 500 commits (50/s), 10000 writes, 20.0 writes per commit"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
}
