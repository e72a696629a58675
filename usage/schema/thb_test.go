package schema_test

import (
	"context"
	"fmt"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/slipverify/slipverify/core/api"
	"github.com/slipverify/slipverify/core/quota"
	"github.com/slipverify/slipverify/usage/chstore"
	"github.com/slipverify/slipverify/usage/ledgertest"
	"github.com/slipverify/slipverify/usage/schema"
)

// insertBeforeAmount writes events as a usage tier before migration 4 did:
// without amount and sending bank.
func insertBeforeAmount(t *testing.T, conn driver.Conn, db string, events ...api.UsageEvent) {
	t.Helper()
	ctx := context.Background()
	b, err := conn.PrepareBatch(ctx, "INSERT INTO "+db+".usage_events (event_id, occurred_at, service_id, branch_id, kind, api, mode, outcome, billable, job_id)")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range events {
		var billable uint8
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

// thbKey is a row of thb_daily: a Bangkok day, service and branch.
type thbKey struct{ day, service, branch string }

// thbRow is what thb_daily says of a day, service and branch.
type thbRow struct {
	billable, withoutAmount uint64
	satang                  int64
	thb                     string
}

func readTHB(t *testing.T, conn driver.Conn, db string) map[thbKey]thbRow {
	t.Helper()
	res, err := conn.Query(context.Background(), "SELECT toString(day), service_id, branch_id, billable, satang, toString(thb), without_amount FROM "+db+".thb_daily")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Close()
	out := map[thbKey]thbRow{}
	for res.Next() {
		var k thbKey
		var r thbRow
		if err := res.Scan(&k.day, &k.service, &k.branch, &r.billable, &r.satang, &r.thb, &r.withoutAmount); err != nil {
			t.Fatal(err)
		}
		out[k] = r
	}
	if err := res.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// baht writes satang as THB with two decimals, as thb reads.
func baht(satang int64) string {
	s := fmt.Sprintf("%03d", satang)
	return strings.TrimLeft(s[:len(s)-2], "0") + "." + s[len(s)-2:]
}

// TestTHBDaily: a ledger migrated from version 3 keeps its events, which
// read amount 0 and count in thb_daily as billable without an amount; the
// events after it carry their amounts, and thb_daily sums the THB of the
// billable ones per Bangkok day, service and branch, each once though its
// batch was inserted twice, none of an event that billed nothing. Running
// migration 4's statements again (a migration interrupted before its
// record, or two processes at once) changes nothing.
func TestTHBDaily(t *testing.T) {
	srv, _ := ledgertest.Ledger(t)
	ctx := context.Background()
	st, err := chstore.Open(chstore.Options{Addrs: []string{srv.Addr()}, Database: "thb", Username: "default"})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	all := schema.Migrations
	i := slices.IndexFunc(all, func(m schema.Migration) bool { return m.Version == 4 })
	schema.Migrations = all[:i]
	err = st.Migrate(ctx)
	schema.Migrations = all
	if err != nil {
		t.Fatal(err)
	}
	bkk := func(day, hour, minute int) time.Time {
		return time.Date(2026, 11, day, hour, minute, 0, 0, quota.Bangkok).UTC()
	}
	want := map[thbKey]thbRow{}
	count := func(e api.UsageEvent) {
		if !e.Billable {
			return
		}
		k := thbKey{e.OccurredAt.In(quota.Bangkok).Format(time.DateOnly), e.ServiceID, e.BranchID}
		r := want[k]
		r.billable++
		r.satang += e.Amount
		if e.Amount == 0 {
			r.withoutAmount++
		}
		want[k] = r
	}
	// Before: billable events without an amount, one that billed nothing.
	var old []api.UsageEvent
	for n := range 6 {
		e := ledgertest.Event(1, "svc-a", fmt.Sprintf("br-%d", n%2), bkk(21, 10, n))
		e.Amount, e.SendingBank = 0, ""
		old = append(old, e)
		count(e)
	}
	refused := ledgertest.Event(0, "svc-a", "br-0", bkk(21, 11, 0))
	old = append(old, refused)
	insertBeforeAmount(t, st.Conn(), "thb", old...)

	if err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	var amount int64
	var bank string
	if err := st.Conn().QueryRow(ctx, "SELECT amount, sending_bank FROM thb.usage_events WHERE event_id = ?", old[0].EventID).Scan(&amount, &bank); err != nil || amount != 0 || bank != "" {
		t.Errorf("an event from before the migration reads amount %d, sending bank %q (%v); want 0 and empty", amount, bank, err)
	}

	// After: amounts, on both sides of Bangkok midnight (the 21st at 23:59
	// is the 21st, 00:00 the 22nd, though both are the 21st in UTC for
	// the latter's 17:00), at two services; a batch inserted twice.
	var rows chstore.Rows
	for n := range 300 {
		at := bkk(21, 23, 59)
		if n%4 >= 2 {
			at = bkk(22, 0, 0)
		}
		e := ledgertest.Event(n, fmt.Sprintf("svc-%c", 'a'+n%2), fmt.Sprintf("br-%d", n%3), at)
		if e.Billable {
			e.Amount += int64(n * n % 97) // odd satang
		}
		count(e)
		if err := rows.Append(&e); err != nil {
			t.Fatal(err)
		}
	}
	// An event charged nothing that carries an amount all the same: not
	// THB verified.
	odd := ledgertest.Event(5, "svc-a", "br-0", bkk(22, 0, 0))
	odd.Amount = 123456
	if err := rows.Append(&odd); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := st.Insert(ctx, &rows); err != nil {
			t.Fatal(err)
		}
	}

	check := func(when string) {
		t.Helper()
		got := readTHB(t, st.Conn(), "thb")
		for k, w := range want {
			w.thb = baht(w.satang)
			if got[k] != w {
				t.Errorf("%s: %v: thb_daily %+v, want %+v", when, k, got[k], w)
			}
		}
		if len(got) != len(want) {
			t.Errorf("%s: thb_daily has %d rows, want %d: %v", when, len(got), len(want), got)
		}
	}
	check("after the migration")

	// Migration 4 again, as a migration run over itself.
	schema.Migrations = append(all[:i+1:i+1], schema.Migration{Version: 99, Name: "migration 4 again", Statements: all[i].Statements})
	err = st.Migrate(ctx)
	schema.Migrations = all
	if err != nil {
		t.Fatalf("migration 4 run again: %v", err)
	}
	check("after migration 4 ran again")
}

// readmeTHBSQL returns the statements of the usage README's example that
// reads thb_daily.
func readmeTHBSQL(t *testing.T) []string {
	t.Helper()
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, part := range strings.Split(string(readme), "```sql\n")[1:] {
		block, _, _ := strings.Cut(part, "```")
		if !strings.Contains(block, "thb_daily") {
			continue
		}
		var stmts []string
		for _, s := range strings.Split(block, ";\n") {
			if s = strings.TrimSpace(s); s != "" {
				stmts = append(stmts, s)
			}
		}
		return stmts
	}
	t.Fatal("usage/README.md has no sql example of thb_daily")
	return nil
}

// TestTHBREADMEQueries runs the README's thb_daily example: November's
// THB per branch and Bangkok day, and per service for the month, exact to
// the satang, an event inserted twice counted once, October and an event
// that billed nothing left out.
func TestTHBREADMEQueries(t *testing.T) {
	stmts := readmeTHBSQL(t)
	if len(stmts) != 2 {
		t.Fatalf("README's thb_daily example has %d statements, want 2", len(stmts))
	}
	_, st := ledgertest.Ledger(t)
	ctx := context.Background()
	bkk := func(month time.Month, day int) time.Time {
		return time.Date(2026, month, day, 0, 30, 0, 0, quota.Bangkok).UTC()
	}
	ev := func(branch string, at time.Time, satang int64) api.UsageEvent {
		e := ledgertest.Event(1, "svc-demo", branch, at)
		e.Amount = satang
		return e
	}
	events := []api.UsageEvent{
		ev("br-1", bkk(11, 1), 10000), ev("br-1", bkk(11, 1), 5), ev("br-2", bkk(11, 1), 250050),
		ev("br-1", bkk(11, 30), 1), ev("br-1", bkk(10, 31), 99900), // 1 November 00:30 Bangkok is 31 October in UTC
	}
	free := ledgertest.Event(0, "svc-demo", "br-1", bkk(11, 2))
	var rows chstore.Rows
	for _, e := range append(events, events[0], free) {
		if err := rows.Append(&e); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Insert(ctx, &rows); err != nil {
		t.Fatal(err)
	}
	query := func(q string, n int) []string {
		t.Helper()
		res, err := st.Conn().Query(ctx, q)
		if err != nil {
			t.Fatalf("%v\n%s", err, q)
		}
		defer res.Close()
		var out []string
		vals := make([]any, n)
		for res.Next() {
			cols := res.ColumnTypes()
			for i := range vals {
				vals[i] = newScan(cols[i].ScanType())
			}
			if err := res.Scan(vals...); err != nil {
				t.Fatal(err)
			}
			var line []string
			for _, v := range vals {
				line = append(line, fmt.Sprint(deref(v)))
			}
			out = append(out, strings.Join(line, " "))
		}
		if err := res.Err(); err != nil {
			t.Fatal(err)
		}
		return out
	}
	got := query(stmts[0], 6)
	want := []string{"2026-11-01 svc-demo br-1 2 100.05 0", "2026-11-01 svc-demo br-2 1 2500.5 0", "2026-11-30 svc-demo br-1 1 0.01 0"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("THB per branch and day:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	got = query(stmts[1], 3)
	want = []string{"svc-demo 4 2600.56"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("THB per service in November:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// newScan returns a pointer to a new value of type t, for Scan.
func newScan(t reflect.Type) any { return reflect.New(t).Interface() }

// deref returns what p points to, a date as its day.
func deref(p any) any {
	v := reflect.ValueOf(p).Elem().Interface()
	if d, ok := v.(time.Time); ok {
		return d.Format(time.DateOnly)
	}
	return v
}
