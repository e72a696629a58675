// Package slipdata maps the transfer record that Thailand's interbank
// switch returns for a slip lookup to core's slip record. KBank's and SCB's
// slip verification APIs, and the aggregators that resell them (RDCW,
// SlipOK), all return the same data object:
//
//	{"transRef": "...", "sendingBank": "004", "receivingBank": "014",
//	 "transDate": "20231005", "transTime": "14:03:27",
//	 "sender":   {"displayName": "นาย ก", "name": "MR. A",
//	              "proxy": {"type": "", "value": ""},
//	              "account": {"type": "BANKAC", "value": "xxx-x-x1234-x"}},
//	 "receiver": {...the same...},
//	 "amount": 5345.45, "paidLocalAmount": 5345.45, "paidLocalCurrency": "764",
//	 "countryCode": "TH", "transFeeAmount": 0,
//	 "ref1": "", "ref2": "", "ref3": "", "toMerchantId": ""}
//
// KBank sends amounts as JSON numbers, SCB every field as a string
// ("amount": "5345.45"); both are read as the same exact decimal. Dates and
// times are Bangkok time (UTC+07:00, no daylight saving), written as RFC 3339
// with a +07:00 offset. refN and toMerchantId may be "", null or absent. The
// receiving bank is "" when the money went to a PromptPay proxy the switch
// does not resolve to a bank (a phone number, say); the receiver then has
// only a masked proxy.
package slipdata

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/slipverify/slipverify/core/bank"
)

// Data is the switch's transfer record as the banks send it.
type Data struct {
	TransRef          string  `json:"transRef"`
	SendingBank       string  `json:"sendingBank"`
	ReceivingBank     string  `json:"receivingBank"`
	TransDate         string  `json:"transDate"` // yyyyMMdd, Bangkok
	TransTime         string  `json:"transTime"` // HH:mm:ss, Bangkok
	Sender            Party   `json:"sender"`
	Receiver          Party   `json:"receiver"`
	Amount            Decimal `json:"amount"`
	PaidLocalAmount   Decimal `json:"paidLocalAmount"`
	PaidLocalCurrency Text    `json:"paidLocalCurrency"`
	CountryCode       string  `json:"countryCode"`
	TransFeeAmount    Decimal `json:"transFeeAmount"`
	Ref1              Text    `json:"ref1"`
	Ref2              Text    `json:"ref2"`
	Ref3              Text    `json:"ref3"`
	ToMerchantID      Text    `json:"toMerchantId"`
}

// Party is a sender or receiver: its names, the PromptPay proxy the money
// went through (empty type when none) and its masked account.
type Party struct {
	DisplayName string `json:"displayName"`
	Name        string `json:"name"`
	Proxy       IDRef  `json:"proxy"`
	Account     IDRef  `json:"account"`
}

// IDRef is a typed, partly masked identifier: a proxy or an account.
type IDRef struct {
	Type  string `json:"type"`
	Value string `json:"value"`
}

// Decimal is a non-negative decimal amount sent as a JSON number or a
// string. Set reports whether the field was present and not null or "".
type Decimal struct {
	Value float64
	Set   bool
}

// UnmarshalJSON reads 5345.45, "5345.45", "", or null. The text must be
// plain decimal digits with an optional fraction: no sign, exponent, or
// spaces, so every accepted amount is exact to the satang it names; the
// float64 is the nearest to that decimal (strconv's correctly rounded
// parse), which is how bank.Slip carries amounts.
func (d *Decimal) UnmarshalJSON(b []byte) error {
	*d = Decimal{}
	if string(b) == "null" {
		return nil
	}
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		b = []byte(s)
		if len(b) == 0 {
			return nil
		}
	}
	if !isDecimal(b) {
		return fmt.Errorf("slipdata: amount %.40q is not a decimal", b)
	}
	v, err := strconv.ParseFloat(string(b), 64)
	if err != nil {
		return fmt.Errorf("slipdata: amount %.40q: %w", b, err)
	}
	*d = Decimal{Value: v, Set: true}
	return nil
}

// maxDigits bounds an amount's integer digits: more than a float64 holds
// exactly to the satang (2^53 satang is about 90 trillion baht).
const maxDigits = 13

func isDecimal(b []byte) bool {
	i := 0
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
	}
	if i == 0 || i > maxDigits {
		return false
	}
	if i == len(b) {
		return true
	}
	if b[i] != '.' || i == len(b)-1 {
		return false
	}
	frac := b[i+1:]
	if len(frac) > 4 {
		return false
	}
	for _, c := range frac {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// Text is a string field that may be null or a number ("ref1": 123 has
// been seen from aggregators); null reads as "".
type Text string

// UnmarshalJSON reads a string, null, or a JSON number (kept as written).
func (t *Text) UnmarshalJSON(b []byte) error {
	switch {
	case string(b) == "null":
		*t = ""
		return nil
	case len(b) > 0 && b[0] == '"':
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*t = Text(s)
		return nil
	case json.Valid(b) && (b[0] == '-' || (b[0] >= '0' && b[0] <= '9')):
		*t = Text(b)
		return nil
	}
	return fmt.Errorf("slipdata: %.40q is not text", b)
}

// bangkok is Asia/Bangkok: UTC+07:00 all year. A fixed zone needs no tz
// database in the image.
var bangkok = time.FixedZone("+07", 7*60*60)

// currencies maps the ISO 4217 numeric codes a Thai slip may carry to
// their letter codes; others are kept as sent.
var currencies = map[string]string{"764": "THB", "840": "USD", "978": "EUR", "156": "CNY", "392": "JPY"}

// ErrBadData is wrapped by every error of Map and Decode.
var ErrBadData = errors.New("slipdata: bad transfer record")

// Decode reads a data object and maps it (Map).
func Decode(b []byte) (bank.Slip, error) {
	var d Data
	if err := json.Unmarshal(b, &d); err != nil {
		return bank.Slip{}, fmt.Errorf("%w: %w", ErrBadData, err)
	}
	return Map(&d)
}

// Map returns d as core's slip record, or ErrBadData when d lacks what a
// slip must have: a transRef, a sending bank, a valid Bangkok date and
// time, and an amount.
func Map(d *Data) (bank.Slip, error) {
	var errs []error
	if d.TransRef == "" {
		errs = append(errs, errors.New("no transRef"))
	}
	if d.SendingBank == "" {
		errs = append(errs, errors.New("no sendingBank"))
	}
	at, err := time.ParseInLocation("20060102 15:04:05", d.TransDate+" "+d.TransTime, bangkok)
	if err != nil || len(d.TransDate) != 8 || len(d.TransTime) != 8 {
		errs = append(errs, fmt.Errorf("transDate %.20q transTime %.20q: not yyyyMMdd HH:mm:ss", d.TransDate, d.TransTime))
	}
	if !d.Amount.Set {
		errs = append(errs, errors.New("no amount"))
	}
	if len(errs) > 0 {
		return bank.Slip{}, fmt.Errorf("%w: %w", ErrBadData, errors.Join(errs...))
	}

	local := d.PaidLocalAmount
	if !local.Set {
		local = d.Amount
	}
	currency := string(d.PaidLocalCurrency)
	if c, ok := currencies[currency]; ok {
		currency = c
	} else if currency == "" {
		currency = "THB"
	}
	country := d.CountryCode
	if country == "" {
		country = "TH"
	}
	s := bank.Slip{
		TransRef:    d.TransRef,
		Date:        at.Format(time.RFC3339),
		CountryCode: country,
		Amount: bank.Amount{
			Amount: d.Amount.Value,
			Local:  bank.LocalAmount{Amount: local.Value, Currency: currency},
		},
		Fee:    d.TransFeeAmount.Value,
		Ref1:   string(d.Ref1),
		Ref2:   string(d.Ref2),
		Ref3:   string(d.Ref3),
		Sender: bank.Party{Bank: bankRef(d.SendingBank), Account: account(&d.Sender)},
		Receiver: bank.Receiver{
			Bank:    bankRef(d.ReceivingBank),
			Account: account(&d.Receiver),
		},
	}
	if d.ToMerchantID != "" {
		id := string(d.ToMerchantID)
		s.Receiver.MerchantID = &id
	}
	return s, nil
}

// bankRef names the bank of code from the catalog; a code the catalog does
// not know is kept with no names, and "" (a receiver the switch did not
// resolve to a bank) stays empty.
func bankRef(code string) bank.BankRef {
	info, ok := bank.Lookup(code)
	if !ok {
		return bank.BankRef{ID: code}
	}
	return bank.BankRef{ID: code, Name: info.NameEN, Short: info.Short}
}

// account keeps the names as the bank gave them: displayName is the name
// printed on the slip (Thai for Thai accounts), name the English one when
// the bank has it.
func account(p *Party) bank.Account {
	a := bank.Account{
		Name: bank.AccountName{TH: p.DisplayName, EN: p.Name},
		Bank: bank.AccountBank{Type: p.Account.Type, Account: p.Account.Value},
	}
	if a.Name.TH == "" {
		a.Name = bank.AccountName{TH: p.Name}
	}
	if p.Proxy.Type != "" || p.Proxy.Value != "" {
		a.Proxy = &bank.Proxy{Type: p.Proxy.Type, Account: p.Proxy.Value}
	}
	return a
}
