// Package receiver decides whether a slip's receiver is one of a merchant's
// bank accounts, comparing what bank slips print (partly masked account
// numbers, truncated Thai or English names with titles) with the account
// the merchant registered.
package receiver

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/slipverify/slipverify/core/api"
)

// Mode says what must match.
type Mode uint8

// Modes. For PromptPay receivers they are the client's matchMode; for bank
// accounts the bank's extraVerify option picks one, and NameNumber is the
// default.
const (
	NameNumber Mode = iota
	Name
	Number
)

// ParseMode reads a matchMode value.
func ParseMode(s string) (Mode, bool) {
	switch s {
	case "NAME_NUMBER":
		return NameNumber, true
	case "NAME":
		return Name, true
	case "NUMBER":
		return Number, true
	}
	return 0, false
}

// minDigits is how many visible digits a masked number must show before it
// can confirm anything.
const minDigits = 3

// NumberMatches reports whether a masked number as printed on a slip
// ("xxx-x-x5678-x", "XXX-XXX-5678", "*****6789") can be account number
// full. Separators are ignored; masked places (x, X, *, •) match any digit.
// The places are aligned at the end: a slip may print more or fewer places
// than the number has (a country code, a shortened mask), but its last
// place is the number's last digit. Every visible digit must equal the
// digit at its place; one that falls before the number's start fails.
func NumberMatches(masked, full string) bool {
	m, f := places(masked), digitsOf(full)
	visible := 0
	for _, c := range m {
		if c != '?' {
			visible++
		}
	}
	if visible < minDigits || len(f) == 0 {
		return false
	}
	offset := len(f) - len(m)
	for i, c := range m {
		if c == '?' {
			continue
		}
		if j := i + offset; j < 0 || f[j] != c {
			return false
		}
	}
	return true
}

// places keeps digits and turns mask characters into '?'.
func places(s string) []byte {
	var out []byte
	for _, r := range s {
		switch {
		case r >= '0' && r <= '9':
			out = append(out, byte(r))
		case r == 'x' || r == 'X' || r == '*' || r == '•' || r == '#':
			out = append(out, '?')
		}
	}
	return out
}

func digitsOf(s string) []byte {
	var out []byte
	for _, r := range s {
		if r >= '0' && r <= '9' {
			out = append(out, byte(r))
		}
	}
	return out
}

// titles are the honorifics and company words slips add or drop at will.
var titles = map[string]bool{
	"นาย": true, "นาง": true, "นางสาว": true, "น.ส.": true, "น.ส": true, "ด.ช.": true, "ด.ญ.": true,
	"บริษัท": true, "บจก.": true, "บจก": true, "จำกัด": true, "(มหาชน)": true, "มหาชน": true, "หจก.": true, "ห้างหุ้นส่วนจำกัด": true,
	"ร้าน": true, "บมจ.": true, "บมจ": true, "หจก": true,
	"mr": true, "mrs": true, "ms": true, "miss": true, "mr.": true, "mrs.": true, "ms.": true, "dr": true, "dr.": true,
	"co": true, "co.": true, "ltd": true, "ltd.": true, "company": true, "limited": true, "plc": true, "plc.": true,
	"corp": true, "corp.": true, "inc": true, "inc.": true, "pcl": true, "pcl.": true, "public": true,
}

// joinedTitles are the titles a name may have joined to its first word:
// Thai writes honorifics without a space ("นายสมชาย", "น.ส.มาลี"), and an
// abbreviation's dot ends it ("MR.SOMCHAI", "บจก.ทดสอบ"). Longest first, so
// นางสาว is taken whole before นาง.
var joinedTitles = []string{"นางสาว", "ด.ช.", "ด.ญ.", "น.ส.", "บจก.", "บมจ.", "หจก.", "นาย", "นาง",
	"mrs.", "miss.", "mr.", "ms.", "dr."}

// dropJoinedTitle returns w without a title joined to its start, when a
// name is left after it.
func dropJoinedTitle(w string) string {
	for _, t := range joinedTitles {
		if rest, ok := strings.CutPrefix(w, t); ok && rest != "" && !titles[rest] {
			if r, _ := utf8.DecodeRuneInString(rest); unicode.IsLetter(r) {
				return rest
			}
		}
	}
	return w
}

// word is a word of a name, lower-cased, without punctuation. last marks
// the name's last printed word, the only one a slip may have cut short.
type word struct {
	text string
	last bool
}

// words splits a name into its words, dropping titles.
func words(name string) []word {
	raw := strings.FieldsFunc(strings.ToLower(name), func(r rune) bool {
		return unicode.IsSpace(r) || r == ',' || r == '(' || r == ')'
	})
	var out []word
	for i, w := range raw {
		w = strings.Map(func(r rune) rune {
			if unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.Is(unicode.Mn, r) || r == '*' || r == '.' {
				return r
			}
			return -1
		}, w)
		if titles[w] || titles[strings.TrimSuffix(w, ".")] {
			continue
		}
		if len(out) == 0 {
			w = dropJoinedTitle(w)
		}
		if w = strings.ReplaceAll(w, ".", ""); w != "" {
			out = append(out, word{w, i == len(raw)-1})
		}
	}
	return out
}

// cutTitle reports whether w is the start of a title word: a slip cut off
// mid-title ("... จ" for "จำกัด").
func cutTitle(w string) bool {
	for t := range titles {
		if strings.HasPrefix(t, w) {
			return true
		}
	}
	return false
}

// NameMatches reports whether a name as printed on a slip can be the
// registered name. Titles and case are ignored; the slip may cut its last
// word short ("MR. SOMCHAI J", "บริษัท ทดสอบสลิป จ"), mask letters
// ("SOMCHAI J***", "นาย สมชาย ใ***") and drop trailing words; its first word
// must be whole, and a word followed by others must be whole.
func NameMatches(printed, registered string) bool {
	p, r := words(printed), words(registered)
	if n := len(p); n > len(r) && n > 0 && p[n-1].last && cutTitle(p[n-1].text) {
		p = p[:n-1]
	}
	if len(p) == 0 || len(p) > len(r) {
		return false
	}
	for i, w := range p {
		text := w.text
		masked := strings.IndexByte(text, '*') >= 0
		if masked {
			text = text[:strings.IndexByte(text, '*')]
		}
		switch {
		case text == r[i].text:
		case i > 0 && (w.last || masked) && strings.HasPrefix(r[i].text, text):
		default:
			return false
		}
	}
	return true
}

// Party is a receiver as the slip prints it.
type Party struct {
	BankID  string
	Account string // masked number
	NameTH  string
	NameEN  string
	IsProxy bool // a PromptPay receiver
}

// Account is a registered receiving account.
type Account struct {
	BankCode, Number string
	NameTH, NameEN   string
}

// Matches reports whether party is account under mode. A bank account must
// also be at the slip's receiving bank; a PromptPay account may be behind
// any bank.
func Matches(party Party, acc Account, promptPay bool, mode Mode) bool {
	if !promptPay && party.BankID != acc.BankCode {
		return false
	}
	number := NumberMatches(party.Account, acc.Number)
	name := NameMatches(party.NameTH, acc.NameTH) || acc.NameEN != "" && party.NameEN != "" && NameMatches(party.NameEN, acc.NameEN)
	switch mode {
	case Name:
		return name
	case Number:
		return number
	}
	return name && number
}

// Account types a bank account has (core/api's, which also tells a valid
// one: api.ValidAccountType).
const (
	Personal = api.AccountPersonal
	Juristic = api.AccountJuristic
)

// juristicMarks are the words that only a juristic person's name holds:
// company, partnership, foundation, association and cooperative, in Thai and
// English.
var juristicMarks = []string{"บริษัท", "บจก", "บมจ", "หจก", "ห้างหุ้นส่วน", "จำกัด", "มูลนิธิ", "สมาคม", "สหกรณ์",
	"company", "co.", "ltd", "limited", "plc", "pcl", "corp", "inc.", "foundation", "association", "cooperative", "partnership"}

// AccountType tells an account holder's type from the names: Juristic when
// either holds a word of a company, partnership, foundation, association
// or cooperative, Personal otherwise. It is the type of an account created
// without one.
func AccountType(nameTH, nameEN string) string {
	name := strings.ToLower(nameTH + " " + nameEN)
	for _, m := range juristicMarks {
		if strings.Contains(name, m) {
			return Juristic
		}
	}
	return Personal
}
