package bankfake_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/slipverify/slipverify/core/bank/bankfake"
	"github.com/slipverify/slipverify/core/lib/testnet"
	"github.com/slipverify/slipverify/core/slip"
	"github.com/slipverify/slipverify/deploy/clickhouse"
	"github.com/slipverify/slipverify/usage/chstore"
	"github.com/slipverify/slipverify/usage/reconcile"
)

// TestStackAsync submits async verifications through the edge to core with
// the dev broker, SLIP_BANK=kbank asking the fake: a slip the bank does
// not know is retried on the schedule (four waits), each attempt one lookup
// at the bank, and ends not found after five; a known slip is one lookup.
// The usage tier's ledger (ClickHouse, skipped where it is not installed)
// counts what core counted.
func TestStackAsync(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the broker, core and the edge")
	}
	pki := bankfake.NewPKI(t)
	kb := bankfake.NewKBank(t, pki, false)
	kafka := testnet.FreeAddr(t)
	testnet.StartBroker(t, "SLIP_KAFKA_ADDR="+kafka)
	ch := clickhouse.StartTest(t)
	ledger, err := chstore.Open(chstore.Options{Addrs: []string{ch.Addr()}, Database: "slip", Username: "default"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ledger.Close() })
	core := testnet.StartCore(t, "../../../deploy/dev/seed.json", "SLIP_KAFKA_ADDR="+kafka, "SLIP_EGRESS_ALLOW_CIDRS=127.0.0.0/8",
		"SLIP_VERIFY_RETRY_SCHEDULE=100ms,100ms,100ms,100ms",
		"SLIP_BANK=kbank", "SLIP_KBANK_URL="+kb.URL(), "SLIP_KBANK_CLIENT_ID="+bankfake.KBankClientID,
		"SLIP_KBANK_CLIENT_SECRET="+bankfake.KBankClientSecret,
		"SLIP_KBANK_CERT_FILE="+pki.CertFile, "SLIP_KBANK_KEY_FILE="+pki.KeyFile, "SLIP_KBANK_CA_FILE="+pki.CAFile)
	testnet.StartUsage(t, kafka, ch.Addr(), "SLIP_CORE_ADDR="+core.Addr, "SLIP_EDGE_TOKEN="+testnet.EdgeToken, "SLIP_USAGE_FLUSH=100ms")
	edge := testnet.StartEdge(t, core.Addr)

	do := func(method, path string, body any) map[string]any {
		t.Helper()
		raw, _ := json.Marshal(body)
		req, _ := http.NewRequest(method, edge.URL()+path, bytes.NewReader(raw))
		req.Header.Set("Authorization", "Bearer "+devKey)
		req.Header.Set("Content-Type", "application/json")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		out, _ := io.ReadAll(res.Body)
		var m map[string]any
		if err := json.Unmarshal(out, &m); err != nil {
			t.Fatalf("%s %s: %d %s", method, path, res.StatusCode, out)
		}
		return m
	}
	data := func(m map[string]any) map[string]any { d, _ := m["data"].(map[string]any); return d }
	run := func(bankCode, ref string) map[string]any {
		t.Helper()
		sub := do("POST", "/v2/verify/bank/async", map[string]any{
			"payload": slip.Bank{BankCode: bankCode, TransRef: ref}.Encode(), "callbackUrl": "https://127.0.0.1:9/slip"}) // no dispatcher runs: never called
		job, _ := data(sub)["jobId"].(string)
		if job == "" {
			t.Fatalf("submit: %v", sub)
		}
		var last map[string]any
		testnet.Eventually(t, 30*time.Second, func() bool {
			last = do("GET", "/v2/verify/bank/jobs/"+job, nil)
			return data(last)["status"] == "done"
		}, func() string { b, _ := json.Marshal(last); return "job not done: " + string(b) + "\n" + core.Output() })
		return data(last)
	}

	d := run("006", "NOSUCHREF00000000002")
	if got := kb.Requests(); got != 5 {
		t.Errorf("not found: %d lookups at the bank, want 5 (one per attempt): %v", got, d)
	}
	if b, _ := json.Marshal(d); !bytes.Contains(b, []byte("SLIP_NOT_FOUND")) {
		t.Errorf("not found job: %s", b)
	}

	d = run("014", "015278145821CTF09876")
	if got := kb.Requests(); got != 6 || kb.Lookups() != 6 {
		t.Errorf("found: %d requests, %d lookups in all, want 6: %v", got, kb.Lookups(), d)
	}
	if b, _ := json.Marshal(d); !bytes.Contains(b, []byte(`"transRef":"015278145821CTF09876"`)) {
		t.Errorf("found job: %s", b)
	}

	// The ledger counts what core counted for the branch.
	var inLedger, inCore int64
	testnet.Eventually(t, time.Minute, func() bool {
		inLedger, inCore = -1, -2
		days, err := ledger.BillableByDay(context.Background())
		if err != nil {
			return false
		}
		inLedger = 0
		for _, d := range days {
			if d.ServiceID == "svc-demo" && d.BranchID == "br-main" {
				inLedger += int64(d.Billable)
			}
		}
		counters, err := (reconcile.Core{Addr: core.Addr, Token: testnet.EdgeToken}).Counters(context.Background())
		if err != nil {
			return false
		}
		for _, svc := range counters.Services {
			for _, b := range svc.Branches {
				if b.BranchID == "br-main" {
					inCore = b.Total
				}
			}
		}
		return inLedger == inCore && inCore >= 1
	}, func() string { return fmt.Sprintf("ledger %d, core %d", inLedger, inCore) })
	t.Logf("billable verifications: ledger %d, core %d", inLedger, inCore)
}
