package gateway_test

import (
	"bufio"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/slipverify/slipverify/core/lib/testnet"
)

// TestBearerPathAllocs: an accepted Bearer request on a rate-limited route,
// forwarded to core and answered, allocates nothing in the edge once warm.
func TestBearerPathAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	one := bearerRequest(t)
	for range 50 {
		one() // warm pools, the auth cache and the connection to core
	}
	if n := testing.AllocsPerRun(200, one); n != 0 {
		t.Errorf("Bearer path allocates %.1f times per request, want 0", n)
	}
}

// TestRateHeaderCasing reads the raw response: the rate headers are written
// exactly as the spec spells them.
func TestRateHeaderCasing(t *testing.T) {
	e := startEdge(t, testnet.StartCore(t, seed))
	conn := e.rawConn(t)
	body := payload("CASINGREF01")
	conn.Write([]byte("POST /v2/verify/bank HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + keyMain +
		"\r\nContent-Type: application/json\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\nConnection: close\r\n\r\n" + body))
	var head strings.Builder
	r := bufio.NewReader(conn)
	for {
		line, err := r.ReadString('\n')
		head.WriteString(line)
		if err != nil || line == "\r\n" {
			break
		}
	}
	for _, h := range []string{"X-RateLimit-Limit: ", "X-RateLimit-Remaining: ", "X-RateLimit-Reset: "} {
		if !strings.Contains(head.String(), "\r\n"+h) {
			t.Errorf("response lacks %q:\n%s", h, head.String())
		}
	}
}

// TestHeaderNameCasing sends the credential headers with their names in
// lower case on the wire: the edge reads them by their canonical names,
// which holds because fasthttp normalises names as it parses them.
func TestHeaderNameCasing(t *testing.T) {
	e := startEdge(t, testnet.StartCore(t, seed))
	body := payload("CASINGREF02")
	signed := e.signed(keyMain, secretA, "POST", "/v2/verify/bank", body, 0, "")
	for name, headers := range map[string][]string{
		"bearer": {"authorization", "Bearer " + keyFast},
		"signed": signed,
	} {
		conn := e.rawConn(t)
		req := "POST /v2/verify/bank HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n"
		for i := 0; i+1 < len(headers); i += 2 {
			req += strings.ToLower(headers[i]) + ": " + headers[i+1] + "\r\n"
		}
		conn.Write([]byte(req + "Connection: close\r\n\r\n" + body))
		status, err := bufio.NewReader(conn).ReadString('\n')
		conn.Close()
		if err != nil || !strings.HasPrefix(status, "HTTP/1.1 200 ") {
			t.Errorf("%s, lower-case header names: %q %v", name, status, err)
		}
	}
}

// BenchmarkBearerPath is TestBearerPathAllocs as a benchmark: one accepted
// Bearer request through the edge to a real core.
func BenchmarkBearerPath(b *testing.B) {
	one := bearerRequest(b)
	b.ReportAllocs()
	for b.Loop() {
		one()
	}
}

// TestSignedPathAllocs: an accepted signed request (a new nonce each time)
// on a rate-limited route, forwarded to core and answered, allocates nothing
// in the edge once warm, except when the nonce store's maps grow, which
// happens less than once per request.
func TestSignedPathAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	one := signedRequest(t, 300)
	for range 50 {
		one()
	}
	if n := testing.AllocsPerRun(200, one); n != 0 {
		t.Errorf("signed path allocates %.1f times per request, want 0", n)
	}
}

// BenchmarkSignedPath is TestSignedPathAllocs as a benchmark.
func BenchmarkSignedPath(b *testing.B) {
	one := signedRequest(b, 1<<14)
	b.ReportAllocs()
	for b.Loop() {
		one()
	}
}

// bearerRequest returns a function that sends one accepted Bearer request
// (a verification of a slip the branch verified before) straight into the
// edge's handler, reusing one RequestCtx, to a real core.
func bearerRequest(tb testing.TB) func() {
	e := startEdge(tb, testnet.StartCore(tb, seed))
	return sendRequest(tb, e, payload("ALLOCREF0001"), func(h *fasthttp.RequestHeader) {
		h.Set("Authorization", "Bearer "+keyFast)
	})
}

// signedRequest returns a function that sends the next of n requests signed
// ahead with keyMain, each with a nonce of its own and stamped a second
// after the one before; the edge's clock moves on as much per request, so
// the branch's bank budget (5/s) always has a token and every timestamp is
// the clock's. Past n requests the nonces repeat, and the edge refuses them.
func signedRequest(tb testing.TB, n int) func() {
	// Records outlive the run: the clock passes any shorter TTL.
	e := startEdge(tb, testnet.StartCore(tb, seed), "SLIP_EDGE_AUTH_TTL=24h")
	body := payload("ALLOCREF0002")
	heads := make([][]string, n)
	for i := range heads {
		heads[i] = e.signed(keyMain, secretA, "POST", "/v2/verify/bank", body, time.Duration(i+1)*time.Second, "")
	}
	i := 0
	return sendRequest(tb, e, body, func(h *fasthttp.RequestHeader) {
		e.clock.Advance(time.Second)
		for j := 0; j+1 < len(heads[i%n]); j += 2 {
			h.Set(heads[i%n][j], heads[i%n][j+1])
		}
		i++
	})
}

// sendRequest returns a function that sends POST /v2/verify/bank with body
// and the headers auth sets straight into the edge's handler, reusing one
// RequestCtx, and fails unless the edge answers 200.
func sendRequest(tb testing.TB, e *edge, body string, auth func(*fasthttp.RequestHeader)) func() {
	h := e.gw.Handler()
	raw := []byte(body)
	var ctx fasthttp.RequestCtx
	ctx.Init(new(fasthttp.Request), &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 5000}, nil)
	return func() {
		ctx.Request.Reset()
		ctx.Response.Reset()
		ctx.Request.Header.SetMethod("POST")
		ctx.Request.SetRequestURI("/v2/verify/bank")
		ctx.Request.Header.SetHost("edge.test")
		auth(&ctx.Request.Header)
		ctx.Request.Header.SetContentType("application/json")
		ctx.Request.SetBody(raw)
		h(&ctx)
		if ctx.Response.StatusCode() != 200 {
			tb.Fatalf("status %d: %s", ctx.Response.StatusCode(), ctx.Response.Body())
		}
	}
}
