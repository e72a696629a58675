package main

import (
	"fmt"
	"strings"
	"testing"
)

// smuggled is a whole request hidden where the edge and core could
// disagree on where the first request ends; core must never receive it.
// TAG marks the requests of one case (three characters, so lengths hold).
var smuggled = "GET /v2/banks?smuggled=TAG HTTP/1.1\r\nHost: edge\r\nAuthorization: Bearer " + keyMain + "\r\n\r\n"

// probe is a request sent after an attack on the same connection: when the
// edge keeps the connection open, the next answer must be the probe's.
var probe = "GET /v2/info?probe=TAG HTTP/1.1\r\nHost: edge\r\nAuthorization: Bearer " + keyMain + "\r\n\r\n"

// head is the start of a POST from the main branch, without framing headers.
func head() string {
	return "POST /v2/qr/generate?case=TAG HTTP/1.1\r\nHost: edge\r\nAuthorization: Bearer " + keyMain + "\r\nContent-Type: application/json\r\n"
}

// TestRequestSmuggling sends requests whose framing is ambiguous or
// obfuscated on raw connections. Whatever the edge makes of them, core
// never receives a request the client did not send as a whole: nothing of
// the smuggled request reaches core as a request, core receives at most the
// one request the edge answered, and on ambiguous framing the edge closes
// the connection instead of reading on from a point a proxy in front of it
// may count differently (RFC 9112 6.1). Unambiguous requests that carry a
// request as their body reach core with that body, and the connection
// serves the next request.
func TestRequestSmuggling(t *testing.T) {
	s := startStack(t, nil)
	chunk := func(b string) string { return fmt.Sprintf("%x\r\n%s\r\n0\r\n\r\n", len(b), b) }
	clte := "0\r\n\r\n" + smuggled
	for i, c := range []struct {
		name    string
		payload string
		// ambiguous: the edge answers at most once, then closes.
		ambiguous bool
		// body is what core must receive as the body of the one request
		// (unambiguous cases).
		body string
	}{
		{"CL.TE", head() + fmt.Sprintf("Content-Length: %d\r\nTransfer-Encoding: chunked\r\n\r\n", len(clte)) + clte, true, ""},
		{"TE.CL", head() + "Transfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n" + chunk(smuggled), true, ""},
		{"two Content-Lengths", head() + fmt.Sprintf("Content-Length: 0\r\nContent-Length: %d\r\n\r\n", len(smuggled)) + smuggled, true, ""},
		{"two Content-Lengths, the other order", head() + fmt.Sprintf("Content-Length: %d\r\nContent-Length: 0\r\n\r\n", len(smuggled)) + smuggled, true, ""},
		{"Content-Length list", head() + fmt.Sprintf("Content-Length: 0, %d\r\n\r\n", len(smuggled)) + smuggled, true, ""},
		{"chunked with a trailing space", head() + fmt.Sprintf("Content-Length: %d\r\nTransfer-Encoding: chunked \r\n\r\n", len(clte)) + clte, true, ""},
		{"xchunked", head() + fmt.Sprintf("Content-Length: %d\r\nTransfer-Encoding: xchunked\r\n\r\n", len(clte)) + clte, true, ""},
		{"xchunked alone", head() + "Transfer-Encoding: xchunked\r\n\r\n" + chunk(smuggled), true, ""},
		{"space before the colon", head() + fmt.Sprintf("Content-Length: %d\r\nTransfer-Encoding : chunked\r\n\r\n", len(clte)) + clte, true, ""},
		{"tab before chunked", head() + fmt.Sprintf("Content-Length: %d\r\nTransfer-Encoding:\tchunked\r\n\r\n", len(clte)) + clte, true, ""},
		{"upper-case CHUNKED", head() + fmt.Sprintf("Content-Length: %d\r\nTRANSFER-ENCODING: CHUNKED\r\n\r\n", len(clte)) + clte, true, ""},
		{"chunked, identity", head() + fmt.Sprintf("Content-Length: %d\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: identity\r\n\r\n", len(clte)) + clte, true, ""},
		{"identity, chunked", head() + "Transfer-Encoding: identity, chunked\r\n\r\n" + chunk(smuggled), true, ""},
		{"folded Transfer-Encoding", head() + fmt.Sprintf("Content-Length: %d\r\nTransfer-Encoding:\r\n chunked\r\n\r\n", len(clte)) + clte, true, ""},
		{"bare LF line ends", strings.ReplaceAll(head()+fmt.Sprintf("Content-Length: %d\r\nTransfer-Encoding: chunked\r\n\r\n", len(clte)), "\r\n", "\n") + clte, true, ""},
		{"chunk size overflow", head() + "Transfer-Encoding: chunked\r\n\r\nffffffffffffffffff1\r\n" + smuggled + "\r\n0\r\n\r\n", true, ""},
		{"bare LF after a chunk size", head() + "Transfer-Encoding: chunked\r\n\r\n2;\n" + "xx\r\n" + smuggled + "\r\n0\r\n\r\n", true, ""},
		{"GET with a body", "GET /v2/info?case=TAG HTTP/1.1\r\nHost: edge\r\nAuthorization: Bearer " + keyMain + fmt.Sprintf("\r\nContent-Length: %d\r\n\r\n", len(smuggled)) + smuggled, false, smuggled},
		{"a request as the body", head() + fmt.Sprintf("Content-Length: %d\r\n\r\n", len(smuggled)) + smuggled, false, smuggled},
		{"a request as a chunked body", head() + "Transfer-Encoding: chunked\r\n\r\n" + chunk(smuggled), false, smuggled},
	} {
		t.Run(c.name, func(t *testing.T) {
			tag := fmt.Sprintf("c%02d", i)
			tagged := func(s string) string { return strings.ReplaceAll(s, "TAG", tag) }
			a := raw(t, s.edgeAddr, tagged(c.payload), 1, tagged(probe))
			if len(a.responses) == 0 && !a.closed {
				t.Fatal("no answer and the connection is open")
			}
			for i, res := range a.responses {
				if res.StatusCode >= 400 {
					checkRefusal(t, res.StatusCode, a.bodies[i])
				}
			}
			var carried, probed []seen
			for _, r := range s.rec.requests(t) {
				switch {
				case strings.Contains(r.uri, "smuggled="+tag):
					t.Errorf("core received the smuggled request: %+v", r)
				case strings.Contains(r.uri, "case="+tag):
					carried = append(carried, r)
				case strings.Contains(r.uri, "probe="+tag):
					probed = append(probed, r)
				}
			}
			if len(carried) > len(a.responses) {
				t.Errorf("core received %d requests for %d answers: %+v", len(carried), len(a.responses), carried)
			}
			if c.ambiguous {
				if !a.closed || len(probed) > 0 {
					t.Errorf("the edge kept the connection open after ambiguous framing (answers %d, probe reached core %d times)", len(a.responses), len(probed))
				}
				return
			}
			want := []seen{{method: c.payload[:strings.IndexByte(c.payload, ' ')], body: tagged(c.body)}}
			if a.closed || len(carried) != 1 || carried[0].body != want[0].body || len(probed) != 1 {
				t.Errorf("want the request with its body once at core and the probe answered; closed %v, core received %+v and the probe %d times",
					a.closed, carried, len(probed))
			}
		})
	}
}
