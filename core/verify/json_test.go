package verify_test

import (
	"encoding/json"
	"testing"

	"github.com/slipverify/slipverify/core/bank"
	"github.com/slipverify/slipverify/core/verify"
)

func ptr[T any](v T) *T { return &v }

// TestBankResultJSON: the answer's own encoding is encoding/json's, in
// every variant of its optional fields.
func TestBankResultJSON(t *testing.T) {
	s := bank.Slip{TransRef: "R<1>", Date: "2026-11-20T11:35:51+07:00", CountryCode: "TH",
		Amount: bank.Amount{Amount: 100.5, Local: bank.LocalAmount{Amount: 100.5, Currency: "THB"}},
		Sender: bank.Party{Bank: bank.BankRef{ID: "004", Short: "KBANK"}, Account: bank.Account{Name: bank.AccountName{TH: "นาย ก"}}},
		Receiver: bank.Receiver{Bank: bank.BankRef{ID: "014", Name: "SCB", Short: "SCB"},
			Account: bank.Account{Name: bank.AccountName{TH: "ร้าน & ข", EN: "SHOP"}, Proxy: &bank.Proxy{Type: bank.ProxyEWallet, Account: "x1"}}}}
	raw := verify.RawSlip{Payload: "0041\u2028", Slip: s}
	plain := struct {
		Payload string `json:"payload"`
		bank.Slip
	}{raw.Payload, s}
	wantRaw, _ := json.Marshal(plain)
	if got, _ := json.Marshal(raw); string(got) != string(wantRaw) {
		t.Errorf("rawSlip %s\nencoding/json %s", got, wantRaw)
	}
	type mirror struct { // BankResult's fields, encoded by reflection
		Remark           string                 `json:"remark"`
		IsDuplicate      bool                   `json:"isDuplicate"`
		MatchedAccount   *verify.MatchedAccount `json:"matchedAccount"`
		AmountInSlip     float64                `json:"amountInSlip"`
		AmountInOrder    *float64               `json:"amountInOrder,omitempty"`
		IsAmountMatched  bool                   `json:"isAmountMatched"`
		IsAccountMatched *bool                  `json:"isAccountMatched,omitempty"`
		RawSlip          json.RawMessage        `json:"rawSlip"`
	}
	matched := &verify.MatchedAccount{ID: "acc-1", Bank: verify.MatchedBank{Code: "014", ShortCode: "SCB"}, NameTH: "บ", Type: "JURISTIC", BankNumber: "1"}
	for _, r := range []verify.BankResult{
		{RawSlip: raw},
		{Remark: `"<order>"`, IsDuplicate: true, MatchedAccount: matched, AmountInSlip: 100.5, AmountInOrder: ptr(100.5),
			IsAmountMatched: true, IsAccountMatched: ptr(true), RawSlip: raw},
		{IsAccountMatched: ptr(false), AmountInOrder: ptr(1e-7), RawSlip: raw},
	} {
		want, _ := json.Marshal(mirror{r.Remark, r.IsDuplicate, r.MatchedAccount, r.AmountInSlip, r.AmountInOrder,
			r.IsAmountMatched, r.IsAccountMatched, wantRaw})
		if got := r.AppendJSON(nil); string(got) != string(want) {
			t.Errorf("AppendJSON %s\nencoding/json %s", got, want)
		}
	}
}
