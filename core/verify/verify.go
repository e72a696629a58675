// Package verify answers whether a slip is real: it reads the slip's QR
// payload, asks the bank, applies the duplicate rules and consumes quota
// exactly once, atomically with remembering the slip.
package verify

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/google/uuid"

	"github.com/slipverify/slipverify/core/api"
	"github.com/slipverify/slipverify/core/bank"
	"github.com/slipverify/slipverify/core/lib/jsonw"
	"github.com/slipverify/slipverify/core/quota"
	"github.com/slipverify/slipverify/core/slip"
	"github.com/slipverify/slipverify/core/store"
)

// Source is where a slip's QR payload comes from; exactly one field is set.
type Source struct {
	Payload string
	Image   []byte // an uploaded or base64-decoded image
	URL     string // an image to fetch
}

// ImageReader finds the slip QR payload in an image source (Image or URL);
// accept tells a slip's payload from other QR codes in the same image.
type ImageReader interface {
	Payload(ctx context.Context, src Source, accept func(string) bool) (string, error)
}

// Request is one verification as the client asked for it.
type Request struct {
	Version             api.Version
	ServiceID, BranchID string
	Source              Source
	Remark              string
	CheckDuplicate      bool
	// Conditions are what the client expects of the slip (v2 only; the
	// branch's defaults fill the kinds it leaves unset).
	Conditions
	Receiver *ReceiverCheck // v2 bank only; nil: no receiver check
	JobID    string         // the async job this attempt runs for, if any
	// Nonce is a signed request's, claimed in the verification's write (an
	// async job's attempts claim none: its submit did).
	Nonce store.Nonce `json:"-"`
	// Resolved, if set, is given the slip payload read from an image or
	// URL source, once it parsed: an async job keeps it for its next
	// attempts instead of the image.
	Resolved func(payload string) `json:"-"`
}

// Verifier verifies slips. It is safe for concurrent use.
type Verifier struct {
	Store    store.Store
	Upstream bank.Connector
	Images   ImageReader      // nil: image sources are refused
	Now      func() time.Time // the time of the usage events of refused attempts (a verified slip's is the store's, that of its quota period); nil: time.Now
}

// RawSlip is the slip record of a bank verification (spec 2.1 rawSlip):
// the data of a v1 success.
type RawSlip struct {
	Payload string `json:"payload"`
	bank.Slip
	enc []byte // its encoding as remembered, when it is that: written as is
}

// AppendJSON appends the slip as the store remembers it, when it is that
// record (an answer encodes the slip once), else as encoding/json writes
// it.
func (s RawSlip) AppendJSON(b []byte) []byte {
	if s.enc != nil {
		return append(b, s.enc...)
	}
	b = append(b, `{"payload":`...)
	b = jsonw.String(b, s.Payload)
	return append(s.Slip.AppendFields(append(b, ',')), '}')
}

// MarshalJSON is AppendJSON, for encoding/json.
func (s RawSlip) MarshalJSON() ([]byte, error) { return s.AppendJSON(nil), nil }

// BankResult is the verification data of a bank slip (spec 2.1), the data
// of a v2 success and of a successful callback.
type BankResult struct {
	Remark      string `json:"remark"`
	IsDuplicate bool   `json:"isDuplicate"`
	// MatchedAccount is the linked account a receiver check found; null
	// when none was asked for or none matched.
	MatchedAccount *MatchedAccount `json:"matchedAccount"`
	AmountInSlip   float64         `json:"amountInSlip"`
	// AmountInOrder echoes the request's matchAmount.
	AmountInOrder   *float64 `json:"amountInOrder,omitempty"`
	IsAmountMatched bool     `json:"isAmountMatched"`
	// IsDateMatched is set when a date condition applied (Match).
	IsDateMatched *bool `json:"isDateMatched,omitempty"`
	// IsAccountMatched is set when the request asked for a receiver check.
	IsAccountMatched *bool   `json:"isAccountMatched,omitempty"`
	RawSlip          RawSlip `json:"rawSlip"`
}

// AppendJSON appends r as encoding/json writes it (TestBankResultJSON),
// the slip as remembered.
func (r BankResult) AppendJSON(b []byte) []byte {
	b = jsonw.Field(b, "remark", true)
	b = jsonw.String(b, r.Remark)
	b = jsonw.Field(b, "isDuplicate", false)
	b = jsonw.Bool(b, r.IsDuplicate)
	b = jsonw.Field(b, "matchedAccount", false)
	if r.MatchedAccount == nil {
		b = append(b, "null"...)
	} else {
		m, _ := json.Marshal(r.MatchedAccount) // strings only: cannot fail
		b = append(b, m...)
	}
	b = jsonw.Field(b, "amountInSlip", false)
	b = jsonw.Float(b, r.AmountInSlip)
	if r.AmountInOrder != nil {
		b = jsonw.Field(b, "amountInOrder", false)
		b = jsonw.Float(b, *r.AmountInOrder)
	}
	b = jsonw.Field(b, "isAmountMatched", false)
	b = jsonw.Bool(b, r.IsAmountMatched)
	if r.IsDateMatched != nil {
		b = jsonw.Field(b, "isDateMatched", false)
		b = jsonw.Bool(b, *r.IsDateMatched)
	}
	if r.IsAccountMatched != nil {
		b = jsonw.Field(b, "isAccountMatched", false)
		b = jsonw.Bool(b, *r.IsAccountMatched)
	}
	b = jsonw.Field(b, "rawSlip", false)
	return append(r.RawSlip.AppendJSON(b), '}')
}

// WalletResult is the verification data of a wallet slip: the bank
// wrapper around the wallet slip (v2). A wallet slip has no receiver
// check, so MatchedAccount is always null.
type WalletResult struct {
	Remark          string          `json:"remark"`
	IsDuplicate     bool            `json:"isDuplicate"`
	MatchedAccount  *MatchedAccount `json:"matchedAccount"`
	AmountInSlip    float64         `json:"amountInSlip"`
	AmountInOrder   *float64        `json:"amountInOrder,omitempty"`
	IsAmountMatched bool            `json:"isAmountMatched"`
	IsDateMatched   *bool           `json:"isDateMatched,omitempty"`
	RawSlip         bank.WalletSlip `json:"rawSlip"`
}

// BankDuplicate is the data of a v1 duplicate_slip refusal of a bank slip:
// the slip as first verified, and when.
type BankDuplicate struct {
	Payload string `json:"payload"`
	bank.Slip
	FirstVerifiedAt string `json:"firstVerifiedAt"`
}

// WalletDuplicate is the data of a v1 duplicate_slip refusal of a wallet
// slip.
type WalletDuplicate struct {
	bank.WalletSlip
	FirstVerifiedAt string `json:"firstVerifiedAt"`
}

// Bank verifies a bank slip.
func (v *Verifier) Bank(ctx context.Context, r Request) (_ BankResult, err error) {
	reported := false
	defer func() { v.report(ctx, r, api.KindBank, reported, err) }()
	payload, err := v.payload(ctx, r.Source, IsBankSlip)
	if err != nil {
		return BankResult{}, err
	}
	p, err := slip.ParseBank(payload)
	if err != nil {
		return BankResult{}, api.E(api.InvalidPayload)
	}
	if r.Resolved != nil && r.Source.Payload == "" {
		r.Resolved(payload)
	}
	var cands []candidate
	if r.Receiver != nil {
		if cands, err = v.candidates(r); err != nil {
			return BankResult{}, err
		}
	}
	got, err := settle(ctx, v, r, store.SlipKey("bank", p.BankCode, p.TransRef), &reported, kind[RawSlip]{
		name: api.KindBank,
		lookup: func(ctx context.Context) (RawSlip, error) {
			s, err := v.Upstream.Bank(ctx, p.BankCode, p.TransRef)
			return RawSlip{Payload: payload, Slip: s}, err
		},
		duplicate: func(s RawSlip, firstAt string) any {
			return BankDuplicate{Payload: s.Payload, Slip: s.Slip, FirstVerifiedAt: firstAt}
		},
		facts: func(s RawSlip) facts {
			return facts{amount: s.Amount.Amount, date: s.Date, receivingBank: s.Receiver.Bank.ID}
		},
		sendingBank: p.BankCode,
	})
	if err != nil {
		return BankResult{}, err
	}
	raw := got.slip
	if raw.Payload == payload {
		raw.enc = got.encoded // the answer is the record; else the payload as sent
	} else {
		raw.Payload = payload
	}
	res := BankResult{
		Remark:          r.Remark,
		IsDuplicate:     got.duplicate,
		AmountInSlip:    raw.Amount.Amount,
		AmountInOrder:   r.MatchAmount,
		IsAmountMatched: got.matched.Amount,
		IsDateMatched:   got.matched.Date,
		RawSlip:         raw,
	}
	if r.Receiver != nil {
		res.MatchedAccount = accountMatched(cands, raw.Receiver)
		m := res.MatchedAccount != nil
		res.IsAccountMatched = &m
	}
	return res, nil
}

// Wallet verifies a wallet slip.
func (v *Verifier) Wallet(ctx context.Context, r Request) (_ WalletResult, err error) {
	reported := false
	defer func() { v.report(ctx, r, api.KindWallet, reported, err) }()
	payload, err := v.payload(ctx, r.Source, isWalletSlip)
	if err != nil {
		return WalletResult{}, err
	}
	p, err := slip.ParseWallet(payload)
	if err != nil {
		return WalletResult{}, api.E(api.InvalidPayload)
	}
	got, err := settle(ctx, v, r, store.SlipKey("wallet", p.TransactionID), &reported, kind[bank.WalletSlip]{
		name:   api.KindWallet,
		lookup: func(ctx context.Context) (bank.WalletSlip, error) { return v.Upstream.Wallet(ctx, p.TransactionID) },
		duplicate: func(s bank.WalletSlip, firstAt string) any {
			return WalletDuplicate{WalletSlip: s, FirstVerifiedAt: firstAt}
		},
		facts: func(s bank.WalletSlip) facts { return facts{amount: s.Amount, date: s.Date} },
	})
	if err != nil {
		return WalletResult{}, err
	}
	ws := got.slip
	return WalletResult{
		Remark:          r.Remark,
		IsDuplicate:     got.duplicate,
		AmountInSlip:    ws.Amount,
		AmountInOrder:   r.MatchAmount,
		IsAmountMatched: got.matched.Amount,
		IsDateMatched:   got.matched.Date,
		RawSlip:         ws,
	}, nil
}

// kind is what settle needs of a kind of slip (T: its verified record).
type kind[T any] struct {
	name      string                           // api.KindBank or api.KindWallet
	lookup    func(context.Context) (T, error) // asks the bank
	duplicate func(s T, firstAt string) any    // the data of a v1 duplicate_slip
	facts     func(s T) facts                  // what the conditions, the history and the usage event read of it
	// sendingBank is the code in the slip's QR payload, part of its key, so
	// a slip answered from its record has the one it was verified with; ""
	// for a wallet slip. A field, not read by facts: a closure over the
	// payload would cost an allocation per verification.
	sendingBank string
}

// facts are what a verification's conditions, its history entry and its
// usage event read of a slip.
type facts struct {
	amount        float64
	date          string // RFC 3339
	receivingBank string // its code; "" for a wallet slip
	sendingBank   string // kind.sendingBank
}

// settled is a verification's verified slip: as the service remembers it
// (encoded) and decoded, whether the answer says isDuplicate, and what it
// says of the request's conditions.
type settled[T any] struct {
	slip      T
	encoded   []byte
	duplicate bool
	matched   Matched
}

// errStaleDecision retries a verification whose slip record was removed
// (by SLIP_SLIP_RETENTION) between its decision and its write.
var errStaleDecision = errors.New("verify: the slip's record went between the decision and the write")

// settle runs what every kind of verification shares: Decide on a
// snapshot, the bank lookup when it says so, and the effect written by
// Store.Apply, decided again on the state it is written into. When the
// effect (with its usage event) is written, it sets *reported.
func settle[T any](ctx context.Context, v *Verifier, r Request, key string, reported *bool, k kind[T]) (settled[T], error) {
	for {
		got, err := settleOnce(ctx, v, r, key, reported, k)
		if !errors.Is(err, errStaleDecision) {
			return got, err
		}
	}
}

func settleOnce[T any](ctx context.Context, v *Verifier, r Request, key string, reported *bool, k kind[T]) (settled[T], error) {
	var got settled[T]
	v.Store.Announce() // a write may follow: the committer may wait for it
	defer v.Store.Retract()
	snap, err := v.Store.Snapshot(r.ServiceID, r.BranchID, key)
	if err != nil {
		return got, identityError(err)
	}
	d := Decide(snap, r)
	cond := r.Conditions
	if r.Version == api.V2 {
		cond = cond.Over(snap.Conditions)
	}
	var seen settled[T] // the slip's record, decoded: the answer of a verification not looked up
	switch {
	case d.Refuse != 0:
		return got, refusal(d.Refuse, snap.Slip, k)
	case !d.Lookup && !d.Charge: // free, answered from the record: nothing to write but a signed request's nonce
		if err := v.Store.ClaimNonce(r.ServiceID, r.Nonce); err != nil {
			return got, identityError(err)
		}
		got, err = fromRecord[T](snap.Slip, d)
		got.matched = cond.match(k.facts(got.slip), snap.At)
		return got, err
	case d.Lookup:
		if got.slip, err = lookupUnannounced(bank.WithService(ctx, r.ServiceID), v.Store, k.lookup); err != nil {
			return got, bankError(err)
		}
		if got.encoded, err = encode(got.slip); err != nil {
			return got, internal(err)
		}
	default:
		if seen, err = fromRecord[T](snap.Slip, d); err != nil {
			return got, err
		}
		got.slip = seen.slip
	}
	f := k.facts(got.slip)
	f.sendingBank = k.sendingBank
	got.matched = cond.match(f, snap.At)
	enc, m := got.encoded, got.matched // what the write reads of got, so got is not captured
	snap, err = v.Store.Apply(r.ServiceID, r.BranchID, key, func(now store.Snapshot) (store.Effect, error) {
		if d = Decide(now, r); d.Refuse != 0 {
			return store.Effect{}, refusal(d.Refuse, now.Slip, k)
		}
		if d.Lookup && enc == nil {
			return store.Effect{}, errStaleDecision
		}
		return store.Effect{Charge: d.Charge, Result: enc, JobID: r.JobID, Nonce: r.Nonce,
			Listed: true, History: store.Verification{Amount: f.amount, ReceivingBank: f.receivingBank, Duplicate: d.Duplicate,
				AmountMatched: m.Amount, DateMatched: m.Date, Remark: r.Remark, JobID: r.JobID},
			Usage: func(charged bool, at time.Time) store.Message {
				return v.usage(r, k.name, api.OutcomeOK, charged, at, f)
			}}, nil
	})
	if err != nil {
		var e *api.Error
		if errors.Is(err, errStaleDecision) || errors.As(err, &e) { // a refusal of Decide's
			return got, err
		}
		return got, identityError(err)
	}
	*reported = true
	if d.Lookup {
		got.duplicate = d.Duplicate
		return got, nil
	}
	matched := got.matched
	if seen.encoded == nil || !bytes.Equal(seen.encoded, snap.Slip.Result) { // recorded since the first snapshot
		if seen, err = fromRecord[T](snap.Slip, d); err != nil {
			return seen, err
		}
		matched = cond.match(k.facts(seen.slip), snap.At)
	}
	seen.duplicate, seen.matched = d.Duplicate, matched
	return seen, nil // the first verification's answer stands
}

// match is Match of the facts of a slip.
func (c Conditions) match(f facts, at time.Time) Matched { return c.Match(f.amount, f.date, at) }

// lookupUnannounced runs a bank lookup with the verification's write
// retracted meanwhile: a bank may take long, and no transaction should wait
// for it.
func lookupUnannounced[T any](ctx context.Context, st store.Store, lookup func(context.Context) (T, error)) (T, error) {
	st.Retract()
	defer st.Announce()
	return lookup(ctx)
}

// encode is the encoding of a verified slip as remembered.
func encode(v any) ([]byte, error) {
	if a, ok := v.(api.Appender); ok {
		return a.AppendJSON(make([]byte, 0, 1024)), nil
	}
	return json.Marshal(v)
}

// fromRecord answers from the slip's record.
func fromRecord[T any](rec *store.SlipRecord, d Decision) (settled[T], error) {
	got := settled[T]{encoded: rec.Result, duplicate: d.Duplicate}
	if err := json.Unmarshal(rec.Result, &got.slip); err != nil {
		return got, internal(err)
	}
	return got, nil
}

// refusal is the error of a refused verification: a v1 duplicate_slip
// carries the slip as first verified.
func refusal[T any](code api.Code, rec *store.SlipRecord, k kind[T]) error {
	if code != api.DuplicateSlip {
		return api.E(code)
	}
	got, err := fromRecord[T](rec, Decision{})
	if err != nil {
		return err
	}
	first := time.Unix(rec.FirstAt, 0).In(quota.Bangkok).Format(time.RFC3339)
	return &api.Error{Code: api.DuplicateSlip, Data: k.duplicate(got.slip, first)}
}

// report emits the usage event of an attempt whose event did not go out
// with a consumption: a refusal, an error or a free self-duplicate.
func (v *Verifier) report(ctx context.Context, r Request, kind string, reported bool, err error) {
	if reported || err != nil && ctx.Err() != nil {
		return // an attempt cut short (an async job's, at a stop) runs again
	}
	outcome := api.OutcomeOK
	if err != nil {
		var e *api.Error
		if !errors.As(err, &e) {
			e = api.E(api.InternalServerError)
		}
		outcome = e.Code.String()
	}
	// A full outbox drops the event and counts it (store.OutboxStats): the
	// verification's answer does not wait for room to report it.
	_ = v.Store.Emit(v.usage(r, kind, outcome, false, v.now(), facts{}))
}

func (v *Verifier) now() time.Time {
	if v.Now != nil {
		return v.Now()
	}
	return time.Now()
}

// usage returns the usage event of an attempt at time at as an outbox
// message. A billable attempt was charged for the slip of facts f, and its
// event alone carries that slip's amount (in satang) and sending bank: an
// attempt charged nothing, a free repeat of the branch's own slip included,
// adds no THB to the ledger, so a slip counts once per charge.
func (v *Verifier) usage(r Request, kind, outcome string, billable bool, at time.Time, f facts) store.Message {
	mode := api.ModeSync
	if r.JobID != "" {
		mode = api.ModeAsync
	}
	ev := api.UsageEvent{
		EventID: uuid.NewString(), OccurredAt: at.UTC(), ServiceID: r.ServiceID, BranchID: r.BranchID,
		Kind: kind, API: r.Version.String(), Mode: mode, Outcome: outcome, Billable: billable, JobID: r.JobID,
	}
	if billable {
		ev.Amount, ev.SendingBank = int64(satang(f.amount)), f.sendingBank
	}
	return store.Message{Topic: api.TopicUsage, Key: r.ServiceID, Value: ev.AppendJSON(make([]byte, 0, 320))} // a billable event fits if its service and branch ids take up to 78 bytes (31 with a job id)
}

// Admit refuses a verification the caller could not make now: an unknown
// or refused service or branch, or quota already used up (Decide, for a
// slip not seen). It returns the branch it read. Async submit asks before
// it accepts jobs.
func (v *Verifier) Admit(serviceID, branchID string) (store.Branch, error) {
	snap, err := v.Store.Snapshot(serviceID, branchID, "")
	if err != nil {
		return snap.Branch, identityError(err)
	}
	if d := Decide(snap, Request{ServiceID: serviceID, BranchID: branchID}); d.Refuse != 0 {
		return snap.Branch, api.E(d.Refuse)
	}
	return snap.Branch, nil
}

// payload returns the QR payload of src.
func (v *Verifier) payload(ctx context.Context, src Source, accept func(string) bool) (string, error) {
	if src.Payload != "" {
		return src.Payload, nil
	}
	if v.Images == nil {
		return "", api.Errorf(api.Validation, "image: image and URL sources are not enabled on this server; send payload")
	}
	return v.Images.Payload(ctx, src, accept)
}

// IsBankSlip reports whether p is a well-formed bank slip payload.
func IsBankSlip(p string) bool   { _, err := slip.ParseBank(p); return err == nil }
func isWalletSlip(p string) bool { _, err := slip.ParseWallet(p); return err == nil }

func identityError(err error) error {
	if errors.Is(err, store.ErrNotFound) {
		return api.E(api.InvalidAPIKey)
	}
	return internal(err)
}

func bankError(err error) error {
	switch {
	case errors.Is(err, bank.ErrNotFound):
		return api.E(api.SlipNotFound)
	case errors.Is(err, bank.ErrPending):
		return api.E(api.SlipPending)
	}
	return &api.Error{Code: api.APIServerError, Cause: err}
}

func internal(err error) error { return api.Internal(err) }
