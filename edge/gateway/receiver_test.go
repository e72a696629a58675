package gateway_test

import (
	"testing"
	"time"

	"github.com/slipverify/slipverify/core/lib/testnet"
	"github.com/slipverify/slipverify/core/slip"
)

// TestReceiverChecks: v2 bank verification checks the receiver against the
// branch's accounts (spec 4.1 rule 4), signed through the edge.
func TestReceiverChecks(t *testing.T) {
	e := startEdge(t, testnet.StartCore(t, seed))
	verify := func(ref, extra string) answer {
		e.clock.Advance(time.Second) // a-main's bank budget is 5/s
		body := `{"payload":"` + slip.Bank{BankCode: "004", TransRef: ref}.Encode() + `"` + extra + `}`
		return e.do(t, "POST", "/v2/verify/bank", body, e.signed(keyMain, secretA, "POST", "/v2/verify/bank", body, 0, "")...)
	}
	matched := func(ref, extra string, want bool) {
		t.Helper()
		a := verify(ref, extra)
		if a.status != 200 || get(a.body, "data", "isAccountMatched") != want {
			t.Errorf("%s %s: want isAccountMatched %v, got %d %s", ref, extra, want, a.status, a.raw)
		}
	}
	refused := func(ref, extra string, status int, code string) {
		t.Helper()
		verify(ref, extra).want(t, status, code)
	}
	// Without a check, no isAccountMatched at all.
	if a := verify("RCVSCB000001", ""); a.status != 200 || get(a.body, "data", "isAccountMatched") != nil {
		t.Errorf("unchecked: %s", a.raw)
	}
	matched("RCVSCB000001", `,"matchAccount":true`, true)          // any linked account: the SCB one
	matched("RCVSCB000001", `,"bankAccountId":"acc-scb"`, true)    // that account
	matched("RCVSCB000001", `,"bankAccountId":"acc-kbank"`, false) // another receiver
	if a := verify("RCVSCB000001", `,"matchAccount":false`); get(a.body, "data", "isAccountMatched") != nil {
		t.Errorf("matchAccount false still checked: %s", a.raw)
	}
	refused("RCVSCB000001", `,"bankAccountId":"acc-nope"`, 404, "BANK_ACCOUNT_NOT_FOUND")
	refused("RCVSCB000001", `,"bankAccountId":"acc-other"`, 404, "BANK_ACCOUNT_NOT_FOUND") // not linked to a-main
	refused("RCVSCB000001", `,"bankAccountId":"acc-scb","bankCode":"999"`, 400, "INVALID_BANK_CODE")
	refused("RCVSCB000001", `,"bankAccountId":"acc-scb","matchMode":"NAME"`, 400, "INVALID_MATCH_MODE")
	refused("RCVPP0000001", `,"bankAccountId":"acc-pp","matchMode":"BOTH"`, 400, "INVALID_MATCH_MODE")
	refused("RCVSCB000001", `,"bankAccountId":"acc-scb","extraVerify":"ACCOUNT_LAST4"`, 400, "INVALID_EXTRA_VERIFY")
	refused("RCVSCB000001", `,"bankCode":"014"`, 400, "VALIDATION_ERROR") // bankCode needs matchAccount or bankAccountId
	// GSB lists extraVerify options: one is required, also when bankCode changes to it.
	refused("RCVGSB000001", `,"bankAccountId":"acc-gsb"`, 400, "INVALID_EXTRA_VERIFY")
	refused("RCVGSB000001", `,"bankAccountId":"acc-gsb","extraVerify":"NOPE"`, 400, "INVALID_EXTRA_VERIFY")
	refused("RCVGSB000001", `,"bankAccountId":"acc-kbank","bankCode":"030"`, 400, "INVALID_EXTRA_VERIFY")
	matched("RCVGSB000001", `,"bankAccountId":"acc-gsb","extraVerify":"ACCOUNT_LAST4"`, true)
	matched("RCVGSB000001", `,"bankAccountId":"acc-gsb","extraVerify":"RECEIVER_NAME"`, true)
	// PromptPay receivers: matchMode picks what must match.
	matched("RCVPP0000001", `,"bankAccountId":"acc-pp"`, true)
	matched("RCVPP0000001", `,"bankAccountId":"acc-pp","matchMode":"NUMBER"`, true)
	matched("RCVPP0000001", `,"bankAccountId":"acc-pp","matchMode":"NAME"`, true)
	matched("RCVPP0000001", `,"bankAccountId":"acc-kbank","bankCode":"PROMPTPAY","matchMode":"NAME_NUMBER"`, false)
	// Refusals consumed nothing: 7 successful verifications of 3 slips by
	// one branch consumed 3.
	a := e.do(t, "GET", "/v2/info", "", bearer(keyMain)...)
	if get(a.body, "data", "branch", "usedQuota") != 3.0 {
		t.Errorf("usedQuota %v, want 3", get(a.body, "data", "branch", "usedQuota"))
	}
}
