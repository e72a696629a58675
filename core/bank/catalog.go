package bank

import "github.com/slipverify/slipverify/core/api"

// The bank catalog is core/api's (a contract: GET /banks serves it, and
// the seed file's checks, which the bench shares, read its codes). These
// are its names here, where the connectors and verification use it.

// ExtraVerifyAccountLast4 and ExtraVerifyReceiverName are the values an
// Info.ExtraVerify list may hold (api.ExtraVerifyAccountLast4 and
// api.ExtraVerifyReceiverName).
const (
	ExtraVerifyAccountLast4 = api.ExtraVerifyAccountLast4
	ExtraVerifyReceiverName = api.ExtraVerifyReceiverName
)

// PromptPay is the code of the pseudo-bank that stands for PromptPay
// receivers in the catalog (api.PromptPay).
const PromptPay = api.PromptPay

// Info is one entry of the bank catalog (api.BankInfo).
type Info = api.BankInfo

// Lookup returns the catalog entry of code, and whether there is one. The
// caller owns the result.
func Lookup(code string) (Info, bool) { return api.LookupBank(code) }

// Banks returns the bank catalog ordered by code. The caller owns the
// result and may modify it.
func Banks() []Info { return api.Banks() }
