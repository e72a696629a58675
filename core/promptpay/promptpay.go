// Package promptpay builds PromptPay "AnyID" QR codes, the static or
// amount-carrying QR a payer scans to transfer money to a phone number, a
// national or tax ID, or an e-wallet ID. It serves POST /qr/generate.
//
// A payload is an EMVCo merchant-presented TLV string sealed by a
// CRC-16/CCITT-FALSE in tag 63:
//
//	00 "01"                                  payload format
//	01 "11" static, "12" with an amount      point of initiation
//	29 { 00 "A000000677010111",              PromptPay AID
//	     01 phone "0066xxxxxxxxx" |          one of the three proxies
//	     02 national or tax ID (13 digits) |
//	     03 e-wallet ID (15 digits) }
//	53 "764"                                 currency, baht
//	58 "TH"                                  country
//	54 amount "1234.50"                      only with an amount
//	63 CRC, 4 upper-case hex digits
//
// The layout is byte for byte that of promptparse's generate.anyId, which the
// golden vectors in testdata come from. Tag 53 comes before tag 58 there; the
// other common generator, promptpay-qr, writes 58 first, which is as valid but
// gives another string and CRC.
//
// The TLV encoding and the CRC are package slip's (slip.AppendTLV,
// slip.AppendCRC), shared with the slip payload codec.
package promptpay

import (
	"errors"
	"fmt"
	"math"
	"strconv"

	"github.com/slipverify/slipverify/core/slip"
)

// Kind is the kind of PromptPay proxy a target names.
type Kind uint8

// The kinds of target.
const (
	// Phone is a Thai mobile number, registered for PromptPay by its owner.
	Phone Kind = iota + 1
	// NationalID is a 13-digit Thai national ID of a person or tax ID of a
	// company: the two share one numbering and one PromptPay proxy type.
	NationalID
	// EWallet is a 15-digit e-wallet ID issued by a wallet provider.
	EWallet
)

// String returns the kind's name as the API spells it: "phone",
// "national_id" or "ewallet".
func (k Kind) String() string {
	switch k {
	case Phone:
		return "phone"
	case NationalID:
		return "national_id"
	case EWallet:
		return "ewallet"
	}
	return "Kind(" + strconv.Itoa(int(k)) + ")"
}

// subTag is the tag of k's proxy inside tag 29.
func (k Kind) subTag() string {
	switch k {
	case Phone:
		return "01"
	case NationalID:
		return "02"
	}
	return "03"
}

// Wire constants and limits.
const (
	aid           = "A000000677010111" // PromptPay's application ID, tag 29.00
	phoneLen      = 10                 // 0812345678
	nationalIDLen = 13
	eWalletLen    = 15

	// MaxAmount is the largest amount Payload accepts, in baht. EMVCo gives
	// tag 54 at most 13 characters, and "9999999999.99" is the largest
	// amount with two decimals that fits.
	MaxAmount = 9999999999.99
)

// errTargetFormat is the message for a target of no known shape.
const errTargetFormat = "must be a phone number (0812345678 or +66812345678), a 13-digit national or tax ID, or a 15-digit e-wallet ID"

// Classify works out what kind of PromptPay target the user typed and
// returns it normalised: digits only, and a phone number in its 10-digit
// local form "0812345678". Spaces, tabs and dashes are ignored anywhere, so
// "081-234-5678", "+66 81 234 5678" and "66812345678" all name the same
// phone. The length decides the kind: 10 digits starting with 0 (or the same
// number as +66 or 66 and 9 digits) is a phone, 13 digits a national or tax
// ID, 15 digits an e-wallet ID. Anything else is an error whose message
// starts with "target: " and says what is wrong; it holds no "; ", the
// separator of VALIDATION_ERROR messages.
//
// A national ID's check digit is not verified: PromptPay itself is the
// authority on which IDs exist, the payer's bank app looks the ID up before
// any money moves, and refusing an ID that PromptPay knows would leave the
// user no way round.
func Classify(target string) (Kind, string, error) {
	var buf [eWalletLen]byte
	k, n, err := classify(target, &buf)
	if err != nil {
		return 0, "", err
	}
	return k, string(buf[:n]), nil
}

// classify is Classify without the allocation: it writes the normalised
// target to buf and returns its length.
func classify(target string, buf *[eWalletLen]byte) (Kind, int, error) {
	n, plus := 0, false
	for i := 0; i < len(target); i++ {
		switch c := target[i]; {
		case c == ' ' || c == '\t' || c == '-':
		case c == '+' && n == 0 && !plus:
			plus = true
		case '0' <= c && c <= '9':
			if n == len(buf) {
				return 0, 0, fmt.Errorf("target: has more than %d digits, but %s", eWalletLen, errTargetFormat)
			}
			buf[n] = c
			n++
		case c == '+':
			return 0, 0, errors.New(`target: "+" may only start a phone number, as in +66812345678`)
		default:
			return 0, 0, fmt.Errorf("target: %s is not allowed, only digits, spaces and dashes", quoteRune(target[i:]))
		}
	}
	d := buf[:n]
	switch {
	case n == 0 && !plus:
		return 0, 0, errors.New("target: is required")
	case plus || n == 11 && d[0] == '6' && d[1] == '6':
		// International form of a phone number: 66 then the local number
		// without its leading 0.
		if n < 2 || d[0] != '6' || d[1] != '6' {
			return 0, 0, errors.New("target: only Thai phone numbers (+66) can receive PromptPay")
		}
		if n == 12 && d[2] == '0' {
			return 0, 0, errors.New("target: drop the 0 after +66, as in +66812345678")
		}
		if n != 11 {
			return 0, 0, fmt.Errorf("target: a phone number has 9 digits after +66, as in +66812345678, not %d", n-2)
		}
		if d[2] == '0' {
			return 0, 0, errors.New("target: a phone number cannot start with +660")
		}
		buf[0] = '0'
		copy(buf[1:], d[2:n])
		return Phone, phoneLen, nil
	case n == phoneLen && d[0] == '0':
		if d[1] == '0' {
			return 0, 0, errors.New(`target: a phone number cannot start with "00", write it as 0812345678 or +66812345678`)
		}
		return Phone, n, nil
	case n == nationalIDLen:
		return NationalID, n, nil
	case n == eWalletLen:
		return EWallet, n, nil
	case n == phoneLen:
		return 0, 0, errors.New("target: a 10-digit phone number starts with 0, as in 0812345678")
	case n == phoneLen-1 && d[0] != '0':
		return 0, 0, errors.New("target: a phone number starts with 0 or +66, as in 0812345678 or +66812345678")
	}
	return 0, 0, fmt.Errorf("target: has %d digits, but %s", n, errTargetFormat)
}

// quoteRune quotes the first character of s for an error message.
func quoteRune(s string) string {
	for _, r := range s {
		return strconv.QuoteRune(r)
	}
	return `""`
}

// Payload returns the PromptPay payload that pays target, byte for byte what
// promptparse's generate.anyId returns for it. target is anything Classify
// accepts. With a nil amount the QR is static (tag 01 "11") and the payer
// types the amount; otherwise it is tag 01 "12" and carries the amount in
// tag 54 with two decimals ("100.50").
//
// The amount must be greater than 0, at most MaxAmount, and have at most two
// decimal places: 100.25 is accepted, 100.255 refused rather than rounded,
// since a QR for another amount than asked is worse than an error.
//
// Every error is the caller's: its message names each failing field,
// "target: ..." and "amount: ...", joined by "; " when both fail, ready for a
// VALIDATION_ERROR.
func Payload(target string, amount *float64) (string, error) {
	var tbuf [eWalletLen]byte
	kind, n, terr := classify(target, &tbuf)
	cents, aerr := int64(0), error(nil)
	if amount != nil {
		cents, aerr = checkAmount(*amount)
	}
	switch {
	case terr != nil && aerr != nil:
		return "", errors.New(terr.Error() + "; " + aerr.Error())
	case terr != nil:
		return "", terr
	case aerr != nil:
		return "", aerr
	}

	// The proxy as promptparse writes it: a phone number as 13 digits, "00",
	// country code 66 and the local number without its 0.
	var pbuf [eWalletLen]byte
	proxy := tbuf[:n]
	if kind == Phone {
		proxy = append(append(pbuf[:0], "0066"...), tbuf[1:n]...)
	}
	var mbuf [4 + 16 + 4 + eWalletLen]byte
	merchant := slip.AppendTLV(mbuf[:0], "00", aid)
	merchant = slip.AppendTLV(merchant, kind.subTag(), string(proxy))

	var buf [96]byte // the longest payload, an e-wallet with the largest amount, is 95
	dst := slip.AppendTLV(buf[:0], "00", "01")
	if amount == nil {
		dst = slip.AppendTLV(dst, "01", "11")
	} else {
		dst = slip.AppendTLV(dst, "01", "12")
	}
	dst = slip.AppendTLV(dst, "29", string(merchant))
	dst = slip.AppendTLV(dst, "53", "764")
	dst = slip.AppendTLV(dst, "58", "TH")
	if amount != nil {
		var abuf [16]byte
		dst = slip.AppendTLV(dst, "54", string(appendCents(abuf[:0], cents)))
	}
	dst = slip.AppendCRC(dst, "63", true)
	return string(dst), nil
}

// checkAmount validates an amount in baht and returns it in satang.
//
// An amount with at most two decimals, say 0.29, is a float64 only as the
// double nearest 0.29; it passes if rounding it to whole satang and back
// gives that same double. Formatting the satang as an integer then gives
// exactly what JavaScript's toFixed(2) gives for the double, as promptparse
// uses: the nearest two-decimal value, with no tie to break.
func checkAmount(a float64) (int64, error) {
	switch {
	case math.IsNaN(a):
		return 0, errors.New("amount: must be a number")
	case !(a > 0):
		return 0, errors.New("amount: must be greater than 0")
	case a > MaxAmount:
		return 0, errors.New("amount: must be at most 9999999999.99")
	}
	c := math.Round(a * 100)
	if c/100 != a {
		return 0, errors.New("amount: must have at most 2 decimal places")
	}
	return int64(c), nil
}

// appendCents appends an amount in satang as baht with two decimals.
func appendCents(dst []byte, cents int64) []byte {
	dst = strconv.AppendInt(dst, cents/100, 10)
	return append(dst, '.', byte('0'+cents%100/10), byte('0'+cents%10))
}
