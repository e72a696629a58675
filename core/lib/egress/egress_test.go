package egress

import (
	"bufio"
	"bytes"
	"context"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slipverify/slipverify/core/api"
	"github.com/slipverify/slipverify/core/lib/testnet"
)

// The tests run real listeners. Every test server listens on 127.0.0.1:P,
// the one address the test policy allows, and beside it a trap listens on
// 127.0.0.2:P, which the policy blocks. A URL that gets past the checks to
// the wrong address lands in the trap on the very port it asked for, and
// every SSRF test ends by proving the trap accepted nothing.

var allowLoopback1 = NewPolicy([]netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")})

// image is what the test servers serve at /img.
var image = []byte("\x89PNG\r\n\x1a\nnot really a png")

// trap counts the connections accepted on a blocked address.
type trap struct {
	ln       net.Listener
	accepted chan string // remote address of each accepted connection
}

func newTrap(t testing.TB, ln net.Listener) *trap {
	tr := &trap{ln: ln, accepted: make(chan string, 1024)}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			tr.accepted <- c.RemoteAddr().String()
			c.Close()
		}
	}()
	t.Cleanup(func() { ln.Close() })
	return tr
}

// untouched fails t if the trap accepted any connection so far. It dials a
// sentinel connection and waits for the trap to accept it: the kernel queues
// completed connections in order, so anything that connected before the
// sentinel has been accepted by then.
func (tr *trap) untouched(t testing.TB) {
	t.Helper()
	c, err := net.Dial("tcp", tr.ln.Addr().String())
	if err != nil {
		t.Fatalf("sentinel dial: %v", err)
	}
	defer c.Close()
	sentinel := c.LocalAddr().String()
	guard := time.NewTimer(10 * time.Second)
	defer guard.Stop()
	var intruders []string
	for {
		select {
		case remote := <-tr.accepted:
			if remote == sentinel {
				if len(intruders) > 0 {
					t.Errorf("trap at %s accepted %d connections: %v", tr.ln.Addr(), len(intruders), intruders)
				}
				return
			}
			intruders = append(intruders, remote)
		case <-guard.C:
			t.Fatal("trap never accepted the sentinel")
		}
	}
}

// site is a test server on 127.0.0.1:P with its trap on 127.0.0.2:P.
type site struct {
	srv  *httptest.Server
	trap *trap
	port string
}

// serve starts h on 127.0.0.1 (TLS if tls) and a trap on the same port of
// 127.0.0.2.
func serve(t testing.TB, h http.Handler, tls bool) *site {
	t.Helper()
	for range 50 {
		ln1, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := strconv.Itoa(ln1.Addr().(*net.TCPAddr).Port)
		ln2, err := net.Listen("tcp", "127.0.0.2:"+port)
		if err != nil {
			ln1.Close()
			if _, err := net.Listen("tcp", "127.0.0.2:0"); err != nil {
				t.Skipf("no 127.0.0.2 on this machine: %v", err)
			}
			continue
		}
		srv := httptest.NewUnstartedServer(h)
		srv.Config.ErrorLog = log.New(io.Discard, "", 0) // refused TLS handshakes are expected
		srv.Listener.Close()
		srv.Listener = ln1
		if tls {
			srv.StartTLS()
		} else {
			srv.Start()
		}
		t.Cleanup(srv.Close)
		return &site{srv: srv, trap: newTrap(t, ln2), port: port}
	}
	t.Fatal("no port free on both 127.0.0.1 and 127.0.0.2")
	return nil
}

// url returns scheme://host:P/path on the site's port.
func (s *site) url(host, path string) string {
	scheme := "http"
	if s.srv.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + net.JoinHostPort(host, s.port) + path
}

// fakeResolver answers from a table; a host with several answers gets them
// in turn, the last one from then on.
type fakeResolver struct {
	mu      sync.Mutex
	answers map[string][][]netip.Addr
	calls   map[string]int
}

func newResolver(table map[string][]string) *fakeResolver {
	r := &fakeResolver{answers: map[string][][]netip.Addr{}, calls: map[string]int{}}
	for host, seq := range table {
		for _, answer := range seq {
			var addrs []netip.Addr
			for _, s := range strings.Fields(answer) {
				addrs = append(addrs, netip.MustParseAddr(s))
			}
			r.answers[host] = append(r.answers[host], addrs)
		}
	}
	return r
}

func (r *fakeResolver) LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error) {
	if network != "ip" {
		return nil, fmt.Errorf("fake resolver: network %q", network)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	seq, ok := r.answers[host]
	if !ok {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	i := min(r.calls[host], len(seq)-1)
	r.calls[host]++
	return seq[i], nil
}

func (r *fakeResolver) count(host string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.calls[host]
}

// resolverTable maps the test names. Each answer is one string of
// space-separated addresses.
var resolverTable = map[string][]string{
	"good.test":      {"127.0.0.1"},
	"trap.test":      {"127.0.0.2"},
	"private.test":   {"10.0.0.1"},
	"meta.test":      {"169.254.169.254"},
	"v6local.test":   {"::1"},
	"mixed.test":     {"127.0.0.2 10.0.0.1 127.0.0.1"},
	"mapped.test":    {"::ffff:127.0.0.1"},
	"mappedbad.test": {"::ffff:127.0.0.2"},
	"empty.test":     {""},
	"rebind.test":    {"127.0.0.1", "127.0.0.2"},
	"example.com":    {"127.0.0.1", "127.0.0.2"}, // in httptest's certificate
}

func testConfig() Config {
	return Config{
		Policy:       allowLoopback1,
		Timeout:      5 * time.Second,
		MaxBytes:     1 << 10,
		MaxRedirects: 3,
		Resolver:     newResolver(resolverTable),
	}
}

func newClient(t testing.TB, cfg Config) *Client {
	t.Helper()
	c, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(c.CloseIdleConnections)
	return c
}

// code returns the catalog code of err, or 0 when err is no *api.Error.
func code(err error) api.Code {
	var ae *api.Error
	if errors.As(err, &ae) {
		return ae.Code
	}
	return 0
}

func wantCode(t testing.TB, what string, err error, want api.Code) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: no error, want %v", what, want)
		return
	}
	var ae *api.Error
	if !errors.As(err, &ae) {
		t.Errorf("%s: error %v is no *api.Error, want %v", what, err, want)
		return
	}
	if ae.Code != want {
		t.Errorf("%s: code %v, want %v (%v)", what, ae.Code, want, err)
	}
}

// imageHandler serves the test routes:
//
//	/img            the image
//	/redirect?to=U  302 to U
//	/hop?n=N        302 to /hop?n=N-1, and /img at 0
func imageHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/img", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "image/png")
		w.Write(image)
	})
	mux.HandleFunc("/redirect", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, r.URL.Query().Get("to"), http.StatusFound)
	})
	mux.HandleFunc("/hop", func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.URL.Query().Get("n"))
		if n <= 0 {
			http.Redirect(w, r, "/img", http.StatusFound)
			return
		}
		http.Redirect(w, r, "/hop?n="+strconv.Itoa(n-1), http.StatusFound)
	})
	return mux
}

func wantImage(t testing.TB, what string, body []byte, err error) {
	t.Helper()
	if err != nil {
		t.Errorf("%s: %v", what, err)
		return
	}
	if !bytes.Equal(body, image) {
		t.Errorf("%s: body %q, want the image", what, body)
	}
}

// TestFetchAddressSpellings refuses every spelling of a blocked address and
// follows every spelling of the allowed one to the server.
func TestFetchAddressSpellings(t *testing.T) {
	s := serve(t, imageHandler(), false)
	c := newClient(t, testConfig())
	ctx := context.Background()
	p := s.port

	for _, u := range []string{
		"http://127.0.0.2:" + p + "/img",
		"http://2130706434:" + p + "/img",         // decimal
		"http://017700000002:" + p + "/img",       // octal, whole
		"http://0177.0.0.2:" + p + "/img",         // octal parts
		"http://0x7f.0.0.2:" + p + "/img",         // hex parts
		"http://0x7f000002:" + p + "/img",         // hex, whole
		"http://0X7F.0x0.00.0x2:" + p + "/img",    // mixed
		"http://127.2:" + p + "/img",              // short a.b
		"http://127.0.2:" + p + "/img",            // short a.b.c
		"http://127.0.0.2.:" + p + "/img",         // absolute
		"http://[::ffff:127.0.0.2]:" + p + "/img", // IPv4-mapped
		"http://[::ffff:7f00:2]:" + p + "/img",    // IPv4-mapped, hex
		"http://[::ffff:127.0.0.1]:" + p + "/img", // mapped form of the allowed address
		"http://[::127.0.0.2]:" + p + "/img",      // IPv4-compatible
		"http://[::1]:" + p + "/img",
		"http://[fe80::1%25lo]:" + p + "/img", // zone
		"http://[::]:" + p + "/img",
		"http://0.0.0.0:" + p + "/img",
		"http://0:" + p + "/img",
		"http://127.0.0.1:" + p + "@127.0.0.2:" + p + "/img", // userinfo, then host
		"https://2130706434:" + p + "/img",
		"http://10.0.0.1/img",
		"http://172.16.5.4/img",
		"http://192.168.1.1/img",
		"http://100.64.0.1/img",
		"http://169.254.169.254/latest/meta-data/",
		"http://0xa9fea9fe/latest/meta-data/", // 169.254.169.254
		"http://[fd00::1]/img",
		"http://[fc00::1]/img",
		"http://[fe80::1]/img",
		"http://[64:ff9b::7f00:2]/img",
		"http://[2002:7f00:2::]/img",
		"http://[2001::1]/img",
		"http://198.18.0.1/img",
		"http://192.0.2.1/img",
		"http://224.0.0.1/img",
		"http://255.255.255.255/img",
	} {
		_, err := c.Fetch(ctx, u)
		wantCode(t, u, err, api.URLInvalidIPRange)
	}
	s.trap.untouched(t)

	for _, u := range []string{
		s.url("127.0.0.1", "/img"),
		s.url("2130706433", "/img"),
		s.url("0177.0.0.1", "/img"),
		s.url("0x7f.1", "/img"),
		s.url("127.1", "/img"),
		s.url("127.0.0.1.", "/img"),
		s.url("good.test", "/img"),
	} {
		body, err := c.Fetch(ctx, u)
		wantImage(t, u, body, err)
	}
	s.trap.untouched(t)
}

// TestFetchRewrittenHost covers a host that only becomes an address on the
// way: Go's transport maps fullwidth digits and dots to ASCII (IDNA), after
// every check on the URL. Only the dial-time check sees the result.
func TestFetchRewrittenHost(t *testing.T) {
	s := serve(t, imageHandler(), false)
	c := newClient(t, testConfig())
	u := "http://１２７．０．０．２:" + s.port + "/img"
	_, err := c.Fetch(context.Background(), u)
	wantCode(t, u, err, api.URLInvalidIPRange)
	// The same spelling of the allowed address reaches the server.
	body, err := c.Fetch(context.Background(), "http://１２７．０．０．１:"+s.port+"/img")
	wantImage(t, "fullwidth 127.0.0.1", body, err)
	s.trap.untouched(t)
}

func TestFetchScheme(t *testing.T) {
	s := serve(t, imageHandler(), false)
	c := newClient(t, testConfig())
	ctx := context.Background()
	for _, u := range []string{
		"ftp://127.0.0.1:" + s.port + "/img",
		"file:///etc/passwd",
		"gopher://127.0.0.1:" + s.port + "/",
		"javascript:alert(1)",
		"data:image/png;base64,iVBORw0KGgo=",
		"ws://127.0.0.1:" + s.port + "/img",
		"//127.0.0.1:" + s.port + "/img", // no scheme
		"127.0.0.1:" + s.port + "/img",
		"",
		"http://",         // no host
		"http:///img",     // no host
		"http:127.0.0.1",  // opaque
		"http://[::1/img", // bad literal
		"http://[::ffff:0177.0.0.2]/img",
		"http://1.2.3.256/img",
		"http://example.1/img",
		"http://a..b/img",
		"http://127.0.0.2\\@127.0.0.1:" + s.port + "/img", // parsers disagree on \; Go refuses it
		"http://127.0.0.1:" + s.port + "\x00/img",
		"http://127.0.0.1:99999999999/img",
	} {
		_, err := c.Fetch(ctx, u)
		wantCode(t, strconv.Quote(u), err, api.URLProtocolNotAllowed)
	}
	// The scheme is case-insensitive.
	body, err := c.Fetch(ctx, "HTTP://127.0.0.1:"+s.port+"/img")
	wantImage(t, "HTTP://", body, err)
	s.trap.untouched(t)
}

// TestFetchResolvedNames checks names: the dialer judges every address a
// name resolves to and connects only to allowed ones.
func TestFetchResolvedNames(t *testing.T) {
	s := serve(t, imageHandler(), false)
	c := newClient(t, testConfig())
	ctx := context.Background()
	for _, host := range []string{"trap.test", "private.test", "meta.test", "v6local.test", "mappedbad.test"} {
		_, err := c.Fetch(ctx, s.url(host, "/img"))
		wantCode(t, host, err, api.URLInvalidIPRange)
	}
	for _, host := range []string{"nxdomain.test", "empty.test"} {
		_, err := c.Fetch(ctx, s.url(host, "/img"))
		wantCode(t, host, err, api.ImageURLUnreachable)
	}
	// Blocked addresses first: skipped, the allowed one is used.
	body, err := c.Fetch(ctx, s.url("mixed.test", "/img"))
	wantImage(t, "mixed.test", body, err)
	// Go's resolver hands out /etc/hosts answers as ::ffff:a.b.c.d; the
	// socket is IPv4 and so is the address judged.
	body, err = c.Fetch(ctx, s.url("mapped.test", "/img"))
	wantImage(t, "mapped.test", body, err)
	s.trap.untouched(t)
}

func TestCheckCallbackURL(t *testing.T) {
	c := newClient(t, testConfig())
	ctx := context.Background()
	for _, u := range []string{
		"https://good.test/hook",
		"https://good.test:8443/hook",
		"https://127.0.0.1/hook",
		"https://2130706433/hook",
		"https://mapped.test/hook",
		"https://8.8.8.8/hook",
	} {
		if err := c.CheckCallbackURL(ctx, u); err != nil {
			t.Errorf("CheckCallbackURL(%s): %v", u, err)
		}
	}
	for _, u := range []string{
		"http://good.test/hook",     // not https
		"ftp://good.test/hook",      //
		"https://mixed.test/hook",   // one blocked address is enough
		"https://trap.test/hook",    //
		"https://private.test/hook", //
		"https://mappedbad.test/hook",
		"https://nxdomain.test/hook", // nothing shows it public
		"https://empty.test/hook",
		"https://127.0.0.2/hook",
		"https://2130706434/hook",
		"https://0x7f.2/hook",
		"https://[::1]/hook",
		"https://[::ffff:127.0.0.1]/hook",
		"https://10.0.0.1/hook",
		"https://example.1/hook",
		"https:///hook",
		"https://[::1/hook",
		"",
	} {
		wantCode(t, strconv.Quote(u), c.CheckCallbackURL(ctx, u), api.InvalidCallbackURL)
	}
}

func TestFetchRedirects(t *testing.T) {
	s := serve(t, imageHandler(), false)
	ctx := context.Background()
	c := newClient(t, testConfig()) // MaxRedirects 3
	redirect := func(to string) string { return s.url("127.0.0.1", "/redirect?to="+to) }

	for _, tc := range []struct {
		to   string
		want api.Code
	}{
		{s.url("127.0.0.2", "/img"), api.URLInvalidIPRange},
		{s.url("2130706434", "/img"), api.URLInvalidIPRange},
		{s.url("0x7f.2", "/img"), api.URLInvalidIPRange},
		{s.url("trap.test", "/img"), api.URLInvalidIPRange}, // judged when dialed
		{"http://169.254.169.254/latest/meta-data/", api.URLInvalidIPRange},
		{"http://[::ffff:127.0.0.2]:" + s.port + "/img", api.URLInvalidIPRange},
		{"file:///etc/passwd", api.URLProtocolNotAllowed},
		{"ftp://127.0.0.1:" + s.port + "/img", api.URLProtocolNotAllowed},
		{"gopher://127.0.0.2:" + s.port + "/", api.URLProtocolNotAllowed},
	} {
		_, err := c.Fetch(ctx, redirect(tc.to))
		wantCode(t, "redirect to "+tc.to, err, tc.want)
	}

	// Allowed targets are followed, up to MaxRedirects.
	body, err := c.Fetch(ctx, redirect(s.url("good.test", "/img")))
	wantImage(t, "redirect to good.test", body, err)
	body, err = c.Fetch(ctx, redirect("/img"))
	wantImage(t, "relative redirect", body, err)
	body, err = c.Fetch(ctx, s.url("127.0.0.1", "/hop?n=2")) // 3 redirects
	wantImage(t, "3 redirects", body, err)
	_, err = c.Fetch(ctx, s.url("127.0.0.1", "/hop?n=3")) // 4 redirects
	wantCode(t, "4 redirects", err, api.ImageURLUnreachable)

	// MaxRedirects 0 refuses every redirect.
	cfg := testConfig()
	cfg.MaxRedirects = 0
	c0 := newClient(t, cfg)
	_, err = c0.Fetch(ctx, redirect("/img"))
	wantCode(t, "MaxRedirects 0", err, api.ImageURLUnreachable)
	body, err = c0.Fetch(ctx, s.url("127.0.0.1", "/img"))
	wantImage(t, "MaxRedirects 0, no redirect", body, err)

	s.trap.untouched(t)
}

// TestRebinding has the resolver answer an allowed address first and a
// blocked one afterwards, as a rebinding attacker's DNS server does.
func TestRebinding(t *testing.T) {
	ctx := context.Background()

	t.Run("fetch", func(t *testing.T) {
		s := serve(t, imageHandler(), false)
		cfg := testConfig()
		r := cfg.Resolver.(*fakeResolver)
		c := newClient(t, cfg)
		body, err := c.Fetch(ctx, s.url("rebind.test", "/img"))
		wantImage(t, "first fetch", body, err)
		c.CloseIdleConnections() // so the second fetch dials again
		_, err = c.Fetch(ctx, s.url("rebind.test", "/img"))
		wantCode(t, "second fetch", err, api.URLInvalidIPRange)
		if n := r.count("rebind.test"); n != 2 {
			t.Errorf("resolver asked %d times, want 2", n)
		}
		s.trap.untouched(t)
	})

	t.Run("callback", func(t *testing.T) {
		var hits int
		var mu sync.Mutex
		s := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			hits++
			mu.Unlock()
		}), true)
		cfg := testConfig()
		cfg.CAFile = writeCA(t, s.srv)
		c := newClient(t, cfg)
		u := s.url("example.com", "/hook")
		if err := c.CheckCallbackURL(ctx, u); err != nil {
			t.Fatalf("CheckCallbackURL: %v", err)
		}
		status, err := c.Post(ctx, u, []byte(`{}`), nil)
		wantCode(t, "Post after rebinding", err, api.InvalidCallbackURL)
		mu.Lock()
		defer mu.Unlock()
		if status != 0 || hits != 0 {
			t.Errorf("Post: status %d, %d hits; want 0, 0", status, hits)
		}
		s.trap.untouched(t)
	})

	// The Control hook is the last word: a connection to a blocked address
	// is refused at connect time even when nothing judged it before.
	t.Run("control", func(t *testing.T) {
		s := serve(t, imageHandler(), false)
		c := newClient(t, testConfig())
		conn, err := c.dialer.net.DialContext(ctx, "tcp", net.JoinHostPort("127.0.0.2", s.port))
		if err == nil {
			conn.Close()
		}
		wantCode(t, "raw dial to 127.0.0.2", err, api.URLInvalidIPRange)
		conn, err = c.dialer.net.DialContext(ctx, "tcp", net.JoinHostPort("127.0.0.1", s.port))
		if err != nil {
			t.Errorf("raw dial to 127.0.0.1: %v", err)
		} else {
			conn.Close()
		}
		s.trap.untouched(t)
	})
}

// TestFetchSize bounds the body by MaxBytes whether the server declares
// its length or not, and whatever it declares.
func TestFetchSize(t *testing.T) {
	const max = 1 << 10
	mux := http.NewServeMux()
	chunked := func(n int) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			for range n {
				w.Write([]byte{'x'})
				w.(http.Flusher).Flush() // no Content-Length
			}
		}
	}
	mux.HandleFunc("/exact", chunked(max))
	mux.HandleFunc("/over", chunked(max+1))
	mux.HandleFunc("/declared", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(max+1))
		w.WriteHeader(200)
		w.(http.Flusher).Flush()
		<-r.Context().Done() // would never finish the body
	})
	mux.HandleFunc("/endless", func(w http.ResponseWriter, r *http.Request) {
		buf := bytes.Repeat([]byte{'x'}, 512)
		for r.Context().Err() == nil {
			if _, err := w.Write(buf); err != nil {
				return
			}
		}
	})
	s := serve(t, mux, false)
	c := newClient(t, testConfig())
	ctx := context.Background()

	body, err := c.Fetch(ctx, s.url("127.0.0.1", "/exact"))
	if err != nil || len(body) != max {
		t.Errorf("exact: %d bytes, %v; want %d", len(body), err, max)
	}
	_, err = c.Fetch(ctx, s.url("127.0.0.1", "/over"))
	wantCode(t, "chunked over", err, api.ImageSizeTooLarge)
	_, err = c.Fetch(ctx, s.url("127.0.0.1", "/endless"))
	wantCode(t, "endless", err, api.ImageSizeTooLarge)
	start := time.Now()
	_, err = c.Fetch(ctx, s.url("127.0.0.1", "/declared"))
	wantCode(t, "declared over", err, api.ImageSizeTooLarge)
	if d := time.Since(start); d > 4*time.Second {
		t.Errorf("declared over took %v: the body was waited for", d)
	}
}

// rawServer answers every request on 127.0.0.1 with response, verbatim,
// then closes the connection.
func rawServer(t testing.TB, response []byte) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	testnet.Serve(t, ln, func(c net.Conn) {
		br := bufio.NewReader(c)
		for {
			line, err := br.ReadString('\n')
			if err != nil || line == "\r\n" {
				break
			}
		}
		c.Write(response)
	})
	return "http://" + ln.Addr().String()
}

// TestFetchContentLengthLies: a server that declares less than it sends
// gets read only as far as it declared; one that declares more and stops
// short fails.
func TestFetchContentLengthLies(t *testing.T) {
	c := newClient(t, testConfig())
	ctx := context.Background()

	under := rawServer(t, append([]byte("HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 10\r\n\r\n"), bytes.Repeat([]byte{'y'}, 64<<10)...))
	body, err := c.Fetch(ctx, under+"/img")
	if err != nil || string(body) != "yyyyyyyyyy" {
		t.Errorf("understated length: %q, %v; want the 10 declared bytes", body, err)
	}
	over := rawServer(t, []byte("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nshort"))
	_, err = c.Fetch(ctx, over+"/img")
	wantCode(t, "overstated length", err, api.ImageURLUnreachable)
	huge := rawServer(t, []byte("HTTP/1.1 200 OK\r\nContent-Length: 99999999999999\r\n\r\nxx"))
	_, err = c.Fetch(ctx, huge+"/img")
	wantCode(t, "huge length", err, api.ImageSizeTooLarge)
}

// TestFetchTimeout: Timeout bounds the whole fetch, headers and body.
func TestFetchTimeout(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/hang", func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done()
	})
	mux.HandleFunc("/stall", func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("part of an image"))
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	})
	s := serve(t, mux, false)
	cfg := testConfig()
	cfg.Timeout = 200 * time.Millisecond
	c := newClient(t, cfg)
	for _, path := range []string{"/hang", "/stall"} {
		_, err := c.Fetch(context.Background(), s.url("127.0.0.1", path))
		wantCode(t, path, err, api.ImageURLUnreachable)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("%s: %v is not DeadlineExceeded", path, err)
		}
	}
	// The caller's context counts too.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := c.Fetch(ctx, s.url("127.0.0.1", "/img"))
	wantCode(t, "canceled", err, api.ImageURLUnreachable)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("canceled: %v is not Canceled", err)
	}
}

func TestFetchStatusAndHeaders(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/404", http.NotFound)
	mux.HandleFunc("/500", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(500) })
	mux.HandleFunc("/304", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(304) })
	mux.HandleFunc("/204", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(204) })
	mux.HandleFunc("/bigheader", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Big", strings.Repeat("h", 70<<10))
	})
	mux.HandleFunc("/header", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Big", strings.Repeat("h", 30<<10))
		w.Write(image)
	})
	s := serve(t, mux, false)
	c := newClient(t, testConfig())
	ctx := context.Background()
	for _, path := range []string{"/404", "/500", "/304", "/bigheader", "/nothing-here"} {
		_, err := c.Fetch(ctx, s.url("127.0.0.1", path))
		wantCode(t, path, err, api.ImageURLUnreachable)
	}
	body, err := c.Fetch(ctx, s.url("127.0.0.1", "/204"))
	if err != nil || len(body) != 0 {
		t.Errorf("/204: %q, %v", body, err)
	}
	body, err = c.Fetch(ctx, s.url("127.0.0.1", "/header"))
	wantImage(t, "30 KiB header", body, err)
}

// writeCA writes the certificate of a TLS test server as a PEM file.
func writeCA(t testing.TB, srv *httptest.Server) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "ca.pem")
	pemBytes := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	if err := os.WriteFile(path, pemBytes, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestTLS(t *testing.T) {
	var (
		mu       sync.Mutex
		gotBody  []byte
		gotSig   string
		gotCType string
	)
	mux := http.NewServeMux()
	mux.Handle("/img", imageHandler())
	mux.HandleFunc("/hook", func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		gotBody, gotSig, gotCType = b, r.Header.Get("X-Service-Signature"), r.Header.Get("Content-Type")
		mu.Unlock()
		w.WriteHeader(http.StatusAccepted)
		w.Write(bytes.Repeat([]byte("ok"), 100<<10)) // more than is drained
	})
	s := serve(t, mux, true)
	ctx := context.Background()

	// Without the CA the server is not trusted.
	plain := newClient(t, testConfig())
	_, err := plain.Fetch(ctx, s.url("127.0.0.1", "/img"))
	wantCode(t, "untrusted fetch", err, api.ImageURLUnreachable)
	if _, err := plain.Post(ctx, s.url("127.0.0.1", "/hook"), nil, nil); err == nil || code(err) != 0 {
		t.Errorf("untrusted post: %v, want a plain transport error", err)
	}

	cfg := testConfig()
	cfg.CAFile = writeCA(t, s.srv)
	c := newClient(t, cfg)
	body, err := c.Fetch(ctx, s.url("127.0.0.1", "/img"))
	wantImage(t, "trusted fetch", body, err)
	body, err = c.Fetch(ctx, s.url("good.test", "/img")) // not in the cert
	wantCode(t, "name not in the certificate", err, api.ImageURLUnreachable)
	if body != nil {
		t.Errorf("got a body from a server with the wrong name")
	}

	h := http.Header{"Content-Type": {"application/json"}, "X-Service-Signature": {"sha256=abc"}}
	status, err := c.Post(ctx, s.url("127.0.0.1", "/hook"), []byte(`{"jobId":"j1"}`), h)
	if err != nil || status != http.StatusAccepted {
		t.Fatalf("Post: %d, %v", status, err)
	}
	mu.Lock()
	if string(gotBody) != `{"jobId":"j1"}` || gotSig != "sha256=abc" || gotCType != "application/json" {
		t.Errorf("delivered %q sig %q type %q", gotBody, gotSig, gotCType)
	}
	mu.Unlock()
	s.trap.untouched(t)
}

func TestPost(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/moved", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, r.URL.Query().Get("to"), http.StatusTemporaryRedirect)
	})
	mux.HandleFunc("/fail", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(500) })
	mux.HandleFunc("/ok", func(w http.ResponseWriter, r *http.Request) {})
	s := serve(t, mux, true)
	cfg := testConfig()
	cfg.CAFile = writeCA(t, s.srv)
	cfg.MaxRedirects = 5 // Post follows none regardless
	c := newClient(t, cfg)
	ctx := context.Background()

	status, err := c.Post(ctx, s.url("127.0.0.1", "/moved?to="+s.url("127.0.0.2", "/ok")), nil, nil)
	if err != nil || status != http.StatusTemporaryRedirect {
		t.Errorf("redirect: %d, %v; want 307 returned, not followed", status, err)
	}
	status, err = c.Post(ctx, s.url("127.0.0.1", "/moved?to=/ok"), nil, nil)
	if err != nil || status != http.StatusTemporaryRedirect {
		t.Errorf("relative redirect: %d, %v; want 307", status, err)
	}
	status, err = c.Post(ctx, s.url("127.0.0.1", "/fail"), nil, nil)
	if err != nil || status != 500 {
		t.Errorf("500: %d, %v", status, err)
	}
	for _, u := range []string{
		"http://127.0.0.1:" + s.port + "/ok", // https only
		s.url("127.0.0.2", "/ok"),
		s.url("2130706434", "/ok"),
		s.url("trap.test", "/ok"),
		s.url("private.test", "/ok"),
		s.url("[::ffff:127.0.0.1]", "/ok"),
		"https://[::1/ok",
		"ftp://127.0.0.1/ok",
	} {
		status, err := c.Post(ctx, u, []byte("{}"), nil)
		wantCode(t, u, err, api.InvalidCallbackURL)
		if status != 0 {
			t.Errorf("%s: status %d", u, status)
		}
	}
	// A network failure is no URL problem: a plain error, to retry.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "https://" + ln.Addr().String() + "/ok"
	ln.Close()
	if _, err := c.Post(ctx, closed, nil, nil); err == nil || code(err) != 0 {
		t.Errorf("refused connection: %v, want a plain error", err)
	}
	s.trap.untouched(t)
}

// TestPostUpgradeAnswer: a receiver answering 101 Switching Protocols and
// then holding the connection silent ends the delivery (a failure) within
// the timeout. The transport hands over the raw connection as the body and
// stops watching the request's context; reading it would wait for as long
// as the receiver likes, holding a delivery slot for good.
func TestPostUpgradeAnswer(t *testing.T) {
	held := make(chan struct{})
	t.Cleanup(func() { close(held) })
	s := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, rw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		defer conn.Close()
		rw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: x\r\n\r\n")
		rw.Flush()
		<-held
	}), true)
	cfg := testConfig()
	cfg.CAFile = writeCA(t, s.srv)
	cfg.Timeout = time.Second
	c := newClient(t, cfg)
	type result struct {
		status int
		err    error
	}
	done := make(chan result, 1)
	go func() {
		status, err := c.Post(context.Background(), s.url("127.0.0.1", "/hook"), []byte("{}"), nil)
		done <- result{status, err}
	}()
	select {
	case r := <-done:
		if r.status >= 200 && r.status < 300 {
			t.Errorf("an upgrade answer counted as delivered: %d, %v", r.status, r.err)
		}
	case <-time.After(20 * time.Second): // a bound on a hang, not a wait for time to pass
		t.Fatal("Post still waits on a receiver that answered 101 and went silent")
	}
}

// TestNoProxyFromEnvironment: HTTP(S)_PROXY pointing at the trap changes
// nothing; the client connects directly.
func TestNoProxyFromEnvironment(t *testing.T) {
	s := serve(t, imageHandler(), false)
	t.Setenv("HTTP_PROXY", "http://127.0.0.2:"+s.port)
	t.Setenv("HTTPS_PROXY", "http://127.0.0.2:"+s.port)
	t.Setenv("http_proxy", "http://127.0.0.2:"+s.port)
	t.Setenv("NO_PROXY", "")
	c := newClient(t, testConfig())
	if c.transport.Proxy != nil {
		t.Error("Transport.Proxy is set")
	}
	body, err := c.Fetch(context.Background(), s.url("good.test", "/img"))
	wantImage(t, "fetch with proxy env", body, err)
	s.trap.untouched(t)
}

func TestNewConfig(t *testing.T) {
	_, err := New(Config{Timeout: -1, MaxBytes: -1, MaxRedirects: -1, CAFile: "/nonexistent/ca.pem"})
	if err == nil {
		t.Fatal("New accepted a bad config")
	}
	for _, field := range []string{"Timeout", "MaxBytes", "MaxRedirects", "CAFile"} {
		if !strings.Contains(err.Error(), field) {
			t.Errorf("error does not name %s: %v", field, err)
		}
	}
	garbage := filepath.Join(t.TempDir(), "garbage.pem")
	os.WriteFile(garbage, []byte("not a certificate"), 0o600)
	if _, err := New(Config{CAFile: garbage}); err == nil {
		t.Error("New accepted a CAFile without certificates")
	}
	// One good certificate and one broken: refused, naming the broken one.
	s := serve(t, imageHandler(), true)
	good, _ := os.ReadFile(writeCA(t, s.srv))
	mixed := filepath.Join(t.TempDir(), "mixed.pem")
	os.WriteFile(mixed, append(good, "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"...), 0o600)
	if _, err := New(Config{CAFile: mixed}); err == nil || !strings.Contains(err.Error(), "certificate 2") {
		t.Errorf("a CAFile with a broken second certificate: %v", err)
	}
	c, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	if c.timeout != DefaultTimeout || c.maxBytes != DefaultMaxBytes || c.maxRedirects != 0 {
		t.Errorf("defaults: timeout %v, maxBytes %d, maxRedirects %d", c.timeout, c.maxBytes, c.maxRedirects)
	}
	if c.transport.MaxResponseHeaderBytes != 64<<10 {
		t.Errorf("MaxResponseHeaderBytes = %d", c.transport.MaxResponseHeaderBytes)
	}
}
