package bank

import "github.com/slipverify/slipverify/core/lib/jsonw"

// AppendJSON appends s as encoding/json writes it, without reflection: a
// slip is encoded on every verification of a new one. TestSlipJSON holds
// the two to the same bytes.
func (s *Slip) AppendJSON(b []byte) []byte {
	return append(s.AppendFields(append(b, '{')), '}')
}

// AppendFields appends the fields of AppendJSON's object without its
// braces, for an object that has more (a rawSlip's payload).
func (s *Slip) AppendFields(b []byte) []byte {
	b = append(b, `"transRef":`...)
	b = jsonw.String(b, s.TransRef)
	b = jsonw.Field(b, "date", false)
	b = jsonw.String(b, s.Date)
	b = jsonw.Field(b, "countryCode", false)
	b = jsonw.String(b, s.CountryCode)
	b = jsonw.Field(b, "amount", false)
	b = jsonw.Field(b, "amount", true)
	b = jsonw.Float(b, s.Amount.Amount)
	b = jsonw.Field(b, "local", false)
	b = jsonw.Field(b, "amount", true)
	b = jsonw.Float(b, s.Amount.Local.Amount)
	b = jsonw.Field(b, "currency", false)
	b = jsonw.String(b, s.Amount.Local.Currency)
	b = append(b, '}', '}')
	b = jsonw.Field(b, "fee", false)
	b = jsonw.Float(b, s.Fee)
	b = jsonw.Field(b, "ref1", false)
	b = jsonw.String(b, s.Ref1)
	b = jsonw.Field(b, "ref2", false)
	b = jsonw.String(b, s.Ref2)
	b = jsonw.Field(b, "ref3", false)
	b = jsonw.String(b, s.Ref3)
	b = jsonw.Field(b, "sender", false)
	b = s.Sender.Bank.appendJSON(jsonw.Field(b, "bank", true))
	b = s.Sender.Account.appendJSON(jsonw.Field(b, "account", false))
	b = append(b, '}')
	b = jsonw.Field(b, "receiver", false)
	b = s.Receiver.Bank.appendJSON(jsonw.Field(b, "bank", true))
	b = s.Receiver.Account.appendJSON(jsonw.Field(b, "account", false))
	b = jsonw.Field(b, "merchantId", false)
	if s.Receiver.MerchantID == nil {
		b = append(b, "null"...)
	} else {
		b = jsonw.String(b, *s.Receiver.MerchantID)
	}
	return append(b, '}')
}

func (r *BankRef) appendJSON(b []byte) []byte {
	b = jsonw.Field(b, "id", true)
	b = jsonw.String(b, r.ID)
	if r.Name != "" {
		b = jsonw.Field(b, "name", false)
		b = jsonw.String(b, r.Name)
	}
	b = jsonw.Field(b, "short", false)
	b = jsonw.String(b, r.Short)
	return append(b, '}')
}

func (a *Account) appendJSON(b []byte) []byte {
	b = jsonw.Field(b, "name", true)
	b = jsonw.Field(b, "th", true)
	b = jsonw.String(b, a.Name.TH)
	if a.Name.EN != "" {
		b = jsonw.Field(b, "en", false)
		b = jsonw.String(b, a.Name.EN)
	}
	b = append(b, '}')
	b = jsonw.Field(b, "bank", false)
	b = jsonw.Field(b, "type", true)
	b = jsonw.String(b, a.Bank.Type)
	b = jsonw.Field(b, "account", false)
	b = jsonw.String(b, a.Bank.Account)
	b = append(b, '}')
	if a.Proxy != nil {
		b = jsonw.Field(b, "proxy", false)
		b = jsonw.Field(b, "type", true)
		b = jsonw.String(b, a.Proxy.Type)
		b = jsonw.Field(b, "account", false)
		b = jsonw.String(b, a.Proxy.Account)
		b = append(b, '}')
	}
	return append(b, '}')
}
