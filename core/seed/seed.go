// Package seed turns a seed file (core/lib/seedfile: its format, reading
// and checks, which the bench shares) into the records core's store keeps.
// Loading is idempotent: records already stored are left as they are.
package seed

import (
	"github.com/slipverify/slipverify/core/lib/seedfile"
	"github.com/slipverify/slipverify/core/secret"
	"github.com/slipverify/slipverify/core/store"
)

// Records returns f's records as the store keeps them: keys as digests,
// secrets sealed with box.
func Records(f seedfile.File, box *secret.Box) store.Records {
	var r store.Records
	for _, s := range f.Services {
		r.Services = append(r.Services, store.Service{
			ID: s.ID, Name: s.Name, State: s.State, UserBanned: s.UserBanned,
			QuotaLimit: s.Quota.Limit, CycleAnchorDay: s.Quota.CycleAnchorDay, Rate: s.Rate,
			PlanName: s.PlanName, ContactEmail: s.ContactEmail,
		})
		for _, b := range s.Branches {
			r.Branches = append(r.Branches, Branch(b, box, s.ID))
		}
		for _, c := range s.B2BClients {
			r.B2BClients = append(r.B2BClients, B2BClient(c, box, s.ID))
		}
		for _, a := range s.BankAccounts {
			r.Accounts = append(r.Accounts, store.BankAccount{
				ID: a.ID, ServiceID: s.ID, BankCode: a.BankCode, BankNumber: a.BankNumber,
				Name: a.Name, Type: a.Type, Branches: a.Branches, Active: true,
			})
		}
	}
	return r
}

// Branch returns the branch b as the store keeps it for service serviceID:
// its key as a digest, its webhook secret sealed with box. The seed and the
// admin API's new services make branches with it.
func Branch(b seedfile.Branch, box *secret.Box, serviceID string) store.Branch {
	ips := b.IPAllow
	if len(ips) == 0 {
		ips = []string{"*"} // no list: every address, as a new branch gets
	}
	br := store.Branch{
		ID: b.ID, ServiceID: serviceID, Name: b.Name, Main: b.Main, Active: b.Active,
		IPAllow: ips, LimitQuota: b.LimitQuota, WebhookURL: b.WebhookURL,
		KeyDigest: store.Digest(b.Key),
	}
	if b.WebhookSecret != nil {
		br.WebhookSecret = box.Seal(*b.WebhookSecret, secret.WebhookLabel(b.ID))
	}
	return br
}

// B2BClient returns the B2B client c as the store keeps it for service
// serviceID: its key as a digest, its secret sealed with box. The seed and
// the admin API's new services and clients make clients with it.
func B2BClient(c seedfile.B2BClient, box *secret.Box, serviceID string) store.B2BClient {
	d := store.Digest(c.Key)
	return store.B2BClient{KeyDigest: d, ServiceID: serviceID, Name: c.Name,
		Secret: box.Seal(c.Secret, secret.ClientLabel(d)), Permissions: c.Permissions}
}
