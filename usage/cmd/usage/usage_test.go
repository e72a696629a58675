package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/slipverify/slipverify/core/api"
	"github.com/slipverify/slipverify/core/lib/testnet"
	"github.com/slipverify/slipverify/core/slip"
	"github.com/slipverify/slipverify/usage/ledgertest"
	"github.com/slipverify/slipverify/usage/reconcile"
)

const root = "../../.."

// TestMain removes the programs the tests build.
func TestMain(m *testing.M) { testnet.Main(m) }

// usageEnv is the environment of a usage process against the test's broker
// and ClickHouse.
func usageEnv(kafka, clickhouse string, extra ...string) []string {
	return append([]string{"SLIP_KAFKA_ADDR=" + kafka, "SLIP_CLICKHOUSE_ADDR=" + clickhouse,
		"SLIP_USAGE_GROUP=usage", "SLIP_USAGE_FLUSH=20ms", "SLIP_USAGE_RETRY_MAX=200ms", "SLIP_EDGE_TOKEN="}, extra...)
}

// get fetches url and returns its status and body.
func get(url string) (int, string, error) {
	res, err := http.Get(url)
	if err != nil {
		return 0, "", err
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	return res.StatusCode, string(body), err
}

// TestKillMidBatch: the usage process is killed with SIGKILL while it
// inserts a backlog, and started again; every event counts exactly once.
func TestKillMidBatch(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the usage program against a broker and ClickHouse")
	}
	kafka := ledgertest.Broker(t, 6)
	ch, st := ledgertest.Ledger(t)
	w := ledgertest.Writer(t, kafka)
	at := time.Now().UTC().Truncate(time.Second)
	var events []api.UsageEvent
	for i := range 60000 {
		events = append(events, ledgertest.Event(i, fmt.Sprintf("svc-%d", i%7), fmt.Sprintf("br-%d", i%13), at))
	}
	ledgertest.Produce(t, w, events...)

	p := testnet.StartUsage(t, kafka, ch.Addr(), usageEnv(kafka, ch.Addr(), "SLIP_USAGE_BATCH=500")...)
	addr := p.Addr
	// Kill it once it has inserted part of the backlog: batches are
	// inserted and committed back to back, so it dies holding one.
	var seen ledgertest.Counts
	if !ledgertest.Eventually(time.Minute, func() bool {
		seen, _ = ledgertest.Count(context.Background(), st)
		return seen.Rows >= 5000
	}) {
		t.Fatalf("nothing inserted: %v\n%s", seen, p.Output())
	}
	p.Kill()
	before, _ := ledgertest.Count(context.Background(), st)
	if before.Events >= uint64(len(events)) {
		t.Fatalf("the whole backlog was in before the kill (%v): the test proves nothing", before)
	}
	p.Restart(t)
	got := ledgertest.WaitCounts(t, st, ledgertest.Want(events), 2*time.Minute)
	t.Logf("killed at %v; after restart %v (rows above events were redelivered)", before, got)

	_, metrics, _ := get("http://" + addr + "/metrics")
	for _, m := range []string{"usage_rows_inserted_total", "usage_consumer_lag_messages", "usage_insert_duration_seconds_bucket", "usage_event_delay_seconds_bucket"} {
		if !strings.Contains(metrics, m) {
			t.Errorf("/metrics lacks %s", m)
		}
	}
	ledgertest.Eventually(10*time.Second, func() bool {
		_, metrics, _ = get("http://" + addr + "/metrics")
		return strings.Contains(metrics, "usage_consumer_lag_messages 0\n")
	})
	if !strings.Contains(metrics, "usage_consumer_lag_messages 0\n") {
		t.Errorf("lag after the drain is not 0:\n%s", metrics)
	}
}

// bankPayload returns a well-formed bank slip payload (the sandbox answers
// any with a synthetic slip) for transfer reference ref.
func bankPayload(t *testing.T, ref string) string {
	t.Helper()
	inner := slip.AppendTLV(slip.AppendTLV(slip.AppendTLV(nil, "00", "000001"), "01", "004"), "02", ref)
	p := slip.AppendTLV(nil, "00", string(inner))
	p = slip.AppendCRC(slip.AppendTLV(p, "51", "TH"), "91", true)
	if _, err := slip.ParseBank(string(p)); err != nil {
		t.Fatalf("test payload: %v", err)
	}
	return string(p)
}

// coreCall sends an internal request to core as the edge does.
func coreCall(t *testing.T, core, method, path, body string, headers ...string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, "http://"+core+path, strings.NewReader(body))
	req.Header.Set(api.HeaderEdgeToken, testnet.EdgeToken)
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(raw)
}

// reconcileNow asks the usage tier's endpoint.
func reconcileNow(t *testing.T, addr string) reconcile.Report {
	t.Helper()
	status, body, err := get("http://" + addr + "/reconcile")
	if err != nil || status != 200 {
		t.Fatalf("/reconcile: %d %s %v", status, body, err)
	}
	var r reconcile.Report
	if err := json.Unmarshal([]byte(body), &r); err != nil {
		t.Fatal(err)
	}
	return r
}

func rowOf(r reconcile.Report, service, branch string) reconcile.Row {
	for _, row := range r.Rows {
		if row.ServiceID == service && row.BranchID == branch {
			return row
		}
	}
	return reconcile.Row{Status: "missing"}
}

// TestReconcileWithCore: verifications made at a real core reach the
// ledger through its usage events; reconciliation then shows no drift, a
// quota reset as a reset, and a drift the test injects, on the endpoint and
// in the command (which fails).
func TestReconcileWithCore(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs core and usage against a broker and ClickHouse")
	}
	kafka := ledgertest.Broker(t, 3)
	ch, st := ledgertest.Ledger(t)
	coreAddr := testnet.StartCore(t, filepath.Join(root, "deploy/dev/seed.json"), "SLIP_KAFKA_ADDR="+kafka).Addr
	env := usageEnv(kafka, ch.Addr(), "SLIP_CORE_ADDR="+coreAddr, "SLIP_EDGE_TOKEN="+testnet.EdgeToken,
		"SLIP_USAGE_RECONCILE_INTERVAL=200ms")
	usageAddr := testnet.StartUsage(t, kafka, ch.Addr(), env...).Addr
	usageBin := testnet.Build(t, "usage/cmd/usage")

	// 30 new slips at two branches, v1 and v2, some v2 ones twice at the
	// same branch (free) and 6 refused as malformed (not billable).
	made, repeats := map[string]int{}, 0
	for i := range 30 {
		branch := []string{"br-main", "br-sub"}[i%2]
		path := []string{"/v2/verify/bank", "/verify"}[i%3%2]
		body := `{"payload":"` + bankPayload(t, fmt.Sprintf("USAGETEST%011d", i)) + `"}`
		times := 1
		if i < 5 && path == "/v2/verify/bank" {
			times, repeats = 2, repeats+1
		}
		for range times {
			status, out := coreCall(t, coreAddr, "POST", path, body, api.HeaderService, "svc-demo", api.HeaderBranch, branch)
			if status != 200 {
				t.Fatalf("verify: %d %s", status, out)
			}
		}
		made[branch]++
	}
	for range 6 {
		coreCall(t, coreAddr, "POST", "/v2/verify/bank", `{"payload":"not a slip"}`, api.HeaderService, "svc-demo", api.HeaderBranch, "br-main")
	}
	var r reconcile.Report
	if !ledgertest.Eventually(time.Minute, func() bool {
		r = reconcileNow(t, usageAddr)
		return r.Drift == 0 && rowOf(r, "svc-demo", "").LedgerTotal == 30
	}) {
		t.Fatalf("no clean reconciliation after the drain: %+v", r)
	}
	if row := rowOf(r, "svc-demo", "br-sub"); row.CoreUsed != int64(made["br-sub"]) || row.LedgerUsed != row.CoreUsed || row.Status != reconcile.OK {
		t.Errorf("br-sub: %+v, want %d used", row, made["br-sub"])
	}
	// The periodic reconciliation finds no drift either.
	clean := []string{"usage_ledger_drift 0\n", "usage_ledger_drift_rows 0\n", "usage_ledger_drifting_services 0\n"}
	waitMetrics(t, usageAddr, clean...)
	// The refused attempts' events join a later commit of core's than the
	// billable ones, so they may reach the ledger a little after them.
	var attempts uint64
	ledgertest.Eventually(time.Minute, func() bool {
		st.Conn().QueryRow(context.Background(), "SELECT uniqExact(event_id) FROM slip.usage_events").Scan(&attempts)
		return attempts >= uint64(30+repeats+6)
	})
	if attempts != uint64(30+repeats+6) {
		t.Errorf("the ledger has %d attempts, want %d (30 new, %d self-duplicates, 6 malformed)", attempts, 30+repeats+6, repeats)
	}

	// A B2B quota reset zeroes br-sub's usedQuota: reported as a reset, not drift.
	status, out := coreCall(t, coreAddr, "POST", "/b2b/branches/br-sub/quota/reset", "", api.HeaderService, "svc-demo",
		api.HeaderB2BClient, "test")
	if status != 200 {
		t.Fatalf("reset: %d %s", status, out)
	}
	r = reconcileNow(t, usageAddr)
	if row := rowOf(r, "svc-demo", "br-sub"); r.Drift != 0 || row.Status != reconcile.Reset || row.CoreUsed != 0 {
		t.Errorf("after a reset: drift %d, br-sub %+v", r.Drift, row)
	}

	// Inject a drift: a billable event core never counted.
	w := ledgertest.Writer(t, kafka)
	ledgertest.Produce(t, w, ledgertest.Event(1, "svc-demo", "br-main", time.Now().UTC()))
	if !ledgertest.Eventually(time.Minute, func() bool { r = reconcileNow(t, usageAddr); return r.Drift > 0 }) {
		t.Fatalf("the injected drift was not reported: %+v", r)
	}
	if row := rowOf(r, "svc-demo", "br-main"); row.Status != reconcile.Drift || row.LedgerTotal != row.CoreTotal+1 {
		t.Errorf("br-main: %+v", row)
	}
	if r.Drift != 2 {
		t.Errorf("%d rows drift, want 2 (the service and br-main): %+v", r.Drift, r.Rows)
	}
	// The gauges show it by the next periodic run: one unit, two rows, one
	// service; a reconciliation has succeeded since.
	metrics := waitMetrics(t, usageAddr, "usage_ledger_drift 1\n", "usage_ledger_drift_rows 2\n", "usage_ledger_drifting_services 1\n")
	if strings.Contains(metrics, "usage_reconcile_last_success_timestamp_seconds 0\n") || !strings.Contains(metrics, "usage_reconcile_failures_total 0\n") {
		t.Errorf("the runs' metrics:\n%s", metrics)
	}
	cmd := exec.Command(usageBin, "reconcile", "-format", "csv")
	cmd.Env = env
	csv, err := cmd.Output()
	if err == nil || !strings.Contains(string(csv), "svc-demo,br-main,") || !strings.Contains(string(csv), ",drift\n") {
		t.Errorf("usage reconcile: %v\n%s", err, csv)
	}
	// The command reads the consumer lag from the brokers: for a group that
	// never read the topic, every event is still in flight.
	cmd = exec.Command(usageBin, "reconcile", "-format", "json")
	cmd.Env = append(env, "SLIP_USAGE_GROUP=never-read")
	raw, _ := cmd.Output() // exits 1: drift
	var unread reconcile.Report
	if err := json.Unmarshal(raw, &unread); err != nil || unread.Lag < int64(attempts)+1 {
		t.Errorf("reconcile for a group that read nothing: lag %d, want at least %d (%v)\n%s", unread.Lag, attempts+1, err, raw)
	}
	cmd = exec.Command(usageBin, "reconcile", "-format", "table")
	cmd.Env = append(env, "SLIP_USAGE_GROUP=never-read")
	if raw, _ = cmd.Output(); !strings.Contains(string(raw), "consumer lag") || !strings.Contains(string(raw), fmt.Sprintf("%d messages", unread.Lag)) {
		t.Errorf("the table does not show the lag of %d:\n%s", unread.Lag, raw)
	}

	// The report: billable per branch this month, as core counted them (plus the injected one).
	cmd = exec.Command(usageBin, "report", "-format", "csv")
	cmd.Env = env
	rep, err := cmd.Output()
	if err != nil {
		t.Fatalf("usage report: %v\n%s", err, rep)
	}
	want := fmt.Sprintf("svc-demo,br-main,%s,%d,", time.Now().In(time.FixedZone("", 7*3600)).Format("2006-01")+"-01", made["br-main"]+1)
	if !strings.Contains(string(rep), want) {
		t.Errorf("report lacks %q:\n%s", want, rep)
	}
}

// waitMetrics polls the usage tier's /metrics until it has every line of
// want, and returns it.
func waitMetrics(t *testing.T, addr string, want ...string) string {
	t.Helper()
	var metrics string
	testnet.Eventually(t, time.Minute, func() bool {
		_, metrics, _ = get("http://" + addr + "/metrics")
		for _, w := range want {
			if !strings.Contains(metrics, w) {
				return false
			}
		}
		return true
	}, func() string { return fmt.Sprintf("/metrics lacks one of %q:\n%s", want, metrics) })
	return metrics
}

// TestServesBeforeClickHouse: a usage tier started while ClickHouse is
// down answers at once, /health with 503 and /metrics with 200, and stops
// when told to while it waits.
func TestServesBeforeClickHouse(t *testing.T) {
	addr := testnet.FreeAddr(t)
	env := map[string]string{}
	for _, kv := range usageEnv(testnet.FreeAddr(t), testnet.FreeAddr(t), "SLIP_USAGE_ADDR="+addr) { // nothing listens at either
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- serve(ctx, nil, func(k string) string { return env[k] }) }()

	var status int
	var body string
	testnet.Eventually(t, 10*time.Second, func() bool { status, body, _ = get("http://" + addr + "/health"); return status != 0 },
		func() string { return "no answer from /health" })
	if status != http.StatusServiceUnavailable || !strings.Contains(body, "clickhouse unreachable") {
		t.Errorf("/health without ClickHouse: %d %s", status, body)
	}
	if status, _, err := get("http://" + addr + "/metrics"); status != 200 {
		t.Errorf("/metrics without ClickHouse: %d %v", status, err)
	}
	cancel()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "before ClickHouse was ready") {
			t.Errorf("serve stopped with %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("serve did not stop while waiting for ClickHouse")
	}
}
