package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/slipverify/slipverify/core/lib/testnet"
	"github.com/slipverify/slipverify/core/slip"
)

// send makes one request with the main branch's Bearer key through the
// edge and returns the status, the body and how long the answer took.
func (s *stack) send(t *testing.T, method, path, body string) (int, string, time.Duration) {
	t.Helper()
	start := time.Now()
	res, raw := s.sendAs(t, keyMain, method, path, body)
	return res.StatusCode, raw, time.Since(start)
}

// sendAs makes one request with a branch's Bearer key through the edge and
// returns the answer and its body.
func (s *stack) sendAs(t *testing.T, key, method, path, body string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest(method, s.url+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	return res, string(raw)
}

// sendRaw is send on a raw connection that writes the body while it reads
// the answer: the edge refuses a body over its limit from the
// Content-Length, before reading it, and closes the connection, which a
// client still writing sees as an error instead of the answer.
func (s *stack) sendRaw(t *testing.T, method, path, body string) (int, string, time.Duration) {
	t.Helper()
	conn, err := net.Dial("tcp", s.edgeAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(30 * time.Second))
	start := time.Now()
	go io.WriteString(conn, bearerReq(method, path, body)) // fails once the edge closes
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	raw, _ := io.ReadAll(res.Body)
	if !res.Close {
		t.Errorf("%s %s: the edge keeps reading after refusing the body", method, path)
	}
	return res.StatusCode, string(raw), time.Since(start)
}

// served asserts that the edge still answers an ordinary client.
func (s *stack) served(t *testing.T) {
	t.Helper()
	if status, body, _ := s.send(t, "GET", "/v2/info", ""); status != http.StatusOK {
		t.Fatalf("an ordinary request got %d %s", status, body)
	}
}

// TestJSONBombs sends hostile JSON bodies to the verify routes through the
// edge to the real core: each gets a 4xx in the spec's error format within
// seconds, duplicate keys included (a body read two ways is refused, not
// guessed), and core stays healthy and serves the next request.
func TestJSONBombs(t *testing.T) {
	s := startStack(t, nil)
	payload := slip.Bank{BankCode: "004", TransRef: "JSONBOMB0001"}.Encode()
	nest := func(open, close string, n int) string {
		return strings.Repeat(open, n) + "1" + strings.Repeat(close, n)
	}
	const limit = 8 << 20 // the edge's body limit
	for _, c := range []struct{ name, path, body string }{
		{"nested arrays", "/v2/verify/bank", `{"payload":` + nest("[", "]", 200000) + `}`},
		{"nested objects", "/v2/verify/bank", `{"payload":` + nest(`{"a":`, "}", 200000) + `}`},
		{"nested arrays as a field", "/v2/verify/wallet", `{"transRef":"x","extra":` + nest("[", "]", 200000) + `}`},
		{"nested batch items", "/v2/verify/bank/async/batch", `{"items":` + nest("[", "]", 200000) + `}`},
		{"a huge array within the limit", "/v2/verify/bank", `{"payload":"` + payload + `","x":[` + strings.Repeat("0,", (limit-200)/2) + `0]}`},
		{"a huge batch within the limit", "/v2/verify/bank/async/batch", `{"items":[` + strings.Repeat(`{},`, (limit-200)/3) + `{}]}`},
		{"a huge string within the limit", "/v2/verify/bank", `{"payload":"` + strings.Repeat("A", limit-200) + `"}`},
		{"a huge string beyond the limit", "/v2/verify/bank", `{"payload":"` + strings.Repeat("A", limit+1) + `"}`},
		{"a huge array beyond the limit", "/verify", `{"payload":[` + strings.Repeat("0,", limit/2+1) + `0]}`},
		{"many keys", "/v2/verify/bank", `{` + manyKeys(200000) + `}`},
		{"duplicate keys", "/v2/verify/bank", `{"payload":"` + payload + `","payload":"not a slip"}`},
		{"duplicate keys, v1", "/verify", `{"payload":"not a slip","payload":"` + payload + `"}`},
		{"a number too large", "/v2/verify/bank", `{"payload":"` + payload + `","amount":1e999999}`},
		{"invalid UTF-8", "/v2/verify/bank", "{\"payload\":\"\xff\xfe\"}"},
		{"trailing data", "/v2/verify/bank", `{"payload":"` + payload + `"}{"payload":"` + payload + `"}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			send := s.send
			if len(c.body) > limit {
				send = s.sendRaw
			}
			status, body, took := send(t, "POST", c.path, c.body)
			checkError(t, "POST", c.path, status, body)
			if took > 10*time.Second {
				t.Errorf("the answer took %v", took)
			}
			if status, _, _ := s.send(t, "GET", "/health", ""); status != http.StatusOK {
				t.Fatalf("/health answers %d after the bomb", status)
			}
			s.served(t)
		})
	}
	if s.core.Exited() || s.edge.Exited() {
		t.Fatal("a program exited")
	}
}

func manyKeys(n int) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"k%d":0`, i)
	}
	return b.String()
}

// TestOversizedHeaders sends a request line or headers far beyond what a
// client needs: the edge refuses each with a 4xx in the spec's format, or
// closes the connection, without reading it all (the client's write fails
// long before 16 MiB are sent), forwards nothing, and serves ordinary
// requests on other connections meanwhile.
func TestOversizedHeaders(t *testing.T) {
	s := startStack(t, nil)
	const huge = 16 << 20
	many := func(n int) string {
		var b strings.Builder
		for i := range n {
			fmt.Fprintf(&b, "X-Header-%d: v\r\n", i)
		}
		return b.String()
	}
	for _, c := range []struct {
		name string
		head string // sent first
		fill byte   // then this byte to 16 MiB, unless 0
		tail string // then this
	}{
		{"many headers", "GET /v2/info?case=h00 HTTP/1.1\r\nHost: edge\r\nAuthorization: Bearer " + keyMain + "\r\n" + many(5000), 0, "\r\n"},
		{"one huge header", "GET /v2/info?case=h01 HTTP/1.1\r\nHost: edge\r\nAuthorization: Bearer " + keyMain + "\r\nX-Big: ", 'a', "\r\n\r\n"},
		{"a huge request line", "GET /v2/info?case=h02&x=", 'a', " HTTP/1.1\r\nHost: edge\r\nAuthorization: Bearer " + keyMain + "\r\n\r\n"},
		{"a huge header name", "GET /v2/info?case=h03 HTTP/1.1\r\nHost: edge\r\nAuthorization: Bearer " + keyMain + "\r\nX-", 'a', ": v\r\n\r\n"},
		{"a huge Authorization", "GET /v2/info?case=h04 HTTP/1.1\r\nHost: edge\r\nAuthorization: Bearer ", 'a', "\r\n\r\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			conn, err := net.Dial("tcp", s.edgeAddr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			conn.SetDeadline(time.Now().Add(30 * time.Second))
			var sent atomic.Int64
			wrote := make(chan error, 1)
			go func() {
				n, err := io.WriteString(conn, c.head)
				sent.Add(int64(n))
				if err == nil && c.fill != 0 {
					chunk := []byte(strings.Repeat(string(c.fill), 64<<10))
					for sent.Load() < huge && err == nil {
						n, err = conn.Write(chunk)
						sent.Add(int64(n))
					}
				}
				if err == nil {
					_, err = io.WriteString(conn, c.tail)
				}
				wrote <- err
			}()
			res, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err == nil {
				body, _ := io.ReadAll(res.Body)
				if res.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
					checkRefusal(t, res.StatusCode, string(body))
				}
				if !res.Close {
					t.Errorf("the edge keeps the connection open after refusing the request")
				}
			}
			s.served(t) // on another connection, while this one is refused
			conn.Close()
			if err := <-wrote; err == nil && c.fill != 0 {
				t.Errorf("the edge read all %d bytes of the request", sent.Load())
			}
			for _, r := range s.rec.requests(t) {
				if strings.Contains(r.uri, "case=h0") {
					t.Errorf("core received %s %.60s", r.method, r.uri)
				}
			}
		})
	}
}

// TestAnswersCarryDate: the edge's own answers (a refused key) and core's
// forwarded ones carry a Date header (RFC 9110 6.6.1), which HTTP caches and
// clients' clock checks rely on.
func TestAnswersCarryDate(t *testing.T) {
	s := startStack(t, nil)
	for key, status := range map[string]int{keyMain: 200, "6f1c2a9e-7b3d-4c5e-9f80-1a2b3c4d5e6f": 401} {
		res, body := s.sendAs(t, key, "GET", "/v2/info", "")
		if res.StatusCode != status {
			t.Fatalf("GET /v2/info: %d %s, want %d", res.StatusCode, body, status)
		}
		if d, err := http.ParseTime(res.Header.Get("Date")); err != nil || time.Since(d).Abs() > time.Minute {
			t.Errorf("%d answer: Date %q (%v)", status, res.Header.Get("Date"), err)
		}
	}
}

// TestLargestHeadsReachCore: a request head the edge takes (up to its 4 KiB
// read buffer) is taken by core too, with the internal headers the edge
// adds: the client gets core's answer, not a plain-text 431 from core.
func TestLargestHeadsReachCore(t *testing.T) {
	s := startStack(t, nil)
	for _, size := range []int{3900, 4000, 4050} {
		head := "GET /v2/info?case=big HTTP/1.1\r\nHost: edge\r\nAuthorization: Bearer " + keyMain + "\r\nX-Pad: "
		head += strings.Repeat("a", size-len(head)-len("\r\n\r\n")) + "\r\n\r\n"
		conn, err := net.Dial("tcp", s.edgeAddr)
		if err != nil {
			t.Fatal(err)
		}
		conn.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.WriteString(conn, head); err != nil {
			t.Fatal(err)
		}
		res, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatalf("a %d-byte head: %v", size, err)
		}
		body, _ := io.ReadAll(res.Body)
		conn.Close()
		if res.StatusCode != http.StatusOK {
			t.Errorf("a %d-byte head: %d %s, want 200", size, res.StatusCode, body)
		}
	}
}

// TestSlowloris holds many connections that send their headers, or their
// body, one byte at a time. The edge's read timeout (SLIP_EDGE_READ_TIMEOUT)
// closes every one of them, none of their requests reaches core, and an
// ordinary client is served meanwhile.
func TestSlowloris(t *testing.T) {
	s := startStack(t, nil, "SLIP_EDGE_READ_TIMEOUT=1s")
	const conns = 60
	var (
		wg     sync.WaitGroup
		closed atomic.Int32
		mu     sync.Mutex
		got    []string // what the slow clients received
	)
	for i := range conns {
		var start, drip string
		if i%2 == 0 { // slow headers
			start = fmt.Sprintf("GET /v2/info?case=slow%02d HTTP/1.1\r\nHost: edge\r\nAuthorization: Bearer %s\r\n", i, keyMain)
			drip = "X-Slow: " + strings.Repeat("a", 4000) + "\r\n\r\n"
		} else { // slow body
			body := `{"payload":"` + strings.Repeat("A", 4000) + `"}`
			start = fmt.Sprintf("POST /v2/qr/generate?case=slow%02d HTTP/1.1\r\nHost: edge\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", i, keyMain, len(body))
			drip = body
		}
		conn, err := net.Dial("tcp", s.edgeAddr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		conn.SetReadDeadline(time.Now().Add(60 * time.Second)) // a hung test fails
		if _, err := io.WriteString(conn, start); err != nil {
			t.Fatal(err)
		}
		stop := make(chan struct{})
		wg.Add(2)
		go func() { // the attacker's pace: a byte every 50 ms, for minutes
			defer wg.Done()
			tick := time.NewTicker(50 * time.Millisecond)
			defer tick.Stop()
			for k := 0; k < len(drip); k++ {
				select {
				case <-stop:
					return
				case <-tick.C:
				}
				if _, err := conn.Write([]byte{drip[k]}); err != nil {
					return
				}
			}
		}()
		go func() {
			defer wg.Done()
			b, _ := io.ReadAll(conn) // returns when the edge closes the connection
			close(stop)
			mu.Lock()
			got = append(got, string(b))
			mu.Unlock()
			closed.Add(1)
		}()
	}
	// Meanwhile an ordinary client is served, again and again.
	for range 5 {
		s.served(t)
	}
	testnet.Eventually(t, 30*time.Second, func() bool { return closed.Load() == conns },
		func() string { return fmt.Sprintf("the edge closed %d of %d slow connections", closed.Load(), conns) })
	wg.Wait()
	for _, b := range got {
		if strings.Contains(b, " 200 ") {
			t.Errorf("a slow client was answered 200: %.200s", b)
		}
	}
	for _, r := range s.rec.requests(t) {
		if strings.Contains(r.uri, "case=slow") {
			t.Errorf("core received a slow client's request %s %s", r.method, r.uri)
		}
	}
	s.served(t)
}

// TestUnfinishedJobsBound: a branch holds at most SLIP_JOB_MAX_OPEN
// unfinished async jobs. Core runs here without a broker, so every accepted
// job stays queued: a submit that would pass the bound is refused whole,
// through the edge, with 429 RATE_LIMIT_EXCEEDED and Retry-After, one that
// fits is accepted, and another branch counts its own jobs.
func TestUnfinishedJobsBound(t *testing.T) {
	s := startStack(t, []string{"SLIP_JOB_MAX_OPEN=100", "SLIP_EGRESS_ALLOW_CIDRS=127.0.0.0/8"})
	payload := func(ref string) string {
		return `"payload":"` + slip.Bank{BankCode: "004", TransRef: ref}.Encode() + `"`
	}
	const hook = `"callbackUrl":"https://127.0.0.1/hook"`
	single := func(ref string) string { return "{" + hook + "," + payload(ref) + "}" }
	refs := 0 // slips submitted so far
	batch := func(n int) string {
		items := make([]string, n)
		for i := range items {
			refs++
			items[i] = "{" + payload(fmt.Sprintf("BOUNDREF%04d", refs)) + "}"
		}
		return "{" + hook + `,"items":[` + strings.Join(items, ",") + "]}"
	}
	submit := func(key, path, body string, want int, what string) {
		t.Helper()
		res, raw := s.sendAs(t, key, "POST", path, body)
		if res.StatusCode != want {
			t.Fatalf("%s: %d %s, want %d", what, res.StatusCode, raw, want)
		}
		if want == http.StatusTooManyRequests {
			var e struct {
				Error struct{ Code string } `json:"error"`
			}
			if json.Unmarshal([]byte(raw), &e); e.Error.Code != "RATE_LIMIT_EXCEEDED" || res.Header.Get("Retry-After") != "1" {
				t.Errorf("%s: %s with Retry-After %q, want RATE_LIMIT_EXCEEDED and 1", what, raw, res.Header.Get("Retry-After"))
			}
		}
	}
	const async, batchPath = "/v2/verify/bank/async", "/v2/verify/bank/async/batch"
	submit(keyMain, batchPath, batch(99), 202, "a batch of 99 of 100")
	submit(keyMain, batchPath, batch(2), 429, "a batch of 2 more")
	submit(keyMain, async, single("BOUNDREF0900"), 202, "the 100th, after the refused batch added none")
	submit(keyMain, async, single("BOUNDREF0901"), 429, "a 101st")
	submit(keyOther, async, single("BOUNDREF0902"), 202, "another branch's first")
}

// TestSilentConnection: a connection that sends nothing is closed when the
// read timeout ends, with no answer (a response nobody asked for could be
// read as the answer to the next request), and so is one whose body stopped
// short; one that sent part of a request head gets VALIDATION_ERROR before
// the close.
func TestSilentConnection(t *testing.T) {
	s := startStack(t, nil, "SLIP_EDGE_READ_TIMEOUT=1s")
	for _, c := range []struct{ name, send, want string }{
		{"nothing", "", ""},
		{"part of a head", "GET /v2/info HTTP/1.1\r\nHost: edge\r\n", "VALIDATION_ERROR"},
		{"part of a body", "POST /v2/qr/generate HTTP/1.1\r\nHost: edge\r\nAuthorization: Bearer " + keyMain +
			"\r\nContent-Length: 100\r\n\r\n{\"type\"", ""},
	} {
		conn, err := net.Dial("tcp", s.edgeAddr)
		if err != nil {
			t.Fatal(err)
		}
		conn.SetDeadline(time.Now().Add(30 * time.Second))
		start := time.Now()
		io.WriteString(conn, c.send)
		got, err := io.ReadAll(conn)
		conn.Close()
		switch {
		case err != nil:
			t.Errorf("%s: %v after %v", c.name, err, time.Since(start))
		case c.want == "" && len(got) > 0:
			t.Errorf("%s: answered %q", c.name, got)
		case c.want != "" && !bytes.Contains(got, []byte(c.want)):
			t.Errorf("%s: answered %q, want %s", c.name, got, c.want)
		}
	}
	s.served(t)
}
