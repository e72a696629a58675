package api

import "time"

// PathUsageCounters is core's internal route answering its quota counters
// (UsageCounters), for the usage tier's reconciliation. Like the auth
// routes it needs the edge token and is never forwarded from clients.
const PathUsageCounters = "/internal/usage/counters"

// UsageCounters is a consistent snapshot of every quota counter of core,
// taken at At.
type UsageCounters struct {
	At       time.Time         `json:"at"`
	Services []ServiceCounters `json:"services"`
}

// ServiceCounters is a service's counters: Used in the billing period
// [PeriodStart, PeriodEnd) (usedQuota), Total since it began
// (totalUsedQuota), and those of each of its branches.
type ServiceCounters struct {
	ServiceID      string `json:"serviceId"`
	CycleAnchorDay int    `json:"cycleAnchorDay"`
	// AnchorSince is when CycleAnchorDay took effect; absent: it always
	// was. The ledger cuts the periods of before it by the anchor then.
	AnchorSince *time.Time       `json:"anchorSince,omitempty"`
	PeriodStart time.Time        `json:"periodStart"`
	PeriodEnd   time.Time        `json:"periodEnd"`
	Used        int64            `json:"used"`
	Total       int64            `json:"total"`
	Branches    []BranchCounters `json:"branches"`
}

// BranchCounters is a branch's counters in its service's current period.
type BranchCounters struct {
	BranchID string `json:"branchId"`
	Used     int64  `json:"used"`
	Total    int64  `json:"total"`
}
