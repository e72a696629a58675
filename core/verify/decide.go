package verify

import (
	"math"
	"time"

	"github.com/slipverify/slipverify/core/api"
	"github.com/slipverify/slipverify/core/store"
)

// Decision is what a verification does, as Decide rules it.
type Decision struct {
	// Refuse, when set, refuses the verification with that code: nothing is
	// charged or remembered.
	Refuse api.Code
	// Lookup asks the bank: the service has no record of the slip.
	Lookup bool
	// Charge consumes one unit of the branch's and the service's quota.
	// Without Lookup the answer comes from the slip's record.
	Charge bool
	// Duplicate is what the answer says as isDuplicate.
	Duplicate bool
}

// Decide is the rule of every verification, from what the store holds (s)
// and what the client asked (r). It runs before the bank is asked, and
// again in the store's write transaction on a fresh snapshot, so a
// verification is charged only as the state it is written into allows. The
// rules (spec 4.1 rule 3, spec 5.1 rule 4, ARCHITECTURE "Quota"; the table
// of TestDecide):
//
//  1. A caller that may not verify is refused (api.CallerRefusal).
//  2. v1 with checkDuplicate: a slip the service verified before is
//     refused with DUPLICATE_SLIP, free.
//  3. v2: a slip the same branch verified before is answered from its
//     record, free.
//  4. Anything else consumes one unit of quota, refused with
//     QUOTA_EXCEEDED when the branch or the service has none left: a slip
//     verified before (by another branch on v2, by anyone on v1 without
//     checkDuplicate) is answered from its record; a new one is looked up.
//
// The conditions a v2 client sets on the slip (Conditions: matchAmount,
// amountMin, amountMax, dateFrom, dateTo, maxAge, and the branch's
// defaults) are not part of the decision: a real slip that fails them is
// answered and charged exactly as one that meets them, with
// isAmountMatched or isDateMatched false (Match). The bank was asked and
// the slip is real; the answer tells the merchant it is not the payment
// expected, as a failed matchAmount always has.
//
// isDuplicate is true for a slip verified before, except on the repeated
// attempt of the async job that first recorded it (after a crash).
func Decide(s store.Snapshot, r Request) Decision {
	if code := api.CallerRefusal(s.Service.UserBanned, s.Service.State, s.Branch.Active); code != 0 {
		return Decision{Refuse: code}
	}
	seen := s.Slip
	dup := seen != nil && !seen.FirstSeenBy(r.JobID)
	switch {
	case seen != nil && r.Version == api.V1 && r.CheckDuplicate:
		return Decision{Refuse: api.DuplicateSlip}
	case seen != nil && r.Version == api.V2 && seen.VerifiedBy(r.BranchID):
		return Decision{Duplicate: dup}
	case !s.QuotaLeft():
		return Decision{Refuse: api.QuotaExceeded}
	}
	return Decision{Lookup: seen == nil, Charge: true, Duplicate: dup}
}

// Conditions are what a v2 client expects of a slip: MatchAmount exactly,
// and the bounds of store.Conditions. A request's conditions of one kind
// (amount, date) replace the branch's defaults of that kind (Over).
type Conditions struct {
	MatchAmount *float64
	store.Conditions
}

// Over returns c with the kinds of condition it leaves unset taken from
// the branch's defaults d.
func (c Conditions) Over(d store.Conditions) Conditions {
	if c.MatchAmount == nil && !c.HasAmount() {
		c.AmountMin, c.AmountMax = d.AmountMin, d.AmountMax
	}
	if !c.HasDate() {
		c.DateFrom, c.DateTo, c.MaxAge = d.DateFrom, d.DateTo, d.MaxAge
	}
	return c
}

// Matched is what the answer says of the conditions: isAmountMatched, true
// when amount conditions were set and every one holds (false when none
// was set, as it always was without matchAmount), and isDateMatched, set
// only when a date condition was.
type Matched struct {
	Amount bool
	Date   *bool
}

// Match checks c against a slip of amount and date (RFC 3339, as banks
// answer it), verified at time at (maxAge counts back from it). Amounts
// compare in satang, so 100.1 matches 100.10; a date bound is inclusive,
// and a date that does not read meets none.
func (c Conditions) Match(amount float64, date string, at time.Time) Matched {
	var m Matched
	if c.MatchAmount != nil || c.HasAmount() {
		got := satang(amount)
		m.Amount = (c.MatchAmount == nil || satang(*c.MatchAmount) == got) &&
			(c.AmountMin == nil || satang(*c.AmountMin) <= got) &&
			(c.AmountMax == nil || satang(*c.AmountMax) >= got)
	}
	if c.HasDate() {
		d, err := time.Parse(time.RFC3339, date)
		ok := err == nil &&
			(c.DateFrom == nil || !d.Before(*c.DateFrom)) &&
			(c.DateTo == nil || !d.After(*c.DateTo)) &&
			(c.MaxAge == 0 || !d.Before(at.Add(-c.MaxAge)))
		m.Date = &ok
	}
	return m
}

func satang(x float64) float64 { return math.Round(x * 100) }
