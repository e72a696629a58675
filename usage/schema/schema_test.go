package schema_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/slipverify/slipverify/core/api"
	"github.com/slipverify/slipverify/core/quota"
	"github.com/slipverify/slipverify/core/store"
	"github.com/slipverify/slipverify/usage/chstore"
	"github.com/slipverify/slipverify/usage/ledgertest"
	"github.com/slipverify/slipverify/usage/schema"
)

// TestMigrateTwice: a second migration (another usage process starting)
// changes nothing and the version is the last migration's.
func TestMigrateTwice(t *testing.T) {
	_, st := ledgertest.Ledger(t)
	ctx := context.Background()
	if err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	v, err := schema.Version(ctx, st.Conn(), "slip")
	if want := schema.Migrations[len(schema.Migrations)-1].Version; err != nil || v != want {
		t.Errorf("version %d, %v; want %d", v, err, want)
	}
}

// TestPeriodsMatchCore: billable_by_period cuts billing periods where core
// does (core/quota, store.Service.PeriodStart), for anchor days 1, 15, 29,
// 30 and 31 over two years, month ends and leap days included, at the
// Bangkok midnight boundary, and for an anchor moved from 30 to 5: the
// periods before the move keep theirs, the first after it runs from the
// move to the 5th.
func TestPeriodsMatchCore(t *testing.T) {
	_, st := ledgertest.Ledger(t)
	ctx := context.Background()
	anchors := map[string]int{"a1": 1, "a15": 15, "a29": 29, "a30": 30, "a31": 31}
	set := map[string]chstore.Anchor{}
	for svc, a := range anchors {
		set[svc] = chstore.Anchor{Day: a}
	}
	// moved: anchor day 30, then 5 from the end of the period of
	// 2028-03-30 (its change applied at the next period), as core moves it.
	moved := store.Service{CycleAnchorDay: 30}
	set["moved"] = chstore.Anchor{Day: 30}
	if err := st.SetAnchors(ctx, set, time.Now()); err != nil {
		t.Fatal(err)
	}
	change := moved.PeriodEnd(moved.PeriodStart(time.Date(2028, 4, 2, 12, 0, 0, 0, quota.Bangkok))) // 2028-04-30
	after := store.Service{CycleAnchorDay: 5, AnchorSince: change.Unix()}
	if err := st.SetAnchors(ctx, map[string]chstore.Anchor{"moved": {Day: 5, Since: change}}, time.Now()); err != nil {
		t.Fatal(err)
	}
	var rows chstore.Rows
	want := map[string]int{} // service/period start -> billable
	start := time.Date(2027, 12, 20, 0, 0, 0, 0, quota.Bangkok)
	for day := 0; day < 800; day += 3 {
		for _, offset := range []time.Duration{0, 23*time.Hour + 59*time.Minute} { // first and last minute of a Bangkok day
			at := start.AddDate(0, 0, day).Add(offset)
			for svc, a := range anchors {
				e := ledgertest.Event(1, svc, "br", at.UTC())
				if err := rows.Append(&e); err != nil {
					t.Fatal(err)
				}
				want[svc+"/"+quota.PeriodStart(at, a).Format(time.DateOnly)]++
			}
			e := ledgertest.Event(1, "moved", "br", at.UTC())
			if err := rows.Append(&e); err != nil {
				t.Fatal(err)
			}
			sv := moved
			if !at.Before(change) {
				sv = after
			}
			want["moved/"+sv.PeriodStart(at).Format(time.DateOnly)]++
		}
	}
	if err := st.Insert(ctx, &rows); err != nil {
		t.Fatal(err)
	}
	res, err := st.Conn().Query(ctx, "SELECT service_id, toString(period_start), billable FROM slip.billable_by_period")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for res.Next() {
		var svc, period string
		var n uint64
		if err := res.Scan(&svc, &period, &n); err != nil {
			t.Fatal(err)
		}
		got[svc+"/"+period] = int(n)
	}
	for k, n := range want {
		if got[k] != n {
			t.Errorf("%s: view %d, core %d", k, got[k], n)
		}
	}
	if len(got) != len(want) {
		t.Errorf("view has %d periods, core %d", len(got), len(want))
	}
}

// TestInvalidEvents: every problem of an event is named.
func TestInvalidEvents(t *testing.T) {
	var rows chstore.Rows
	f := func(e api.UsageEvent, want ...string) {
		t.Helper()
		err := rows.Append(&e)
		for _, w := range want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("%+v: error %v does not name %s", e, err, w)
			}
		}
	}
	ok := ledgertest.Event(1, "svc", "br", time.Now())
	bad := ok
	bad.EventID, bad.Kind, bad.API, bad.Mode, bad.Outcome = "{"+ok.EventID[1:], "cheque", "v3", "batch", ""
	f(bad, "eventId", "kind", "api", "mode", "outcome")
	bad = ok
	bad.OccurredAt, bad.ServiceID, bad.BranchID, bad.JobID = time.Time{}, "", "", fmt.Sprintf("%0200d", 1)
	f(bad, "occurredAt", "serviceId", "branchId", "jobId")
	if rows.Len() != 0 {
		t.Errorf("invalid events were appended: %d", rows.Len())
	}
}
