package main

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/slipverify/slipverify/core/lib/testnet"
)

// TestOversizedChunkedBodyInRouteFormat: the edge program refuses a chunked
// body that runs over its 8 MiB limit in the version of the request's
// route, as it refuses one whose Content-Length is over it: fasthttp has
// reset the request by then, so only the server's HeaderReceived hook knows
// the route. None of them reaches core.
func TestOversizedChunkedBodyInRouteFormat(t *testing.T) {
	s := startStack(t, nil)
	chunk := strings.Repeat("A", 1<<20)
	for _, c := range []struct{ name, head, want string }{
		{"v2", "POST /v2/verify/bank?case=c00 HTTP/1.1\r\nAuthorization: Bearer " + keyMain + "\r\n", `{"success":false,"error":{"code":"IMAGE_SIZE_TOO_LARGE"`},
		{"v2 async", "POST /v2/verify/bank/async?case=c01 HTTP/1.1\r\nAuthorization: Bearer " + keyMain + "\r\n", `{"success":false,"error":{"code":"IMAGE_SIZE_TOO_LARGE"`},
		{"b2b", "POST /b2b/branches?case=c02 HTTP/1.1\r\nX-API-Key: " + clientKey + "\r\n", `{"success":false,"error":{"code":"VALIDATION_ERROR"`},
		{"v1", "POST /verify?case=c03 HTTP/1.1\r\nAuthorization: Bearer " + keyMain + "\r\n", `{"status":400,"message":"image_size_too_large"}`},
	} {
		conn, err := net.Dial("tcp", s.edgeAddr)
		if err != nil {
			t.Fatal(err)
		}
		conn.SetDeadline(time.Now().Add(10 * time.Second))
		// The edge answers before it has read all of it.
		go testnet.SendChunked(conn, c.head+"Host: edge\r\nContent-Type: application/json\r\n", chunk, 9)
		res, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Errorf("%s: no answer: %v", c.name, err)
			conn.Close()
			continue
		}
		b, _ := io.ReadAll(res.Body)
		conn.Close()
		if res.StatusCode != 400 || !strings.HasPrefix(string(b), c.want) {
			t.Errorf("%s: %d %s, want 400 %s", c.name, res.StatusCode, b, c.want)
		}
	}
	for _, r := range s.rec.requests(t) {
		if strings.Contains(r.uri, "case=c0") {
			t.Errorf("core received %s %.60s", r.method, r.uri)
		}
	}
}
