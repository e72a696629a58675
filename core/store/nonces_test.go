package store_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/slipverify/slipverify/core/api"
	"github.com/slipverify/slipverify/core/store"
)

// TestNonceClaimedOnce: copies of a signed request that reach the store at
// once, or one after another, are claimed once per service; the nonce is
// remembered as long as an edge would take the request, then forgotten.
func TestNonceClaimedOnce(t *testing.T) {
	c := newClock()
	st, _ := open(t, c, 0)
	at := c.Now()
	for i := range 200 {
		n := store.Nonce{Value: fmt.Sprintf("nonce-%03d", i), At: at}
		var wg sync.WaitGroup
		var mu sync.Mutex
		claimed := 0
		for range 4 {
			wg.Go(func() {
				err := st.ClaimNonce("svc-a", n)
				mu.Lock()
				defer mu.Unlock()
				if err == nil {
					claimed++
				} else if api.Internal(err).Code != api.DuplicateNonce {
					t.Errorf("claim %d: %v", i, err)
				}
			})
		}
		wg.Wait()
		if claimed != 1 {
			t.Fatalf("nonce %d: claimed %d times of 4", i, claimed)
		}
	}
	n := store.Nonce{Value: "nonce-000", At: at}
	if err := st.ClaimNonce("svc-b", n); err != nil {
		t.Errorf("another service's nonce: %v", err)
	}
	for _, after := range []time.Duration{0, api.NonceWindow} {
		if _, err := st.ExpireNonces(at.Add(after), 1000); err != nil {
			t.Fatal(err)
		}
		if err := st.ClaimNonce("svc-a", n); err == nil {
			t.Fatalf("a nonce was forgotten %v after its timestamp, inside the window", after)
		}
	}
	if m, err := st.ExpireNonces(at.Add(api.NonceWindow+2*time.Minute), 1000); err != nil || m == 0 {
		t.Fatalf("expiring the window's nonces: %d nonces, %v", m, err)
	}
	if err := st.ClaimNonce("svc-a", n); err != nil {
		t.Errorf("a nonce past the window is still refused: %v", err)
	}
}

// TestNonceGuardsChange: copies of one signed change that reach the store
// at once are applied once.
func TestNonceGuardsChange(t *testing.T) {
	c := newClock()
	st, _, _ := openTwoServices(t, c)
	for i := range 100 {
		ch := store.Change{Nonce: store.Nonce{Value: fmt.Sprintf("change-%03d", i), At: c.Now()}}
		var wg sync.WaitGroup
		var mu sync.Mutex
		applied := 0
		for range 2 {
			wg.Go(func() {
				_, err := st.UpdateBranch("svc-a", "a-2", ch, func(b *store.Branch, _ store.Usage) error { b.Name += "x"; return nil })
				mu.Lock()
				defer mu.Unlock()
				if err == nil {
					applied++
				}
			})
		}
		wg.Wait()
		if applied != 1 {
			t.Fatalf("change %d: applied %d times of 2", i, applied)
		}
	}
}
