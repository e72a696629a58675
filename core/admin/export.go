package admin

import (
	"errors"

	"github.com/valyala/fasthttp"

	"github.com/slipverify/slipverify/core/api"
	"github.com/slipverify/slipverify/core/lib/seedfile"
	"github.com/slipverify/slipverify/core/store"
)

// export answers every record in the seed file's format, without keys and
// secrets: what an operator keeps, or loads into another deployment once
// keys are issued again.
func (a *admin) export(_ *fasthttp.RequestCtx, _ caller) (any, error) {
	list, err := a.Store.Services()
	if err != nil {
		return nil, api.Internal(err)
	}
	out := seedfile.File{Services: []seedfile.Service{}}
	for _, sv := range list {
		e := seedfile.Service{ID: sv.ID, Name: sv.Name, State: sv.State, UserBanned: sv.UserBanned, Rate: sv.Rate,
			PlanName: sv.PlanName, ContactEmail: sv.ContactEmail,
			Branches: []seedfile.Branch{}, B2BClients: []seedfile.B2BClient{}, BankAccounts: []seedfile.BankAccount{}}
		e.Quota.Limit, e.Quota.CycleAnchorDay = sv.QuotaLimit, sv.CycleAnchorDay
		branches, err := a.Store.Branches(sv.ID)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return nil, api.Internal(err)
		}
		for _, b := range branches {
			e.Branches = append(e.Branches, seedfile.Branch{ID: b.ID, Name: b.Name, Main: b.Main, Active: b.Active, IPAllow: b.IPAllow,
				LimitQuota: b.LimitQuota, WebhookURL: b.WebhookURL})
		}
		clients, err := a.Store.Clients(sv.ID)
		if err != nil {
			return nil, api.Internal(err)
		}
		for _, c := range clients {
			e.B2BClients = append(e.B2BClients, seedfile.B2BClient{Name: c.Name, Permissions: c.Permissions})
		}
		accounts, err := a.Store.Accounts(sv.ID, "")
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return nil, api.Internal(err)
		}
		for _, acc := range accounts {
			e.BankAccounts = append(e.BankAccounts, seedfile.BankAccount{ID: acc.ID, BankCode: acc.BankCode, BankNumber: acc.BankNumber,
				Name: acc.Name, Type: acc.Type, Branches: acc.Branches})
		}
		out.Services = append(out.Services, e)
	}
	return out, nil
}
