package authcache

import (
	"testing"
	"time"

	"github.com/slipverify/slipverify/core/api"
)

// TestRefusalAt: the instants core gives (a service's end date, a rotated
// key's overlap, a previous secret's) refuse from that instant, whatever
// the cache holds, in the order of api.CallerRefusal.
func TestRefusalAt(t *testing.T) {
	end := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	before, after := end.Add(-time.Nanosecond), end
	for _, tc := range []struct {
		name          string
		auth          api.BranchAuth
		before, after api.Code
	}{
		{"end date", api.BranchAuth{ServiceState: api.StateActive, BranchActive: true, ServiceExpiresAt: &end}, 0, api.ServiceExpired},
		{"end date of an inactive branch", api.BranchAuth{ServiceState: api.StateActive, ServiceExpiresAt: &end}, api.BranchInactive, api.ServiceExpired},
		{"end date of a banned service", api.BranchAuth{ServiceState: api.StateBanned, BranchActive: true, ServiceExpiresAt: &end}, api.ServiceBanned, api.ServiceBanned},
		{"end date of a banned user", api.BranchAuth{ServiceState: api.StateActive, UserBanned: true, BranchActive: true, ServiceExpiresAt: &end}, api.UserBanned, api.UserBanned},
		{"a rotated key's overlap", api.BranchAuth{ServiceState: api.StateActive, BranchActive: true, KeyExpiresAt: &end}, 0, api.InvalidAPIKey},
		{"no instant", api.BranchAuth{ServiceState: api.StateActive, BranchActive: true}, 0, 0},
	} {
		p, err := branchPrincipal(tc.auth)
		if err != nil {
			t.Fatal(err)
		}
		if got := p.RefusalAt(before); got != tc.before {
			t.Errorf("%s, before: %v, want %v", tc.name, got, tc.before)
		}
		if got := p.RefusalAt(after); got != tc.after {
			t.Errorf("%s, from the instant: %v, want %v", tc.name, got, tc.after)
		}
	}
	c := clientPrincipal(api.ClientAuth{ServiceState: api.StateActive, Secret: "current-secret-0123456789",
		Previous: &api.PreviousSecret{Secret: "previous-secret-0123456789", ExpiresAt: end}, ServiceExpiresAt: &end})
	if c.PrevSigner == nil || !c.PrevEnds.Equal(end) || c.PrevNonceClient == c.NonceClient {
		t.Errorf("a client's previous secret: signer %v until %v, nonce scope %q (current %q)", c.PrevSigner != nil, c.PrevEnds, c.PrevNonceClient, c.NonceClient)
	}
	if c.RefusalAt(before) != 0 || c.RefusalAt(after) != api.ServiceExpired {
		t.Errorf("a client's end date: %v then %v", c.RefusalAt(before), c.RefusalAt(after))
	}
}
