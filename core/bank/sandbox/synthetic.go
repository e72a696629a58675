package sandbox

import (
	"time"

	"github.com/slipverify/slipverify/core/bank"
)

// The tables below feed the synthetic slips. Changing any of them, or their
// order, changes every synthetic answer; testdata/synthetic.json notices.

// senderRefs holds the bank reference of every catalog bank that can send a
// transfer (all but PROMPTPAY), by code, as a slip names it.
var senderRefs = func() map[string]bank.BankRef {
	m := make(map[string]bank.BankRef)
	for _, b := range bank.Banks() {
		if b.Code != bank.PromptPay {
			m[b.Code] = bank.BankRef{ID: b.Code, Name: b.NameEN, Short: b.Short}
		}
	}
	return m
}()

// receiverRefs are the banks a synthetic transfer is paid into: the retail
// banks, including the state banks whose receivers need extraVerify.
var receiverRefs = func() []bank.BankRef {
	codes := []string{"002", "004", "006", "011", "014", "022", "024", "025", "030", "033", "034", "069"}
	refs := make([]bank.BankRef, len(codes))
	for i, c := range codes {
		refs[i] = senderRefs[c]
	}
	return refs
}()

// persons are the senders of synthetic slips.
var persons = []bank.AccountName{
	{TH: "นาย สมชาย ใจดี", EN: "MR. SOMCHAI JAIDEE"},
	{TH: "นาง สมศรี มีสุข", EN: "MRS. SOMSRI MEESUK"},
	{TH: "น.ส. มาลี รักไทย", EN: "MISS MALEE RAKTHAI"},
	{TH: "นาย ประเสริฐ ทองคำ", EN: "MR. PRASERT THONGKHAM"},
	{TH: "น.ส. วิภา แสงทอง", EN: "MISS WIPA SAENGTHONG"},
	{TH: "นาย อนุชา ศรีสุข", EN: "MR. ANUCHA SRISUK"},
	{TH: "นาง กาญจนา บุญมา", EN: "MRS. KANCHANA BUNMA"},
	{TH: "นาย ธนพล วงศ์ใหญ่", EN: "MR. THANAPHON WONGYAI"},
}

// payees are the receivers of synthetic slips: shops, companies and people.
var payees = []bank.AccountName{
	{TH: "บริษัท ทดสอบสลิป จำกัด", EN: "SLIP TEST CO LTD"},
	{TH: "บริษัท สยาม ค้าปลีก จำกัด", EN: "SIAM RETAIL CO LTD"},
	{TH: "บริษัท บางกอก โลจิสติกส์ จำกัด", EN: "BANGKOK LOGISTICS CO LTD"},
	{TH: "ห้างหุ้นส่วนจำกัด รุ่งเรือง การค้า", EN: "RUNGRUENG TRADING LP"},
	{TH: "ร้าน ข้าวมันไก่ ป้าแดง", EN: "KHAO MAN KAI PA DAENG"},
	{TH: "ร้าน กาแฟ ดอยสูง", EN: "DOI SUNG COFFEE"},
	{TH: "นาย วีระ พาณิชย์", EN: "MR. WEERA PHANICH"},
	{TH: "น.ส. ศิริพร ค้าขาย", EN: "MISS SIRIPORN KHAKHAI"},
}

// phonePrefixes start the masked phone numbers of synthetic wallet slips.
var phonePrefixes = []string{"061", "062", "063", "080", "081", "082", "083", "084", "086", "087", "089", "091", "092", "095", "098"}

// syntheticYear is the year synthetic slips are dated in, Bangkok time: far
// enough back that no slip is ever pending, fixed so answers never depend on
// the clock.
var syntheticYear = time.Date(2020, time.January, 1, 0, 0, 0, 0, time.FixedZone("ICT", 7*60*60))

// syntheticYearSeconds is the length of 2020, a leap year, in seconds.
const syntheticYearSeconds = 366 * 24 * 60 * 60

// Amounts of synthetic slips, in satang: 1.00 to 50,000.00 baht.
const (
	minSatang = 100
	maxSatang = 5_000_000
)

// syntheticSlip is the synthetic slip of (sender.ID, transRef). It allocates
// one string, which holds the date and both accounts.
func syntheticSlip(sender bank.BankRef, transRef string) bank.Slip {
	r := newStream('B', sender.ID, transRef)
	amount := r.amount()
	date := r.date()
	senderName := persons[r.below(len(persons))]
	receiverBank := receiverRefs[r.below(len(receiverRefs))]
	receiverName := payees[r.below(len(payees))]

	// One buffer, one allocation: the date, then two masked accounts.
	var buf [64]byte
	b := date.AppendFormat(buf[:0], time.RFC3339)
	endDate := len(b)
	b = appendAccount(b, r.below(10_000))
	endSender := len(b)
	b = appendAccount(b, r.below(10_000))
	s := string(b)

	return bank.Slip{
		TransRef:    transRef,
		Date:        s[:endDate],
		CountryCode: "TH",
		Amount:      thb(amount),
		Sender: bank.Party{
			Bank: sender,
			Account: bank.Account{
				Name: senderName,
				Bank: bank.AccountBank{Type: "BANKAC", Account: s[endDate:endSender]},
			},
		},
		Receiver: bank.Receiver{
			Bank: receiverBank,
			Account: bank.Account{
				Name: receiverName,
				Bank: bank.AccountBank{Type: "BANKAC", Account: s[endSender:]},
			},
		},
	}
}

// syntheticWallet is the synthetic wallet slip of transactionID. It
// allocates one string, which holds the date and both phone numbers.
func syntheticWallet(transactionID string) bank.WalletSlip {
	r := newStream('W', "", transactionID)
	amount := r.amount()
	date := r.date()
	sender := persons[r.below(len(persons))]
	receiver := payees[r.below(len(payees))]

	var buf [64]byte
	b := date.AppendFormat(buf[:0], time.RFC3339)
	endDate := len(b)
	b = appendPhone(b, phonePrefixes[r.below(len(phonePrefixes))], r.below(10_000))
	endSender := len(b)
	b = appendPhone(b, phonePrefixes[r.below(len(phonePrefixes))], r.below(10_000))
	s := string(b)

	return bank.WalletSlip{
		TransactionID: transactionID,
		Amount:        amount,
		Date:          s[:endDate],
		Sender:        bank.WalletParty{Name: sender.TH, Phone: s[endDate:endSender]},
		Receiver:      bank.WalletParty{Name: receiver.TH, Phone: s[endSender:]},
	}
}

// appendAccount appends an account number masked as slips print it,
// "xxx-x-x1234-x", showing last4 (0 to 9999).
func appendAccount(b []byte, last4 int) []byte {
	b = append(b, "xxx-x-x"...)
	b = appendDigits4(b, last4)
	return append(b, "-x"...)
}

// appendPhone appends a phone number masked as wallet slips print it,
// "081-xxx-1234".
func appendPhone(b []byte, prefix string, last4 int) []byte {
	b = append(b, prefix...)
	b = append(b, "-xxx-"...)
	return appendDigits4(b, last4)
}

// appendDigits4 appends n (0 to 9999) as four digits.
func appendDigits4(b []byte, n int) []byte {
	return append(b, byte('0'+n/1000), byte('0'+n/100%10), byte('0'+n/10%10), byte('0'+n%10))
}

// stream is a deterministic sequence of pseudo-random numbers: splitmix64
// seeded with the FNV-1a hash of a request. Neither may change without
// changing every synthetic slip.
type stream uint64

// newStream seeds a stream from kind ('B' bank, 'W' wallet), bankCode and
// ref. The separators keep ("00", "1X") and ("001", "X") apart.
func newStream(kind byte, bankCode, ref string) stream {
	const (
		offset64 = 14695981039346656037
		prime64  = 1099511628211
	)
	h := uint64(offset64)
	mix := func(c byte) { h = (h ^ uint64(c)) * prime64 }
	mix(kind)
	for i := range len(bankCode) {
		mix(bankCode[i])
	}
	mix(0)
	for i := range len(ref) {
		mix(ref[i])
	}
	return stream(h)
}

// next returns the stream's next number (splitmix64).
func (s *stream) next() uint64 {
	*s += 0x9e3779b97f4a7c15
	z := uint64(*s)
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// below returns a number in [0, n). For the n used here (at most a few
// million) the modulo bias is below one part in 10^12.
func (s *stream) below(n int) int { return int(s.next() % uint64(n)) }

// amount returns an amount in baht, with satang, in [1.00, 50,000.00].
func (s *stream) amount() float64 {
	satang := minSatang + s.below(maxSatang-minSatang+1)
	return float64(satang) / 100
}

// date returns a time to the second in syntheticYear, in Bangkok time.
func (s *stream) date() time.Time {
	return syntheticYear.Add(time.Duration(s.below(syntheticYearSeconds)) * time.Second)
}
