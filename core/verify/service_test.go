package verify_test

import (
	"context"
	"sync"
	"testing"

	"github.com/slipverify/slipverify/core/bank"
	"github.com/slipverify/slipverify/core/slip"
)

// services is a bank.Connector that notes the service each lookup's
// context names, and asks the connector under it.
type services struct {
	bank.Connector
	mu  sync.Mutex
	got []string
}

func (s *services) note(ctx context.Context) {
	s.mu.Lock()
	s.got = append(s.got, bank.Service(ctx))
	s.mu.Unlock()
}

func (s *services) Bank(ctx context.Context, bankCode, transRef string) (bank.Slip, error) {
	s.note(ctx)
	return s.Connector.Bank(ctx, bankCode, transRef)
}

func (s *services) Wallet(ctx context.Context, id string) (bank.WalletSlip, error) {
	s.note(ctx)
	return s.Connector.Wallet(ctx, id)
}

// TestLookupsNameTheirService: the bank is told whose lookup it runs, so a
// bank's connector can share its capacity among services.
func TestLookupsNameTheirService(t *testing.T) {
	v := newVerifier(t, 10)
	up := &services{Connector: v.Upstream}
	v.Upstream = up
	ctx := context.Background()
	if _, err := v.Bank(ctx, request(slip.Bank{BankCode: "004", TransRef: "SERVICE0001"}.Encode())); err != nil {
		t.Fatal(err)
	}
	wallet := slip.Wallet{EventType: "P2P", TransactionID: "50001234567890", Date: "01012024"}.Encode()
	if _, err := v.Wallet(ctx, request(wallet)); err != nil {
		t.Fatal(err)
	}
	if len(up.got) != 2 || up.got[0] != "svc" || up.got[1] != "svc" {
		t.Errorf("lookups named services %q, want svc twice", up.got)
	}
}
