package manifest

import (
	"testing"

	"github.com/slipverify/slipverify/core/seed"
	"github.com/slipverify/slipverify/edge/iplist"
)

// TestCoreAcceptsWhatTheEdgeReads: every IP allow list entry core stores
// (from the seed or /b2b) the edge can read; an entry it could not would
// fail every request of its branch.
func TestCoreAcceptsWhatTheEdgeReads(t *testing.T) {
	for _, e := range []string{
		"*", "203.0.113.7", "203.0.113.0/24", "2001:db8::1", "2001:db8::/32", "::ffff:203.0.113.7",
		"fe80::1%eth0", "fe80::%eth0/64", "203.0.113.7/24", "203.0.113", "", " 203.0.113.7", "0.0.0.0/0",
	} {
		_, err := iplist.Parse([]string{e})
		if seed.ValidIPEntry(e) && err != nil {
			t.Errorf("core accepts %q, the edge refuses it: %v", e, err)
		}
	}
}
