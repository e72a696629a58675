// Package verify answers whether a slip is real: it reads the slip's QR
// payload, asks the bank, applies the duplicate rules and consumes quota
// exactly once, atomically with remembering the slip.
package verify

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"time"

	"github.com/google/uuid"

	"github.com/slipverify/slipverify/core/api"
	"github.com/slipverify/slipverify/core/bank"
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
	MatchAmount         *float64
	Receiver            *ReceiverCheck // v2 bank only; nil: no receiver check
	JobID               string         // the async job this attempt runs for, if any
	// Resolved, if set, is given the slip payload read from an image or
	// URL source, once it parsed: an async job keeps it for its next
	// attempts instead of the image.
	Resolved func(payload string) `json:"-"`
}

// Verifier verifies slips. It is safe for concurrent use.
type Verifier struct {
	Store    *store.Store
	Upstream bank.Connector
	Images   ImageReader      // nil: image sources are refused
	Now      func() time.Time // the time of the usage events of refused attempts (a verified slip's is the store's, that of its quota period); nil: time.Now
}

// RawSlip is the slip record of a bank verification (spec 2.1 rawSlip):
// the data of a v1 success.
type RawSlip struct {
	Payload string `json:"payload"`
	bank.Slip
}

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
	// IsAccountMatched is set when the request asked for a receiver check.
	IsAccountMatched *bool   `json:"isAccountMatched,omitempty"`
	RawSlip          RawSlip `json:"rawSlip"`
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
	RawSlip         bank.WalletSlip `json:"rawSlip"`
}

// BankDuplicate is the data of a v1 duplicate_slip refusal of a bank slip:
// the slip as first verified, and when.
type BankDuplicate struct {
	RawSlip
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
	var raw RawSlip
	seen, err := v.settle(ctx, r, api.KindBank, store.SlipKey("bank", p.BankCode, p.TransRef), &raw, &reported,
		func(ctx context.Context) (any, error) {
			s, err := v.Upstream.Bank(ctx, p.BankCode, p.TransRef)
			return RawSlip{Payload: payload, Slip: s}, err
		},
		func(firstAt string) any {
			raw.Payload = payload
			return BankDuplicate{RawSlip: raw, FirstVerifiedAt: firstAt}
		})
	if err != nil {
		return BankResult{}, err
	}
	raw.Payload = payload
	res := BankResult{
		Remark:          r.Remark,
		IsDuplicate:     seen,
		AmountInSlip:    raw.Amount.Amount,
		AmountInOrder:   r.MatchAmount,
		IsAmountMatched: amountMatches(r.MatchAmount, raw.Amount.Amount),
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
	var ws bank.WalletSlip
	seen, err := v.settle(ctx, r, api.KindWallet, store.SlipKey("wallet", p.TransactionID), &ws, &reported,
		func(ctx context.Context) (any, error) { return v.Upstream.Wallet(ctx, p.TransactionID) },
		func(firstAt string) any { return WalletDuplicate{WalletSlip: ws, FirstVerifiedAt: firstAt} })
	if err != nil {
		return WalletResult{}, err
	}
	return WalletResult{
		Remark:          r.Remark,
		IsDuplicate:     seen,
		AmountInSlip:    ws.Amount,
		AmountInOrder:   r.MatchAmount,
		IsAmountMatched: amountMatches(r.MatchAmount, ws.Amount),
		RawSlip:         ws,
	}, nil
}

// settle runs the part of a verification common to every kind of slip:
// the caller's state, the duplicate rules, the bank lookup (only for a slip
// the service has not verified before) and the atomic consumption of quota.
// It decodes the verified slip into out and reports whether the slip was
// verified before. dup builds a v1 duplicate_slip answer from out and the
// time the slip was first verified. When the
// verification consumes, its usage event goes out with the consumption and
// settle sets *reported.
func (v *Verifier) settle(ctx context.Context, r Request, kind, key string, out any, reported *bool,
	lookup func(context.Context) (any, error), dup func(firstAt string) any) (bool, error) {
	sv, br, err := v.Store.Identity(r.ServiceID, r.BranchID)
	if err != nil {
		return false, identityError(err)
	}
	if err := checkState(sv, br); err != nil {
		return false, err
	}
	policy := policyOf(r)
	seen, err := v.Store.Slip(r.ServiceID, key)
	if err != nil {
		return false, internal(err)
	}
	refuse := func(seen *store.SlipRecord) error {
		if err := json.Unmarshal(seen.Result, out); err != nil {
			return internal(err)
		}
		first := time.Unix(seen.FirstAt, 0).In(quota.Bangkok).Format(time.RFC3339)
		return &api.Error{Code: api.DuplicateSlip, Data: dup(first)}
	}
	var result []byte
	switch {
	case seen != nil && policy == store.RefuseDuplicate:
		return true, refuse(seen)
	case seen != nil && policy == store.FreeSelfDuplicate && seen.VerifiedBy(r.BranchID):
		// Fast path: a self-duplicate is free and already known.
		if err := json.Unmarshal(seen.Result, out); err != nil {
			return true, internal(err)
		}
		return !seen.FirstSeenBy(r.JobID), nil
	case seen != nil:
		result = seen.Result
	default:
		// Slow path: ask the bank, but not when the answer could not be charged.
		if err := v.quotaLeft(sv, br); err != nil {
			return false, err
		}
		s, err := lookup(ctx)
		if err != nil {
			return false, bankError(err)
		}
		if result, err = json.Marshal(s); err != nil {
			return false, internal(err)
		}
	}
	c, err := v.Store.Consume(store.Verification{
		ServiceID: r.ServiceID, BranchID: r.BranchID, SlipKey: key, Result: result, Policy: policy,
		JobID: r.JobID,
		Usage: func(charged bool, at time.Time) store.Message { return v.usage(r, kind, api.OutcomeOK, charged, at) },
	})
	*reported = err == nil
	switch {
	case errors.Is(err, store.ErrDuplicate):
		return true, refuse(c.Seen)
	case errors.Is(err, store.ErrQuotaExceeded):
		return false, api.E(api.QuotaExceeded)
	case err != nil:
		return false, internal(err)
	}
	if c.Seen != nil {
		result = c.Seen.Result // the first verification's answer stands
	}
	if err := json.Unmarshal(result, out); err != nil {
		return false, internal(err)
	}
	return c.Seen != nil && !c.Seen.FirstSeenBy(r.JobID), nil
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
	_ = v.Store.Emit(v.usage(r, kind, outcome, false, v.now()))
}

func (v *Verifier) now() time.Time {
	if v.Now != nil {
		return v.Now()
	}
	return time.Now()
}

// usage returns the usage event of an attempt at time at as an outbox
// message.
func (v *Verifier) usage(r Request, kind, outcome string, billable bool, at time.Time) store.Message {
	mode := api.ModeSync
	if r.JobID != "" {
		mode = api.ModeAsync
	}
	ev := api.UsageEvent{
		EventID: uuid.NewString(), OccurredAt: at.UTC(), ServiceID: r.ServiceID, BranchID: r.BranchID,
		Kind: kind, API: r.Version.String(), Mode: mode, Outcome: outcome, Billable: billable, JobID: r.JobID,
	}
	value, err := json.Marshal(ev)
	if err != nil {
		panic(err) // strings, a bool and a time always encode
	}
	return store.Message{Topic: api.TopicUsage, Key: r.ServiceID, Value: value}
}

// Admit refuses a verification the caller could not make now: an unknown
// or refused service or branch, or quota already used up. It returns the
// branch it read. Async submit asks before it accepts jobs.
func (v *Verifier) Admit(serviceID, branchID string) (store.Branch, error) {
	sv, br, err := v.Store.Identity(serviceID, branchID)
	if err != nil {
		return br, identityError(err)
	}
	if err := checkState(sv, br); err != nil {
		return br, err
	}
	return br, v.quotaLeft(sv, br)
}

// quotaLeft refuses with QUOTA_EXCEEDED when the service or the branch has
// used up its quota of the current period.
func (v *Verifier) quotaLeft(sv store.Service, br store.Branch) error {
	u, err := v.Store.Usage(sv, br.ID)
	if err != nil {
		return internal(err)
	}
	if !u.Service.Allows(&sv.QuotaLimit) || !u.Branch.Allows(br.LimitQuota) {
		return api.E(api.QuotaExceeded)
	}
	return nil
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

func policyOf(r Request) store.Policy {
	switch {
	case r.Version == api.V2:
		return store.FreeSelfDuplicate
	case r.CheckDuplicate:
		return store.RefuseDuplicate
	}
	return store.ChargeAlways
}

// checkState refuses callers whose service or branch may not verify.
func checkState(sv store.Service, br store.Branch) error {
	switch {
	case sv.UserBanned:
		return api.E(api.UserBanned)
	case sv.State == store.StateBanned:
		return api.E(api.ServiceBanned)
	case sv.State == store.StateExpired:
		return api.E(api.ServiceExpired)
	case !br.Active:
		return api.E(api.BranchInactive)
	}
	return nil
}

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

// amountMatches compares amounts in satang, so 100.1 matches 100.10.
func amountMatches(want *float64, got float64) bool {
	return want != nil && math.Round(*want*100) == math.Round(got*100)
}
