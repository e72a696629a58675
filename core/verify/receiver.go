package verify

import (
	"slices"
	"strings"

	"github.com/slipverify/slipverify/core/api"
	"github.com/slipverify/slipverify/core/bank"
	"github.com/slipverify/slipverify/core/receiver"
	"github.com/slipverify/slipverify/core/store"
)

// ReceiverCheck asks whether the slip's receiver is one of the branch's
// bank accounts (spec 4.1 rule 4).
type ReceiverCheck struct {
	AccountID   string // one account; empty: every account linked to the branch
	BankCode    string // overrides the account's bank
	ExtraVerify string
	MatchMode   string // PROMPTPAY only: NAME, NUMBER or NAME_NUMBER
}

// MatchedAccount is the linked account a receiver check found, as a v2
// answer shows it.
type MatchedAccount struct {
	ID         string      `json:"id"`
	Bank       MatchedBank `json:"bank"`
	NameTH     string      `json:"nameTh"`
	NameEN     string      `json:"nameEn"`
	Type       string      `json:"type"` // receiver.Personal or receiver.Juristic
	BankNumber string      `json:"bankNumber"`
}

// MatchedBank is the bank of a MatchedAccount.
type MatchedBank struct {
	Code      string `json:"code"`
	ShortCode string `json:"shortCode"`
	NameTH    string `json:"nameTh"`
	NameEN    string `json:"nameEn"`
}

// matchedAccount returns how a v2 answer shows a.
func matchedAccount(a store.BankAccount) *MatchedAccount {
	info, _ := bank.Lookup(a.BankCode)
	return &MatchedAccount{
		ID:         a.ID,
		Bank:       MatchedBank{Code: info.Code, ShortCode: info.Short, NameTH: info.NameTH, NameEN: info.NameEN},
		NameTH:     a.Name.TH,
		NameEN:     a.Name.EN,
		Type:       a.AccountType(),
		BankNumber: a.BankNumber,
	}
}

// candidate is an account to compare the receiver with, and how.
type candidate struct {
	stored    store.BankAccount
	acc       receiver.Account
	promptPay bool
	mode      receiver.Mode
}

// candidates returns the accounts a check compares with. It refuses before
// any bank lookup or quota use: BANK_ACCOUNT_NOT_FOUND for a missing or
// unlinked account (or a branch with none), and the first rule an account
// breaks (INVALID_EXTRA_VERIFY, INVALID_MATCH_MODE) when no account passes.
func (v *Verifier) candidates(r Request) ([]candidate, error) {
	accounts, err := v.Store.Accounts(r.ServiceID, r.BranchID)
	if err != nil {
		return nil, internal(err)
	}
	var out []candidate
	var first error
	for _, a := range accounts {
		if !a.Active || r.Receiver.AccountID != "" && a.ID != r.Receiver.AccountID {
			continue
		}
		c, err := ruleCheck(r.Receiver, a)
		if err != nil {
			if first == nil {
				first = err
			}
			continue
		}
		out = append(out, c)
	}
	switch {
	case len(out) > 0:
		return out, nil
	case first != nil:
		return nil, first
	}
	return nil, api.E(api.BankAccountNotFound)
}

// ruleCheck applies the bank's rules to one account.
func ruleCheck(rc *ReceiverCheck, a store.BankAccount) (candidate, error) {
	code := a.BankCode
	if rc.BankCode != "" {
		code = rc.BankCode
	}
	info, _ := bank.Lookup(code)
	c := candidate{
		stored:    a,
		acc:       receiver.Account{BankCode: code, Number: a.BankNumber, NameTH: a.Name.TH, NameEN: a.Name.EN},
		promptPay: code == bank.PromptPay,
	}
	if rc.MatchMode != "" {
		if !c.promptPay {
			return c, api.E(api.InvalidMatchMode)
		}
		c.mode, _ = receiver.ParseMode(rc.MatchMode) // checked when parsed
	}
	switch {
	case len(info.ExtraVerify) == 0 && rc.ExtraVerify != "":
		return c, api.Errorf(api.InvalidExtraVerify, "extraVerify: bank "+code+" takes no extraVerify")
	case len(info.ExtraVerify) > 0 && !slices.Contains(info.ExtraVerify, rc.ExtraVerify):
		return c, api.Errorf(api.InvalidExtraVerify, "extraVerify: bank "+code+" requires one of "+strings.Join(info.ExtraVerify, ", "))
	case rc.ExtraVerify == bank.ExtraVerifyAccountLast4:
		c.mode = receiver.Number
	case rc.ExtraVerify == bank.ExtraVerifyReceiverName:
		c.mode = receiver.Name
	}
	return c, nil
}

// accountMatched returns the first candidate the verified slip's receiver
// is, or nil.
func accountMatched(cs []candidate, to bank.Receiver) *MatchedAccount {
	p := receiver.Party{BankID: to.Bank.ID, Account: to.Account.Bank.Account, NameTH: to.Account.Name.TH, NameEN: to.Account.Name.EN}
	for _, c := range cs {
		if receiver.Matches(p, c.acc, c.promptPay, c.mode) {
			return matchedAccount(c.stored)
		}
	}
	return nil
}
