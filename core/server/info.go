package server

import (
	"time"

	"github.com/valyala/fasthttp"

	"github.com/slipverify/slipverify/core/api"
	"github.com/slipverify/slipverify/core/quota"
)

// Info is the application and quota information of GET /v2/info and
// GET /me. Quota records have the shape of spec 2.2.
type Info struct {
	Application struct {
		ID    string `json:"id"`
		Name  string `json:"name"`
		State string `json:"state"`
	} `json:"application"`
	Branch struct {
		ID             string `json:"id"`
		Name           string `json:"name"`
		Main           bool   `json:"main"`
		LimitQuota     *int64 `json:"limitQuota"`
		UsedQuota      int64  `json:"usedQuota"`
		TotalUsedQuota int64  `json:"totalUsedQuota"`
	} `json:"branch"`
	Service struct {
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
}

func (s *Server) info(_ *fasthttp.RequestCtx, c caller) (any, error) {
	sv, br, err := s.store.Identity(c.serviceID, c.branchID)
	if err != nil {
		return nil, api.E(api.InvalidAPIKey)
	}
	u, err := s.store.Usage(sv, br.ID)
	if err != nil {
		return nil, api.Internal(err)
	}
	var in Info
	in.Application.ID, in.Application.Name, in.Application.State = sv.ID, sv.Name, sv.State
	in.Branch.ID, in.Branch.Name, in.Branch.Main = br.ID, br.Name, br.Main
	in.Branch.LimitQuota, in.Branch.UsedQuota, in.Branch.TotalUsedQuota = br.LimitQuota, u.Branch.Used, u.Branch.Total
	in.Service.LimitQuota, in.Service.UsedQuota, in.Service.TotalUsedQuota = sv.QuotaLimit, u.Service.Used, u.Service.Total
	in.RemainingQuota = max(0, sv.QuotaLimit-u.Service.Used)
	if br.LimitQuota != nil {
		in.RemainingQuota = max(0, min(in.RemainingQuota, *br.LimitQuota-u.Branch.Used))
	}
	start := time.Unix(u.PeriodStart, 0).In(quota.Bangkok)
	in.Period.Start = start.Format(time.RFC3339)
	in.Period.End = quota.PeriodEnd(start, sv.CycleAnchorDay).Format(time.RFC3339)
	return in, nil
}
