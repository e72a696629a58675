package gateway

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/valyala/fasthttp"

	"github.com/slipverify/slipverify/edge/config"
)

// gatewayOf is the edge's request path in front of the cores at addrs
// (SLIP_CORE_ADDR), as FromConfig makes it: the cores probed once, as it
// starts, and not again while the test runs.
func gatewayOf(t *testing.T, addrs string) *Gateway {
	env := map[string]string{"SLIP_CORE_ADDR": addrs, "SLIP_EDGE_TOKEN": "cores-test-edge-token-0123456789abcdef", "SLIP_EDGE_ACCESS_LOG": "off",
		"SLIP_EDGE_CORE_PROBE": "1h"}
	cfg, err := config.Load(nil, func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	gw, err := FromConfig(cfg, time.Now, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(gw.Close)
	return gw
}

// metric is the value of series on gw's metrics, -1 when it is not there.
func metric(gw *Gateway, series string) float64 {
	var b bytes.Buffer
	gw.Metrics().WritePrometheus(&b)
	for _, line := range strings.Split(b.String(), "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			var f float64
			fmt.Sscan(v, &f)
			return f
		}
	}
	return -1
}

// TestCoreCutNotResent: with two cores ready, requests that one core read
// and then cut off without an answer (it crashed) fail, and none of them
// goes on to the other core, which answers the rest: the first may have
// acted on it. The other core keeps its connections open, as core does.
func TestCoreCutNotResent(t *testing.T) {
	cut, ok := startFakeCore(t, false), startFakeServer(t, "127.0.0.1:0")
	gw := gatewayOf(t, cut.addr+","+ok.addr)
	const n = 6
	failed := 0
	for i := range n {
		if status, err := post(gw.cfg.Core, "core"); err != nil {
			failed++
		} else if status != 200 {
			t.Fatalf("status %d", status)
		}
		if read := ok.requests.Load() + cut.requests.Load(); read != int64(i+1) {
			t.Fatalf("after %d requests the cores read %d", i+1, read)
		}
	}
	if cut.requests.Load() == 0 || ok.requests.Load() == 0 {
		t.Fatalf("requests not spread over both cores: %d to the one that cuts, %d to the other", cut.requests.Load(), ok.requests.Load())
	}
	if int64(failed) != cut.requests.Load() || ok.requests.Load()+cut.requests.Load() != n {
		t.Errorf("%d failed, %d read by the core that cuts, %d by the other: want every cut request failed, and each request read once",
			failed, cut.requests.Load(), ok.requests.Load())
	}
	if f := metric(gw, "edge_core_failovers_total"); f != 0 {
		t.Errorf("edge_core_failovers_total %v, want 0", f)
	}
}

// fakeServer is a core served by fasthttp, keeping connections alive: it
// answers /ready 200 (503 while notReady) and counts every other request,
// answered 200; a request to /hold is answered once hold is closed.
type fakeServer struct {
	addr     string
	ln       net.Listener
	requests atomic.Int64
	notReady atomic.Bool
	held     chan struct{} // one value per request to /hold arrived
	hold     chan struct{}
}

func startFakeServer(t *testing.T, addr string) *fakeServer {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeServer{addr: ln.Addr().String(), ln: ln, held: make(chan struct{}, 8), hold: make(chan struct{})}
	srv := &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) {
		switch string(ctx.Path()) {
		case "/ready":
			if f.notReady.Load() {
				ctx.SetStatusCode(fasthttp.StatusServiceUnavailable)
			}
		case "/hold":
			f.held <- struct{}{}
			<-f.hold
		default:
			f.requests.Add(1)
		}
		ctx.SetBodyString("ok")
	}}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Shutdown() })
	return f
}

// TestFewestInFlight: requests of no service (the auth cache's lookups):
// while one core holds a request, the next ones go to the other, where
// round robin would send every second one to the busy core.
func TestFewestInFlight(t *testing.T) {
	x, y := startFakeServer(t, "127.0.0.1:0"), startFakeServer(t, "127.0.0.1:0")
	gw := gatewayOf(t, x.addr+","+y.addr)
	busy, done := holdAs(t, gw, "", x, y)
	free := y
	if busy == y {
		free = x
	}
	const n = 6
	for i := range n {
		if status, err := post(gw.cfg.Core, "core"); err != nil || status != 200 {
			t.Fatalf("request %d: %d %v", i, status, err)
		}
	}
	if b, f := busy.requests.Load(), free.requests.Load(); b != 0 || f != n {
		t.Errorf("with one core holding a request: %d requests to it, %d to the other; want all %d to the other", b, f, n)
	}
	close(x.hold)
	close(y.hold)
	if err := <-done; err != nil {
		t.Errorf("the held request: %v", err)
	}
}

// TestRefusedCoreFailover: a core that was ready and then refuses
// connections (it stopped) costs no request: the request goes to the other
// core, the refusing core is dropped at once, and the next requests go to
// the other core without trying it again.
func TestRefusedCoreFailover(t *testing.T) {
	gone, up := startFakeServer(t, "127.0.0.1:0"), startFakeServer(t, "127.0.0.1:0")
	gw := gatewayOf(t, gone.addr+","+up.addr)
	if r := metric(gw, fmt.Sprintf(`edge_core_ready{core=%q}`, gone.addr)); r != 1 {
		t.Fatalf("edge_core_ready of the core before it stops: %v", r)
	}
	gone.ln.Close() // new connections are refused
	const n = 4
	for i := range n {
		if status, err := post(gw.cfg.Core, "core"); err != nil || status != 200 {
			t.Fatalf("request %d: %d %v", i, status, err)
		}
	}
	if got := up.requests.Load(); got != n {
		t.Errorf("the core up answered %d requests, want %d", got, n)
	}
	if f := metric(gw, "edge_core_failovers_total"); f != 1 {
		t.Errorf("edge_core_failovers_total %v, want 1: the stopped core tried once, then dropped", f)
	}
	if r := metric(gw, fmt.Sprintf(`edge_core_ready{core=%q}`, gone.addr)); r != 0 {
		t.Errorf("edge_core_ready of the stopped core: %v, want 0", r)
	}
}

// TestCoresOfAName: a name in SLIP_CORE_ADDR stands for every address it
// resolves to, resolved again on each Resolve: a core added is probed and
// takes requests, a core gone gets none and leaves the metrics, and a
// resolution that fails changes nothing.
func TestCoresOfAName(t *testing.T) {
	one := startFakeServer(t, "127.0.0.1:0")
	_, port, _ := net.SplitHostPort(one.addr)
	two := startFakeServer(t, "127.0.0.2:"+port) // the same port: one name, one port
	var mu sync.Mutex
	ips, resolveErr := []string{"127.0.0.1"}, error(nil)
	cfg, err := config.Load(nil, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	cs := NewCores(CoresConfig{
		Addrs: []string{"cores.test:" + port}, Client: func(addr string) *fasthttp.HostClient { return newCoreClient(addr, cfg) },
		EdgeToken: "token", ProbeEvery: time.Second, ResolveEvery: time.Second, Now: time.Now, Log: slog.New(slog.DiscardHandler),
		Resolve: func(_ context.Context, host string) ([]string, error) {
			mu.Lock()
			defer mu.Unlock()
			if host != "cores.test" {
				t.Errorf("resolved %q", host)
			}
			return ips, resolveErr
		},
	})
	t.Cleanup(cs.Close)
	m := &Metrics{set: metrics.NewSet(), cores: cs.set}
	gw := &Gateway{cfg: Config{Core: &fasthttp.HostClient{Addr: "core", Transport: cs}}, cores: cs, metrics: m}
	send := func(n int) {
		t.Helper()
		for i := range n {
			if status, err := post(gw.cfg.Core, "core"); err != nil || status != 200 {
				t.Fatalf("request %d: %d %v", i, status, err)
			}
		}
	}
	set := func(addrs []string, err error) {
		mu.Lock()
		ips, resolveErr = addrs, err
		mu.Unlock()
		cs.Resolve(context.Background())
	}
	ready := func(addr string) float64 { return metric(gw, fmt.Sprintf(`edge_core_ready{core=%q}`, addr)) }

	send(4)
	if one.requests.Load() != 4 || two.requests.Load() != 0 || ready(two.addr) != -1 {
		t.Fatalf("one address: %d and %d requests, want all to the first", one.requests.Load(), two.requests.Load())
	}
	set([]string{"127.0.0.1", "127.0.0.2"}, nil)
	if ready(two.addr) != 1 {
		t.Fatalf("the core added: edge_core_ready %v, want 1", ready(two.addr))
	}
	send(4)
	if two.requests.Load() == 0 {
		t.Errorf("the core added took no request (%d, %d)", one.requests.Load(), two.requests.Load())
	}
	set(nil, errors.New("no such host"))
	if ready(one.addr) != 1 || ready(two.addr) != 1 {
		t.Errorf("a failed resolution changed the cores: %v %v", ready(one.addr), ready(two.addr))
	}
	set([]string{"127.0.0.2"}, nil)
	before := one.requests.Load()
	send(4)
	if one.requests.Load() != before || ready(one.addr) != -1 {
		t.Errorf("the core gone took %d requests, edge_core_ready %v (want none, and no series)", one.requests.Load()-before, ready(one.addr))
	}
}

// sendAs sends a request of service svc (hService, as forward sets it)
// through gw and returns the one of cores that read it.
func sendAs(t *testing.T, gw *Gateway, svc string, cores ...*fakeServer) *fakeServer {
	t.Helper()
	before := make([]int64, len(cores))
	for i, c := range cores {
		before[i] = c.requests.Load()
	}
	req, res := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(res)
	req.SetRequestURI("http://core/verify")
	req.Header.SetMethod("POST")
	req.Header.SetCanonical(hService, []byte(svc))
	if err := gw.cfg.Core.Do(req, res); err != nil || res.StatusCode() != 200 {
		t.Fatalf("a request of %s: %d %v", svc, res.StatusCode(), err)
	}
	var got *fakeServer
	for i, c := range cores {
		if n := c.requests.Load() - before[i]; n == 1 && got == nil {
			got = c
		} else if n != 0 {
			t.Fatalf("a request of %s read %d times by core %d", svc, n, i)
		}
	}
	if got == nil {
		t.Fatalf("a request of %s reached no core", svc)
	}
	return got
}

// holdAs sends a request of service svc ("" for none) to /hold through
// gw, and returns the one of the cores x and y holding it once it
// arrived, and the request's error, sent once the core answers it.
func holdAs(t *testing.T, gw *Gateway, svc string, x, y *fakeServer) (*fakeServer, <-chan error) {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		req, res := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
		defer fasthttp.ReleaseRequest(req)
		defer fasthttp.ReleaseResponse(res)
		req.SetRequestURI("http://core/hold")
		if svc != "" {
			req.Header.SetCanonical(hService, []byte(svc))
		}
		done <- gw.cfg.Core.Do(req, res)
	}()
	select {
	case <-x.held:
		return x, done
	case <-y.held:
		return y, done
	case err := <-done:
		t.Fatalf("a held request of %s was answered: %v", svc, err)
	case <-time.After(10 * time.Second):
		t.Fatalf("a held request of %s reached no core", svc)
	}
	return nil, nil
}

// TestServiceSticksToCore: each service's requests all reach one core
// while loads are light, and that core is the same behind a second edge;
// services spread over both cores.
func TestServiceSticksToCore(t *testing.T) {
	x, y := startFakeServer(t, "127.0.0.1:0"), startFakeServer(t, "127.0.0.1:0")
	gw, other := gatewayOf(t, x.addr+","+y.addr), gatewayOf(t, y.addr+","+x.addr)
	const services = 32 // all on one core by chance: 2 in 2^32
	home := map[string]*fakeServer{}
	for round := range 3 {
		for i := range services {
			svc := fmt.Sprintf("svc-%02d", i)
			got := sendAs(t, gw, svc, x, y)
			if round == 0 {
				home[svc] = got
			} else if got != home[svc] {
				t.Fatalf("service %s: its requests reached both cores", svc)
			}
		}
	}
	onX := 0
	for svc, c := range home {
		if c == x {
			onX++
		}
		if got := sendAs(t, other, svc, x, y); got != c {
			t.Errorf("service %s: a second edge sends it to the other core", svc)
		}
	}
	if onX == 0 || onX == services {
		t.Errorf("%d services: %d on one core, %d on the other; want both some", services, onX, services-onX)
	}
}

// serviceHome starts two cores behind a gateway and returns them, with
// the one svc's requests go to and the other.
func serviceHome(t *testing.T, svc string) (gw *Gateway, x, y, home, away *fakeServer) {
	t.Helper()
	x, y = startFakeServer(t, "127.0.0.1:0"), startFakeServer(t, "127.0.0.1:0")
	gw = gatewayOf(t, x.addr+","+y.addr)
	home = sendAs(t, gw, svc, x, y)
	away = map[*fakeServer]*fakeServer{x: y, y: x}[home]
	return gw, x, y, home, away
}

// TestServiceCoreNotReady: while a service's core fails its probe, the
// service's requests go to the other core; they come back once it answers
// its probe again.
func TestServiceCoreNotReady(t *testing.T) {
	const svc = "svc-moving"
	gw, x, y, home, away := serviceHome(t, svc)

	home.notReady.Store(true)
	gw.cores.probeAll()
	for i := range 4 {
		if got := sendAs(t, gw, svc, x, y); got != away {
			t.Fatalf("request %d with the service's core not ready went to it", i)
		}
	}
	home.notReady.Store(false)
	gw.cores.probeAll()
	for i := range 4 {
		if got := sendAs(t, gw, svc, x, y); got != home {
			t.Fatalf("request %d with the service's core ready again went to the other", i)
		}
	}
}

// TestServiceSpills: a service's core holding one of its requests still
// takes the next (below the bound: ceil(1.25 × 2 in flight / 2) = 2);
// holding two, at the bound, the service's next requests go to the other
// core, and come back once the two are answered.
func TestServiceSpills(t *testing.T) {
	const svc = "svc-busy"
	gw, x, y, home, away := serviceHome(t, svc)

	first, done1 := holdAs(t, gw, svc, x, y)
	if first != home {
		t.Fatalf("the service's first held request went to the other core")
	}
	if got := sendAs(t, gw, svc, x, y); got != home {
		t.Errorf("with one request held, the service's next went to the other core")
	}
	second, done2 := holdAs(t, gw, svc, x, y)
	if second != home {
		t.Fatalf("the service's second held request went to the other core")
	}
	for i := range 4 {
		if got := sendAs(t, gw, svc, x, y); got != away {
			t.Errorf("request %d with its core holding two went to it, not the other core", i)
		}
	}
	close(home.hold)
	for _, done := range []<-chan error{done1, done2} {
		if err := <-done; err != nil {
			t.Errorf("a held request: %v", err)
		}
	}
	if got := sendAs(t, gw, svc, x, y); got != home {
		t.Errorf("with the held requests answered, the service's next went to the other core")
	}
}
