package bankfake_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/slipverify/slipverify/core/bank/bankfake"
	"github.com/slipverify/slipverify/core/lib/testnet"
	"github.com/slipverify/slipverify/core/slip"
)

func TestMain(m *testing.M) { testnet.Main(m) }

// devKey is the main branch key of deploy/dev/seed.json.
const devKey = "046745d7-0d0a-43c1-ad0d-0d2bb1f9edc2"

// TestStack verifies slips through the edge and core, started as
// processes, with SLIP_BANK=014=scb,*=kbank asking the fakes over two-way
// TLS: each verification is one lookup at the bank, a found slip is the
// bank's record and is not looked up again, not found and the bank's errors
// reach the client as SLIP_NOT_FOUND and API_SERVER_ERROR, the bank's code
// in core's log and not in the client's message.
func TestStack(t *testing.T) {
	if testing.Short() {
		t.Skip("starts core and the edge")
	}
	pki := bankfake.NewPKI(t)
	kb := bankfake.NewKBank(t, pki, true)
	sc := bankfake.NewSCB(t, pki)
	core := testnet.StartCore(t, "../../../deploy/dev/seed.json",
		"SLIP_BANK=014=scb,*=kbank",
		"SLIP_KBANK_URL="+kb.URL(), "SLIP_KBANK_CLIENT_ID="+bankfake.KBankClientID, "SLIP_KBANK_CLIENT_SECRET="+bankfake.KBankClientSecret,
		"SLIP_KBANK_CERT_FILE="+pki.CertFile, "SLIP_KBANK_KEY_FILE="+pki.KeyFile, "SLIP_KBANK_CA_FILE="+pki.CAFile, "SLIP_KBANK_TEST_MODE=true",
		"SLIP_SCB_URL="+sc.URL(), "SLIP_SCB_API_KEY="+bankfake.SCBAPIKey, "SLIP_SCB_API_SECRET="+bankfake.SCBAPISecret,
		"SLIP_SCB_CERT_FILE="+pki.CertFile, "SLIP_SCB_KEY_FILE="+pki.KeyFile, "SLIP_SCB_CA_FILE="+pki.CAFile)
	edge := testnet.StartEdge(t, core.Addr)
	client := &http.Client{Timeout: 30 * time.Second}

	verify := func(bankCode, ref string) (int, map[string]any) {
		t.Helper()
		body := `{"payload":"` + slip.Bank{BankCode: bankCode, TransRef: ref}.Encode() + `"}`
		req, _ := http.NewRequest("POST", edge.URL()+"/v2/verify/bank", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+devKey)
		req.Header.Set("Content-Type", "application/json")
		res, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("%s: %s", ref, b)
		}
		return res.StatusCode, m
	}
	code := func(m map[string]any) string {
		e, _ := m["error"].(map[string]any)
		c, _ := e["code"].(string)
		return c
	}

	// KBank, number amounts, no receiving bank.
	status, m := verify("004", "016143102633ATF01234")
	if status != 200 {
		t.Fatalf("kbank slip: %d %v", status, m)
	}
	if s := mustJSON(m); !strings.Contains(s, `"transRef":"016143102633ATF01234"`) || !strings.Contains(s, `"date":"2024-02-29T23:59:59+07:00"`) ||
		!strings.Contains(s, `"proxy":{"account":"xxx-xxx-5678","type":"MSISDN"}`) || !strings.Contains(s, "นาย วิชัย ส") || !strings.Contains(s, `"receiver":{"account":{"bank":{"account":"","type":""}`) {
		t.Errorf("kbank slip: %s", s)
	}
	// SCB, routed by its code, string amounts.
	status, m = verify("014", "202310051403SCBQR123")
	if status != 200 || !strings.Contains(mustJSON(m), `"amount":5345.45`) {
		t.Errorf("scb slip: %d %s", status, mustJSON(m))
	}
	if kb.Lookups() != 1 || sc.Lookups() != 1 {
		t.Fatalf("lookups kbank %d scb %d, want 1 each", kb.Lookups(), sc.Lookups())
	}
	// A found slip is stored: verified again, it is a duplicate and the
	// bank is not asked (or billed) again.
	status, m = verify("004", "016143102633ATF01234")
	if d, _ := m["data"].(map[string]any); status != 200 || d["isDuplicate"] != true {
		t.Errorf("second verification: %d %s", status, mustJSON(m))
	}
	if kb.Requests() != 1 {
		t.Fatalf("a stored slip was looked up again: %d requests", kb.Requests())
	}

	// Not found: one lookup, SLIP_NOT_FOUND; asked again, one more (not
	// cached).
	for i := range 2 {
		if status, m := verify("006", "NOSUCHREF00000000001"); code(m) != "SLIP_NOT_FOUND" {
			t.Fatalf("unknown ref: %d %v", status, m)
		}
		if kb.Requests() != 2+i {
			t.Fatalf("requests %d after %d not-found verifications", kb.Requests(), i+1)
		}
	}

	// The switch fails: API_SERVER_ERROR, one lookup, the code only in the log.
	kb.Inject(bankfake.SwitchFailure)
	status, m = verify("004", "015278145821CTF09876")
	if code(m) != "API_SERVER_ERROR" || strings.Contains(mustJSON(m), "8503") {
		t.Fatalf("switch failure: %d %s", status, mustJSON(m))
	}
	if kb.Requests() != 4 {
		t.Errorf("requests %d after the switch failure, want 4", kb.Requests())
	}
	testnet.Eventually(t, 10*time.Second, func() bool { return strings.Contains(core.Output(), "8503") },
		func() string { return "core's log lacks the bank's code 8503:\n" + core.Output() })
	if strings.Contains(core.Output(), bankfake.KBankClientSecret) || strings.Contains(core.Output(), bankfake.SCBAPISecret) {
		t.Error("core's log shows a bank secret")
	}

	// An expired token: the verification succeeds, the bank ran one lookup.
	kb.Inject(bankfake.ExpiredToken)
	before := kb.Lookups()
	if status, m := verify("004", "015278145821CTF09876"); status != 200 {
		t.Fatalf("after an expired token: %d %v", status, m)
	}
	if kb.Lookups() != before+1 || kb.Tokens() != 2 {
		t.Errorf("lookups +%d tokens %d, want +1 and 2", kb.Lookups()-before, kb.Tokens())
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
