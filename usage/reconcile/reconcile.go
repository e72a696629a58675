// Package reconcile compares the ClickHouse ledger with core's quota
// counters, per service and branch: billable events in the service's
// current billing period against usedQuota, and all billable events
// against totalUsedQuota.
//
// Two differences are not drift, because core changes its counters without
// a usage event:
//   - a B2B quota reset sets a branch's usedQuota to 0 and keeps its
//     totalUsedQuota. A branch whose totals agree and whose ledger period
//     count is above core's is reported "reset": the ledger, which finance
//     bills from, keeps every billable event of the period. (The service's
//     counters are never reset.)
//   - deleting a branch deletes its counters. Its ledger rows stay and are
//     reported "deleted"; they still count in the service's row.
//
// Anything else, in either direction, is drift. The comparison on request
// (Run) is exact once the pipeline has drained; while events are in flight
// (in core's outbox, in Kafka, in a batch) the ledger trails core, so each
// report carries the consumer's lag. The periodic one (Watch) reads the
// ledger between two reads of core's counters and needs no drained
// pipeline (Between).
package reconcile

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"time"

	"github.com/slipverify/slipverify/core/api"
	"github.com/slipverify/slipverify/usage/chstore"
)

// Statuses of a row.
const (
	OK      = "ok"
	Drift   = "drift"
	Reset   = "reset"
	Deleted = "deleted"
)

// Row compares one service (BranchID empty) or branch.
type Row struct {
	ServiceID   string `json:"serviceId"`
	BranchID    string `json:"branchId,omitempty"`
	PeriodStart string `json:"periodStart"` // Bangkok date
	CoreUsed    int64  `json:"coreUsed"`
	LedgerUsed  int64  `json:"ledgerUsed"`
	CoreTotal   int64  `json:"coreTotal"`
	LedgerTotal int64  `json:"ledgerTotal"`
	Status      string `json:"status"`
	Units       int64  `json:"units,omitempty"` // a drifting row: how far the ledger is off core's counts
}

// Report is one reconciliation.
type Report struct {
	CoreAt time.Time `json:"coreAt"`      // when core read its counters
	Lag    int64     `json:"lagMessages"` // the consumer group's lag when read; -1: the brokers could not be asked
	Drift  int       `json:"drift"`       // rows with status drift
	Rows   []Row     `json:"rows"`
}

// Core reads core's quota counters over its internal route.
type Core struct {
	Addr   string // host:port
	Token  string // the edge token
	Client *http.Client
}

// Counters asks core for its counters.
func (c Core) Counters(ctx context.Context) (api.UsageCounters, error) {
	var out api.UsageCounters
	if c.Token == "" {
		return out, errors.New("reconcile: SLIP_EDGE_TOKEN is not set, so core's counters cannot be read")
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+c.Addr+api.PathUsageCounters, nil)
	if err != nil {
		return out, err
	}
	req.Header.Set(api.HeaderEdgeToken, c.Token)
	client := c.Client
	if client == nil {
		client = http.DefaultClient
	}
	res, err := client.Do(req)
	if err != nil {
		return out, fmt.Errorf("reconcile: core: %w", err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(io.LimitReader(res.Body, 64<<20))
	if err != nil {
		return out, fmt.Errorf("reconcile: core: %w", err)
	}
	var env struct {
		Success bool              `json:"success"`
		Data    api.UsageCounters `json:"data"`
		Error   struct{ Code, Message string }
	}
	if err := json.Unmarshal(body, &env); err != nil {
		return out, fmt.Errorf("reconcile: core answered %d with %.200q", res.StatusCode, body)
	}
	if res.StatusCode != http.StatusOK || !env.Success {
		return out, fmt.Errorf("reconcile: core answered %d %s: %s", res.StatusCode, env.Error.Code, env.Error.Message)
	}
	return env.Data, nil
}

// Anchors returns each service's billing-cycle anchor day and when it took
// effect.
func Anchors(c api.UsageCounters) map[string]chstore.Anchor {
	m := make(map[string]chstore.Anchor, len(c.Services))
	for _, s := range c.Services {
		a := chstore.Anchor{Day: s.CycleAnchorDay}
		if s.AnchorSince != nil {
			a.Since = *s.AnchorSince
		}
		m[s.ServiceID] = a
	}
	return m
}

// Compare reconciles core's counters with the ledger's billable events per
// day. Rows come services first, each followed by its branches, by id.
func Compare(counters api.UsageCounters, days []chstore.DayCount) Report {
	return Between(counters, counters, days)
}

// Between reconciles a ledger read after core's counters prev and before
// its counters cur: every event in the ledger was counted by cur, and every
// event counted by prev has reached the ledger unless the pipeline lags
// behind by longer than between the two reads. So a ledger count inside
// [prev, cur] is no drift, however many events were in flight at either
// read; Units of a drifting row is how far outside it is. Compare is the
// case prev = cur. Periods are cur's; a service whose period began after
// prev starts from 0. Rows come as in Compare.
func Between(prev, cur api.UsageCounters, days []chstore.DayCount) Report {
	type key struct{ service, branch string }
	ledger := map[key]*counts{}
	starts, ends := map[string]time.Time{}, map[string]time.Time{}
	for _, s := range cur.Services {
		starts[s.ServiceID], ends[s.ServiceID] = bangkokDate(s.PeriodStart), bangkokDate(s.PeriodEnd)
	}
	add := func(k key, d chstore.DayCount) {
		y, m, dd := d.Day.Date()
		day := time.Date(y, m, dd, 0, 0, 0, 0, time.UTC)
		s := ledger[k]
		if s == nil {
			s = new(counts)
			ledger[k] = s
		}
		s.total += int64(d.Billable)
		if start, ok := starts[d.ServiceID]; ok && !day.Before(start) && day.Before(ends[d.ServiceID]) {
			s.used += int64(d.Billable)
		}
	}
	for _, d := range days {
		add(key{d.ServiceID, ""}, d)
		add(key{d.ServiceID, d.BranchID}, d)
	}
	get := func(k key) counts {
		if s := ledger[k]; s != nil {
			delete(ledger, k)
			return *s
		}
		return counts{}
	}
	before := map[key]counts{}
	for _, s := range prev.Services {
		same := bangkokDate(s.PeriodStart).Equal(starts[s.ServiceID])
		at := func(used, total int64) counts {
			if !same {
				used = 0
			}
			return counts{used: used, total: total}
		}
		before[key{s.ServiceID, ""}] = at(s.Used, s.Total)
		for _, b := range s.Branches {
			before[key{s.ServiceID, b.BranchID}] = at(b.Used, b.Total)
		}
	}
	r := Report{CoreAt: cur.At}
	push := func(row Row) {
		if row.Status == Drift {
			r.Drift++
		}
		r.Rows = append(r.Rows, row)
	}
	for _, s := range cur.Services {
		period := starts[s.ServiceID].Format(time.DateOnly)
		k := key{s.ServiceID, ""}
		push(row(k.service, "", period, before[k], counts{s.Used, s.Total}, get(k), false))
		for _, b := range s.Branches {
			k := key{s.ServiceID, b.BranchID}
			push(row(k.service, k.branch, period, before[k], counts{b.Used, b.Total}, get(k), true))
		}
	}
	// What is left are services and branches core no longer has.
	var rest []Row
	for k, l := range ledger {
		status, units := Drift, l.total // a service core does not know is drift
		if k.branch != "" {
			if _, ok := starts[k.service]; ok {
				status, units = Deleted, 0
			}
		}
		rest = append(rest, Row{ServiceID: k.service, BranchID: k.branch, LedgerUsed: l.used, LedgerTotal: l.total, Status: status, Units: units})
	}
	sort.Slice(rest, func(i, j int) bool {
		if rest[i].ServiceID != rest[j].ServiceID {
			return rest[i].ServiceID < rest[j].ServiceID
		}
		return rest[i].BranchID < rest[j].BranchID
	})
	for _, row := range rest {
		push(row)
	}
	return r
}

// counts are billable events in the current period (used) and in all
// (total).
type counts struct{ used, total int64 }

// row decides one row's status: the ledger inside core's [lo, hi] on both
// counts is ok; a branch whose total is inside and whose period count is
// above core's was reset; anything else drifts, by its distance outside.
func row(service, branch, period string, lo, hi, ledger counts, resettable bool) Row {
	r := Row{ServiceID: service, BranchID: branch, PeriodStart: period, CoreUsed: hi.used, CoreTotal: hi.total,
		LedgerUsed: ledger.used, LedgerTotal: ledger.total, Status: OK}
	total, used := outside(ledger.total, lo.total, hi.total), outside(ledger.used, lo.used, hi.used)
	switch {
	case total == 0 && used == 0:
	case resettable && total == 0 && ledger.used > hi.used:
		r.Status = Reset
	default:
		r.Status, r.Units = Drift, max(total, used)
	}
	return r
}

// outside returns how far v lies outside [min(lo, hi), hi].
func outside(v, lo, hi int64) int64 {
	switch lo = min(lo, hi); {
	case v < lo:
		return lo - v
	case v > hi:
		return v - hi
	}
	return 0
}

// bangkokDate returns the Bangkok calendar date of t as midnight UTC, the
// way ClickHouse hands back a Date.
func bangkokDate(t time.Time) time.Time {
	y, m, d := t.In(bangkok).Date()
	return time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
}

var bangkok = time.FixedZone("Asia/Bangkok", 7*60*60)

// Run asks core for its counters, records the services' anchor days in the
// ledger, reads the ledger, and compares them. lag is the consumer's lag to
// report alongside (0 when unknown).
func Run(ctx context.Context, core Core, store *chstore.Store, lag int64) (Report, error) {
	counters, err := core.Counters(ctx)
	if err != nil {
		return Report{}, err
	}
	if err := store.SetAnchors(ctx, Anchors(counters), counters.At); err != nil {
		return Report{}, err
	}
	days, err := store.BillableByDay(ctx)
	if err != nil {
		return Report{}, err
	}
	r := Compare(counters, days)
	r.Lag = lag
	return r, nil
}
