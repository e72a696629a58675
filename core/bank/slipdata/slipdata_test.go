package slipdata_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/slipverify/slipverify/core/bank/bankfake"
	"github.com/slipverify/slipverify/core/bank/slipdata"
)

const base = `{"transRef":"R1","sendingBank":"004","receivingBank":"014","transDate":"20231005","transTime":"14:03:27",
"sender":{"displayName":"ก","name":"A","proxy":{"type":"","value":""},"account":{"type":"BANKAC","value":"x1"}},
"receiver":{"displayName":"ข","name":"","proxy":{"type":"","value":""},"account":{"type":"BANKAC","value":"x2"}},
"paidLocalCurrency":"764","countryCode":"TH",%s}`

func withAmount(fields string) string { return strings.Replace(base, "%s", fields, 1) }

// TestAmounts: numbers and strings read as the same exact decimal.
func TestAmounts(t *testing.T) {
	f := func(fields string, amount, local, fee float64) {
		t.Helper()
		s, err := slipdata.Decode([]byte(withAmount(fields)))
		if err != nil {
			t.Fatalf("%s: %v", fields, err)
		}
		if s.Amount.Amount != amount || s.Amount.Local.Amount != local || s.Fee != fee {
			t.Errorf("%s: amount %v local %v fee %v, want %v %v %v", fields, s.Amount.Amount, s.Amount.Local.Amount, s.Fee, amount, local, fee)
		}
	}
	f(`"amount":5345.45`, 5345.45, 5345.45, 0)
	f(`"amount":"5345.45"`, 5345.45, 5345.45, 0)
	f(`"amount":"0.10","paidLocalAmount":"0.1","transFeeAmount":"2.50"`, 0.1, 0.1, 2.5)
	f(`"amount":100,"paidLocalAmount":null,"transFeeAmount":""`, 100, 100, 0)
	f(`"amount":9999999999999.99`, 9999999999999.99, 9999999999999.99, 0)
}

func TestRejects(t *testing.T) {
	for _, fields := range []string{
		`"amount":-1`, `"amount":"1e3"`, `"amount":" 1"`, `"amount":"1."`, `"amount":".5"`, `"amount":"NaN"`,
		`"amount":"12345678901234"`, `"amount":true`, `"amount":null`, `"amount":""`, `"transFeeAmount":1`,
	} {
		if _, err := slipdata.Decode([]byte(withAmount(fields))); !errors.Is(err, slipdata.ErrBadData) {
			t.Errorf("%s: err %v, want ErrBadData", fields, err)
		}
	}
	for _, bad := range []string{
		strings.Replace(withAmount(`"amount":1`), `"20231005"`, `"2023-10-05"`, 1),
		strings.Replace(withAmount(`"amount":1`), `"14:03:27"`, `"25:00:00"`, 1),
		strings.Replace(withAmount(`"amount":1`), `"R1"`, `""`, 1),
		`[]`, `{"transRef":`,
	} {
		if _, err := slipdata.Decode([]byte(bad)); !errors.Is(err, slipdata.ErrBadData) {
			t.Errorf("%.60s: err %v, want ErrBadData", bad, err)
		}
	}
}

// TestDate: Bangkok wall time, written with +07:00.
func TestDate(t *testing.T) {
	s, err := slipdata.Decode([]byte(withAmount(`"amount":1`)))
	if err != nil {
		t.Fatal(err)
	}
	if s.Date != "2023-10-05T14:03:27+07:00" {
		t.Errorf("date %s", s.Date)
	}
}

func TestCurrencyAndRefs(t *testing.T) {
	s, err := slipdata.Decode([]byte(strings.Replace(withAmount(`"amount":1,"ref1":12345,"ref2":null,"toMerchantId":"M1"`), `"764"`, `"840"`, 1)))
	if err != nil {
		t.Fatal(err)
	}
	if s.Amount.Local.Currency != "USD" || s.Ref1 != "12345" || s.Ref2 != "" || s.Receiver.MerchantID == nil || *s.Receiver.MerchantID != "M1" {
		t.Errorf("currency %s ref1 %q ref2 %q merchant %v", s.Amount.Local.Currency, s.Ref1, s.Ref2, s.Receiver.MerchantID)
	}
}

// FuzzDecode: arbitrary JSON never panics, and whatever maps is a slip
// with a transRef, a +07:00 date and a non-negative amount.
func FuzzDecode(f *testing.F) {
	for _, name := range []string{"kbank_interbank.json", "kbank_promptpay.json", "kbank_thai.json", "scb_interbank.json", "scb_promptpay.json"} {
		f.Add([]byte(bankfake.Example(name)))
	}
	f.Add([]byte(withAmount(`"amount":"1.5"`)))
	f.Add([]byte(`{"amount":{}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := slipdata.Decode(b)
		if err != nil {
			if !errors.Is(err, slipdata.ErrBadData) {
				t.Fatalf("error %v is not ErrBadData", err)
			}
			return
		}
		if s.TransRef == "" || !strings.HasSuffix(s.Date, "+07:00") || s.Amount.Amount < 0 || s.Amount.Local.Currency == "" {
			t.Fatalf("mapped %s", s.AppendJSON(nil))
		}
		if !json.Valid(s.AppendJSON(nil)) {
			t.Fatalf("slip JSON invalid: %s", s.AppendJSON(nil))
		}
	})
}

func BenchmarkDecode(b *testing.B) {
	for _, name := range []string{"kbank_interbank.json", "scb_interbank.json"} {
		data := bankfake.Example(name)
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := slipdata.Decode(data); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
