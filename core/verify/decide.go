package verify

import (
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
