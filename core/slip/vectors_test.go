// The golden vectors in testdata/vectors.json come from promptparse, the
// reference implementation. Regenerate them from the repository root with:
//
//	npm install --prefix /tmp/promptparse promptparse@1.6.0 &&
//	  PROMPTPARSE_PREFIX=/tmp/promptparse node core/slip/testdata/gen.mjs > core/slip/testdata/vectors.json
//
// CI has no node: the JSON is committed and only read here.

package slip

import (
	"errors"
	"strings"
	"testing"

	"github.com/slipverify/slipverify/core/internal/golden"
)

// vector is one entry of testdata/vectors.json; gen.mjs documents the fields.
type vector struct {
	Name  string `json:"name"`
	Input *struct {
		Kind          string `json:"kind"`
		BankCode      string `json:"bankCode"`
		TransRef      string `json:"transRef"`
		EventType     string `json:"eventType"`
		TransactionID string `json:"transactionId"`
		Date          string `json:"date"`
	} `json:"input"`
	Payload     string `json:"payload"`
	Promptparse struct {
		Bank *struct {
			SendingBank string `json:"sendingBank"`
			TransRef    string `json:"transRef"`
		} `json:"bank"`
		Wallet *struct {
			EventType     string `json:"eventType"`
			TransactionID string `json:"transactionId"`
			Date          string `json:"date"`
		} `json:"wallet"`
	} `json:"promptparse"`
	Want   string `json:"want"` // "bank", "wallet" or "none"
	Fields struct {
		BankCode      string `json:"bankCode"`
		TransRef      string `json:"transRef"`
		EventType     string `json:"eventType"`
		TransactionID string `json:"transactionId"`
		Date          string `json:"date"`
	} `json:"fields"`
	Deviation string `json:"deviation"`
}

func loadVectors(tb testing.TB) []vector {
	tb.Helper()
	return golden.Vectors[vector](tb, "testdata/vectors.json", 50)
}

func TestVectors(t *testing.T) {
	vectors := loadVectors(t)
	for _, v := range vectors {
		t.Run(v.Name, func(t *testing.T) {
			// A vector may differ from promptparse only with a stated reason.
			ppBank, ppWallet := v.Promptparse.Bank != nil, v.Promptparse.Wallet != nil
			if (ppBank != (v.Want == "bank") || ppWallet != (v.Want == "wallet")) && v.Deviation == "" {
				t.Fatalf("want %s but promptparse says bank=%v wallet=%v, with no deviation stated", v.Want, ppBank, ppWallet)
			}

			if in := v.Input; in != nil {
				var got string
				switch in.Kind {
				case "bank":
					got = Bank{BankCode: in.BankCode, TransRef: in.TransRef}.Encode()
				case "wallet":
					got = Wallet{EventType: in.EventType, TransactionID: in.TransactionID, Date: in.Date}.Encode()
				default:
					t.Fatalf("input kind %q", in.Kind)
				}
				if got != v.Payload {
					t.Errorf("Encode = %q, promptparse generated %q", got, v.Payload)
				}
			}

			b, errB := ParseBank(v.Payload)
			w, errW := ParseWallet(v.Payload)
			checkSentinel(t, "ParseBank", errB)
			checkSentinel(t, "ParseWallet", errW)
			if (errB == nil) != (v.Want == "bank") {
				t.Errorf("ParseBank(%q) error = %v, want success: %v", v.Payload, errB, v.Want == "bank")
			}
			if (errW == nil) != (v.Want == "wallet") {
				t.Errorf("ParseWallet(%q) error = %v, want success: %v", v.Payload, errW, v.Want == "wallet")
			}
			if errB == nil {
				want := Bank{BankCode: v.Fields.BankCode, TransRef: v.Fields.TransRef}
				if b != want {
					t.Errorf("ParseBank = %+v, want %+v", b, want)
				}
				if p := v.Promptparse.Bank; p != nil && (p.SendingBank != b.BankCode || p.TransRef != b.TransRef) {
					t.Errorf("ParseBank = %+v, promptparse extracts %+v", b, *p)
				}
			}
			if errW == nil {
				want := Wallet{EventType: v.Fields.EventType, TransactionID: v.Fields.TransactionID, Date: v.Fields.Date}
				if w != want {
					t.Errorf("ParseWallet = %+v, want %+v", w, want)
				}
				if p := v.Promptparse.Wallet; p != nil &&
					(p.EventType != w.EventType || p.TransactionID != w.TransactionID || p.Date != w.Date) {
					t.Errorf("ParseWallet = %+v, promptparse extracts %+v", w, *p)
				}
			}
		})
	}
}

// TestVectorsCoverTolerances keeps the vector file honest about what it has
// to cover: canonical CRCs with a leading zero nibble for both kinds, and
// the dropped-zero forms.
func TestVectorsCoverTolerances(t *testing.T) {
	var bankZero, walletZero, dropped bool
	for _, v := range loadVectors(t) {
		crc := v.Payload[max(0, len(v.Payload)-4):]
		if v.Input != nil && v.Want != "none" && strings.HasPrefix(crc, "0") {
			bankZero = bankZero || v.Want == "bank"
			walletZero = walletZero || v.Want == "wallet"
		}
		if v.Want != "none" && strings.Contains(v.Name, "dropped") {
			dropped = true
		}
	}
	if !bankZero || !walletZero || !dropped {
		t.Errorf("vectors lack a case: bank CRC with top nibble 0 %v, wallet %v, dropped zeros %v", bankZero, walletZero, dropped)
	}
}

// checkSentinel fails unless err is nil or wraps one of the package's errors.
func checkSentinel(t testing.TB, op string, err error) {
	t.Helper()
	if err != nil && !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrChecksum) && !errors.Is(err, ErrNotSlip) {
		t.Errorf("%s error %v wraps none of ErrMalformed, ErrChecksum, ErrNotSlip", op, err)
	}
}
