package gateway_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/slipverify/slipverify/core/bank/httpbank"
	"github.com/slipverify/slipverify/core/bank/sandbox"
	"github.com/slipverify/slipverify/core/lib/testnet"
)

// TestAdaptiveLimitIgnoresClients: only core's own overload signal lowers
// the rate factor, which is every tenant's (TestOverloadSignal); not what a
// client's own request causes, nor a slow answer. Core takes 400 ms (by the
// edge's clock) for each bank lookup here; what would lower the factor, were
// it counted:
//   - an HTTP/1.0 request without Host (fasthttp's client would not send it
//     on: API_SERVER_ERROR, counted as core down);
//   - a request core refuses (its time is the request's doing);
//   - a big body, which takes core longer in proportion;
//   - a slow answer of core's.
func TestAdaptiveLimitIgnoresClients(t *testing.T) {
	var e *edge
	var slowBy atomic.Int64
	sb, err := sandbox.New(sandbox.Config{NotFound: []string{"NOTFOUND0001"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	inner := httpbank.Handler(sb)
	bankSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e.clock.Advance(time.Duration(slowBy.Load())) // core takes this long, by the edge's clock
		inner.ServeHTTP(w, r)
	}))
	defer bankSrv.Close()
	core := testnet.StartCore(t, seed, "SLIP_BANK=http", "SLIP_BANK_URL="+bankSrv.URL)
	e = startEdge(t, core, "SLIP_EDGE_ADAPT_INTERVAL=1s", "SLIP_EDGE_MIN_FACTOR=0.1")
	n := 0
	limit := func() string {
		t.Helper()
		e.clock.Advance(time.Second) // the interval of what came before has ended
		n++
		a := e.do(t, "POST", "/v2/verify/bank", payload(fmt.Sprintf("FASTREF%05d", n)), bearer(keyFast)...)
		a.want(t, 200, "")
		return a.header.Get("X-RateLimit-Limit")
	}
	check := func(what string) {
		t.Helper()
		if l := limit(); l != "1000000" {
			t.Fatalf("after %s: limit %s, want the plan's 1000000", what, l)
		}
	}

	for range 3 {
		res := e.raw(t, "GET /banks HTTP/1.0\r\nAuthorization: Bearer "+keyMain+"\r\n\r\n")
		b, _ := io.ReadAll(res.Body)
		if res.StatusCode != 200 || !strings.Contains(string(b), `"success":true`) {
			t.Errorf("GET /banks HTTP/1.0 without Host: %d %s", res.StatusCode, b)
		}
		check("an HTTP/1.0 request without Host")
	}

	slowBy.Store(int64(400 * time.Millisecond))
	for range 3 {
		e.do(t, "POST", "/v2/verify/bank", payload("NOTFOUND0001"), bearer(keyFast)...).want(t, 404, "SLIP_NOT_FOUND")
	}
	slowBy.Store(0)
	check("slow refusals")

	slowBy.Store(int64(400 * time.Millisecond))
	n++
	big := payload(fmt.Sprintf("BIGREF%05d", n))
	big = big[:len(big)-1] + strings.Repeat(" ", 1<<20) + "}" // 1 MiB of JSON white space
	e.do(t, "POST", "/v2/verify/bank", big, bearer(keyMain)...).want(t, 200, "")
	slowBy.Store(0)
	check("a slow answer to a big body")

	// Nor does a slow answer of core's: it is not core saying it is overloaded.
	slowBy.Store(int64(400 * time.Millisecond))
	n++
	e.do(t, "POST", "/v2/verify/bank", payload(fmt.Sprintf("SLOWREF%05d", n)), bearer(keyMain)...).want(t, 200, "")
	slowBy.Store(0)
	check("a slow answer")
}
