package gateway_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slipverify/slipverify/core/api"
	"github.com/slipverify/slipverify/core/bank/httpbank"
	"github.com/slipverify/slipverify/core/bank/sandbox"
	"github.com/slipverify/slipverify/core/lib/testnet"
	"github.com/slipverify/slipverify/core/slip"
)

const seed = "testdata/seed.json"

func payload(ref string) string {
	return `{"payload":"` + slip.Bank{BankCode: "004", TransRef: ref}.Encode() + `"}`
}

// TestBearerAndStateErrors covers every refusal of a Bearer request, in both
// versions.
func TestBearerAndStateErrors(t *testing.T) {
	e := startEdge(t, testnet.StartCore(t, seed))
	v2 := func(hdr []string, status int, code string) {
		t.Helper()
		e.do(t, "GET", "/v2/info", "", hdr...).want(t, status, code)
	}
	v1 := func(hdr []string, status int, code string) {
		t.Helper()
		e.do(t, "GET", "/me", "", hdr...).want(t, status, code)
	}
	v2(nil, 401, "MISSING_API_KEY")
	v1(nil, 401, "unauthorized")
	v2([]string{"Authorization", "Basic abc"}, 401, "INVALID_API_KEY")
	v2(bearer("not-a-uuid"), 401, "INVALID_API_KEY")
	v2(bearer("00000000-0000-4000-8000-000000000000"), 401, "INVALID_API_KEY")
	v1(bearer("00000000-0000-4000-8000-000000000000"), 401, "unauthorized")
	v2(bearer(keyOff), 403, "BRANCH_INACTIVE")
	v1(bearer(keyOff), 403, "application_deactivated")
	v2(bearer(keyExp), 403, "SERVICE_EXPIRED")
	v1(bearer(keyExp), 403, "application_expired")
	v2(bearer(keyBan), 403, "SERVICE_BANNED")
	v1(bearer(keyBan), 403, "application_deactivated")
	v2(bearer(keyUser), 403, "USER_BANNED")
	v1(bearer(keyUser), 403, "application_deactivated")
	v2(bearer(keyIP), 403, "IP_NOT_ALLOWED") // the peer is 127.0.0.1
	v1(bearer(keyIP), 403, "access_denied")
	e.do(t, "GET", "/v2/nope", "", bearer(keyMain)...).want(t, 404, "NOT_FOUND")
	e.do(t, "GET", "/nope", "").want(t, 404, "not_found")
	e.do(t, "DELETE", "/v2/verify/bank", "").want(t, 404, "NOT_FOUND")
	// The utility routes answer in the v2 format at the root: their other
	// methods and paths under them too.
	e.do(t, "GET", "/qr/generate", "", bearer(keyMain)...).want(t, 404, "NOT_FOUND")
	e.do(t, "POST", "/banks", "", bearer(keyMain)...).want(t, 404, "NOT_FOUND")
	e.do(t, "DELETE", "/bank-accounts", "", bearer(keyMain)...).want(t, 404, "NOT_FOUND")
	e.do(t, "GET", "/verify/nope", "", bearer(keyMain)...).want(t, 404, "not_found")
	// v1 takes Bearer only: a signed v1 request has no key.
	e.do(t, "GET", "/me", "", e.signed(keyMain, secretA, "GET", "/me", "", 0, "")...).want(t, 401, "unauthorized")

	a := e.do(t, "GET", "/v2/info", "", bearer(keyMain)...)
	if a.status != 200 || get(a.body, "data", "branch", "id") != "a-main" {
		t.Fatalf("accepted request: %d %s", a.status, a.raw)
	}
	a = e.do(t, "POST", "/verify", payload("EDGEV1REF01"), bearer(keyMain)...)
	if a.status != 200 || a.body["status"] != 200.0 {
		t.Fatalf("v1 verify: %d %s", a.status, a.raw)
	}
}

// TestClientIP: the allow list sees X-Forwarded-For only from a trusted
// proxy, and then its right-most untrusted address.
func TestClientIP(t *testing.T) {
	core := testnet.StartCore(t, seed)
	direct := startEdge(t, core)
	direct.do(t, "GET", "/v2/info", "", append(bearer(keyIP), "X-Forwarded-For", "10.1.2.3")...).want(t, 403, "IP_NOT_ALLOWED")

	behind := startEdge(t, core, "SLIP_TRUSTED_PROXIES=127.0.0.0/8, 172.16.0.0/12")
	ok := func(xff ...string) {
		t.Helper()
		h := bearer(keyIP)
		for _, x := range xff {
			h = append(h, "X-Forwarded-For", x)
		}
		if a := behind.do(t, "GET", "/v2/info", "", h...); a.status != 200 {
			t.Errorf("XFF %q: %d %s", xff, a.status, a.raw)
		}
	}
	refused := func(xff ...string) {
		t.Helper()
		h := bearer(keyIP)
		for _, x := range xff {
			h = append(h, "X-Forwarded-For", x)
		}
		behind.do(t, "GET", "/v2/info", "", h...).want(t, 403, "IP_NOT_ALLOWED")
	}
	ok("10.1.2.3")                      // exact address
	ok("192.168.44.5")                  // CIDR
	ok("2001:db8::42")                  // IPv6 CIDR
	ok("8.8.8.8, 10.1.2.3, 172.16.0.9") // right-most untrusted
	ok("8.8.8.8", "10.1.2.3")           // several headers read as one list
	refused("10.1.2.3, 8.8.8.8")        // the client forged the left part
	refused("10.1.2.4")                 // not listed
	refused()                           // no header: the trusted peer itself
	behind.do(t, "GET", "/v2/info", "", append(bearer(keyMain), "X-Forwarded-For", "8.8.8.8")...).want(t, 200, "")
}

// TestHeaderInjection: internal headers a client sends never reach core.
func TestHeaderInjection(t *testing.T) {
	e := startEdge(t, testnet.StartCore(t, seed))
	h := append(bearer(keyMain),
		"X-Slip-Service", "svc-exp", "X-Slip-Branch", "exp-main", "X-Slip-Edge-Token", testnet.EdgeToken,
		"X-Slip-Version", "v1", "X-Slip-Client-Ip", "10.1.2.3", "X-Slip-B2b-Client", strings.Repeat("a", 64))
	a := e.do(t, "GET", "/v2/info", "", h...)
	if a.status != 200 || get(a.body, "data", "branch", "id") != "a-main" || get(a.body, "data", "application", "id") != "svc-a" {
		t.Fatalf("identity taken from client headers: %d %s", a.status, a.raw)
	}
	// Without a key, forged identity headers get nowhere.
	e.do(t, "GET", "/v2/info", "", "X-Slip-Service", "svc-a", "X-Slip-Branch", "a-main", "X-Slip-Edge-Token", testnet.EdgeToken).
		want(t, 401, "MISSING_API_KEY")
	if a.header.Get("X-Slip-Overload") != "" || a.header.Get("Server") == "core" {
		t.Errorf("internal response headers leak: %v", a.header)
	}
}

// TestNonceShares: the nonces of one signing secret (a B2B client's own
// requests and its service's branch keys') count together against
// SLIP_EDGE_NONCE_PER_CLIENT, and a service's clients together against
// SLIP_EDGE_NONCE_PER_SERVICE.
func TestNonceShares(t *testing.T) {
	e := startEdge(t, testnet.StartCore(t, seed), "SLIP_EDGE_NONCE_MAX=100", "SLIP_EDGE_NONCE_PER_SERVICE=3",
		"SLIP_EDGE_NONCE_PER_CLIENT=2")
	info := func(key string) answer {
		t.Helper()
		return e.do(t, "GET", "/v2/info", "", e.signed(key, secretA, "GET", "/v2/info", "", 0, "")...)
	}
	info(keyMain).want(t, 200, "")
	info(keyAFast).want(t, 200, "")
	info(keyMain).want(t, 429, "RATE_LIMIT_EXCEEDED") // secretA's 2, whichever key signed
	e.b2b(t, clientFull, secretA, "GET", "/b2b/branches", "").want(t, 429, "RATE_LIMIT_EXCEEDED")
	quota := func() answer {
		t.Helper()
		return e.b2b(t, clientRead, secretRead, "GET", "/b2b/branches/a-fast/quota", "") // svc-a's other client
	}
	quota().want(t, 200, "")
	quota().want(t, 429, "RATE_LIMIT_EXCEEDED") // svc-a's 3
}

// TestSignedRequests covers spec 5.2 on v2 routes signed with a branch UUID.
func TestSignedRequests(t *testing.T) {
	e := startEdge(t, testnet.StartCore(t, seed))
	body := `{"payload":"` + slip.Bank{BankCode: "004", TransRef: "SIGNEDREF01"}.Encode() + `","remark":"ค่าสินค้า ✓"}`
	h := e.signed(keyMain, secretA, "POST", "/v2/verify/bank", body, 0, "")
	a := e.do(t, "POST", "/v2/verify/bank", body, h...)
	if a.status != 200 || get(a.body, "data", "remark") != "ค่าสินค้า ✓" {
		t.Fatalf("signed verify with a non-ASCII body: %d %s", a.status, a.raw)
	}
	e.do(t, "POST", "/v2/verify/bank", body, h...).want(t, 401, "DUPLICATE_NONCE")
	// The key is not signed: the same request under another key signing with
	// the same secret is the same nonce.
	for i := 0; i+1 < len(h); i += 2 {
		if h[i] == "X-API-Key" {
			h[i+1] = keyAFast
		}
	}
	e.do(t, "POST", "/v2/verify/bank", body, h...).want(t, 401, "DUPLICATE_NONCE")

	// A request line in absolute form is signed over its path.
	var req strings.Builder
	req.WriteString("GET http://" + strings.TrimPrefix(e.url, "http://") + "/v2/info HTTP/1.1\r\nHost: edge.example\r\n")
	for hs := e.signed(keyMain, secretA, "GET", "/v2/info", "", 0, ""); len(hs) >= 2; hs = hs[2:] {
		req.WriteString(hs[0] + ": " + hs[1] + "\r\n")
	}
	if res := e.raw(t, req.String()+"\r\n"); res.StatusCode != 200 {
		body, _ := io.ReadAll(res.Body)
		t.Errorf("signed request in absolute form: %d %s", res.StatusCode, body)
	}

	// A query string is part of PATH; an empty body hashes the empty string.
	if a := e.do(t, "GET", "/v2/info?verbose=1", "", e.signed(keyMain, secretA, "GET", "/v2/info?verbose=1", "", 0, "")...); a.status != 200 {
		t.Errorf("signed GET with a query: %d %s", a.status, a.raw)
	}
	e.do(t, "GET", "/v2/info?verbose=2", "", e.signed(keyMain, secretA, "GET", "/v2/info?verbose=1", "", 0, "")...).
		want(t, 401, "INVALID_SIGNATURE")
	// Tampered body, wrong secret, wrong method.
	e.do(t, "POST", "/v2/verify/bank", body+" ", e.signed(keyMain, secretA, "POST", "/v2/verify/bank", body, 0, "")...).
		want(t, 401, "INVALID_SIGNATURE")
	e.do(t, "GET", "/v2/info", "", e.signed(keyMain, "svc-a-readonly-secret-0000", "GET", "/v2/info", "", 0, "")...).
		want(t, 401, "INVALID_SIGNATURE")
	e.do(t, "GET", "/v2/info", "", e.signed(keyMain, secretA, "POST", "/v2/info", "", 0, "")...).
		want(t, 401, "INVALID_SIGNATURE")
	// A request signed before the edge started may have been used before a
	// restart: its nonce cannot be checked, so it is refused.
	e.do(t, "GET", "/v2/info", "", e.signed(keyMain, secretA, "GET", "/v2/info", "", -2*time.Second, "")...).
		want(t, 401, "INVALID_TIMESTAMP")
	// Clock skew both ways, once the edge is up for longer than the window:
	// 5 minutes is allowed, 5 minutes and a second not.
	e.clock.Advance(5 * time.Minute)
	for _, skew := range []time.Duration{5 * time.Minute, -5 * time.Minute} {
		if a := e.do(t, "GET", "/v2/info", "", e.signed(keyMain, secretA, "GET", "/v2/info", "", skew, "")...); a.status != 200 {
			t.Errorf("skew %v: %d %s", skew, a.status, a.raw)
		}
	}
	for _, skew := range []time.Duration{5*time.Minute + time.Second, -5*time.Minute - time.Second, 24 * time.Hour} {
		e.do(t, "GET", "/v2/info", "", e.signed(keyMain, secretA, "GET", "/v2/info", "", skew, "")...).want(t, 401, "INVALID_TIMESTAMP")
	}
	// Malformed headers.
	good := e.signed(keyMain, secretA, "GET", "/v2/info", "", 0, "")
	bad := func(i int, v string, code string) {
		t.Helper()
		h := append([]string(nil), good...)
		h[i] = v
		e.do(t, "GET", "/v2/info", "", h...).want(t, 401, code)
	}
	bad(1, "", "MISSING_API_KEY")
	bad(1, "nope", "INVALID_API_KEY")
	bad(1, "00000000-0000-4000-8000-000000000000", "INVALID_API_KEY")
	bad(3, "", "INVALID_TIMESTAMP")
	bad(3, "12x", "INVALID_TIMESTAMP")
	bad(5, "not-a-uuid", "INVALID_SIGNATURE")
	bad(7, "", "INVALID_SIGNATURE")
	bad(7, strings.Repeat("0", 64), "INVALID_SIGNATURE")
	// A service without a B2B client cannot sign.
	e.do(t, "GET", "/v2/info", "", e.signed(keyNoSign, "anything-at-all-000", "GET", "/v2/info", "", 0, "")...).
		want(t, 401, "INVALID_SIGNATURE")

	// A nonce is remembered for the whole window, and forgotten after it.
	n := "0b1e8f3c-55d2-4a6e-9f41-000000000001"
	e.do(t, "GET", "/v2/info", "", e.signed(keyMain, secretA, "GET", "/v2/info", "", 0, n)...).want(t, 200, "")
	e.clock.Advance(4*time.Minute + 59*time.Second)
	e.do(t, "GET", "/v2/info", "", e.signed(keyMain, secretA, "GET", "/v2/info", "", -4*time.Minute-59*time.Second, n)...).
		want(t, 401, "DUPLICATE_NONCE")
	e.clock.Advance(2 * time.Minute)
	// The old timestamp is now outside the window, and a fresh one with the
	// same nonce is a new request.
	e.do(t, "GET", "/v2/info", "", e.signed(keyMain, secretA, "GET", "/v2/info", "", -7*time.Minute, n)...).want(t, 401, "INVALID_TIMESTAMP")
	if a := e.do(t, "GET", "/v2/info", "", e.signed(keyMain, secretA, "GET", "/v2/info", "", 0, n)...); a.status != 200 {
		t.Errorf("a nonce past its window: %d %s", a.status, a.raw)
	}
}

// TestRateLimits: the bank and wallet budgets are token buckets of one
// second, independent, only on verify routes, with the spec's headers.
func TestRateLimits(t *testing.T) {
	e := startEdge(t, testnet.StartCore(t, seed))
	for i := range 5 { // rate.bank is 5
		a := e.do(t, "POST", "/v2/verify/bank", payload(fmt.Sprintf("RATEREF%04d", i)), bearer(keyMain)...)
		if a.status != 200 || a.header.Get("X-RateLimit-Limit") != "5" || a.header.Get("X-RateLimit-Remaining") != strconv.Itoa(4-i) {
			t.Fatalf("request %d: %d %v %s", i, a.status, a.header, a.raw)
		}
		if a.header.Get("X-RateLimit-Reset") == "" {
			t.Fatalf("request %d: no X-RateLimit-Reset", i)
		}
	}
	a := e.do(t, "POST", "/v2/verify/bank", payload("RATEREF9999"), bearer(keyMain)...)
	a.want(t, 429, "RATE_LIMIT_EXCEEDED")
	if ra, _ := strconv.Atoi(a.header.Get("Retry-After")); ra < 1 || a.header.Get("X-RateLimit-Remaining") != "0" {
		t.Errorf("429 headers: %v", a.header)
	}
	// v1 draws from the same bank budget and answers in v1 form.
	e.do(t, "GET", "/verify?payload=x", "", bearer(keyMain)...).want(t, 429, "rate_limit_exceeded")
	// The wallet budget is untouched; utility routes are unlimited and bare.
	w := e.do(t, "POST", "/v2/verify/wallet", `{"payload":"`+slip.Wallet{EventType: "P2P", TransactionID: "123456", Date: "20112026"}.Encode()+`"}`, bearer(keyMain)...)
	if w.status != 200 || w.header.Get("X-RateLimit-Limit") != "3" || w.header.Get("X-RateLimit-Remaining") != "2" {
		t.Errorf("wallet budget: %d %v %s", w.status, w.header, w.raw)
	}
	if i := e.do(t, "GET", "/v2/info", "", bearer(keyMain)...); i.status != 200 || i.header.Get("X-RateLimit-Limit") != "" {
		t.Errorf("info carries rate headers: %v", i.header)
	}
	// Another branch has its own bucket.
	if a := e.do(t, "POST", "/v2/verify/bank", payload("RATEOTHER01"), bearer(keyAFast)...); a.status != 200 {
		t.Errorf("another branch limited: %d", a.status)
	}
	// Continuous refill: 200 ms gives one request back.
	e.clock.Advance(200 * time.Millisecond)
	if a := e.do(t, "POST", "/v2/verify/bank", payload("RATEREF0100"), bearer(keyMain)...); a.status != 200 {
		t.Errorf("after 200 ms: %d %s", a.status, a.raw)
	}
	e.do(t, "POST", "/v2/verify/bank", payload("RATEREF0101"), bearer(keyMain)...).want(t, 429, "RATE_LIMIT_EXCEEDED")

	// A refusal of a known branch on a limited route shows its limit too,
	// without taking from it; an unknown caller's has no limit to show.
	off := e.do(t, "POST", "/v2/verify/bank", payload("RATEOFF0001"), bearer(keyOff)...)
	off.want(t, 403, "BRANCH_INACTIVE")
	if off.header.Get("X-RateLimit-Limit") == "" || off.header.Get("X-RateLimit-Remaining") != off.header.Get("X-RateLimit-Limit") {
		t.Errorf("BRANCH_INACTIVE's rate headers: %v", off.header)
	}
	e.do(t, "POST", "/v2/verify/bank", payload("RATEOFF0002"), bearer(keyOff)...)
	if again := e.do(t, "POST", "/v2/verify/bank", payload("RATEOFF0003"), bearer(keyOff)...); again.header.Get("X-RateLimit-Remaining") != off.header.Get("X-RateLimit-Remaining") {
		t.Errorf("refusals took from the bucket: remaining %s, then %s", off.header.Get("X-RateLimit-Remaining"), again.header.Get("X-RateLimit-Remaining"))
	}
	unknown := e.do(t, "POST", "/v2/verify/bank", payload("RATEUNK0001"), bearer("00000000-0000-4000-8000-000000000000")...)
	if unknown.status != 401 || unknown.header.Get("X-RateLimit-Limit") != "" {
		t.Errorf("an unknown key: %d %v", unknown.status, unknown.header)
	}
}

// TestOverloadSignal: core marks an answer X-Slip-Overload when it holds
// more than SLIP_CORE_MAX_INFLIGHT requests; the edge keeps the header from
// the client and halves the rate factor at the interval's end.
func TestOverloadSignal(t *testing.T) {
	sb, err := sandbox.New(sandbox.Config{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	inner := httpbank.Handler(sb)
	arrived, release := make(chan struct{}), make(chan struct{})
	gatewaySrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		if bytes.Contains(body, []byte("HOLDREF")) {
			arrived <- struct{}{}
			<-release
		}
		inner.ServeHTTP(w, r)
	}))
	defer gatewaySrv.Close()
	core := testnet.StartCore(t, seed, "SLIP_BANK=http", "SLIP_BANK_URL="+gatewaySrv.URL, "SLIP_CORE_MAX_INFLIGHT=1")
	e := startEdge(t, core, "SLIP_EDGE_ADAPT_INTERVAL=1s")
	fast := bearer(keyFast) // a plan rate of 1,000,000/s: the limit shows the factor

	held := make(chan answer)
	go func() { held <- e.do(t, "POST", "/v2/verify/bank", payload("HOLDREF00001"), fast...) }()
	select {
	case <-arrived:
	case a := <-held:
		t.Fatalf("the request to hold was answered: %d %s", a.status, a.raw)
	}
	// core holds two requests now, one more than it takes without strain.
	second := e.do(t, "POST", "/v2/verify/bank", payload("OVERREF00001"), fast...)
	if second.status != 200 || second.header.Get(api.HeaderOverload) != "" {
		t.Errorf("the answer core marked: %d, overload header %q", second.status, second.header.Get(api.HeaderOverload))
	}
	close(release)
	if a := <-held; a.status != 200 || a.header.Get("X-RateLimit-Limit") != "1000000" {
		t.Fatalf("the held request: %d limit %s", a.status, a.header.Get("X-RateLimit-Limit"))
	}
	e.clock.Advance(time.Second)
	after := e.do(t, "POST", "/v2/verify/bank", payload("OVERREF00002"), fast...)
	if l, _ := strconv.Atoi(after.header.Get("X-RateLimit-Limit")); after.status != 200 || l > 1000000/2 {
		t.Errorf("after an interval with an overloaded answer: %d, limit %d, want at most half the plan", after.status, l)
	}
}

// TestHealth: the edge is healthy while core answers.
func TestHealth(t *testing.T) {
	core := testnet.StartCore(t, seed)
	e := startEdge(t, core)
	// The first checks, all at once (a load balancer's probes as the edge
	// starts): the edge asked core before it served any.
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			if a := e.do(t, "GET", "/health", ""); a.status != 200 || get(a.body, "data", "core") != "ok" {
				t.Errorf("health: %d %s", a.status, a.raw)
			}
		})
	}
	wg.Wait()
	if res := e.raw(t, "HEAD /health HTTP/1.1\r\nHost: edge\r\n\r\n"); res.StatusCode != 200 {
		t.Errorf("HEAD /health: %d", res.StatusCode)
	}
	core.Kill()
	e.clock.Advance(2 * time.Second)
	e.do(t, "GET", "/health", "").want(t, 503, "API_SERVER_ERROR")
	e.do(t, "GET", "/v2/info", "", bearer(keyMain)...).want(t, 500, "API_SERVER_ERROR")
}

// TestWrongEdgeToken: an edge whose SLIP_EDGE_TOKEN is not core's fails its
// health check and answers API_SERVER_ERROR, never INVALID_API_KEY: its
// callers' keys are not at fault, and no key is remembered as unknown.
func TestWrongEdgeToken(t *testing.T) {
	core := testnet.StartCore(t, seed)
	e := startEdge(t, core, "SLIP_EDGE_TOKEN=not-the-edge-token-0123456789abcdef")
	e.do(t, "GET", "/health", "").want(t, 503, "API_SERVER_ERROR")
	for range 2 { // the second time from the cache, were the answer cached
		e.do(t, "GET", "/v2/info", "", bearer(keyMain)...).want(t, 500, "API_SERVER_ERROR")
	}
	e.do(t, "GET", "/me", "", bearer(keyMain)...).want(t, 500, "api_server_error")
}

// TestCoreRestarted: core stopped and started again between two requests,
// so the edge's pooled connection to it was closed while idle: the next
// request goes on a new connection and is answered, not refused after the
// core timeout.
func TestCoreRestarted(t *testing.T) {
	core := testnet.StartCore(t, seed)
	e := startEdge(t, core)
	e.do(t, "POST", "/v2/verify/bank", payload("RESTARTREF001"), bearer(keyMain)...).want(t, 200, "")
	core.Stop() // core closes its idle connections as it stops
	testnet.StartCore(t, seed, "SLIP_CORE_ADDR="+core.Addr)
	start := time.Now()
	e.do(t, "POST", "/v2/verify/bank", payload("RESTARTREF002"), bearer(keyMain)...).want(t, 200, "")
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("the first request after the restart took %v", took)
	}
}

// TestEdgeTokenRotated: core restarted with another token while the edge
// holds its callers' records: their requests get API_SERVER_ERROR, not core's
// refusal of the edge.
func TestEdgeTokenRotated(t *testing.T) {
	core := testnet.StartCore(t, seed)
	e := startEdge(t, core)
	if a := e.do(t, "POST", "/v2/verify/bank", payload("ROTATEREF001"), bearer(keyMain)...); a.status != 200 {
		t.Fatalf("before the rotation: %d %s", a.status, a.raw)
	}
	core.Kill()
	testnet.StartCore(t, seed, "SLIP_CORE_ADDR="+core.Addr, "SLIP_EDGE_TOKEN=the-rotated-edge-token-0123456789abcdef")
	e.do(t, "POST", "/v2/verify/bank", payload("ROTATEREF002"), bearer(keyMain)...).want(t, 500, "API_SERVER_ERROR")
	e.do(t, "POST", "/verify", payload("ROTATEREF003"), bearer(keyMain)...).want(t, 500, "api_server_error")
}

// TestOversizedBody: a body over the edge's limit is refused from its
// Content-Length, before it is sent: the client gets its answer having sent
// only the headers.
func TestOversizedBody(t *testing.T) {
	e := startEdge(t, testnet.StartCore(t, seed))
	askAs := func(method, path string) string {
		// only the head and the body's first bytes are sent
		res := e.raw(t, fmt.Sprintf("%s %s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n{\"base64\":\"", method, path, keyMain, 50<<20))
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return fmt.Sprint(res.StatusCode, " ", string(b))
	}
	ask := func(path string) string { return askAs("POST", path) }
	if got := ask("/v2/verify/bank"); !strings.HasPrefix(got, "400 ") || !strings.Contains(got, `"IMAGE_SIZE_TOO_LARGE"`) {
		t.Errorf("v2: %s", got)
	}
	if got := ask("/verify"); got != `400 {"status":400,"message":"image_size_too_large"}` {
		t.Errorf("v1: %s", got)
	}
	// An async submit carries the same image; a batch, many small ones.
	if got := ask("/v2/verify/bank/async"); !strings.HasPrefix(got, "400 ") || !strings.Contains(got, `"IMAGE_SIZE_TOO_LARGE"`) {
		t.Errorf("async: %s", got)
	}
	for _, path := range []string{"/v2/verify/bank/async/batch", "/b2b/branches"} {
		if got := ask(path); !strings.Contains(got, `"VALIDATION_ERROR"`) {
			t.Errorf("%s: %s", path, got)
		}
	}
	// GET /verify takes its payload in the query: a big body is no image.
	if got := askAs("GET", "/verify?payload=x"); got != `400 {"status":400,"message":"invalid_request"}` {
		t.Errorf("GET /verify with a big body: %s", got)
	}
}

// TestOversizedChunkedBody: a chunked body that runs over the edge's limit
// is refused in its route's format, as one refused from its Content-Length
// is, although fasthttp has reset the request by then.
func TestOversizedChunkedBody(t *testing.T) {
	e := startEdge(t, testnet.StartCore(t, seed))
	chunk := strings.Repeat("A", 1<<20)
	ask := func(method, target string) string {
		t.Helper()
		conn := e.rawConn(t)
		// The edge answers before it has read all of it.
		go testnet.SendChunked(conn, method+" "+target+" HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "+keyMain+"\r\nContent-Type: application/json\r\n", chunk, 9)
		res, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatalf("%s %s: %v", method, target, err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return fmt.Sprint(res.StatusCode, " ", string(b))
	}
	for _, c := range []struct{ method, target, want string }{
		{"POST", "/v2/verify/bank", `"IMAGE_SIZE_TOO_LARGE"`},
		{"POST", "/v2/verify/bank/async?x=1", `"IMAGE_SIZE_TOO_LARGE"`},
		{"POST", "/v2/verify/bank/async/batch", `"VALIDATION_ERROR"`},
		{"POST", "/b2b/branches", `"VALIDATION_ERROR"`},
		{"POST", "/qr/generate", `"VALIDATION_ERROR"`},
		{"POST", "http://x/v2/verify/wallet", `"IMAGE_SIZE_TOO_LARGE"`},
		{"POST", "/verify", `{"status":400,"message":"image_size_too_large"}`},
		{"POST", "/api/v1/verify/wallet", `{"status":400,"message":"image_size_too_large"}`},
		{"GET", "/me", `{"status":400,"message":"invalid_request"}`},
	} {
		if got := ask(c.method, c.target); !strings.HasPrefix(got, "400 ") || !strings.Contains(got, c.want) {
			t.Errorf("%s %s: %s, want 400 %s", c.method, c.target, got, c.want)
		}
	}
}

// TestMalformedChunkedBody: a chunked body whose framing is broken is
// refused with VALIDATION_ERROR in its route's version, and the
// connection closed.
func TestMalformedChunkedBody(t *testing.T) {
	e := startEdge(t, testnet.StartCore(t, seed))
	for _, c := range []struct{ target, want string }{
		{"/v2/verify/bank", `"VALIDATION_ERROR"`},
		{"/b2b/branches", `"VALIDATION_ERROR"`},
		{"/verify", `{"status":400,"message":"invalid_request"}`},
		{"/api/v1/verify", `{"status":400,"message":"invalid_request"}`},
	} {
		res := e.raw(t, "POST "+c.target+" HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "+keyMain+
			"\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}XX0\r\n\r\n") // no CRLF after the chunk
		b, _ := io.ReadAll(res.Body)
		if res.StatusCode != 400 || !strings.Contains(string(b), c.want) || !res.Close {
			t.Errorf("POST %s: %d %s (close %v), want 400 %s", c.target, res.StatusCode, b, res.Close, c.want)
		}
	}
}
