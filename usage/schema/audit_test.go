package schema_test

import (
	"context"
	"encoding/json"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/slipverify/slipverify/core/api"
	"github.com/slipverify/slipverify/core/quota"
	"github.com/slipverify/slipverify/usage/chstore"
	"github.com/slipverify/slipverify/usage/ledgertest"
	"github.com/slipverify/slipverify/usage/schema"
)

// TestAuditSchemaUpgrade: a ledger made by the first version (before the
// audit log) migrates to the last, its usage events kept.
func TestAuditSchemaUpgrade(t *testing.T) {
	srv, st := ledgertest.Ledger(t)
	ctx := context.Background()
	old, err := chstore.Open(chstore.Options{Addrs: []string{srv.Addr()}, Database: "old", Username: "default"})
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	all := schema.Migrations
	schema.Migrations = all[:1]
	err = old.Migrate(ctx)
	schema.Migrations = all
	if err != nil {
		t.Fatal(err)
	}
	insertBeforeAmount(t, old.Conn(), "old", ledgertest.Event(1, "s", "b", time.Now()))
	if err := old.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	v, err := schema.Version(ctx, st.Conn(), "old")
	if want := all[len(all)-1].Version; err != nil || v != want {
		t.Errorf("version %d, %v; want %d", v, err, want)
	}
	var events, audit uint64
	if err := st.Conn().QueryRow(ctx, "SELECT (SELECT count() FROM old.usage_events), (SELECT count() FROM old.audit_events)").Scan(&events, &audit); err != nil || events != 1 || audit != 0 {
		t.Errorf("after the upgrade: %d usage events, %d audit records, %v", events, audit, err)
	}
}

// readmeAuditSQL returns the statements of the usage README's audit log example.
func readmeAuditSQL(t *testing.T) []string {
	t.Helper()
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(readme), "## The audit log")
	if !ok {
		t.Fatal("usage/README.md has no section The audit log")
	}
	_, block, ok := strings.Cut(after, "```sql\n")
	block, _, ok2 := strings.Cut(block, "```")
	if !ok || !ok2 {
		t.Fatal("the usage README's audit log section has no sql block")
	}
	var stmts []string
	for _, s := range strings.Split(block, ";\n") {
		if s = strings.TrimSpace(s); s != "" {
			stmts = append(stmts, s)
		}
	}
	return stmts
}

// TestAuditREADMEQueries runs the README's audit log example on
// ClickHouse: svc-demo's changes newest first, each once though inserted
// twice; and November's plan changes joined with the billable
// verifications of the 7 Bangkok days before and from each change's day,
// with a day just outside each window and a service without usage.
func TestAuditREADMEQueries(t *testing.T) {
	stmts := readmeAuditSQL(t)
	if len(stmts) != 2 {
		t.Fatalf("README's audit example has %d statements, want 2", len(stmts))
	}
	_, st := ledgertest.Ledger(t)
	ctx := context.Background()
	bkk := func(day, hour int) time.Time { return time.Date(2026, 11, day, hour, 0, 0, 0, quota.Bangkok) }

	// Plan changes: svc-demo on 15 November at 01:30 Bangkok time (still
	// the 14th in UTC), svc-idle on the 20th; svc-demo's name change on the
	// 16th; a plan change of October.
	plan := func(i int, svc string, at time.Time, from, to int) api.AuditRecord {
		a := ledgertest.Audit(i, svc, at)
		a.Before = json.RawMessage(`{"id":"` + svc + `","name":"Demo","plan":{"name":"basic","quotaLimit":` + strconv.Itoa(from) + `},"pendingPlan":null}`)
		a.After = json.RawMessage(`{"id":"` + svc + `","name":"Demo","plan":{"name":"pro","quotaLimit":` + strconv.Itoa(to) + `},"pendingPlan":null}`)
		return a
	}
	change := plan(1, "svc-demo", bkk(15, 1).Add(30*time.Minute), 1000, 5000)
	rename := ledgertest.Audit(2, "svc-demo", bkk(16, 9))
	rename.Action = "service.update"
	records := []api.AuditRecord{change, rename, plan(3, "svc-idle", bkk(20, 12), 100, 200), plan(4, "svc-demo", bkk(1, 0).AddDate(0, 0, -2), 500, 1000)}
	var audit chstore.AuditRows
	for _, a := range append(records, records...) { // every record delivered twice
		if err := audit.Append(&a); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.InsertAudit(ctx, &audit); err != nil {
		t.Fatal(err)
	}

	// svc-demo's billable verifications by Bangkok day: the 7 days before
	// the 15th are the 8th to the 14th, the 7 from it the 15th to the 21st.
	var rows chstore.Rows
	billable := map[int]int{7: 100, 8: 2, 14: 3, 15: 5, 21: 7, 22: 1000}
	n := 0
	for day, count := range billable {
		for range count {
			e := ledgertest.Event(1, "svc-demo", "br-"+strconv.Itoa(n%3), bkk(day, 23))
			e.Outcome, e.Billable = api.OutcomeOK, true
			rows.Append(&e)
			n++
		}
		e := ledgertest.Event(0, "svc-demo", "br-0", bkk(day, 0)) // an attempt that billed nothing
		e.Outcome, e.Billable = "SLIP_NOT_FOUND", false
		rows.Append(&e)
	}
	if err := st.Insert(ctx, &rows); err != nil {
		t.Fatal(err)
	}

	res, err := st.Conn().Query(ctx, stmts[0])
	if err != nil {
		t.Fatalf("%v\n%s", err, stmts[0])
	}
	var trail []string
	for res.Next() {
		var at time.Time
		var ms uint16
		var actorType, actorName, action, targetType, targetID, reason string
		if err := res.Scan(&at, &ms, &actorType, &actorName, &action, &targetType, &targetID, &reason); err != nil {
			t.Fatal(err)
		}
		trail = append(trail, action+" "+at.In(quota.Bangkok).Format("2006-01-02 15:04")+" "+actorType+" "+targetType+" "+targetID)
	}
	if err := res.Err(); err != nil {
		t.Fatal(err)
	}
	want := []string{"service.update 2026-11-16 09:00 admin service svc-demo", "service.plan 2026-11-15 01:30 admin service svc-demo",
		"service.plan 2026-10-30 00:00 admin service svc-demo"}
	if strings.Join(trail, "\n") != strings.Join(want, "\n") {
		t.Errorf("svc-demo's changes:\n%s\nwant\n%s", strings.Join(trail, "\n"), strings.Join(want, "\n"))
	}

	res, err = st.Conn().Query(ctx, stmts[1])
	if err != nil {
		t.Fatalf("%v\n%s", err, stmts[1])
	}
	var got []string
	for res.Next() {
		var svc, actor string
		var at time.Time
		var qBefore, qAfter, before, after uint64
		if err := res.Scan(&svc, &at, &actor, &qBefore, &qAfter, &before, &after); err != nil {
			t.Fatal(err)
		}
		got = append(got, svc+" "+at.UTC().Format(time.RFC3339)+" "+actor+" quota "+strconv.Itoa(int(qBefore))+"->"+strconv.Itoa(int(qAfter))+
			" billable "+strconv.Itoa(int(before))+" then "+strconv.Itoa(int(after)))
	}
	if err := res.Err(); err != nil {
		t.Fatal(err)
	}
	want = []string{"svc-demo 2026-11-14T18:30:00Z ops quota 1000->5000 billable 5 then 12",
		"svc-idle 2026-11-20T05:00:00Z ops quota 100->200 billable 0 then 0"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("plan changes with billable verifications:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
