package gateway_test

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/slipverify/slipverify/core/lib/testnet"
)

const (
	v1Refusal = `{"status":400,"message":"invalid_request"}`
	v2Refusal = `"VALIDATION_ERROR"`
	// unreadable is in the message of the edge's refusal of a request it
	// could not read.
	unreadable = "not taken as sent"
)

// refusedInRouteFormat sends each request on a connection of its own and
// wants it refused at once with 400 VALIDATION_ERROR in the version want
// holds the body of, and the connection closed.
func refusedInRouteFormat(t *testing.T, e *edge, cases []struct{ name, request, want string }) {
	t.Helper()
	for _, c := range cases {
		start := time.Now()
		res := e.raw(t, c.request)
		b, _ := io.ReadAll(res.Body)
		if res.StatusCode != 400 || !strings.Contains(string(b), c.want) || !res.Close {
			t.Errorf("%s: %d %s (close %v), want 400 %s and the connection closed", c.name, res.StatusCode, b, res.Close, c.want)
		}
		if took := time.Since(start); took > 5*time.Second {
			t.Errorf("%s: answered after %v", c.name, took)
		}
	}
}

const auth = "Authorization: Bearer " + keyMain + "\r\n"

// TestOversizedHeadInRouteFormat: a request head over fasthttp's 4 KiB
// buffer, which fasthttp discards unread, is refused in the version of its
// route (by its path as the router reads it).
func TestOversizedHeadInRouteFormat(t *testing.T) {
	e := startEdge(t, testnet.StartCore(t, seed))
	big := "X-Pad: " + strings.Repeat("a", 5000) + "\r\n"
	refusedInRouteFormat(t, e, []struct{ name, request, want string }{
		{"v1", "GET /me HTTP/1.1\r\nHost: x\r\n" + auth + big + "\r\n", v1Refusal},
		{"v1 prefix", "POST /api/v1/verify HTTP/1.1\r\nHost: x\r\n" + big + auth + "\r\n", v1Refusal},
		{"v2", "GET /v2/info HTTP/1.1\r\nHost: x\r\n" + auth + big + "\r\n", v2Refusal},
		{"b2b", "GET /b2b/branches HTTP/1.1\r\nHost: x\r\n" + big + "\r\n", v2Refusal},
		{"v2 at the root", "GET /banks HTTP/1.1\r\nHost: x\r\n" + big + "\r\n", v2Refusal},
		{"a request line over 4 KiB, v1", "GET /me?x=" + strings.Repeat("a", 5000) + " HTTP/1.1\r\nHost: x\r\n\r\n", v1Refusal},
		{"absolute form, v1", "GET http://x/verify?payload=1 HTTP/1.1\r\nHost: x\r\n" + big + "\r\n", v1Refusal},
		{"an encoded v2 path", "GET /%76%32/info HTTP/1.1\r\nHost: x\r\n" + big + "\r\n", v2Refusal},
		{"an unknown path, v1", "GET /nothing HTTP/1.1\r\nHost: x\r\n" + big + "\r\n", v1Refusal},
	})
}

// TestBareLFHeadsRefused: a request head with a line that ends in a bare
// line feed (LF without CR) is refused at once, in its route's version:
// fasthttp would wait for a CRLF CRLF until the read timeout. One is refused
// even where fasthttp would take it: a front end may count its lines
// otherwise.
func TestBareLFHeadsRefused(t *testing.T) {
	e := startEdge(t, testnet.StartCore(t, seed))
	refusedInRouteFormat(t, e, []struct{ name, request, want string }{
		{"bare LF line ends, v1", "GET /me HTTP/1.1\nHost: x\n" + strings.TrimSuffix(auth, "\r\n") + "\n\n", v1Refusal},
		{"bare LF line ends, v2", "GET /v2/info HTTP/1.1\nHost: x\n\n", v2Refusal},
		{"a bare LF before the blank line, v1", "GET /me HTTP/1.1\r\nHost: x\r\n" + auth + "\n", v1Refusal},
		{"a bare LF, then the blank line, v1 prefix", "GET /api/v1/me HTTP/1.1\r\nHost: x\r\n" + strings.TrimSuffix(auth, "\r\n") + "\n\r\n", v1Refusal},
		{"a bare LF in the middle, v1", "GET /me HTTP/1.1\r\nHost: x\nX-Note: a\r\n" + auth + "\r\n", v1Refusal},
		{"a bare LF after the request line, b2b", "GET /b2b/branches HTTP/1.1\nHost: x\r\n\r\n", v2Refusal},
		{"a bare LF before the request line: no route yet", "\nGET /me HTTP/1.1\r\nHost: x\r\n" + auth + "\r\n", v2Refusal},
	})
}

// TestMalformedChunkSizeInRouteFormat: a chunked body whose chunk size is
// no hex number, or too long a one, is refused in its route's version.
func TestMalformedChunkSizeInRouteFormat(t *testing.T) {
	e := startEdge(t, testnet.StartCore(t, seed))
	chunked := "Transfer-Encoding: chunked\r\n\r\n"
	refusedInRouteFormat(t, e, []struct{ name, request, want string }{
		{"no hex digit, v1", "POST /verify HTTP/1.1\r\nHost: x\r\n" + auth + chunked + "zz\r\n{}\r\n0\r\n\r\n", v1Refusal},
		{"an empty chunk size, v1 prefix", "POST /api/v1/verify/wallet HTTP/1.1\r\nHost: x\r\n" + auth + chunked + "\r\n", v1Refusal},
		{"a chunk size too long, v1", "POST /verify HTTP/1.1\r\nHost: x\r\n" + auth + chunked + "fffffffffffffffffff1\r\n{}\r\n0\r\n\r\n", v1Refusal},
		{"no hex digit, v2", "POST /v2/verify/bank HTTP/1.1\r\nHost: x\r\n" + auth + chunked + "zz\r\n{}\r\n0\r\n\r\n", v2Refusal},
		{"no hex digit, b2b", "POST /b2b/branches HTTP/1.1\r\nHost: x\r\n" + chunked + "zz\r\n{}\r\n0\r\n\r\n", v2Refusal},
		{"a malformed Content-Length, v1", "GET /me HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n", v1Refusal},
	})
}

// TestBareLFOnKeptConnection: on a connection kept open, the head of each
// request is watched anew: after requests served (pipelined ones among
// them), a head with bare line feeds is refused at once in its own route's
// version, and bare line feeds in bodies, plain, chunked or sent after 100
// Continue, are data.
func TestBareLFOnKeptConnection(t *testing.T) {
	e := startEdge(t, testnet.StartCore(t, seed))
	conn := e.rawConn(t)
	br := bufio.NewReader(conn)
	ask := func(request string) (int, string, bool) {
		t.Helper()
		io.WriteString(conn, request)
		res, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("%.40q: no answer: %v", request, err)
		}
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b), res.Close
	}
	body := "{\n\n\"type\":\n\"bank\"\n}\n"
	for _, r := range []string{
		"GET /v2/info HTTP/1.1\r\nHost: x\r\n" + auth + "\r\n",
		"POST /v2/qr/generate HTTP/1.1\r\nHost: x\r\n" + auth + "Content-Type: application/json\r\n" + fmt.Sprintf("Content-Length: %d\r\n\r\n", len(body)) + body,
		"POST /v2/qr/generate HTTP/1.1\r\nHost: x\r\n" + auth + "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n" + fmt.Sprintf("2\r\n\n\n\r\n%x\r\n%s\r\n0\r\n\r\n", len(body), body),
		"GET /me HTTP/1.1\r\nHost: x\r\n" + auth + "\r\n",
	} {
		if status, b, closed := ask(r); status >= 500 || closed || strings.Contains(b, unreadable) {
			t.Fatalf("%.40q: %d %s (close %v): refused as unreadable", r, status, b, closed)
		}
	}
	// 100 Continue: the body is sent once the edge asks for it.
	io.WriteString(conn, "POST /v2/qr/generate HTTP/1.1\r\nHost: x\r\n"+auth+"Content-Type: application/json\r\nExpect: 100-continue\r\n"+fmt.Sprintf("Content-Length: %d\r\n\r\n", len(body)))
	if line, err := br.ReadString('\n'); err != nil || !strings.Contains(line, " 100 ") {
		t.Fatalf("want 100 Continue, got %q %v", line, err)
	}
	br.ReadString('\n')
	if status, b, closed := ask(body); status >= 500 || closed || strings.Contains(b, unreadable) {
		t.Fatalf("a body after 100 Continue: %d %s (close %v)", status, b, closed)
	}
	// Pipelined: two requests in one write, the second head read with the
	// first, then the next head on its own.
	two := "GET /v2/info HTTP/1.1\r\nHost: x\r\n" + auth + "\r\n"
	io.WriteString(conn, two+two)
	for range 2 {
		res, err := http.ReadResponse(br, nil)
		if err != nil || res.StatusCode != 200 {
			t.Fatalf("pipelined: %v %v", res, err)
		}
		io.Copy(io.Discard, res.Body)
	}
	status, b, closed := ask("GET /me HTTP/1.1\nHost: x\n" + strings.TrimSuffix(auth, "\r\n") + "\n\n")
	if status != 400 || b != v1Refusal || !closed {
		t.Errorf("bare LF after requests served: %d %s (close %v), want 400 %s and the connection closed", status, b, closed, v1Refusal)
	}
}

// TestBareCRHeadsRefused: a request head with a bare carriage return (CR
// without LF) is refused at once, in its route's version: fasthttp would
// take a field holding one, and wait for the end of a head whose blank line
// holds one until the read timeout.
func TestBareCRHeadsRefused(t *testing.T) {
	e := startEdge(t, testnet.StartCore(t, seed))
	refusedInRouteFormat(t, e, []struct{ name, request, want string }{
		{"a bare CR in the blank line, v1", "GET /me HTTP/1.1\r\nHost: x\r\n" + auth + "\r\r\n", v1Refusal},
		{"a bare CR in the blank line, v2", "GET /v2/info HTTP/1.1\r\nHost: x\r\n" + auth + "\r\r\n", v2Refusal},
		{"a bare CR in a field, v1 prefix", "GET /api/v1/me HTTP/1.1\r\nHost: x\rX-Note: a\r\n" + auth + "\r\n", v1Refusal},
		{"a bare CR in the request line, b2b", "GET /b2b/branches\r HTTP/1.1\r\nHost: x\r\n\r\n", v2Refusal},
	})
}

// TestRefusalNotReset: a client that sends a head over 4 KiB in one
// write, with more bytes behind it, reads the whole 400 and then the end of
// the connection, as does one whose body the edge refuses from its
// Content-Length: the edge reads what the client sent before it closes, as
// closing a socket that holds unread bytes resets the connection, and the
// reset can reach the client before it reads the answer. (Over loopback the
// answer is read first, then the reset: the test wants the clean end.)
func TestRefusalNotReset(t *testing.T) {
	e := startEdge(t, testnet.StartCore(t, seed))
	body := strings.Repeat("b", 64<<10)
	for _, c := range []struct{ name, request, want string }{
		{"a head over 4 KiB", "POST /verify HTTP/1.1\r\nHost: x\r\n" + auth + "X-Pad: " + strings.Repeat("a", 5000) + "\r\n" +
			"Content-Type: application/json\r\nContent-Length: 65536\r\n\r\n" + body, v1Refusal},
		{"a head with a bare LF", "POST /v2/verify/bank HTTP/1.1\r\nHost: x\n" + auth +
			"Content-Type: application/json\r\nContent-Length: 65536\r\n\r\n" + body, v2Refusal},
		{"a body over the limit", "POST /v2/verify/bank HTTP/1.1\r\nHost: x\r\n" + auth +
			"Content-Type: application/json\r\nContent-Length: 9000000\r\n\r\n" + body, `"IMAGE_SIZE_TOO_LARGE"`},
	} {
		for i := range 5 {
			conn := e.rawConn(t)
			if _, err := io.WriteString(conn, c.request); err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(conn) // to the end: an answer, then a clean close
			if err != nil {
				t.Errorf("%s, %d: read %q, then %v", c.name, i, got, err)
				continue
			}
			res, err := http.ReadResponse(bufio.NewReader(strings.NewReader(string(got))), nil)
			if err != nil {
				t.Fatalf("%s, %d: %q: %v", c.name, i, got, err)
			}
			b, err := io.ReadAll(res.Body)
			if err != nil || res.StatusCode != 400 || !strings.Contains(string(b), c.want) || !res.Close {
				t.Errorf("%s, %d: %d %s (close %v) %v, want 400 %s and the connection closed", c.name, i, res.StatusCode, b, res.Close, err, c.want)
			}
			conn.Close()
		}
	}
}
