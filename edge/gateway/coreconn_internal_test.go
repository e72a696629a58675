package gateway

import (
	"bufio"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/slipverify/slipverify/core/lib/testnet"
	"github.com/slipverify/slipverify/edge/config"
)

// fakeCore counts the requests it reads on each connection; after each it
// answers 200 and closes (answer) or closes without answering. It answers
// the edge's readiness probes, which it does not count, 200: it is ready.
type fakeCore struct {
	addr     string
	requests atomic.Int64
	closed   chan struct{} // one value per connection closed
}

func startFakeCore(t *testing.T, answer bool) *fakeCore {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeCore{addr: ln.Addr().String(), closed: make(chan struct{}, 16)}
	testnet.Serve(t, ln, func(c net.Conn) {
		defer c.Close()
		req, err := http.ReadRequest(bufio.NewReader(c))
		if err != nil {
			return
		}
		if req.URL.Path == "/ready" {
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
			return
		}
		defer func() { f.closed <- struct{}{} }() // after the close
		io.Copy(io.Discard, req.Body)
		f.requests.Add(1)
		if answer {
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		}
	})
	return f
}

// coreClient is the edge's client of core at addr, as FromConfig makes it.
func coreClient(t *testing.T, addr string) *fasthttp.HostClient {
	env := map[string]string{"SLIP_CORE_ADDR": addr, "SLIP_EDGE_TOKEN": "coreconn-test-edge-token-0123456789abcdef", "SLIP_EDGE_ACCESS_LOG": "off"}
	cfg, err := config.Load(nil, func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	gw, err := FromConfig(cfg, time.Now, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(gw.Close)
	return gw.cfg.Core
}

func post(c *fasthttp.HostClient, addr string) (int, error) {
	req, res := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(res)
	req.SetRequestURI("http://" + addr + "/verify")
	req.Header.SetMethod("POST")
	req.SetBodyString(`{"payload":"x","checkDuplicate":true}`)
	err := c.Do(req, res)
	return res.StatusCode(), err
}

// TestCoreCutAfterRequest: a connection cut after core read the request
// (core crashed, or something between them closed it) fails the request;
// it is not sent again, since core may have acted on it (a v1 verification
// sent twice is answered duplicate_slip, charged; a quota adjustment moves
// twice).
func TestCoreCutAfterRequest(t *testing.T) {
	core := startFakeCore(t, false)
	c := coreClient(t, core.addr)
	if _, err := post(c, core.addr); err == nil {
		t.Fatal("a request whose connection was cut before the answer succeeded")
	}
	if n := core.requests.Load(); n != 1 {
		t.Errorf("core read the request %d times, want once", n)
	}
}

// TestCoreClosedIdle: a pooled connection core closed while it was idle (as
// a restart closes them) is not used: the request goes on a new connection
// and is answered.
func TestCoreClosedIdle(t *testing.T) {
	core := startFakeCore(t, true)
	c := coreClient(t, core.addr)
	for i := range 3 {
		if status, err := post(c, core.addr); err != nil || status != 200 {
			t.Fatalf("request %d: %d, %v", i, status, err)
		}
		select { // core closes the connection after each answer
		case <-core.closed:
		case <-time.After(10 * time.Second):
			t.Fatal("core did not close the connection")
		}
	}
	if n := core.requests.Load(); n != 3 {
		t.Errorf("core read %d requests, want 3", n)
	}
}
