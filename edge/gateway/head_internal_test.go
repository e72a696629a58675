package gateway

import (
	"bytes"
	"errors"
	"net"
	"testing"

	"github.com/slipverify/slipverify/core/api"
)

// script is a connection that reads its chunks one a Read and takes
// whatever is written.
type script struct {
	net.Conn
	chunks [][]byte
}

func (s *script) Read(p []byte) (int, error) {
	if len(s.chunks) == 0 {
		return 0, errors.New("script: no more chunks")
	}
	n := copy(p, s.chunks[0])
	if s.chunks[0] = s.chunks[0][n:]; len(s.chunks[0]) == 0 {
		s.chunks = s.chunks[1:]
	}
	return n, nil
}

func (s *script) Write(p []byte) (int, error) { return len(p), nil }

// readAll reads c until an error, and returns what it read and the error.
func readAll(c net.Conn) ([]byte, error) {
	var out []byte
	buf := make([]byte, 4096)
	for {
		n, err := c.Read(buf)
		out = append(out, buf[:n]...)
		if err != nil {
			return out, err
		}
	}
}

// TestHeadConnSplits: wherever the stream is cut between two Reads (a CR
// and its LF in different reads among them), a headConn tells a bare LF in
// the head from a CRLF, passes on every byte before it, takes a body's
// bytes as data, and keeps the request line's version.
func TestHeadConnSplits(t *testing.T) {
	for _, c := range []struct {
		name, stream string
		bare         bool // a bare LF in the head: refused
		version      api.Version
	}{
		{"CRLF head and a body with bare LFs", "POST /verify HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n\r\n\n\n\n\n", false, api.V1},
		{"CRLF head, v2", "GET /v2/info HTTP/1.1\r\nHost: x\r\n\r\n", false, api.V2},
		{"an empty line before the request line", "\r\nGET /me HTTP/1.1\r\nHost: x\r\n\r\n", false, api.V1},
		{"bare LF ends, v1", "GET /me HTTP/1.1\nHost: x\n\n", true, api.V1},
		{"a bare LF in the middle, v2", "GET /b2b/branches HTTP/1.1\r\nHost: x\nA: b\r\n\r\n", true, api.V2},
		{"a bare LF blank line, v1", "GET /api/v1/me HTTP/1.1\r\nHost: x\r\n\n", true, api.V1},
		{"a bare LF blank line after a bare CR", "GET /me HTTP/1.1\r\nHost: x\r\r\n\n", true, api.V1},
		{"a bare CR in the blank line, v1", "GET /me HTTP/1.1\r\nHost: x\r\n\r\r\n", true, api.V1},
		{"a bare CR in a field, v2", "GET /v2/info HTTP/1.1\r\nHost: x\rA: b\r\n\r\n", true, api.V2},
		{"a bare CR in the request line, v1", "GET /me\r HTTP/1.1\r\nHost: x\r\n\r\n", true, api.V1},
		{"a CRLF head, then CRs in the body", "POST /verify HTTP/1.1\r\nContent-Length: 3\r\n\r\n\r\rx", false, api.V1},
	} {
		for cut := 0; cut <= len(c.stream); cut++ {
			s := []byte(c.stream)
			hc := &headConn{Conn: &script{chunks: [][]byte{s[:cut:cut], s[cut:]}}, watching: true}
			got, err := readAll(hc)
			if bare := errors.Is(err, errBareLF); bare != c.bare {
				t.Errorf("%s, cut at %d: refused %v (%v), want %v", c.name, cut, bare, err, c.bare)
				continue
			}
			want := c.stream
			if c.bare { // up to the first bare CR or LF, made a space: what fasthttp may see
				i := firstBare(c.stream)
				want = c.stream[:i] + " "
				if c.stream[i] == '\r' && cut == i+1 { // passed on before its next byte was read
					want = c.stream[:cut]
				}
			}
			if string(got) != want {
				t.Errorf("%s, cut at %d: passed on %q, want %q", c.name, cut, got, want)
			}
			if v := hc.version(); v != c.version {
				t.Errorf("%s, cut at %d: version %v, want %v", c.name, cut, v, c.version)
			}
		}
	}
}

// firstBare returns the index of the first bare CR or LF in s.
func firstBare(s string) int {
	for i := range len(s) {
		if s[i] == '\n' && (i == 0 || s[i-1] != '\r') || s[i] == '\r' && (i+1 == len(s) || s[i+1] != '\n') {
			return i
		}
	}
	return -1
}

// TestHeadConnWatchesEachHead: a response starts the next head, whose bare
// LF is refused and whose version is its own; a 100 Continue does not, so
// the body after it is data.
func TestHeadConnWatchesEachHead(t *testing.T) {
	sc := &script{}
	hc := &headConn{Conn: sc, watching: true}
	read := func(s string) error {
		sc.chunks = [][]byte{[]byte(s)}
		_, err := hc.Read(make([]byte, 4096))
		return err
	}
	if err := read("POST /v2/verify/bank HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	hc.Write(continued)
	if err := read("\n\n"); err != nil || hc.err != nil {
		t.Fatalf("a body after 100 Continue: %v %v", err, hc.err)
	}
	// A 100 Continue cut in two by fasthttp's write buffer, behind answers
	// a pipelining client has not read.
	if err := read("POST /v2/verify/bank HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	hc.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\nHTTP/1.1 100 Con"))
	hc.Write([]byte("tinue\r\n\r\n"))
	if err := read("\n\n"); err != nil || hc.err != nil {
		t.Fatalf("a body after a 100 Continue in two writes: %v %v", err, hc.err)
	}
	hc.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"))
	if err := read("GET /me HTTP/1.1\nHost: x\n\n"); err != nil || !errors.Is(hc.err, errBareLF) || hc.version() != api.V1 {
		t.Fatalf("the next head: %v, refused %v, version %v; want refused, v1", err, hc.err, hc.version())
	}
}

// BenchmarkHeadConnRead is the cost of a headConn on one request of a kept
// connection: a response written, then a typical head read (the body after
// it is not looked at), against the same on the connection unwatched.
func BenchmarkHeadConnRead(b *testing.B) {
	head := []byte("POST /v2/verify/bank HTTP/1.1\r\nHost: edge.example.com\r\nUser-Agent: Go-http-client/1.1\r\n" +
		"Content-Length: 2048\r\nAuthorization: Bearer 11111111-1111-4111-8111-111111111111\r\n" +
		"Content-Type: application/json\r\nAccept-Encoding: gzip\r\n\r\n")
	body := bytes.Repeat([]byte("A"), 2048)
	response := []byte("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}")
	buf := make([]byte, 4096)
	run := func(b *testing.B, c net.Conn, sc *script) {
		var chunks [2][]byte
		b.ReportAllocs()
		for b.Loop() {
			c.Write(response)
			chunks = [2][]byte{head, body}
			sc.chunks = chunks[:]
			c.Read(buf)
			c.Read(buf)
		}
	}
	b.Run("plain", func(b *testing.B) {
		sc := &script{}
		run(b, sc, sc)
	})
	b.Run("watched", func(b *testing.B) {
		sc := &script{}
		run(b, &headConn{Conn: sc, watching: true}, sc)
	})
}
