package gateway_test

import (
	"strings"
	"testing"

	"github.com/slipverify/slipverify/core/lib/testnet"
	"github.com/slipverify/slipverify/core/slip"
)

// TestEncodedPathsKeepTheirRoute: a path whose percent-encoded slashes or
// dot segments would, decoded and cleaned, name another route reaches core
// as the route the edge matched and authorised, never as the other one. So
// an encoded path cannot leave a verification's rate budget behind, nor
// borrow one B2B permission for another.
func TestEncodedPathsKeepTheirRoute(t *testing.T) {
	e := startEdge(t, testnet.StartCore(t, seed))
	p := slip.Bank{BankCode: "004", TransRef: "015353134529BPM00777"}.Encode()
	// Matched as the unlimited job route; cleaned, it is v1's /verify (bank
	// budget, 5/s for this branch).
	smuggled := "/v2/verify/bank/jobs/..%2F..%2F..%2F..%2Fverify?payload=" + p
	for i := range 8 {
		a := e.do(t, "GET", smuggled, "", bearer(keyMain)...)
		if a.status == 200 || strings.Contains(a.raw, "transRef") {
			t.Fatalf("request %d: verified outside the rate budget: %d %s", i, a.status, a.raw)
		}
	}
	// Matched as GET /b2b/branches/{branch}/quota (quota:read, which this
	// client has); cleaned, it is GET /b2b/bank-accounts (bank-account:read,
	// which it has not).
	borrowed := "/b2b/branches/..%2Fbank-accounts%3F/quota"
	if a := e.b2b(t, clientRead, secretRead, "GET", borrowed, ""); a.status == 200 {
		t.Fatalf("quota:read listed bank accounts: %s", a.raw)
	}
	// The plain routes still answer.
	e.b2b(t, clientRead, secretRead, "GET", "/b2b/bank-accounts", "").want(t, 403, "PERMISSION_DENIED")
	e.do(t, "GET", "/verify?payload="+p, "", bearer(keyMain)...).want(t, 200, "")
}
