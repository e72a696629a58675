package reconcile

import "testing"

// TestRow is the rule of one row: the ledger's counts against core's as
// read before (lo) and after (hi) the ledger was.
func TestRow(t *testing.T) {
	f := func(name string, lo, hi, ledger counts, branch bool, status string, units int64) {
		t.Helper()
		r := row("svc", "", "2026-11-01", lo, hi, ledger, branch)
		if r.Status != status || r.Units != units {
			t.Errorf("%s: %s by %d, want %s by %d", name, r.Status, r.Units, status, units)
		}
	}
	f("equal", counts{5, 9}, counts{5, 9}, counts{5, 9}, false, OK, 0)
	f("events in flight", counts{5, 9}, counts{8, 12}, counts{6, 10}, false, OK, 0)
	f("event core never counted", counts{5, 9}, counts{5, 9}, counts{6, 10}, false, Drift, 1)
	f("event never arrived", counts{5, 9}, counts{7, 11}, counts{4, 8}, false, Drift, 1)
	f("counted in the wrong period", counts{5, 9}, counts{5, 9}, counts{3, 9}, false, Drift, 2)
	f("branch reset", counts{5, 9}, counts{0, 9}, counts{5, 9}, true, Reset, 0)
	f("reset in flight", counts{5, 9}, counts{0, 10}, counts{5, 9}, true, Reset, 0)
	f("service never resets", counts{5, 9}, counts{0, 9}, counts{5, 9}, false, Drift, 5)
	f("reset and drift", counts{5, 9}, counts{0, 9}, counts{5, 11}, true, Drift, 5)
}
