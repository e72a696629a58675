package promptpay

import (
	"math"
	"strings"
	"testing"
)

func TestClassify(t *testing.T) {
	f := func(in string, kind Kind, want string) {
		t.Helper()
		k, got, err := Classify(in)
		if err != nil || k != kind || got != want {
			t.Errorf("Classify(%q) = %v, %q, %v; want %v, %q", in, k, got, err, kind, want)
		}
	}
	f("0812345678", Phone, "0812345678")
	f("081-234-5678", Phone, "0812345678")
	f(" 081 234 5678 ", Phone, "0812345678")
	f("081\t234\t5678", Phone, "0812345678")
	f("+66812345678", Phone, "0812345678")
	f("+66 81 234 5678", Phone, "0812345678")
	f("+66-81-234-5678", Phone, "0812345678")
	f("66812345678", Phone, "0812345678")
	f("66 81 234 5678", Phone, "0812345678")
	f("0612345678", Phone, "0612345678")
	f("1234567890121", NationalID, "1234567890121")
	f("1-2345-67890-12-1", NationalID, "1234567890121")
	f("0105550123451", NationalID, "0105550123451") // juristic tax ID
	f("0066812345678", NationalID, "0066812345678") // 13 digits: promptparse's phone wire form is not a phone typing
	f("004999000288505", EWallet, "004999000288505")
	f("004 999 000 288 505", EWallet, "004999000288505")
}

// TestClassifyRejects checks that each bad target is refused with a message
// that names the field and the problem.
func TestClassifyRejects(t *testing.T) {
	f := func(in, want string) {
		t.Helper()
		k, got, err := Classify(in)
		if err == nil {
			t.Errorf("Classify(%q) = %v, %q; want an error", in, k, got)
			return
		}
		if !strings.HasPrefix(err.Error(), "target: ") || !strings.Contains(err.Error(), want) {
			t.Errorf("Classify(%q) error %q; want it to start with \"target: \" and contain %q", in, err, want)
		}
		if k != 0 || got != "" {
			t.Errorf("Classify(%q) failed but returned %v, %q", in, k, got)
		}
	}
	f("", "is required")
	f("  - ", "is required")
	f("081.234.5678", `'.' is not allowed`)
	f("(081) 2345678", `'(' is not allowed`)
	f("๐๘๑๒๓๔๕๖๗๘", `'๐' is not allowed`) // Thai digits
	f("0812345678x", `'x' is not allowed`)
	f("081+2345678", `"+" may only start`)
	f("++66812345678", `"+" may only start`)
	f("+", "only Thai phone numbers (+66)")
	f("+1 415 555 0100", "only Thai phone numbers (+66)")
	f("+660812345678", "drop the 0 after +66")
	f("660812345678", "has 12 digits")
	f("+6681234567", "9 digits after +66")
	f("+668123456789", "9 digits after +66")
	f("+66012345678", "cannot start with +660")
	f("0012345678", `cannot start with "00"`)
	f("8123456789", "starts with 0")
	f("812345678", "starts with 0 or +66")
	f("081234567", "has 9 digits")
	f("08123456789", "has 11 digits")
	f("123456789012", "has 12 digits")
	f("12345678901234", "has 14 digits")
	f("1234567890123456", "more than 15 digits")
	f("1", "has 1 digits")
}

func TestPayloadRejects(t *testing.T) {
	amt := func(a float64) *float64 { return &a }
	f := func(target string, amount *float64, want string) {
		t.Helper()
		p, err := Payload(target, amount)
		if err == nil {
			t.Errorf("Payload(%q, %v) = %q; want error %q", target, fmtAmount(amount), p, want)
			return
		}
		if err.Error() != want {
			t.Errorf("Payload(%q, %v) error\n got %q\nwant %q", target, fmtAmount(amount), err, want)
		}
		if p != "" {
			t.Errorf("Payload(%q, %v) failed but returned %q", target, fmtAmount(amount), p)
		}
	}
	const phone = "0812345678"
	f(phone, amt(0), "amount: must be greater than 0")
	f(phone, amt(math.Copysign(0, -1)), "amount: must be greater than 0")
	f(phone, amt(-1), "amount: must be greater than 0")
	f(phone, amt(math.Inf(-1)), "amount: must be greater than 0")
	f(phone, amt(math.NaN()), "amount: must be a number")
	f(phone, amt(math.Inf(1)), "amount: must be at most 9999999999.99")
	f(phone, amt(10000000000), "amount: must be at most 9999999999.99")
	f(phone, amt(9999999999.991), "amount: must be at most 9999999999.99")
	f(phone, amt(0.001), "amount: must have at most 2 decimal places")
	f(phone, amt(0.005), "amount: must have at most 2 decimal places")
	f(phone, amt(1.005), "amount: must have at most 2 decimal places")
	f(phone, amt(100.255), "amount: must have at most 2 decimal places")
	f(phone, amt(1e-300), "amount: must have at most 2 decimal places")
	f(phone, amt(1234567.891), "amount: must have at most 2 decimal places")
	f("", nil, "target: is required")
	f("12345", amt(1), "target: has 5 digits, but "+errTargetFormat)
	// Both fields fail: both are named, joined as VALIDATION_ERROR wants.
	f("", amt(-5), "target: is required; amount: must be greater than 0")
	f("+660812345678", amt(0.125), "target: drop the 0 after +66, as in +66812345678; amount: must have at most 2 decimal places")
}

// TestPayloadAmount checks the static/dynamic switch and the amount format
// on cases that go beyond the vectors: the edges of the accepted range.
func TestPayloadAmount(t *testing.T) {
	f := func(a float64, tag54 string) {
		t.Helper()
		p, err := Payload("0812345678", &a)
		if err != nil {
			t.Fatalf("Payload(%v): %v", a, err)
		}
		objs, err := parseTLV(p)
		if err != nil {
			t.Fatalf("Payload(%v) = %q: %v", a, p, err)
		}
		if objs[1].value != "12" || objs[5].tag != "54" || objs[5].value != tag54 {
			t.Errorf("Payload(%v) = %q; want tag 01 = 12 and tag 54 = %q", a, p, tag54)
		}
	}
	f(0.01, "0.01")
	f(0.1, "0.10")
	f(0.29, "0.29")
	f(1, "1.00")
	f(100.5, "100.50")
	f(1e3, "1000.00")
	f(123456789.12, "123456789.12")
	f(999999999.99, "999999999.99")
	f(9999999999.99, "9999999999.99")
	f(9999999999.98, "9999999999.98")

	p, err := Payload("0812345678", nil)
	if err != nil || !strings.HasPrefix(p, "000201010211") || strings.Contains(p, "5802TH54") {
		t.Errorf("Payload without amount = %q, %v; want static (01 = 11) and no tag 54", p, err)
	}
}

func TestKindString(t *testing.T) {
	for k, want := range map[Kind]string{Phone: "phone", NationalID: "national_id", EWallet: "ewallet", 0: "Kind(0)", 9: "Kind(9)"} {
		if got := k.String(); got != want {
			t.Errorf("Kind(%d).String() = %q, want %q", k, got, want)
		}
	}
}

func BenchmarkPayload(b *testing.B) {
	amount := 1234.5
	b.Run("static", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := Payload("081-234-5678", nil); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("amount", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := Payload("+66 81 234 5678", &amount); err != nil {
				b.Fatal(err)
			}
		}
	})
}
