package gateway_test

import (
	"io"
	"strings"
	"testing"
	"time"

	"github.com/slipverify/slipverify/core/lib/testnet"
)

// TestAbsoluteFormAnyTarget: a request target in absolute form is answered
// as its path is, whatever scheme it names and with no host in it: the edge
// speaks plain HTTP to core, and fasthttp's client would not send an
// https:// target on (API_SERVER_ERROR for a request core never saw) and
// would send one without a host with an empty Host, which core's server
// refuses as unreadable (a text/plain 400, or a closed connection the edge
// took for core failing, lowering every tenant's rate).
func TestAbsoluteFormAnyTarget(t *testing.T) {
	e := startEdge(t, testnet.StartCore(t, seed), "SLIP_EDGE_ADAPT_INTERVAL=1s")
	for _, c := range []struct{ target, want string }{
		{"http://x/v2/info", `"success":true`},
		{"https://x/v2/info", `"success":true`},
		{"HTTPS://x/banks", `"success":true`},
		{"https://x/me", `"status":200`},
		{"http:///v2/info", `"success":true`},
		{"http:///me", `"status":200`},
		{"https:///api/v1/me", `"status":200`},
	} {
		for range 3 {
			res := e.raw(t, "GET "+c.target+" HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "+keyMain+"\r\nConnection: close\r\n\r\n")
			b, _ := io.ReadAll(res.Body)
			if res.StatusCode != 200 || !strings.Contains(string(b), c.want) {
				t.Errorf("GET %s: %d %.200s", c.target, res.StatusCode, b)
			}
		}
	}
	e.clock.Advance(time.Second) // the interval of these requests has ended
	a := e.do(t, "POST", "/v2/verify/bank", payload("ABSREF000001"), bearer(keyFast)...)
	a.want(t, 200, "")
	if l := a.header.Get("X-RateLimit-Limit"); l != "1000000" {
		t.Errorf("another tenant's limit: %s, want the plan's 1000000", l)
	}
}
