package verify_test

import (
	"fmt"
	"testing"
	"time"

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
	// Conditions (spec-silent; core/README.md): a slip that fails the
	// client's conditions, or the branch's, is decided (answered and
	// charged) exactly as one that meets them; only the answer's
	// isAmountMatched and isDateMatched tell them apart (TestMatch).
	failing := verify.Conditions{MatchAmount: ptr(1.0), Conditions: store.Conditions{AmountMin: ptr(1e9), MaxAge: time.Second}}
	// No quota left is the branch's own limit used up, or the service's
	// (whatever the branch's): each row holds for both.
	exhaust := map[string]func(*store.Snapshot){
		"":                  func(*store.Snapshot) {},
		"branch exhausted":  func(s *store.Snapshot) { s.Usage.Branch.Used = *s.Branch.LimitQuota },
		"service exhausted": func(s *store.Snapshot) { s.Usage.Service.Used = s.Service.QuotaLimit },
	}
	for _, row := range rows {
		ways := []string{""}
		if !row.quota {
			ways = []string{"branch exhausted", "service exhausted"}
		}
		for _, way := range ways {
			for _, cond := range []struct {
				name string
				c    verify.Conditions
				def  store.Conditions
			}{{"no conditions", verify.Conditions{}, store.Conditions{}}, {"failed conditions", failing, store.Conditions{}},
				{"failed branch defaults", verify.Conditions{}, failing.Conditions}} {
				name := fmt.Sprintf("%v checkDuplicate=%v seen by %s quota left=%v %s, %s", row.version, row.checkDup, row.seen, row.quota, way, cond.name)
				snap := snapshot(row.seen, func(s *store.Snapshot) { s.Conditions = cond.def; exhaust[way](s) })
				d := verify.Decide(snap, verify.Request{Version: row.version, CheckDuplicate: row.checkDup, BranchID: "br", Conditions: cond.c})
				if got := describe(d); got != row.want || d.Duplicate != row.isDup {
					t.Errorf("%s: %s (isDuplicate %v), want %s (isDuplicate %v)", name, got, d.Duplicate, row.want, row.isDup)
				}
			}
		}
	}

	// The async job that first recorded a slip, run again after a crash,
	// finds its own verification: free, and not a duplicate.
	job := verify.Decide(snapshot(own, func(s *store.Snapshot) { s.Slip.Job = "job-1" }),
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
				d := verify.Decide(snapshot(seen, st.change), verify.Request{Version: v, CheckDuplicate: true, BranchID: "br"})
				if d.Refuse != st.want || d.Charge || d.Lookup {
					t.Errorf("%s, %v, seen by %s: %+v, want refused with %v", st.name, v, seen, d, st.want)
				}
			}
		}
	}
}

// snapshot is the state of a verification by branch br of svc.
func snapshot(seen string, change func(*store.Snapshot)) store.Snapshot {
	limit := int64(10)
	s := store.Snapshot{
		Service: store.Service{ID: "svc", State: store.StateActive, QuotaLimit: 100},
		Branch:  store.Branch{ID: "br", ServiceID: "svc", Active: true, LimitQuota: &limit},
		Usage:   store.Usage{Service: quota.Counter{Used: 5}, Branch: quota.Counter{Used: 3}},
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

// TestMatch states what the answer says of the conditions: isAmountMatched
// is true when amount conditions were set and all hold (to the satang),
// isDateMatched is set only when a date condition was and tells whether
// the slip's date is within every bound (inclusive); a request's kind of
// condition replaces the branch's defaults of that kind.
func TestMatch(t *testing.T) {
	at := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	date := "2026-11-22T15:00:00+07:00" // 08:00 UTC, two hours before at
	tm := func(s string) *time.Time { v, _ := time.Parse(time.RFC3339, s); return &v }
	type c = verify.Conditions
	type sc = store.Conditions
	rows := []struct {
		name   string
		cond   c
		amount bool
		date   string // "": isDateMatched not set
	}{
		{"none", c{}, false, ""},
		{"matchAmount to the satang", c{MatchAmount: ptr(100.1)}, true, ""},
		{"matchAmount off by a satang", c{MatchAmount: ptr(100.11)}, false, ""},
		{"min and max inclusive", c{Conditions: sc{AmountMin: ptr(100.10), AmountMax: ptr(100.1)}}, true, ""},
		{"below min", c{Conditions: sc{AmountMin: ptr(100.11)}}, false, ""},
		{"above max", c{Conditions: sc{AmountMax: ptr(100.09)}}, false, ""},
		{"matchAmount holds, max fails", c{MatchAmount: ptr(100.1), Conditions: sc{AmountMax: ptr(50.0)}}, false, ""},
		{"window inclusive, any offset", c{Conditions: sc{DateFrom: tm("2026-11-22T08:00:00Z"), DateTo: tm("2026-11-22T15:00:00+07:00")}}, false, "true"},
		{"before dateFrom", c{Conditions: sc{DateFrom: tm("2026-11-22T08:00:01Z")}}, false, "false"},
		{"after dateTo", c{Conditions: sc{DateTo: tm("2026-11-22T07:59:59Z")}}, false, "false"},
		{"within maxAge", c{Conditions: sc{MaxAge: 2 * time.Hour}}, false, "true"},
		{"older than maxAge", c{Conditions: sc{MaxAge: 2*time.Hour - time.Second}}, false, "false"},
	}
	for _, row := range rows {
		m := row.cond.Match(100.1, date, at)
		got := ""
		if m.Date != nil {
			got = fmt.Sprint(*m.Date)
		}
		if m.Amount != row.amount || got != row.date {
			t.Errorf("%s: amount %v date %q, want %v %q", row.name, m.Amount, got, row.amount, row.date)
		}
	}
	if m := (c{Conditions: sc{MaxAge: time.Hour}}).Match(1, "22/11/2026", at); m.Date == nil || *m.Date {
		t.Errorf("a date that does not read meets no date condition: %+v", m)
	}
	def := sc{AmountMin: ptr(500.0), MaxAge: time.Hour}
	if got := (c{MatchAmount: ptr(100.1)}).Over(def); got.AmountMin != nil || got.MaxAge != time.Hour {
		t.Errorf("matchAmount replaces the default amount range, not the date: %+v", got)
	}
	if got := (c{Conditions: sc{DateTo: tm("2026-11-23T00:00:00Z")}}).Over(def); got.MaxAge != 0 || got.AmountMin == nil {
		t.Errorf("dateTo replaces the default date bounds, not the amount: %+v", got)
	}
}
