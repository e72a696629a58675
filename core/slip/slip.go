// Package slip is the codec of the QR payloads printed on Thai transfer
// slips: the bank slip "mini-QR" of the Slip Verify API and its wallet
// (TrueMoney) variant. Both are EMVCo-style TLV strings sealed by a
// CRC-16/CCITT-FALSE in tag 91:
//
//	bank:   00 { 00 "000001", 01 sending bank, 02 transRef } 51 "TH" 91 CRC
//	wallet: 00 { 00 "01", 01 "01", 02 event type, 03 transaction id, 04 DDMMYYYY } 91 crc
//
// The wire layout follows the promptparse library (generate.slipVerify and
// generate.trueMoneySlipVerify), which the golden vectors in testdata come
// from. Parsing is stricter than promptparse: lengths must add up, tags may
// not repeat, the CRC must be tag 91 and last, and the fields must look like
// what banks issue. It is also more tolerant in the ways real apps need: the
// CRC in either case, with dropped leading zeros, and white space around the
// payload.
//
// Parsing allocates nothing when it succeeds (the fast path): the fields of
// Bank and Wallet are substrings of the payload and share its memory. They
// stay valid as long as the payload's bytes do, which for an ordinary Go
// string is forever, but keep the whole payload alive; strings.Clone them to
// store them apart. A payload that aliases a reused buffer (a fasthttp body
// turned into a string without copying) must be copied before the parse, or
// the fields before the buffer is reused. Only failures allocate, to build
// the error (the slow path).
package slip

import (
	"errors"
	"fmt"
	"strings"
)

// Errors the parsers return, wrapped with detail; test them with errors.Is.
var (
	// ErrMalformed means the payload is not a well-formed slip payload: bad
	// TLV framing (lengths that do not add up, truncation, trailing bytes,
	// repeated tags, no CRC tag 91 at the end) or a required field that is
	// missing or invalid.
	ErrMalformed = errors.New("slip: malformed payload")
	// ErrChecksum means the payload is well formed but its CRC does not match.
	ErrChecksum = errors.New("slip: checksum mismatch")
	// ErrNotSlip means the payload is a sound TLV payload with a good CRC but
	// not a slip of the kind asked for: a wallet slip given to ParseBank, a
	// bank slip given to ParseWallet, or something else entirely.
	ErrNotSlip = errors.New("slip: not a slip of this kind")
)

// Wire constants.
const (
	apiBank      = "000001" // tag 00.00 of a bank slip
	walletTag00  = "01"     // tag 00.00 of a wallet slip
	walletTag01  = "01"     // tag 00.01 of a wallet slip
	country      = "TH"     // tag 51 of a bank slip
	crcTag       = 91
	maxFieldLen  = 50 // longest transRef, event type or transaction id accepted
	bankCodeLen  = 3
	walletDateLn = 8
)

// Bank is a parsed bank slip payload.
type Bank struct {
	// BankCode is the sending bank's 3-digit code, for example "004".
	BankCode string
	// TransRef is the transaction reference: 1 to 50 ASCII letters and digits.
	TransRef string
}

// Wallet is a parsed wallet slip payload. Date is DDMMYYYY as printed.
type Wallet struct {
	// EventType is the kind of transfer, for example "P2P": 1 to 50 ASCII
	// letters, digits, '_' or '-'.
	EventType string
	// TransactionID identifies the transfer: 1 to 50 ASCII letters and digits.
	TransactionID string
	// Date is the transfer's date as printed, DDMMYYYY, a real calendar date.
	Date string
}

// ParseBank parses a bank slip payload. It accepts the CRC in either case
// and with dropped leading zeros, white space around the payload, tags and
// sub-tags it does not know, and any order of tags before the CRC. It checks
// the framing first (ErrMalformed), then the CRC (ErrChecksum), then the kind
// of slip (ErrNotSlip), then the fields (ErrMalformed). The fields of the
// result are substrings of payload.
func ParseBank(payload string) (Bank, error) {
	f, err := scan(payload)
	if err != nil {
		return Bank{}, err
	}
	if f.sub[0] != apiBank {
		return Bank{}, fmt.Errorf("%w: tag 00.00 (API type) is %q, not %q", ErrNotSlip, f.sub[0], apiBank)
	}
	if f.hasCountry && f.country != country {
		return Bank{}, fmt.Errorf("%w: tag 51 (country) is %q, not %q", ErrNotSlip, f.country, country)
	}
	b := Bank{BankCode: f.sub[1], TransRef: f.sub[2]}
	if err := b.Validate(); err != nil {
		return Bank{}, err
	}
	return b, nil
}

// ParseWallet parses a wallet slip payload, with the same tolerances as
// ParseBank. It fails with ErrMalformed, ErrChecksum or ErrNotSlip. The
// fields of the result are substrings of payload.
func ParseWallet(payload string) (Wallet, error) {
	f, err := scan(payload)
	if err != nil {
		return Wallet{}, err
	}
	if f.sub[0] != walletTag00 || f.sub[1] != walletTag01 {
		return Wallet{}, fmt.Errorf("%w: tags 00.00 and 00.01 are %q and %q, not %q and %q",
			ErrNotSlip, f.sub[0], f.sub[1], walletTag00, walletTag01)
	}
	w := Wallet{EventType: f.sub[2], TransactionID: f.sub[3], Date: f.sub[4]}
	if err := w.Validate(); err != nil {
		return Wallet{}, err
	}
	return w, nil
}

// Validate reports, as ErrMalformed, the first field of b that ParseBank
// would refuse. Encode is faithful only for a Bank that passes Validate, as
// every Bank from ParseBank does.
func (b Bank) Validate() error {
	if len(b.BankCode) != bankCodeLen || !isDigits(b.BankCode) {
		return fmt.Errorf("%w: bank code (tag 00.01) %q is not 3 digits", ErrMalformed, clip(b.BankCode))
	}
	if !isAlnum(b.TransRef, false) {
		return fmt.Errorf("%w: transRef (tag 00.02) %q is not 1 to %d ASCII letters and digits",
			ErrMalformed, clip(b.TransRef), maxFieldLen)
	}
	return nil
}

// Validate reports, as ErrMalformed, the first field of w that ParseWallet
// would refuse. Encode is faithful only for a Wallet that passes Validate, as
// every Wallet from ParseWallet does.
func (w Wallet) Validate() error {
	if !isAlnum(w.EventType, true) {
		return fmt.Errorf("%w: event type (tag 00.02) %q is not 1 to %d ASCII letters, digits, '_' or '-'",
			ErrMalformed, clip(w.EventType), maxFieldLen)
	}
	if !isAlnum(w.TransactionID, false) {
		return fmt.Errorf("%w: transaction id (tag 00.03) %q is not 1 to %d ASCII letters and digits",
			ErrMalformed, clip(w.TransactionID), maxFieldLen)
	}
	if !isDate(w.Date) {
		return fmt.Errorf("%w: date (tag 00.04) %q is not a real DDMMYYYY date", ErrMalformed, clip(w.Date))
	}
	// Each is at most 50 bytes, but tag 00 holds at most 99 in all.
	if n := len(w.EventType) + len(w.TransactionID); walletSubLen(w) > 99 {
		return fmt.Errorf("%w: event type and transaction id together are %d bytes, over the %d that fit in tag 00",
			ErrMalformed, n, 99-walletSubLen(Wallet{Date: w.Date}))
	}
	return nil
}

// Encode returns the canonical payload of b, byte for byte what promptparse's
// generate.slipVerify produces: tag 00 with sub-tags 00, 01, 02 in order, tag
// 51 "TH", then tag 91 with an upper-case CRC. The result is meaningful only
// if b passes Validate.
func (b Bank) Encode() string {
	var buf [96]byte // a valid Bank needs at most 89
	dst := appendHeader(buf[:0], "00", 4+len(apiBank)+4+len(b.BankCode)+4+len(b.TransRef))
	dst = AppendTLV(dst, "00", apiBank)
	dst = AppendTLV(dst, "01", b.BankCode)
	dst = AppendTLV(dst, "02", b.TransRef)
	dst = AppendTLV(dst, "51", country)
	dst = AppendCRC(dst, "91", true)
	return string(dst)
}

// Encode returns the canonical payload of w, byte for byte what promptparse's
// generate.trueMoneySlipVerify produces: tag 00 with sub-tags 00 to 04 in
// order, no tag 51, then tag 91 with a lower-case CRC. The result is
// meaningful only if w passes Validate.
func (w Wallet) Encode() string {
	var buf [112]byte // a valid Wallet needs at most 109
	dst := appendHeader(buf[:0], "00", walletSubLen(w))
	dst = AppendTLV(dst, "00", walletTag00)
	dst = AppendTLV(dst, "01", walletTag01)
	dst = AppendTLV(dst, "02", w.EventType)
	dst = AppendTLV(dst, "03", w.TransactionID)
	dst = AppendTLV(dst, "04", w.Date)
	dst = AppendCRC(dst, "91", false)
	return string(dst)
}

// walletSubLen is the length of the value of tag 00 of w's payload.
func walletSubLen(w Wallet) int {
	return 4 + len(walletTag00) + 4 + len(walletTag01) + 4 + len(w.EventType) +
		4 + len(w.TransactionID) + 4 + len(w.Date)
}

// frame is what both kinds of slip share: the sub-tags 00 to 04 of tag 00
// ("" when absent, as empty values are refused) and tag 51.
type frame struct {
	sub        [5]string
	country    string
	hasCountry bool
}

// scan checks the envelope of a slip payload: printable ASCII, TLV framing
// that adds up, no repeated tags, tag 91 last with a matching CRC, and a tag
// 00 whose value is itself sound TLV. It is the fast path of both parsers and
// must not allocate unless it fails.
func scan(payload string) (frame, error) {
	var f frame
	s := strings.TrimSpace(payload)
	if s == "" {
		return f, fmt.Errorf("%w: empty payload", ErrMalformed)
	}
	// Lengths count bytes here and UTF-16 units in JavaScript; staying in
	// printable ASCII keeps them the same thing.
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7E {
			return f, fmt.Errorf("%w: byte 0x%02X at offset %d is not printable ASCII", ErrMalformed, s[i], i)
		}
	}
	var seen tagSet
	root, hasRoot := "", false
	for i := 0; ; {
		if i == len(s) {
			return f, fmt.Errorf("%w: no CRC tag 91 at the end", ErrMalformed)
		}
		tag, n, ok := header(s, i)
		if !ok {
			return f, fmt.Errorf("%w: no tag and length at offset %d", ErrMalformed, i)
		}
		if tag == crcTag {
			if err := checkCRC(s, i, n); err != nil {
				return f, err
			}
			break
		}
		end := i + 4 + n
		switch {
		case n == 0:
			return f, fmt.Errorf("%w: tag %s at offset %d is empty", ErrMalformed, s[i:i+2], i)
		case end > len(s):
			return f, fmt.Errorf("%w: tag %s at offset %d needs %d bytes, %d left", ErrMalformed, s[i:i+2], i, n, len(s)-i-4)
		case !seen.add(tag):
			return f, fmt.Errorf("%w: tag %s repeats at offset %d", ErrMalformed, s[i:i+2], i)
		}
		switch tag {
		case 0:
			root, hasRoot = s[i+4:end], true
		case 51:
			f.country, f.hasCountry = s[i+4:end], true
		}
		i = end
	}
	if !hasRoot {
		return f, fmt.Errorf("%w: no tag 00", ErrNotSlip)
	}
	seen = tagSet{}
	for i := 0; i < len(root); {
		tag, n, ok := header(root, i)
		if !ok {
			return f, fmt.Errorf("%w: no sub-tag and length at offset %d of tag 00", ErrMalformed, i)
		}
		end := i + 4 + n
		switch {
		case n == 0:
			return f, fmt.Errorf("%w: sub-tag 00.%s is empty", ErrMalformed, root[i:i+2])
		case end > len(root):
			return f, fmt.Errorf("%w: sub-tag 00.%s needs %d bytes, %d left in tag 00", ErrMalformed, root[i:i+2], n, len(root)-i-4)
		case !seen.add(tag):
			return f, fmt.Errorf("%w: sub-tag 00.%s repeats", ErrMalformed, root[i:i+2])
		}
		if tag < len(f.sub) {
			f.sub[tag] = root[i+4 : end]
		}
		i = end
	}
	return f, nil
}

// checkCRC checks the CRC tag that starts at s[i:], with declared length n.
// Besides the canonical "9104" and 4 hex digits of either case, it takes the
// forms real apps print when they drop the CRC's leading zeros: "9104" with
// 1-3 digits (promptparse pads these) and "910n" with n digits, whose CRC may
// have been computed over the prefix ending "9104" or over the prefix as
// printed.
func checkCRC(s string, i, n int) error {
	rest := len(s) - i - 4
	switch {
	case n < 1 || n > 4:
		return fmt.Errorf("%w: CRC tag 91 has length %d", ErrMalformed, n)
	case rest > n:
		return fmt.Errorf("%w: %d bytes after the CRC tag 91 at offset %d", ErrMalformed, rest-n, i)
	case rest < n && !(n == 4 && rest > 0):
		return fmt.Errorf("%w: CRC tag 91 needs %d bytes, %d left", ErrMalformed, n, rest)
	}
	want, ok := parseHex(s[i+4:])
	if !ok {
		return fmt.Errorf("%w: CRC %q is not hex", ErrMalformed, s[i+4:])
	}
	got := crcUpdate(0xFFFF, s[:i+4])
	if got == want {
		return nil
	}
	if n != 4 && crcUpdate(crcUpdate(0xFFFF, s[:i+2]), "04") == want {
		return nil
	}
	return fmt.Errorf("%w: payload says %s, computed %04X", ErrChecksum, s[i+4:], got)
}

// clip shortens a value quoted in an error: a parsed one is at most 99 bytes,
// but Validate also sees values built by callers.
func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}

// isDigits reports whether s is all ASCII digits.
func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// isAlnum reports whether s is 1 to maxFieldLen ASCII letters and digits,
// and also '_' and '-' when punct is set.
func isAlnum(s string, punct bool) bool {
	if len(s) == 0 || len(s) > maxFieldLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case '0' <= c && c <= '9', 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z':
		case punct && (c == '_' || c == '-'):
		default:
			return false
		}
	}
	return true
}

// isDate reports whether s is a real Gregorian date written DDMMYYYY, year
// 0001 to 9999.
func isDate(s string) bool {
	if len(s) != walletDateLn || !isDigits(s) {
		return false
	}
	num := func(s string) int {
		n := 0
		for i := 0; i < len(s); i++ {
			n = n*10 + int(s[i]-'0')
		}
		return n
	}
	d, m, y := num(s[0:2]), num(s[2:4]), num(s[4:8])
	if y == 0 || m < 1 || m > 12 || d < 1 {
		return false
	}
	days := [13]int{0, 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31}[m]
	if m == 2 && y%4 == 0 && (y%100 != 0 || y%400 == 0) {
		days = 29
	}
	return d <= days
}
