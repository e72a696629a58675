package slip

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// Payloads from promptparse's own test suite and README.
const (
	bankPayload   = "004100060000010103014022000111222233344ABCD125102TH910417DF"
	walletPayload = "00470002010102010203P2P0312TM12345678900408300920269104be2a"
)

// tlv builds one data object independently of AppendTLV.
func tlv(tag, value string) string { return fmt.Sprintf("%s%02d%s", tag, len(value), value) }

// seal appends a correct CRC tag 91, so a case tests structure, not CRC.
func seal(body string) string {
	return body + "9104" + fmt.Sprintf("%04X", CRC16(body+"9104"))
}

func bankSub(code, ref string) string {
	return tlv("00", "000001") + tlv("01", code) + tlv("02", ref)
}

func bankBody(code, ref string) string { return tlv("00", bankSub(code, ref)) + tlv("51", "TH") }

func walletSub(ev, id, date string) string {
	return tlv("00", "01") + tlv("01", "01") + tlv("02", ev) + tlv("03", id) + tlv("04", date)
}

func TestCRC16(t *testing.T) {
	f := func(in string, want uint16) {
		t.Helper()
		if got := CRC16(in); got != want {
			t.Errorf("CRC16(%q) = %04X, want %04X", in, got, want)
		}
	}
	f("", 0xFFFF)
	f("123456789", 0x29B1) // the catalogued check value of CRC-16/CCITT-FALSE
	f("004000060000010103002021900021231231212000115102TH9104", 0x9C30)
	f("00020101021129370016A0000006770101110113006681222333353037645802TH6304", 0x1DCF)
}

func TestAppendTLV(t *testing.T) {
	f := func(tag, value, want string) {
		t.Helper()
		if got := string(AppendTLV([]byte("x"), tag, value)); got != "x"+want {
			t.Errorf("AppendTLV(%q, %q) = %q, want %q", tag, value, got, "x"+want)
		}
	}
	f("00", "01", "000201")
	f("58", "TH", "5802TH")
	f("02", strings.Repeat("a", 10), "0210aaaaaaaaaa")
	f("02", strings.Repeat("a", 99), "0299"+strings.Repeat("a", 99))
	f("02", strings.Repeat("a", 105), "0205"+strings.Repeat("a", 105)) // as promptparse
}

func TestAppendCRC(t *testing.T) {
	f := func(body, tag string, upper bool, want string) {
		t.Helper()
		if got := string(AppendCRC([]byte(body), tag, upper)); got != want {
			t.Errorf("AppendCRC(%q, %q, %v) = %q, want %q", body, tag, upper, got, want)
		}
	}
	f("004000060000010103002021900021231231212000115102TH", "91", true,
		"004000060000010103002021900021231231212000115102TH91049C30")
	f("00020101021129370016A0000006770101110113006681222333353037645802TH", "63", true,
		"00020101021129370016A0000006770101110113006681222333353037645802TH63041DCF")
	f("00470002010102010203P2P0312TM1234567890040830092026", "91", false, walletPayload)
}

func TestParseBank(t *testing.T) {
	b, err := ParseBank(bankPayload)
	if err != nil {
		t.Fatal(err)
	}
	if want := (Bank{BankCode: "014", TransRef: "00111222233344ABCD12"}); b != want {
		t.Fatalf("ParseBank = %+v, want %+v", b, want)
	}
	if got := b.Encode(); got != bankPayload {
		t.Errorf("Encode = %q, want %q", got, bankPayload)
	}
}

func TestParseWallet(t *testing.T) {
	w, err := ParseWallet(walletPayload)
	if err != nil {
		t.Fatal(err)
	}
	if want := (Wallet{EventType: "P2P", TransactionID: "TM1234567890", Date: "30092026"}); w != want {
		t.Fatalf("ParseWallet = %+v, want %+v", w, want)
	}
	if got := w.Encode(); got != walletPayload {
		t.Errorf("Encode = %q, want %q", got, walletPayload)
	}
}

// TestAccept covers the tolerances and layouts ParseBank and ParseWallet take.
func TestAccept(t *testing.T) {
	// A bank payload whose CRC is below 0x1000, to drop a leading zero.
	var zero string
	for n := 0; zero == ""; n++ {
		if body := bankBody("004", fmt.Sprintf("Z%07d", n)); CRC16(body+"9104") < 0x1000 {
			zero = body
		}
	}
	zcrc := fmt.Sprintf("%03x", CRC16(zero+"9104"))
	// A bank payload whose CRC over the prefix ending "9103" is below 0x1000.
	var printed string
	for n := 0; printed == ""; n++ {
		if body := bankBody("004", fmt.Sprintf("P%07d", n)); CRC16(body+"9103") < 0x1000 {
			printed = body
		}
	}
	lower := bankPayload[:len(bankPayload)-4] + "17df"
	walletUpper := walletPayload[:len(walletPayload)-4] + "BE2A"

	bank := []struct{ name, payload string }{
		{"canonical", bankPayload},
		{"lower-case CRC", lower},
		{"spaces around", "  " + bankPayload + "  "},
		{"line ends around", "\r\n" + bankPayload + "\n"},
		{"zero dropped, length 04", zero + "9104" + zcrc},
		{"zero dropped, length 03", zero + "9103" + zcrc},
		{"zero dropped, length 03, upper case", zero + "9103" + strings.ToUpper(zcrc)},
		{"CRC over prefix as printed", printed + "9103" + fmt.Sprintf("%03X", CRC16(printed+"9103"))},
		{"no tag 51", seal(tlv("00", bankSub("004", "ABC123")))},
		{"tag 51 first", seal(tlv("51", "TH") + tlv("00", bankSub("004", "ABC123")))},
		{"unknown top-level tag", seal(bankBody("004", "ABC123") + tlv("62", "07ABC"))},
		{"unknown sub-tag", seal(tlv("00", bankSub("004", "ABC123")+tlv("09", "x")) + tlv("51", "TH"))},
		{"sub-tags reversed", seal(tlv("00", tlv("02", "ABC123")+tlv("01", "004")+tlv("00", "000001")) + tlv("51", "TH"))},
		{"transRef of 50", seal(bankBody("004", strings.Repeat("9", 50)))},
	}
	for _, c := range bank {
		if _, err := ParseBank(c.payload); err != nil {
			t.Errorf("bank %s: ParseBank(%q): %v", c.name, c.payload, err)
		}
	}
	wallet := []struct{ name, payload string }{
		{"canonical", walletPayload},
		{"upper-case CRC", walletUpper},
		{"tab around", "\t" + walletPayload},
		{"leap day 2024", seal(tlv("00", walletSub("P2P", "TM1", "29022024")))},
		{"leap day 2000", seal(tlv("00", walletSub("P2P", "TM1", "29022000")))},
		{"31 December", seal(tlv("00", walletSub("P2P", "TM1", "31122025")))},
		{"Buddhist-era year", seal(tlv("00", walletSub("P2P", "TM1", "01012568")))},
		{"event type with _ and -", seal(tlv("00", walletSub("BILL_PAY-2", "TM1", "01012025")))},
		{"tag 51 present", seal(tlv("00", walletSub("P2P", "TM1", "01012025")) + tlv("51", "TH"))},
		{"longest fields", seal(tlv("00", walletSub(strings.Repeat("E", 17), strings.Repeat("1", 50), "01012025")))},
	}
	for _, c := range wallet {
		if _, err := ParseWallet(c.payload); err != nil {
			t.Errorf("wallet %s: ParseWallet(%q): %v", c.name, c.payload, err)
		}
	}
}

// TestReject covers every way a payload is refused, and with which error.
// Each payload must also be refused by the other parser.
func TestReject(t *testing.T) {
	okCRC := bankPayload[len(bankPayload)-4:]
	noCRC := bankPayload[:len(bankPayload)-8]
	walletBody := func(ev, id, date string) string { return seal(tlv("00", walletSub(ev, id, date))) }
	cases := []struct {
		name    string
		wallet  bool // the case is for ParseWallet, else ParseBank
		payload string
		err     error
	}{
		// Framing.
		{"empty", false, "", ErrMalformed},
		{"blank", false, " \t\r\n", ErrMalformed},
		{"not TLV", false, "hello, world", ErrMalformed},
		{"letter in tag", false, "0A" + bankPayload[2:], ErrMalformed},
		{"letter in length", false, "004A" + bankPayload[4:], ErrMalformed},
		{"space in length", false, seal("00 3" + bankBody("004", "ABC123")[4:]), ErrMalformed},
		{"tag 00 length too long", false, seal("0028" + bankBody("004", "ABC123")[4:]), ErrMalformed},
		{"tag 00 length too short", false, seal("0026" + bankBody("004", "ABC123")[4:]), ErrMalformed},
		{"value runs past the end", false, "0099" + bankPayload[4:], ErrMalformed},
		{"truncated in a header", false, bankPayload[:2], ErrMalformed},
		{"truncated in a value", false, bankPayload[:30], ErrMalformed},
		{"truncated before CRC", false, noCRC, ErrMalformed},
		{"CRC tag without value", false, noCRC + "9104", ErrMalformed},
		{"CRC tag cut in header", false, noCRC + "91", ErrMalformed},
		{"garbage before CRC", false, seal(bankBody("004", "ABC123") + "XYZ"), ErrMalformed},
		{"garbage after CRC", false, bankPayload + "00", ErrMalformed},
		{"space inside", false, bankPayload[:20] + " " + bankPayload[20:], ErrMalformed},
		{"CRC not last", false, tlv("00", bankSub("014", "00111222233344ABCD12")) + "9104" + okCRC + "5102TH", ErrMalformed},
		{"CRC in tag 63", false, func() string { b := bankBody("004", "ABC123") + "6304"; return b + fmt.Sprintf("%04X", CRC16(b)) }(), ErrMalformed},
		{"CRC length 05", false, noCRC + "9105" + okCRC + "0", ErrMalformed},
		{"CRC length 00", false, noCRC + "9100", ErrMalformed},
		{"CRC not hex", false, noCRC + "9104" + "17DG", ErrMalformed},
		{"CRC with sign", false, noCRC + "9104" + "+7DF", ErrMalformed},
		{"CRC 03 with 4 digits", false, noCRC + "9103" + okCRC, ErrMalformed},
		{"empty top-level tag", false, seal(bankBody("004", "ABC123") + "6200"), ErrMalformed},
		{"repeated tag 51", false, seal(bankBody("004", "ABC123") + tlv("51", "TH")), ErrMalformed},
		{"repeated tag 00", false, seal(bankBody("004", "ABC123") + tlv("00", bankSub("004", "EVIL99"))), ErrMalformed},
		{"repeated sub-tag 02", false, seal(tlv("00", bankSub("004", "ABC123")+tlv("02", "EVIL99")) + tlv("51", "TH")), ErrMalformed},
		{"empty sub-tag", false, seal(tlv("00", bankSub("004", "ABC123")+"0500") + tlv("51", "TH")), ErrMalformed},
		{"sub-tag runs past tag 00", false, seal(tlv("00", bankSub("004", "ABC123")+"0509abc") + tlv("51", "TH")), ErrMalformed},
		{"letter in sub-tag length", false, seal(tlv("00", tlv("00", "000001")+"010X004"+tlv("02", "ABC123")) + tlv("51", "TH")), ErrMalformed},
		{"non-ASCII byte", false, seal(bankBody("004", "ABC123") + tlv("62", "é")), ErrMalformed},
		{"NUL byte", false, seal(bankBody("004", "ABC123") + tlv("62", "\x00")), ErrMalformed},

		// CRC.
		{"wrong CRC", false, noCRC + "9104" + "17DE", ErrChecksum},
		{"wrong CRC, lower case", false, noCRC + "9104" + "17de", ErrChecksum},
		{"non-zero digit dropped", false, noCRC + "9103" + okCRC[1:], ErrChecksum},
		{"non-zero digit dropped, length 04", false, noCRC + "9104" + okCRC[1:], ErrChecksum},
		{"body changed", false, strings.Replace(bankPayload, "ABCD", "ABCE", 1), ErrChecksum},

		// Not a bank slip.
		{"no tag 00", false, seal(tlv("51", "TH")), ErrNotSlip},
		{"wrong API type", false, seal(tlv("00", tlv("00", "000002")+tlv("01", "004")+tlv("02", "ABC123")) + tlv("51", "TH")), ErrNotSlip},
		{"no API type", false, seal(tlv("00", tlv("01", "004")+tlv("02", "ABC123")) + tlv("51", "TH")), ErrNotSlip},
		{"wallet payload", false, walletPayload, ErrNotSlip},
		{"country not TH", false, seal(tlv("00", bankSub("004", "ABC123")) + tlv("51", "LA")), ErrNotSlip},
		{"PromptPay QR", false, "00020101021129370016A0000006770101110113006681222333353037645802TH63041DCF", ErrMalformed},

		// Bank fields.
		{"no bank code", false, seal(tlv("00", tlv("00", "000001")+tlv("02", "ABC123")) + tlv("51", "TH")), ErrMalformed},
		{"bank code with letter", false, seal(bankBody("0A4", "ABC123")), ErrMalformed},
		{"bank code of 2", false, seal(bankBody("04", "ABC123")), ErrMalformed},
		{"bank code of 4", false, seal(bankBody("0004", "ABC123")), ErrMalformed},
		{"no transRef", false, seal(tlv("00", tlv("00", "000001")+tlv("01", "004")) + tlv("51", "TH")), ErrMalformed},
		{"transRef of 51", false, seal(bankBody("004", strings.Repeat("9", 51))), ErrMalformed},
		{"transRef with dash", false, seal(bankBody("004", "0151-2310")), ErrMalformed},
		{"transRef with space", false, seal(bankBody("004", "0151 2310")), ErrMalformed},

		// Not a wallet slip.
		{"bank payload", true, bankPayload, ErrNotSlip},
		{"sub-tag 00 not 01", true, seal(tlv("00", tlv("00", "02")+tlv("01", "01")+tlv("02", "P2P")+tlv("03", "TM1")+tlv("04", "01012025"))), ErrNotSlip},
		{"sub-tag 01 not 01", true, seal(tlv("00", tlv("00", "01")+tlv("01", "02")+tlv("02", "P2P")+tlv("03", "TM1")+tlv("04", "01012025"))), ErrNotSlip},
		{"no sub-tag 01", true, seal(tlv("00", tlv("00", "01")+tlv("02", "P2P")+tlv("03", "TM1")+tlv("04", "01012025"))), ErrNotSlip},
		{"wallet wrong CRC", true, walletPayload[:len(walletPayload)-1] + "b", ErrChecksum},

		// Wallet fields.
		{"no event type", true, seal(tlv("00", tlv("00", "01")+tlv("01", "01")+tlv("03", "TM1")+tlv("04", "01012025"))), ErrMalformed},
		{"no transaction id", true, seal(tlv("00", tlv("00", "01")+tlv("01", "01")+tlv("02", "P2P")+tlv("04", "01012025"))), ErrMalformed},
		{"no date", true, seal(tlv("00", tlv("00", "01")+tlv("01", "01")+tlv("02", "P2P")+tlv("03", "TM1"))), ErrMalformed},
		{"event type with space", true, walletBody("P 2P", "TM1", "01012025"), ErrMalformed},
		{"event type of 51", true, walletBody(strings.Repeat("E", 51), "TM1", "01012025"), ErrMalformed},
		{"transaction id with #", true, walletBody("P2P", "TM#1", "01012025"), ErrMalformed},
		{"date of 7", true, walletBody("P2P", "TM1", "1012025"), ErrMalformed},
		{"date of 9", true, walletBody("P2P", "TM1", "010120250"), ErrMalformed},
		{"date with letter", true, walletBody("P2P", "TM1", "0101202A"), ErrMalformed},
		{"date ISO order", true, walletBody("P2P", "TM1", "20250101"), ErrMalformed},
		{"30 February", true, walletBody("P2P", "TM1", "30022024"), ErrMalformed},
		{"29 February 2023", true, walletBody("P2P", "TM1", "29022023"), ErrMalformed},
		{"29 February 1900", true, walletBody("P2P", "TM1", "29021900"), ErrMalformed},
		{"31 April", true, walletBody("P2P", "TM1", "31042025"), ErrMalformed},
		{"day 00", true, walletBody("P2P", "TM1", "00012025"), ErrMalformed},
		{"day 32", true, walletBody("P2P", "TM1", "32012025"), ErrMalformed},
		{"month 00", true, walletBody("P2P", "TM1", "01002025"), ErrMalformed},
		{"month 13", true, walletBody("P2P", "TM1", "01132025"), ErrMalformed},
		{"year 0000", true, walletBody("P2P", "TM1", "01010000"), ErrMalformed},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var err, other error
			if c.wallet {
				_, err = ParseWallet(c.payload)
				_, other = ParseBank(c.payload)
			} else {
				_, err = ParseBank(c.payload)
				_, other = ParseWallet(c.payload)
			}
			if !errors.Is(err, c.err) {
				t.Errorf("payload %q: error %v, want %v", c.payload, err, c.err)
			}
			if other == nil && c.payload != bankPayload && c.payload != walletPayload {
				t.Errorf("payload %q: the other parser accepts it", c.payload)
			}
		})
	}
}

// TestRejectPrefixes cuts valid payloads at every length: no proper prefix
// of a payload is a payload (a dropped CRC digit matches only a CRC of 0).
func TestRejectPrefixes(t *testing.T) {
	for _, p := range []string{bankPayload, walletPayload} {
		for n := range len(p) {
			_, errB := ParseBank(p[:n])
			_, errW := ParseWallet(p[:n])
			if errB == nil || errW == nil {
				t.Errorf("prefix %q accepted", p[:n])
			}
		}
	}
}

func TestValidateEncode(t *testing.T) {
	banks := []struct {
		b  Bank
		ok bool
	}{
		{Bank{"004", "ABC123"}, true},
		{Bank{"004", strings.Repeat("9", 50)}, true},
		{Bank{"004", strings.Repeat("9", 51)}, false},
		{Bank{"4", "ABC123"}, false},
		{Bank{"004", ""}, false},
		{Bank{}, false},
	}
	for _, c := range banks {
		err := c.b.Validate()
		if (err == nil) != c.ok || (err != nil && !errors.Is(err, ErrMalformed)) {
			t.Errorf("%+v.Validate() = %v, want ok %v", c.b, err, c.ok)
		}
		got, perr := ParseBank(c.b.Encode())
		if (perr == nil) != c.ok || (c.ok && got != c.b) {
			t.Errorf("ParseBank(%+v.Encode()) = %+v, %v", c.b, got, perr)
		}
	}
	wallets := []struct {
		w  Wallet
		ok bool
	}{
		{Wallet{"P2P", "TM1", "01012025"}, true},
		{Wallet{strings.Repeat("E", 17), strings.Repeat("1", 50), "01012025"}, true},
		{Wallet{strings.Repeat("E", 18), strings.Repeat("1", 50), "01012025"}, false}, // tag 00 would be 100 bytes
		{Wallet{"P2P", "TM1", "31022025"}, false},
		{Wallet{"", "TM1", "01012025"}, false},
		{Wallet{}, false},
	}
	for _, c := range wallets {
		err := c.w.Validate()
		if (err == nil) != c.ok || (err != nil && !errors.Is(err, ErrMalformed)) {
			t.Errorf("%+v.Validate() = %v, want ok %v", c.w, err, c.ok)
		}
		got, perr := ParseWallet(c.w.Encode())
		if (perr == nil) != c.ok || (c.ok && got != c.w) {
			t.Errorf("ParseWallet(%+v.Encode()) = %+v, %v", c.w, got, perr)
		}
	}
}

// TestParseAllocs guards the promise that parsing allocates nothing when it
// succeeds, across the tolerant paths too.
func TestParseAllocs(t *testing.T) {
	for _, v := range loadVectors(t) {
		switch v.Want {
		case "bank":
			if n := testing.AllocsPerRun(100, func() { _, _ = ParseBank(v.Payload) }); n != 0 {
				t.Errorf("%s: ParseBank allocates %v times", v.Name, n)
			}
		case "wallet":
			if n := testing.AllocsPerRun(100, func() { _, _ = ParseWallet(v.Payload) }); n != 0 {
				t.Errorf("%s: ParseWallet allocates %v times", v.Name, n)
			}
		}
	}
	if n := testing.AllocsPerRun(100, func() { _ = Bank{"014", "00111222233344ABCD12"}.Encode() }); n > 1 {
		t.Errorf("Bank.Encode allocates %v times, want 1 (the string)", n)
	}
}

var (
	sinkBank   Bank
	sinkWallet Wallet
	sinkString string
)

func BenchmarkParseBank(b *testing.B) {
	b.ReportAllocs()
	b.SetBytes(int64(len(bankPayload)))
	for b.Loop() {
		sinkBank, _ = ParseBank(bankPayload)
	}
}

func BenchmarkParseWallet(b *testing.B) {
	b.ReportAllocs()
	b.SetBytes(int64(len(walletPayload)))
	for b.Loop() {
		sinkWallet, _ = ParseWallet(walletPayload)
	}
}

func BenchmarkEncodeBank(b *testing.B) {
	b.ReportAllocs()
	bank := Bank{BankCode: "014", TransRef: "00111222233344ABCD12"}
	for b.Loop() {
		sinkString = bank.Encode()
	}
}

func BenchmarkEncodeWallet(b *testing.B) {
	b.ReportAllocs()
	w := Wallet{EventType: "P2P", TransactionID: "TM1234567890", Date: "30092026"}
	for b.Loop() {
		sinkString = w.Encode()
	}
}
