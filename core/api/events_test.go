package api

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"
)

// TestUsageEventAmountJSON: the amount and sending bank of a billable event
// are written as encoding/json writes them, between billable and jobId, and
// left out when unset; an event written before them reads as amount 0.
func TestUsageEventAmountJSON(t *testing.T) {
	at := time.Date(2026, 11, 1, 0, 0, 0, 123456789, time.UTC)
	bank := UsageEvent{EventID: "e1", OccurredAt: at, ServiceID: "svc", BranchID: "br", Kind: KindBank, API: "v2", Mode: ModeAsync,
		Outcome: OutcomeOK, Billable: true, Amount: 150075, SendingBank: "004", JobID: "j1"}
	wallet := bank
	wallet.Kind, wallet.SendingBank, wallet.JobID = KindWallet, "", ""
	refused := bank
	refused.Outcome, refused.Billable, refused.Amount, refused.SendingBank = "QUOTA_EXCEEDED", false, 0, ""
	odd := bank
	odd.Amount, odd.SendingBank = math.MaxInt64, "<&\u2028>"
	for _, e := range []UsageEvent{bank, wallet, refused, odd, {Amount: -1}} {
		want, _ := json.Marshal(e)
		if got := e.AppendJSON(nil); string(got) != string(want) {
			t.Errorf("AppendJSON %s\nencoding/json %s", got, want)
		}
	}
	if got := string(bank.AppendJSON(nil)); !strings.Contains(got, `"billable":true,"amount":150075,"sendingBank":"004","jobId":"j1"}`) {
		t.Errorf("billable event: %s", got)
	}
	if got := string(refused.AppendJSON(nil)); strings.Contains(got, "amount") || strings.Contains(got, "sendingBank") {
		t.Errorf("an event charged nothing carries an amount or bank: %s", got)
	}
	var old UsageEvent
	if err := json.Unmarshal([]byte(`{"eventId":"e0","occurredAt":"2026-10-01T00:00:00Z","serviceId":"svc","branchId":"br","kind":"bank","api":"v1","mode":"sync","outcome":"success","billable":true}`), &old); err != nil ||
		old.Amount != 0 || old.SendingBank != "" || !old.Billable {
		t.Errorf("an event from before the amount: %+v, %v", old, err)
	}
}
