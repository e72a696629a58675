package bank_test

import (
	"encoding/json"
	"testing"

	"github.com/slipverify/slipverify/core/bank"
)

// TestSlipJSON: AppendJSON writes what encoding/json writes, in every
// variant of the optional fields and with text that needs escaping.
func TestSlipJSON(t *testing.T) {
	merchant := "M<1>&"
	full := bank.Slip{TransRef: "015353134529BPM05470", Date: "2026-11-20T11:35:51+07:00", CountryCode: "TH",
		Amount: bank.Amount{Amount: 100.5, Local: bank.LocalAmount{Amount: 3e-7, Currency: "THB"}}, Fee: 1e21,
		Ref1: "INV-1", Ref2: "\"q\" \\ \u2028", Ref3: "\xff",
		Sender: bank.Party{Bank: bank.BankRef{ID: "004", Name: "Kasikornbank", Short: "KBANK"},
			Account: bank.Account{Name: bank.AccountName{TH: "นาย ทดสอบ ระบบ", EN: "MR. TEST"},
				Bank: bank.AccountBank{Type: "BANKAC", Account: "xxx-x-x1234-x"}, Proxy: &bank.Proxy{Type: bank.ProxyPhone, Account: "xxx-xxx-5678"}}},
		Receiver: bank.Receiver{Bank: bank.BankRef{ID: "014", Short: "SCB"},
			Account:    bank.Account{Name: bank.AccountName{TH: "บริษัท <ทดสอบ> & ลูก"}, Bank: bank.AccountBank{Type: "BANKAC", Account: "x"}},
			MerchantID: &merchant},
	}
	bare := bank.Slip{}
	for _, s := range []bank.Slip{full, bare} {
		want, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := s.AppendJSON(nil); string(got) != string(want) {
			t.Errorf("AppendJSON:\n%s\nencoding/json:\n%s", got, want)
		}
	}
}
