package verify_test

import (
	"fmt"
	"testing"

	"github.com/slipverify/slipverify/core/api"
	"github.com/slipverify/slipverify/core/quota"
	"github.com/slipverify/slipverify/core/store"
	"github.com/slipverify/slipverify/core/verify"
)

// TestDecide states the rules of a verification as the spec and the README
// state them (core/README.md, "How a verification is decided"): for each API
// version and checkDuplicate, a slip the service never verified, verified
// by this branch or by another, with quota left or not, the outcome and
// whether it is charged; and the caller states that refuse before any of
// it, in their order.
func TestDecide(t *testing.T) {
	const (
		lookup            = "look up, charge"       // ask the bank; charged when verified
		charged           = "from record, charge"   // answered from the record, charged
		free              = "from record, free"     // answered from the record, free
		duplicate         = "refuse duplicate_slip" // v1 only, free
		noQuota           = "refuse QUOTA_EXCEEDED"
		never, own, other = "never", "this branch", "another branch"
	)
	rows := []struct {
		version  api.Version
		checkDup bool
		seen     string
		quota    bool
		want     string
		isDup    bool
	}{
		// v2 (spec 4.1 rule 3): a self-duplicate is free, any other
		// verification consumes; checkDuplicate changes nothing.
		{api.V2, false, never, true, lookup, false},
		{api.V2, false, never, false, noQuota, false},
		{api.V2, false, own, true, free, true},
		{api.V2, false, own, false, free, true},
		{api.V2, false, other, true, charged, true},
		{api.V2, false, other, false, noQuota, false},
		{api.V2, true, never, true, lookup, false},
		{api.V2, true, own, false, free, true},
		{api.V2, true, other, true, charged, true},
		// v1 with checkDuplicate: a slip the service verified before is
		// refused, free, whoever verified it.
		{api.V1, true, never, true, lookup, false},
		{api.V1, true, never, false, noQuota, false},
		{api.V1, true, own, true, duplicate, false},
		{api.V1, true, own, false, duplicate, false},
		{api.V1, true, other, true, duplicate, false},
		{api.V1, true, other, false, duplicate, false},
		// v1 without it: every verification consumes.
		{api.V1, false, never, true, lookup, false},
		{api.V1, false, never, false, noQuota, false},
		{api.V1, false, own, true, charged, true},
		{api.V1, false, own, false, noQuota, false},
		{api.V1, false, other, true, charged, true},
		{api.V1, false, other, false, noQuota, false},
	}
	for _, row := range rows {
		name := fmt.Sprintf("%v checkDuplicate=%v seen by %s quota left=%v", row.version, row.checkDup, row.seen, row.quota)
		d := verify.Decide(snapshot(row.seen, row.quota, nil), verify.Request{Version: row.version, CheckDuplicate: row.checkDup, BranchID: "br"})
		if got := describe(d); got != row.want || d.Duplicate != row.isDup {
			t.Errorf("%s: %s (isDuplicate %v), want %s (isDuplicate %v)", name, got, d.Duplicate, row.want, row.isDup)
		}
	}

	// The async job that first recorded a slip, run again after a crash,
	// finds its own verification: free, and not a duplicate.
	job := verify.Decide(snapshot(own, true, func(s *store.Snapshot) { s.Slip.Job = "job-1" }),
		verify.Request{Version: api.V2, BranchID: "br", JobID: "job-1"})
	if describe(job) != free || job.Duplicate {
		t.Errorf("a job's own record: %s (isDuplicate %v), want %s and not a duplicate", describe(job), job.Duplicate, free)
	}

	// The caller's state refuses first, in this order, whatever the slip.
	states := []struct {
		name   string
		change func(*store.Snapshot)
		want   api.Code
	}{
		{"user banned (and service banned, branch inactive)", func(s *store.Snapshot) {
			s.Service.UserBanned, s.Service.State, s.Branch.Active = true, store.StateBanned, false
		}, api.UserBanned},
		{"service banned (and branch inactive)", func(s *store.Snapshot) { s.Service.State, s.Branch.Active = store.StateBanned, false }, api.ServiceBanned},
		{"service expired (and branch inactive)", func(s *store.Snapshot) { s.Service.State, s.Branch.Active = store.StateExpired, false }, api.ServiceExpired},
		{"branch inactive", func(s *store.Snapshot) { s.Branch.Active = false }, api.BranchInactive},
	}
	for _, st := range states {
		for _, seen := range []string{never, own, other} {
			for _, v := range []api.Version{api.V1, api.V2} {
				d := verify.Decide(snapshot(seen, true, st.change), verify.Request{Version: v, CheckDuplicate: true, BranchID: "br"})
				if d.Refuse != st.want || d.Charge || d.Lookup {
					t.Errorf("%s, %v, seen by %s: %+v, want refused with %v", st.name, v, seen, d, st.want)
				}
			}
		}
	}
}

// snapshot is the state of a verification by branch br of svc.
func snapshot(seen string, quotaLeft bool, change func(*store.Snapshot)) store.Snapshot {
	limit := int64(10)
	s := store.Snapshot{
		Service: store.Service{ID: "svc", State: store.StateActive, QuotaLimit: 100},
		Branch:  store.Branch{ID: "br", ServiceID: "svc", Active: true, LimitQuota: &limit},
		Usage:   store.Usage{Service: quota.Counter{Used: 5}, Branch: quota.Counter{Used: 3}},
	}
	if !quotaLeft {
		s.Usage.Branch.Used = limit
	}
	switch seen {
	case "this branch":
		s.Slip = &store.SlipRecord{Branches: []string{"other", "br"}}
	case "another branch":
		s.Slip = &store.SlipRecord{Branches: []string{"other"}}
	}
	if change != nil {
		change(&s)
	}
	return s
}

func describe(d verify.Decision) string {
	switch {
	case d.Refuse != 0:
		return "refuse " + d.Refuse.String()
	case d.Lookup && d.Charge:
		return "look up, charge"
	case d.Charge:
		return "from record, charge"
	case !d.Lookup:
		return "from record, free"
	}
	return fmt.Sprintf("%+v", d)
}
