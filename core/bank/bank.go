// Package bank defines how core asks a bank whether a transfer is real: the
// Connector interface, the slip records it answers with, and the errors it
// may return. Implementations: the sandbox bank (package bank/sandbox), an
// HTTP connector to an upstream bank gateway (package bank/httpbank), the
// banks' own slip verification APIs (packages bank/kbank and bank/scb), and
// a router picking one of them by sending bank (package bank/route).
package bank

import (
	"context"
	"errors"
)

// Errors a Connector returns. Core maps them to the error catalog:
// ErrNotFound to SLIP_NOT_FOUND, ErrPending to SLIP_PENDING and ErrUpstream
// to API_SERVER_ERROR.
var (
	// ErrNotFound means the bank has no such transfer.
	ErrNotFound = errors.New("bank: slip not found")
	// ErrPending means the transfer is too recent for the bank to confirm.
	ErrPending = errors.New("bank: slip pending")
	// ErrUpstream means the bank could not answer (timeout, outage, bad reply).
	ErrUpstream = errors.New("bank: upstream error")
)

// Connector looks up transfers at a bank or wallet provider. Implementations
// are safe for concurrent use. A lookup is made at most once per call: a
// connector never retries a request the upstream may already have billed.
// A lookup's context names the service it is for (WithService), so that
// one service cannot take a bank's whole capacity from the others.
type Connector interface {
	// Bank looks up a bank transfer by the sending bank's code and the
	// transaction reference printed in the slip's QR payload.
	Bank(ctx context.Context, bankCode, transRef string) (Slip, error)
	// Wallet looks up a wallet transfer by its transaction id.
	Wallet(ctx context.Context, transactionID string) (WalletSlip, error)
}

// serviceKey is the context key of the service a lookup is for.
type serviceKey struct{}

// WithService returns ctx naming the service (the tenant) a lookup made
// with it is for. Connectors that share a bank's capacity among services
// (package bank/upstream) read it with Service; the others ignore it.
func WithService(ctx context.Context, serviceID string) context.Context {
	return context.WithValue(ctx, serviceKey{}, serviceID)
}

// Service returns the service ctx names, "" when none: such lookups share
// one tenant's part of a bank's capacity.
func Service(ctx context.Context) string {
	s, _ := ctx.Value(serviceKey{}).(string)
	return s
}

// Slip is a verified bank transfer: the rawSlip of the interface (spec 2.1)
// without its payload, which core fills in from the request.
type Slip struct {
	TransRef    string   `json:"transRef"`
	Date        string   `json:"date"` // ISO 8601 with offset
	CountryCode string   `json:"countryCode"`
	Amount      Amount   `json:"amount"`
	Fee         float64  `json:"fee"`
	Ref1        string   `json:"ref1"`
	Ref2        string   `json:"ref2"`
	Ref3        string   `json:"ref3"`
	Sender      Party    `json:"sender"`
	Receiver    Receiver `json:"receiver"`
}

// Amount is the transferred amount, also in local currency.
type Amount struct {
	Amount float64     `json:"amount"`
	Local  LocalAmount `json:"local"`
}

// LocalAmount is an amount in a named currency (THB for Thai transfers).
type LocalAmount struct {
	Amount   float64 `json:"amount"`
	Currency string  `json:"currency"`
}

// Party is the sender of a transfer.
type Party struct {
	Bank    BankRef `json:"bank"`
	Account Account `json:"account"`
}

// Receiver is the receiving party; MerchantID is null when the receiver is
// not a merchant.
type Receiver struct {
	Bank       BankRef `json:"bank"`
	Account    Account `json:"account"`
	MerchantID *string `json:"merchantId"`
}

// BankRef names a bank. Some banks report only ID and Short.
type BankRef struct {
	ID    string `json:"id"`
	Name  string `json:"name,omitempty"`
	Short string `json:"short"`
}

// Account is a party's account as the slip prints it. Proxy is set when
// the bank reports the PromptPay proxy the transfer went through.
type Account struct {
	Name  AccountName `json:"name"`
	Bank  AccountBank `json:"bank"`
	Proxy *Proxy      `json:"proxy,omitempty"`
}

// Proxy is a PromptPay proxy (spec 2.1's account, as the banks report it):
// its type and its partly masked value.
type Proxy struct {
	Type    string `json:"type"` // NATID, MSISDN, EWALLETID, EMAIL or BILLERID
	Account string `json:"account"`
}

// The proxy types a bank reports.
const (
	ProxyNationalID = "NATID"
	ProxyPhone      = "MSISDN"
	ProxyEWallet    = "EWALLETID"
	ProxyEmail      = "EMAIL"
	ProxyBiller     = "BILLERID"
)

// AccountName is an account holder's name; the English form may be absent.
type AccountName struct {
	TH string `json:"th"`
	EN string `json:"en,omitempty"`
}

// AccountBank is an account's type and its partly masked number.
type AccountBank struct {
	Type    string `json:"type"`
	Account string `json:"account"`
}

// WalletSlip is a verified wallet transfer.
type WalletSlip struct {
	TransactionID string      `json:"transactionId"`
	Amount        float64     `json:"amount"`
	Date          string      `json:"date"` // ISO 8601 with offset
	Sender        WalletParty `json:"sender"`
	Receiver      WalletParty `json:"receiver"`
}

// WalletParty is a wallet holder as the slip prints it.
type WalletParty struct {
	Name  string `json:"name"`
	Phone string `json:"phone"`
}
