package testnet

import "testing"

// TestFreeAddrDistinct: addresses picked one after another, as a test does
// for the tiers of one stack, are all different (the kernel hands a port
// just closed out again within a few thousand picks).
func TestFreeAddrDistinct(t *testing.T) {
	seen := map[string]bool{}
	for range 2000 {
		a := FreeAddr(t)
		if seen[a] {
			t.Fatalf("FreeAddr returned %s twice", a)
		}
		seen[a] = true
	}
}
