package slip

import (
	"testing"
)

// FuzzParse feeds arbitrary strings to both parsers. Neither may panic or
// return an error outside the package's three; a payload is never both a
// bank and a wallet slip; and whatever parses re-encodes to a canonical
// payload that parses back to the same value, and only as its own kind.
//
// A random mutation almost always breaks the CRC, which would leave
// everything behind the CRC check unexplored, so each input is also tried
// with its CRC tag replaced by a correct one.
func FuzzParse(f *testing.F) {
	for _, v := range loadVectors(f) {
		f.Add(v.Payload)
	}
	f.Add(bankPayload + bankPayload)
	f.Add("9104")
	f.Add("00049104" + "0")
	f.Fuzz(func(t *testing.T, payload string) {
		checkParse(t, payload)
		body := payload
		if n := len(body); n >= 8 && body[n-8:n-6] == "91" {
			body = body[:n-8]
		}
		checkParse(t, string(AppendCRC([]byte(body), "91", true)))
	})
}

// checkParse asserts FuzzParse's properties for one payload.
func checkParse(t *testing.T, payload string) {
	t.Helper()
	b, errB := ParseBank(payload)
	w, errW := ParseWallet(payload)
	checkSentinel(t, "ParseBank", errB)
	checkSentinel(t, "ParseWallet", errW)
	if errB == nil && errW == nil {
		t.Fatalf("%q parses as bank %+v and as wallet %+v", payload, b, w)
	}
	if errB == nil {
		if err := b.Validate(); err != nil {
			t.Fatalf("ParseBank(%q) = %+v, which fails Validate: %v", payload, b, err)
		}
		enc := b.Encode()
		if b2, err := ParseBank(enc); err != nil || b2 != b {
			t.Fatalf("ParseBank(%q) = %+v; its Encode %q parses to %+v, %v", payload, b, enc, b2, err)
		}
		if _, err := ParseWallet(enc); err == nil {
			t.Fatalf("bank encoding %q parses as a wallet", enc)
		}
	}
	if errW == nil {
		if err := w.Validate(); err != nil {
			t.Fatalf("ParseWallet(%q) = %+v, which fails Validate: %v", payload, w, err)
		}
		enc := w.Encode()
		if w2, err := ParseWallet(enc); err != nil || w2 != w {
			t.Fatalf("ParseWallet(%q) = %+v; its Encode %q parses to %+v, %v", payload, w, enc, w2, err)
		}
		if _, err := ParseBank(enc); err == nil {
			t.Fatalf("wallet encoding %q parses as a bank", enc)
		}
	}
}

// FuzzEncode checks that Validate and Encode agree with the parsers: a value
// that passes Validate round-trips, and one that fails it but still fits the
// TLV lengths encodes to a payload the parser refuses.
func FuzzEncode(f *testing.F) {
	f.Add("004", "ABC123", "P2P", "TM1234567890", "30092026")
	f.Add("4", "", "", "1", "29022023")
	f.Fuzz(func(t *testing.T, code, ref, ev, id, date string) {
		b := Bank{BankCode: code, TransRef: ref}
		got, err := ParseBank(b.Encode())
		if b.Validate() == nil {
			if err != nil || got != b {
				t.Fatalf("valid %+v: ParseBank(Encode) = %+v, %v", b, got, err)
			}
		} else if 4+6+4+len(code)+4+len(ref) <= 99 && err == nil {
			t.Fatalf("invalid %+v encodes to %q, which ParseBank accepts as %+v", b, b.Encode(), got)
		}

		w := Wallet{EventType: ev, TransactionID: id, Date: date}
		gotW, err := ParseWallet(w.Encode())
		if w.Validate() == nil {
			if err != nil || gotW != w {
				t.Fatalf("valid %+v: ParseWallet(Encode) = %+v, %v", w, gotW, err)
			}
		} else if walletSubLen(w) <= 99 && err == nil {
			t.Fatalf("invalid %+v encodes to %q, which ParseWallet accepts as %+v", w, w.Encode(), gotW)
		}
	})
}
