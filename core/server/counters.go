package server

import (
	"time"

	"github.com/valyala/fasthttp"

	"github.com/slipverify/slipverify/core/api"
	"github.com/slipverify/slipverify/core/quota"
)

// usageCounters answers the usage tier's reconciliation with every quota
// counter (api.UsageCounters).
func (s *Server) usageCounters(*fasthttp.RequestCtx, caller) (any, error) {
	at, all, err := s.store.Counters()
	if err != nil {
		return nil, api.Internal(err)
	}
	out := api.UsageCounters{At: at.UTC(), Services: make([]api.ServiceCounters, 0, len(all))}
	for _, sc := range all {
		start := time.Unix(sc.PeriodStart, 0).In(quota.Bangkok)
		c := api.ServiceCounters{
			ServiceID: sc.Service.ID, CycleAnchorDay: sc.Service.CycleAnchorDay,
			PeriodStart: start, PeriodEnd: sc.Service.PeriodEnd(start),
			Used: sc.Counter.Used, Total: sc.Counter.Total, Branches: make([]api.BranchCounters, 0, len(sc.Branches)),
		}
		if since := sc.Service.AnchorSince; since != 0 {
			t := time.Unix(since, 0).In(quota.Bangkok)
			c.AnchorSince = &t
		}
		for _, b := range sc.Branches {
			c.Branches = append(c.Branches, api.BranchCounters{BranchID: b.BranchID, Used: b.Counter.Used, Total: b.Counter.Total})
		}
		out.Services = append(out.Services, c)
	}
	return out, nil
}
