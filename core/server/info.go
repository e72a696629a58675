package server

import (
	"errors"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/slipverify/slipverify/core/api"
	"github.com/slipverify/slipverify/core/quota"
	"github.com/slipverify/slipverify/core/store"
)

// Info is the application and quota information of GET /v2/info. Quota
// records have the shape of spec 2.2; the commercial API's names
// (application.autoRenew and .quota, branch.isActive and .quota, account,
// product) stand beside them, null where the platform keeps no such value
// or the service has none.
type Info struct {
	Application InfoApplication `json:"application"`
	Branch      InfoBranch      `json:"branch"`
	Service     struct {
		LimitQuota     int64 `json:"limitQuota"`
		UsedQuota      int64 `json:"usedQuota"`
		TotalUsedQuota int64 `json:"totalUsedQuota"`
	} `json:"service"`
	// RemainingQuota is how many more verifications this branch may make in
	// the current period, under both its own and its service's limit.
	RemainingQuota int64 `json:"remainingQuota"`
	Period         struct {
		Start string `json:"start"`
		End   string `json:"end"`
	} `json:"period"`
	Account InfoAccount `json:"account"`
	Product InfoProduct `json:"product"`
}

// InfoApplication is the calling branch's service.
type InfoApplication struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	State     string `json:"state"`
	AutoRenew struct {
		Expired   bool    `json:"expired"`
		Quota     bool    `json:"quota"` // the quota renews each period: always true
		CreatedAt *string `json:"createdAt"`
		ExpiresAt *string `json:"expiresAt"`
	} `json:"autoRenew"`
	Quota struct {
		Used      int64 `json:"used"`
		Max       int64 `json:"max"`
		Remaining int64 `json:"remaining"` // the service's, whatever the branch's limit
		TotalUsed int64 `json:"totalUsed"`
	} `json:"quota"`
}

// InfoBranch is the calling branch.
type InfoBranch struct {
	ID             string `json:"id"`
	Name           string `json:"name"`
	Main           bool   `json:"main"`
	IsActive       bool   `json:"isActive"`
	LimitQuota     *int64 `json:"limitQuota"`
	UsedQuota      int64  `json:"usedQuota"`
	TotalUsedQuota int64  `json:"totalUsedQuota"`
	Quota          struct {
		Used      int64 `json:"used"`
		TotalUsed int64 `json:"totalUsed"`
	} `json:"quota"`
}

// InfoAccount is the account holder: the service's contact email (null
// when it has none) and no credit balance (0: the platform keeps none).
type InfoAccount struct {
	Email  *string `json:"email"`
	Credit int64   `json:"credit"`
}

// InfoProduct is the service's plan in force: its name (null when it has
// none).
type InfoProduct struct {
	Name *string `json:"name"`
}

// Me is the data of GET /me (v1), in the commercial API's names.
type Me struct {
	Application string `json:"application"` // the service's name
	UsedQuota   int64  `json:"usedQuota"`   // the service's, this period
	MaxQuota    *int64 `json:"maxQuota"`    // the service's limit; null: none
	// RemainingQuota is what this key can still verify this period: the
	// smaller of its branch's and its service's remaining; null when
	// neither has a limit.
	RemainingQuota *int64  `json:"remainingQuota"`
	ExpiredAt      *string `json:"expiredAt"`     // null: the service has no end date
	CurrentCredit  int64   `json:"currentCredit"` // 0: the platform keeps no credit balance
}

// usage is a caller's records and this period's counters.
type usage struct {
	sv store.Service
	br store.Branch
	u  store.Usage
}

// remaining is how many more verifications the branch may make this
// period, under both its own and its service's limit.
func (x usage) remaining() int64 {
	r := max(0, x.sv.QuotaLimit-x.u.Service.Used)
	if x.br.LimitQuota != nil {
		r = max(0, min(r, *x.br.LimitQuota-x.u.Branch.Used))
	}
	return r
}

func (s *Server) usage(c caller) (usage, error) {
	snap, err := s.store.Snapshot(c.serviceID, c.branchID, "")
	switch {
	case errors.Is(err, store.ErrNotFound):
		return usage{}, api.E(api.InvalidAPIKey)
	case err != nil:
		return usage{}, api.Internal(err)
	}
	return usage{snap.Service, snap.Branch, snap.Usage}, nil
}

func (s *Server) info(_ *fasthttp.RequestCtx, c caller) (any, error) {
	x, err := s.usage(c)
	if err != nil {
		return nil, err
	}
	sv, br, u := x.sv, x.br, x.u
	var in Info
	a := &in.Application
	a.ID, a.Name, a.State = sv.ID, sv.Name, sv.State
	a.AutoRenew.Expired, a.AutoRenew.Quota = sv.State == store.StateExpired, true
	a.AutoRenew.CreatedAt, a.AutoRenew.ExpiresAt = bangkok(sv.CreatedAt), bangkok(sv.ExpiresAt)
	a.Quota.Used, a.Quota.Max, a.Quota.TotalUsed = u.Service.Used, sv.QuotaLimit, u.Service.Total
	a.Quota.Remaining = max(0, sv.QuotaLimit-u.Service.Used)
	b := &in.Branch
	b.ID, b.Name, b.Main, b.IsActive = br.ID, br.Name, br.Main, br.Active
	b.LimitQuota, b.UsedQuota, b.TotalUsedQuota = br.LimitQuota, u.Branch.Used, u.Branch.Total
	b.Quota.Used, b.Quota.TotalUsed = u.Branch.Used, u.Branch.Total
	in.Service.LimitQuota, in.Service.UsedQuota, in.Service.TotalUsedQuota = sv.QuotaLimit, u.Service.Used, u.Service.Total
	in.RemainingQuota = x.remaining()
	in.Account.Email = sv.ContactEmail
	if sv.PlanName != "" {
		in.Product.Name = &sv.PlanName
	}
	start := time.Unix(u.PeriodStart, 0).In(quota.Bangkok)
	in.Period.Start = start.Format(time.RFC3339)
	in.Period.End = sv.PeriodEnd(start).Format(time.RFC3339)
	return in, nil
}

func (s *Server) me(_ *fasthttp.RequestCtx, c caller) (any, error) {
	x, err := s.usage(c)
	if err != nil {
		return nil, err
	}
	limit, remaining := x.sv.QuotaLimit, x.remaining()
	return Me{Application: x.sv.Name, UsedQuota: x.u.Service.Used, MaxQuota: &limit, RemainingQuota: &remaining,
		ExpiredAt: bangkok(x.sv.ExpiresAt)}, nil
}

// bangkok writes t as RFC 3339 in Bangkok time, as the periods are; nil
// stays nil (null).
func bangkok(t *time.Time) *string {
	if t == nil {
		return nil
	}
	s := t.In(quota.Bangkok).Format(time.RFC3339)
	return &s
}
