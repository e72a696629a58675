package gateway_test

import (
	"bufio"
	"net"
	"strconv"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"
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
	e := startEdge(t, startCore(t, seed))
	conn, err := net.Dial("tcp", strings.TrimPrefix(e.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
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

// BenchmarkBearerPath is TestBearerPathAllocs as a benchmark: one accepted
// Bearer request through the edge to a real core.
func BenchmarkBearerPath(b *testing.B) {
	one := bearerRequest(b)
	b.ReportAllocs()
	for b.Loop() {
		one()
	}
}

// bearerRequest returns a function that sends one accepted Bearer request
// (a verification of a slip the branch verified before) straight into the
// edge's handler, reusing one RequestCtx, to a real core.
func bearerRequest(tb testing.TB) func() {
	e := startEdge(tb, startCore(tb, seed))
	h := e.gw.Handler()
	body := []byte(payload("ALLOCREF0001"))
	var ctx fasthttp.RequestCtx
	ctx.Init(new(fasthttp.Request), &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 5000}, nil)
	return func() {
		ctx.Request.Reset()
		ctx.Response.Reset()
		ctx.Request.Header.SetMethod("POST")
		ctx.Request.SetRequestURI("/v2/verify/bank")
		ctx.Request.Header.SetHost("edge.test")
		ctx.Request.Header.Set("Authorization", "Bearer "+keyFast)
		ctx.Request.Header.SetContentType("application/json")
		ctx.Request.SetBody(body)
		h(&ctx)
		if ctx.Response.StatusCode() != 200 {
			tb.Fatalf("status %d: %s", ctx.Response.StatusCode(), ctx.Response.Body())
		}
	}
}
