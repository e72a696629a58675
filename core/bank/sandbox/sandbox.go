// Package sandbox is the sandbox bank: a bank.Connector that answers from the
// seed file's sandbox section, and for everything else invents a slip, so the
// dev stack and load tests run without a real bank.
//
// A bank lookup (bankCode, transRef) is answered, in this order:
//
//  1. transRef in UpstreamError: bank.ErrUpstream;
//  2. transRef in NotFound: bank.ErrNotFound;
//  3. transRef of a listed slip: the slip as listed, or bank.ErrNotFound when
//     bankCode is not the listed slip's bank (the sending bank issues the
//     reference, so no other bank knows it), or bank.ErrPending when the
//     slip's bank is PendingBank and it is dated less than PendingWindow
//     before now (a date after now counts as too recent, too);
//  4. otherwise, a well-formed request (bankCode a bank of the catalog, not
//     PROMPTPAY; transRef 1 to 99 printable ASCII characters without spaces,
//     what a slip QR sub-tag can carry) gets a synthetic slip, and any other
//     request bank.ErrNotFound.
//
// A synthetic slip is derived from a hash of (bankCode, transRef) alone: the
// same request always gets the same slip, in every process and on every
// machine, so duplicate detection and load tests see a stable bank. Its
// amount lies between 1.00 and 50,000.00 baht, its date in the year 2020
// (Bangkok time), so it is never pending and does not depend on the clock;
// its sender bank is the requested bank, its receiver bank and both names come
// from small fixed tables, and accounts are masked as "xxx-x-x1234-x". The
// golden file testdata/synthetic.json pins the derivation: changing it
// changes what every load test and dev stack has stored.
//
// Wallet lookups follow the same rules by transaction id: the UpstreamError
// and NotFound lists apply, listed wallet slips are answered as listed (never
// pending), and other well-formed ids get a synthetic wallet slip.
//
// Lookups are on the hot path of load tests: everything is precomputed by New,
// a listed or scripted answer allocates nothing and a synthetic one allocates
// a single string.
package sandbox

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/slipverify/slipverify/core/bank"
)

// PendingWindow is how long after its date a listed slip of the pending bank
// stays pending.
const PendingWindow = 5 * time.Minute

// maxRefLen is the longest transRef or transaction id the sandbox accepts:
// the longest value a two-digit EMVCo length can announce.
const maxRefLen = 99

// Config is the sandbox section of the seed file; it decodes from that JSON
// object as it stands.
type Config struct {
	// PendingBank is the bank code whose recent listed slips are pending;
	// empty means none.
	PendingBank string `json:"pendingBank"`
	// Slips are the bank slips answered as listed.
	Slips []Slip `json:"slips"`
	// NotFound are transRefs and wallet transaction ids answered with
	// bank.ErrNotFound.
	NotFound []string `json:"notFound"`
	// UpstreamError are transRefs and wallet transaction ids answered with
	// bank.ErrUpstream.
	UpstreamError []string `json:"upstreamError"`
	// Wallet are the wallet slips answered as listed.
	Wallet []bank.WalletSlip `json:"wallet"`
}

// Slip is a listed bank slip of the seed. Fee defaults to 0 and the
// references to "". Date is RFC 3339 and is answered as written.
type Slip struct {
	BankCode string        `json:"bankCode"`
	TransRef string        `json:"transRef"`
	Amount   float64       `json:"amount"`
	Date     string        `json:"date"`
	Fee      float64       `json:"fee,omitempty"`
	Ref1     string        `json:"ref1,omitempty"`
	Ref2     string        `json:"ref2,omitempty"`
	Ref3     string        `json:"ref3,omitempty"`
	Sender   bank.Party    `json:"sender"`
	Receiver bank.Receiver `json:"receiver"`
}

// errScriptedUpstream is the answer to a transRef of Config.UpstreamError.
var errScriptedUpstream = fmt.Errorf("%w: sandbox: scripted upstream error", bank.ErrUpstream)

// Bank is the sandbox bank. It is safe for concurrent use; nothing changes
// after New. The answers for one listed slip share its Receiver.MerchantID
// pointer: callers treat it as read-only.
type Bank struct {
	now         func() time.Time
	pendingBank string
	slips       map[string]listedSlip      // by transRef
	wallet      map[string]bank.WalletSlip // by transaction id
	scripted    map[string]error           // NotFound and UpstreamError
}

// listedSlip is a listed bank slip, ready to answer.
type listedSlip struct {
	bankCode string
	date     time.Time
	slip     bank.Slip
}

var _ bank.Connector = (*Bank)(nil)

// New returns the sandbox bank for cfg, reading the time from now (time.Now
// when nil) to decide pending slips. It reports every problem of cfg at once:
// codes of no sending bank (PROMPTPAY sends nothing), malformed references,
// dates that are not RFC 3339, amounts that are not positive, and references
// listed twice (a reference may appear in only one of Slips, NotFound and
// UpstreamError; a wallet id in only one of Wallet, NotFound and
// UpstreamError).
func New(cfg Config, now func() time.Time) (*Bank, error) {
	if now == nil {
		now = time.Now
	}
	b := &Bank{
		now:         now,
		pendingBank: cfg.PendingBank,
		slips:       make(map[string]listedSlip, len(cfg.Slips)),
		wallet:      make(map[string]bank.WalletSlip, len(cfg.Wallet)),
		scripted:    make(map[string]error, len(cfg.NotFound)+len(cfg.UpstreamError)),
	}
	var errs []error
	problem := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("sandbox: "+format, args...))
	}

	if cfg.PendingBank != "" && !senderBank(cfg.PendingBank) {
		problem("pendingBank: no sending bank has code %q", cfg.PendingBank)
	}

	// bankRefs (slips and scripted) and walletRefs (wallet) record where
	// each reference was first listed, to name both places of a duplicate.
	bankRefs := make(map[string]string, len(cfg.Slips)+len(cfg.NotFound)+len(cfg.UpstreamError))
	walletRefs := make(map[string]string, len(cfg.Wallet)+len(cfg.NotFound)+len(cfg.UpstreamError))
	claim := func(seen map[string]string, ref, where string) {
		if first, dup := seen[ref]; dup {
			problem("%s: %q is already listed in %s", where, ref, first)
			return
		}
		seen[ref] = where
	}

	for i, s := range cfg.Slips {
		where := fmt.Sprintf("slips[%d]", i)
		if !senderBank(s.BankCode) {
			problem("%s.bankCode: no sending bank has code %q", where, s.BankCode)
		}
		if !wellFormedRef(s.TransRef) {
			problem("%s.transRef: %q is not 1 to %d printable ASCII characters", where, s.TransRef, maxRefLen)
		}
		if !positive(s.Amount) {
			problem("%s.amount: %v is not greater than 0", where, s.Amount)
		}
		if !(s.Fee >= 0) || math.IsInf(s.Fee, 1) {
			problem("%s.fee: %v is not a finite amount of 0 or more", where, s.Fee)
		}
		date, err := time.Parse(time.RFC3339, s.Date)
		if err != nil {
			problem("%s.date: %q is not RFC 3339", where, s.Date)
		}
		claim(bankRefs, s.TransRef, where)
		b.slips[s.TransRef] = listedSlip{
			bankCode: s.BankCode,
			date:     date,
			slip: bank.Slip{
				TransRef:    s.TransRef,
				Date:        s.Date,
				CountryCode: "TH",
				Amount:      thb(s.Amount),
				Fee:         s.Fee,
				Ref1:        s.Ref1,
				Ref2:        s.Ref2,
				Ref3:        s.Ref3,
				Sender:      s.Sender,
				Receiver:    ownMerchantID(s.Receiver),
			},
		}
	}
	for i, w := range cfg.Wallet {
		where := fmt.Sprintf("wallet[%d]", i)
		if !wellFormedRef(w.TransactionID) {
			problem("%s.transactionId: %q is not 1 to %d printable ASCII characters", where, w.TransactionID, maxRefLen)
		}
		if !positive(w.Amount) {
			problem("%s.amount: %v is not greater than 0", where, w.Amount)
		}
		if _, err := time.Parse(time.RFC3339, w.Date); err != nil {
			problem("%s.date: %q is not RFC 3339", where, w.Date)
		}
		claim(walletRefs, w.TransactionID, where)
		b.wallet[w.TransactionID] = w
	}
	script := func(list []string, name string, answer error) {
		for i, ref := range list {
			where := fmt.Sprintf("%s[%d]", name, i)
			if !wellFormedRef(ref) {
				problem("%s: %q is not 1 to %d printable ASCII characters", where, ref, maxRefLen)
			}
			claim(bankRefs, ref, where)
			if first, listed := walletRefs[ref]; listed {
				problem("%s: %q is already listed in %s", where, ref, first)
			}
			b.scripted[ref] = answer
		}
	}
	script(cfg.NotFound, "notFound", bank.ErrNotFound)
	script(cfg.UpstreamError, "upstreamError", errScriptedUpstream)

	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return b, nil
}

// Bank answers a bank lookup as the package documentation describes.
func (b *Bank) Bank(ctx context.Context, bankCode, transRef string) (bank.Slip, error) {
	if err := ctx.Err(); err != nil {
		return bank.Slip{}, fmt.Errorf("%w: sandbox: %w", bank.ErrUpstream, err)
	}
	if err, ok := b.scripted[transRef]; ok {
		return bank.Slip{}, err
	}
	if l, ok := b.slips[transRef]; ok {
		if l.bankCode != bankCode {
			return bank.Slip{}, bank.ErrNotFound
		}
		if l.bankCode == b.pendingBank && b.now().Sub(l.date) < PendingWindow {
			return bank.Slip{}, bank.ErrPending
		}
		return l.slip, nil
	}
	sender, ok := senderRefs[bankCode]
	if !ok || !wellFormedRef(transRef) {
		return bank.Slip{}, bank.ErrNotFound
	}
	return syntheticSlip(sender, transRef), nil
}

// Wallet answers a wallet lookup as the package documentation describes.
func (b *Bank) Wallet(ctx context.Context, transactionID string) (bank.WalletSlip, error) {
	if err := ctx.Err(); err != nil {
		return bank.WalletSlip{}, fmt.Errorf("%w: sandbox: %w", bank.ErrUpstream, err)
	}
	if err, ok := b.scripted[transactionID]; ok {
		return bank.WalletSlip{}, err
	}
	if w, ok := b.wallet[transactionID]; ok {
		return w, nil
	}
	if !wellFormedRef(transactionID) {
		return bank.WalletSlip{}, bank.ErrNotFound
	}
	return syntheticWallet(transactionID), nil
}

// wellFormedRef reports whether ref can be a transRef or wallet transaction
// id: 1 to maxRefLen printable ASCII characters, no spaces.
func wellFormedRef(ref string) bool {
	if len(ref) == 0 || len(ref) > maxRefLen {
		return false
	}
	for i := range len(ref) {
		if ref[i] <= ' ' || ref[i] > '~' {
			return false
		}
	}
	return true
}

// senderBank reports whether code is a bank that can send a transfer: a
// catalog bank other than the PROMPTPAY pseudo-bank.
func senderBank(code string) bool {
	_, ok := senderRefs[code]
	return ok
}

// positive reports whether a is a usable amount: finite and above zero.
func positive(a float64) bool { return a > 0 && !math.IsInf(a, 1) }

// thb is amount a in baht, as a slip states it.
func thb(a float64) bank.Amount {
	return bank.Amount{Amount: a, Local: bank.LocalAmount{Amount: a, Currency: "THB"}}
}

// ownMerchantID gives r its own copy of the merchant id, so a caller that
// changes its Config after New cannot change the answers.
func ownMerchantID(r bank.Receiver) bank.Receiver {
	if r.MerchantID != nil {
		id := *r.MerchantID
		r.MerchantID = &id
	}
	return r
}
