package receiver

import "testing"

func TestNumberMatches(t *testing.T) {
	f := func(masked, full string, want bool) {
		t.Helper()
		if got := NumberMatches(masked, full); got != want {
			t.Errorf("NumberMatches(%q, %q) = %v, want %v", masked, full, got, want)
		}
	}
	// KBANK, SCB, BBL and KTB style masks over 10-digit accounts.
	f("xxx-x-x5678-x", "123-4-45678-9", true)
	f("xxx-x-x5678-x", "1234456789", true)
	f("xxx-x-x5678-x", "1234456779", false)
	f("XXX-X-X5678-X", "1234456789", true)
	f("xxx-xxx567-8", "1234565678", true)
	f("xxx-xxx567-8", "1234565679", false)
	f("xxx-x-xx456-7", "0001234567", true)
	f("123-4-xxxxx-9", "1234567899", true)
	f("*****6789", "0123456789", true) // shorter mask: aligned at the end
	f("******6789", "0123456789", true)
	f("xxxxxx6780", "0123456789", false)
	// The visible digits must sit at the places the mask gives them,
	// counted from the end, not anywhere in the number.
	f("*****6789", "6789012345", false)
	f("*****6789", "0067890000", false)
	f("xxx-xxx-5678", "66856781234", false)
	f("xxx-x-x5678-x", "5678000000", false)
	f("12345678xx", "345678", false) // visible places before the number's start
	// PromptPay proxies: phone numbers and national IDs.
	f("xxx-xxx-5678", "0812345678", true)
	f("xxx-xxx-5678", "0812345679", false)
	f("x-xxxx-xxxx0-12-1", "1234567890121", true)
	f("x-xxxx-xxxx5-12-1", "1234567890121", false)
	f("xxx-xxx-5678", "+66812345678", true)
	// Too little shown to tell.
	f("xxx-xxx-xx78", "0812345678", false)
	f("", "0812345678", false)
	f("xxxxxxxxxx", "0812345678", false)
}

func TestNameMatches(t *testing.T) {
	f := func(printed, registered string, want bool) {
		t.Helper()
		if got := NameMatches(printed, registered); got != want {
			t.Errorf("NameMatches(%q, %q) = %v, want %v", printed, registered, got, want)
		}
	}
	f("นาย สมชาย ใจดี", "สมชาย ใจดี", true)
	f("นาย สมชาย ใ", "นาย สมชาย ใจดี", true)    // truncated surname
	f("นาย สมชาย ใ***", "นาย สมชาย ใจดี", true) // masked surname
	f("นาย สมชาย", "นาย สมชาย ใจดี", true)      // surname dropped
	f("นาย สมหญิง ใจดี", "นาย สมชาย ใจดี", false)
	f("น.ส. มาลี รักไทย", "นางสาว มาลี รักไทย", true) // title written two ways
	f("บริษัท ทดสอบสลิป จ", "บริษัท ทดสอบสลิป จำกัด", true)
	f("บริษัท ทดสอบสลิป จำกัด", "ทดสอบสลิป", true)
	f("บจก. ทดสอบสลิป", "บริษัท ทดสอบสลิป จำกัด", true)
	f("บริษัท ทดสอบ", "บริษัท ทดสอบสลิป จำกัด", false) // a first word must be whole
	f("MR. SOMCHAI J", "Somchai Jaidee", true)
	f("MR. SOMCHAI JAIDEE", "MR SOMCHAI JAIDEE", true)
	f("MR SOMCHAI J***", "SOMCHAI JAIDEE", true)
	f("MISS MALEE R", "MS. MALEE RAKTHAI", true)
	f("SLIP TEST CO., LTD.", "SLIP TEST CO LTD", true)
	f("SLIP TEST CO LTD", "SLIP TESTING CO LTD", false)
	f("MR. SOMCHAI J", "SOMCHAI", false) // more words than registered
	f("SOMCHAI JAI DEE", "SOMCHAI JAIDEE", false)
	f("", "SOMCHAI", false)
	f("MR.", "SOMCHAI", false)
	// A title joined to the name, as Thai writes it.
	f("นาย สมชาย ใ", "นายสมชาย ใจดี", true)
	f("นายสมชาย ใจดี", "สมชาย ใจดี", true)
	f("น.ส.มาลี รักไทย", "นางสาว มาลี รักไทย", true)
	f("นางสาวมาลี ร", "น.ส. มาลี รักไทย", true)
	f("นางมาลี ร", "นางสาว มาลี รักไทย", true) // the honorific is not the name
	f("บจก.ทดสอบสลิป", "บริษัท ทดสอบสลิป จำกัด", true)
	f("MR.SOMCHAI J", "SOMCHAI JAIDEE", true)
	f("นายสมหญิง ใจดี", "นาย สมชาย ใจดี", false)
	f("MRSOMCHAI J", "SOMCHAI JAIDEE", false) // no dot: no title to take off
	// Public companies and partnerships, however the form is written.
	f("บมจ. ทดสอบ", "บริษัท ทดสอบ จำกัด (มหาชน)", true)
	f("SIAM CEMENT PCL", "SIAM CEMENT PUBLIC COMPANY LIMITED", true)
	f("หจก ทดสอบ", "ห้างหุ้นส่วนจำกัด ทดสอบ", true)
}

func TestMatches(t *testing.T) {
	acc := Account{BankCode: "014", Number: "1234565678", NameTH: "บริษัท ทดสอบสลิป จำกัด", NameEN: "SLIP TEST CO LTD"}
	slip := Party{BankID: "014", Account: "xxx-xxx567-8", NameTH: "บริษัท ทดสอบสลิป จ", NameEN: "SLIP TEST CO"}
	if !Matches(slip, acc, false, NameNumber) {
		t.Error("the registered account does not match its own slip")
	}
	other := slip
	other.BankID = "004"
	if Matches(other, acc, false, NameNumber) {
		t.Error("an account at another bank matches")
	}
	wrongNumber := slip
	wrongNumber.Account = "xxx-xxx999-8"
	if Matches(wrongNumber, acc, false, NameNumber) || !Matches(wrongNumber, acc, false, Name) || Matches(wrongNumber, acc, false, Number) {
		t.Error("modes do not pick what must match")
	}
	englishOnly := Party{BankID: "014", Account: "xxx-xxx567-8", NameTH: "ชื่ออื่น", NameEN: "SLIP TEST CO LTD"}
	if !Matches(englishOnly, acc, false, NameNumber) {
		t.Error("an English name alone does not match")
	}
	pp := Account{BankCode: "PROMPTPAY", Number: "0812345678", NameTH: "นาย สมชาย ใจดี"}
	ppSlip := Party{BankID: "004", Account: "xxx-xxx-5678", NameTH: "นาย สมชาย ใ"}
	if !Matches(ppSlip, pp, true, NameNumber) || !Matches(ppSlip, pp, true, Number) {
		t.Error("a PromptPay receiver behind any bank does not match")
	}
	for in, want := range map[string]Mode{"NAME": Name, "NUMBER": Number, "NAME_NUMBER": NameNumber} {
		if m, ok := ParseMode(in); !ok || m != want {
			t.Errorf("ParseMode(%s)", in)
		}
	}
	if _, ok := ParseMode("name"); ok {
		t.Error("ParseMode is case-insensitive")
	}
}
