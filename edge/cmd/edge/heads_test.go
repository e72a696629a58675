package main

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestUnreadableHeadsInRouteFormat: the edge program refuses a request it
// cannot read in the version of the request's route, at once, and closes
// the connection: a head over 4 KiB, a head whose lines end in bare line
// feeds (which fasthttp alone would answer only at the 30-second read
// timeout), a chunk size that is no number. None of them reaches core.
func TestUnreadableHeadsInRouteFormat(t *testing.T) {
	s := startStack(t, nil)
	const (
		v1 = `{"status":400,"message":"invalid_request"}`
		v2 = `"VALIDATION_ERROR"`
	)
	auth := "Authorization: Bearer " + keyMain + "\r\n"
	big := "X-Pad: " + strings.Repeat("a", 5000) + "\r\n"
	chunked := "Transfer-Encoding: chunked\r\n\r\n"
	for _, c := range []struct{ name, request, want string }{
		{"a head over 4 KiB, v1", "GET /me?case=u00 HTTP/1.1\r\nHost: edge\r\n" + auth + big + "\r\n", v1},
		{"a head over 4 KiB, v2", "GET /v2/info?case=u01 HTTP/1.1\r\nHost: edge\r\n" + auth + big + "\r\n", v2},
		{"bare LF line ends, v1", "GET /me?case=u02 HTTP/1.1\nHost: edge\n" + strings.TrimSuffix(auth, "\r\n") + "\n\n", v1},
		{"bare LF line ends, v2", "GET /v2/info?case=u03 HTTP/1.1\nHost: edge\n" + strings.TrimSuffix(auth, "\r\n") + "\n\n", v2},
		{"a bare LF in a head fasthttp would take, v1", "GET /api/v1/me?case=u04 HTTP/1.1\r\nHost: edge\nX: y\r\n" + auth + "\r\n", v1},
		{"a malformed chunk size, v1", "POST /verify?case=u05 HTTP/1.1\r\nHost: edge\r\n" + auth + chunked + "zz\r\n{}\r\n0\r\n\r\n", v1},
		{"a malformed chunk size, v2", "POST /v2/verify/bank?case=u06 HTTP/1.1\r\nHost: edge\r\n" + auth + chunked + "zz\r\n{}\r\n0\r\n\r\n", v2},
	} {
		conn, err := net.Dial("tcp", s.edgeAddr)
		if err != nil {
			t.Fatal(err)
		}
		conn.SetDeadline(time.Now().Add(10 * time.Second)) // a third of the read timeout
		start := time.Now()
		io.WriteString(conn, c.request)
		res, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Errorf("%s: no answer after %v: %v", c.name, time.Since(start), err)
			conn.Close()
			continue
		}
		b, _ := io.ReadAll(res.Body)
		conn.Close()
		if res.StatusCode != 400 || !strings.Contains(string(b), c.want) || !res.Close {
			t.Errorf("%s: %d %s (close %v), want 400 %s and the connection closed", c.name, res.StatusCode, b, res.Close, c.want)
		}
	}
	for _, r := range s.rec.requests(t) {
		if strings.Contains(r.uri, "case=u0") {
			t.Errorf("core received %s %.60s", r.method, r.uri)
		}
	}
	s.served(t)
}
