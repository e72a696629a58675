package reconcile_test

import (
	"context"
	"encoding/json"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/slipverify/slipverify/core/api"
	"github.com/slipverify/slipverify/usage/chstore"
	"github.com/slipverify/slipverify/usage/ledgertest"
	"github.com/slipverify/slipverify/usage/reconcile"
)

const token = "watch-test-token-of-32-characters-at-least"

// counters stands in for core's counters route: the test sets each
// branch's count (used = total, all in the current period) between runs,
// to script events in flight and counters moved without an event.
type counters struct {
	mu       sync.Mutex
	branches map[string]map[string]int64 // service → branch → count
	fail     bool
}

func (c *counters) set(service, branch string, n int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.branches[service][branch] = n
}

func (c *counters) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if r.URL.Path != api.PathUsageCounters || r.Header.Get(api.HeaderEdgeToken) != token || c.fail {
		w.WriteHeader(http.StatusInternalServerError)
		w.Write([]byte(`{"success":false,"error":{"code":"INTERNAL_SERVER_ERROR","message":"down"}}`))
		return
	}
	bkk := time.FixedZone("Asia/Bangkok", 7*3600)
	now := time.Now().In(bkk)
	start := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, bkk)
	out := api.UsageCounters{At: time.Now().UTC()}
	for _, id := range []string{"svc-a", "svc-b", "svc-c"} { // core lists services by id
		s := api.ServiceCounters{ServiceID: id, CycleAnchorDay: 1, PeriodStart: start, PeriodEnd: start.AddDate(0, 1, 0)}
		for _, b := range []string{"1", "2"} {
			if n, ok := c.branches[id][id+b]; ok {
				s.Branches = append(s.Branches, api.BranchCounters{BranchID: id + b, Used: n, Total: n})
				s.Used, s.Total = s.Used+n, s.Total+n
			}
		}
		out.Services = append(out.Services, s)
	}
	json.NewEncoder(w).Encode(map[string]any{"success": true, "data": out})
}

// insert writes n new billable events of branch into the ledger, each
// twice (a redelivered batch), and returns the last.
func insert(t *testing.T, st *chstore.Store, service, branch string, n int) api.UsageEvent {
	t.Helper()
	var rows chstore.Rows
	var e api.UsageEvent
	for range n {
		e = api.UsageEvent{EventID: uuid.NewString(), OccurredAt: time.Now().UTC(), ServiceID: service, BranchID: branch,
			Kind: api.KindBank, API: "v2", Mode: api.ModeSync, Outcome: api.OutcomeOK, Billable: true}
		for range 2 {
			if err := rows.Append(&e); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := st.Insert(context.Background(), &rows); err != nil {
		t.Fatal(err)
	}
	return e
}

// TestWatch: periodic reconciliation against a ClickHouse ledger. Events in
// flight (counted by core, not yet in the ledger) are no drift; an event
// core never counted and a count core moved without an event are, by the
// units they are off, once the run that checks their service comes; a run
// checks two services, the next two after the last run's, of core's and
// the ledger's.
func TestWatch(t *testing.T) {
	_, st := ledgertest.Ledger(t)
	core := &counters{branches: map[string]map[string]int64{
		"svc-a": {"svc-a1": 3, "svc-a2": 2}, "svc-b": {"svc-b1": 1}, "svc-c": {"svc-c1": 0}}}
	srv := httptest.NewServer(core)
	defer srv.Close()
	clock := time.Now()
	w := &reconcile.Watch{Core: reconcile.Core{Addr: strings.TrimPrefix(srv.URL, "http://"), Token: token}, Store: st,
		Services: 2, Now: func() time.Time { return clock }}
	ctx := context.Background()
	run := func(want reconcile.Status) {
		t.Helper()
		clock = clock.Add(time.Minute)
		if err := w.Once(ctx); err != nil {
			t.Fatal(err)
		}
		got := w.Status()
		want.LastSuccess, want.Runs, want.Failures = clock, got.Runs, got.Failures
		if got != want {
			t.Errorf("after run %d: %+v, want %+v", got.Runs, got, want)
		}
	}

	// svc-b1's one event is still in flight.
	insert(t, st, "svc-a", "svc-a1", 3)
	insert(t, st, "svc-a", "svc-a2", 2)
	run(reconcile.Status{Checked: 2}) // svc-a, svc-b
	run(reconcile.Status{Checked: 3}) // svc-c

	// svc-b1's event arrives; core counts one more for svc-b1 that is in
	// flight; the ledger gains an event at svc-a1 that core never counted.
	insert(t, st, "svc-b", "svc-b1", 1)
	core.set("svc-b", "svc-b1", 2)
	insert(t, st, "svc-a", "svc-a1", 1)
	run(reconcile.Status{Units: 1, Rows: 2, Services: 1, Checked: 3}) // svc-a and svc-a1 one above core
	run(reconcile.Status{Units: 1, Rows: 2, Services: 1, Checked: 3}) // svc-c: svc-a's drift stands

	// svc-b1's second event never came: a counter moved without an event.
	run(reconcile.Status{Units: 2, Rows: 4, Services: 2, Checked: 3})

	// A run that cannot read core changes nothing but the failures.
	core.mu.Lock()
	core.fail = true
	core.mu.Unlock()
	before := w.Status()
	if err := w.Once(ctx); err == nil {
		t.Fatal("a run succeeded without core")
	}
	if got := w.Status(); got.Failures != before.Failures+1 || got.Units != before.Units || got.LastSuccess != before.LastSuccess {
		t.Errorf("after a failed run: %+v, before %+v", got, before)
	}
	core.mu.Lock()
	core.fail = false
	core.mu.Unlock()

	// Repaired: core counts svc-a1's extra event, svc-b1's event arrives.
	core.set("svc-a", "svc-a1", 4)
	insert(t, st, "svc-b", "svc-b1", 1)
	run(reconcile.Status{Checked: 3, Units: 2, Rows: 4, Services: 2}) // svc-c
	run(reconcile.Status{Checked: 3})                                 // svc-a, svc-b
}

// TestBillableOfBounded: the ledger query of a run returns the listed
// services only, and their days before the period as one row, so its size
// does not grow with the ledger's age while the totals stay exact.
func TestBillableOfBounded(t *testing.T) {
	_, st := ledgertest.Ledger(t)
	day := func(d int) time.Time { return time.Date(2026, 11, d, 5, 0, 0, 0, time.UTC) } // noon in Bangkok
	var rows chstore.Rows
	for i, d := range []int{2, 3, 3, 9, 20, 21, 21} {
		for _, svc := range []string{"svc-a", "svc-b"} {
			e := ledgertest.Event(1, svc, svc+"1", day(d))
			if i == 0 {
				e.Billable = false // an attempt that consumed nothing counts in neither
			}
			if err := rows.Append(&e); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := st.Insert(context.Background(), &rows); err != nil {
		t.Fatal(err)
	}
	got, err := st.BillableOf(context.Background(), []string{"svc-a"}, time.Date(2026, 11, 20, 0, 0, 0, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	byDay := map[string]uint64{}
	for _, d := range got {
		if d.ServiceID != "svc-a" || d.BranchID != "svc-a1" {
			t.Errorf("a row of %s/%s", d.ServiceID, d.BranchID)
		}
		byDay[d.Day.Format(time.DateOnly)] += d.Billable
	}
	want := map[string]uint64{"2026-11-19": 3, "2026-11-20": 1, "2026-11-21": 2}
	if !maps.Equal(byDay, want) {
		t.Errorf("billable by day %v, want %v", byDay, want)
	}
	if all, err := st.BillableByDay(context.Background()); err != nil || len(all) != 10 {
		t.Errorf("the whole ledger: %d rows (%v), want 10", len(all), err)
	}
}
