package gateway_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/slipverify/slipverify/core/api"
	"github.com/slipverify/slipverify/core/lib/testnet"
)

// charged is the number of verifications core has charged, every service
// together, read from its own counters: with bbolt each core keeps its own.
func charged(t testing.TB, core *testnet.Program) int64 {
	t.Helper()
	req, _ := http.NewRequest("GET", core.URL()+api.PathUsageCounters, nil)
	req.Header.Set(api.HeaderEdgeToken, testnet.EdgeToken)
	res, err := noKeepAlive.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var body struct {
		Data api.UsageCounters `json:"data"`
	}
	if err := json.NewDecoder(res.Body).Decode(&body); err != nil || res.StatusCode != 200 {
		t.Fatalf("core's counters: %d %v", res.StatusCode, err)
	}
	var n int64
	for _, s := range body.Data.Services {
		n += s.Total
	}
	return n
}

// noKeepAlive asks the cores themselves: no connection is kept, which would
// hold a core's shutdown.
var noKeepAlive = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}

// metric is the value of series on the edge's metrics, -1 when it is not
// there.
func (e *edge) metric(series string) float64 {
	var b bytes.Buffer
	e.gw.Metrics().WritePrometheus(&b)
	for _, line := range strings.Split(b.String(), "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			var f float64
			fmt.Sscan(v, &f)
			return f
		}
	}
	return -1
}

// ready is edge_core_ready of core.
func (e *edge) ready(core *testnet.Program) float64 {
	return e.metric(fmt.Sprintf(`edge_core_ready{core=%q}`, core.Addr))
}

// probe moves the edge's clock past a probe interval and asks its /health,
// which runs the probe round then due: the edge knows each core's
// readiness as of now.
func (e *edge) probe(t testing.TB) {
	t.Helper()
	e.clock.Advance(time.Second) // SLIP_EDGE_CORE_PROBE
	http.Get(e.url + "/health")
}

// TestTwoCores: one service's verifications all go to one of two cores
// while the load is light (its core's batches and counter locks are its
// own); with that core killed every later request is answered by the
// other, none lost and none charged twice; started again and ready, the
// killed core takes the service's requests back.
func TestTwoCores(t *testing.T) {
	a, b := testnet.StartCore(t, seed), testnet.StartCore(t, seed)
	e := startEdge(t, a, "SLIP_CORE_ADDR="+a.Addr+","+b.Addr)
	sent := 0
	send := func(n int) {
		t.Helper()
		for range n {
			sent++
			e.do(t, "POST", "/v2/verify/bank", payload(fmt.Sprintf("TWOCORES%05d", sent)), bearer(keyFast)...).want(t, 200, "")
		}
	}
	send(20)
	home, away := a, b
	if charged(t, b) > 0 {
		home, away = b, a
	}
	if ch, ca := charged(t, home), charged(t, away); ch != 20 || ca != 0 {
		t.Fatalf("20 verifications of one service, one at a time: %d charged by one core, %d by the other; want all by one", ch, ca)
	}

	home.Kill()
	send(20)
	if got := charged(t, away); got != 20 {
		t.Errorf("with the service's core killed, the other charged %d of the next 20 verifications", got)
	}
	if r := e.ready(home); r != 0 {
		t.Errorf("edge_core_ready of the killed core: %v, want 0", r)
	}

	home.Restart(t)
	if got := charged(t, home); got != 20 {
		t.Errorf("the killed core charged %d verifications, 20 before it was killed", got)
	}
	e.probe(t)
	if r := e.ready(home); r != 1 {
		t.Fatalf("edge_core_ready of the core started again: %v, want 1", r)
	}
	send(20)
	if ch, ca := charged(t, home), charged(t, away); ch != 40 || ca != 20 {
		t.Errorf("after its restart the service's core charged %d of 20 verifications, the other %d", ch-20, ca-20)
	}
}

// TestRollingRestart: under continuous concurrent load, two cores are
// stopped (SIGTERM) and started again one at a time, each once the edge
// has taken the one before back: not a request fails, and each answered
// verification is charged once, by one core. The load is one service's,
// eight at a time: more than its core takes under the bound, so the other
// core gets some whichever is the service's.
func TestRollingRestart(t *testing.T) {
	const drain = "SLIP_CORE_DRAIN=3s" // longer than the edge takes to notice here (a probe after /ready fails)
	a, b := testnet.StartCore(t, seed, drain), testnet.StartCore(t, seed, drain)
	e := startEdge(t, a, "SLIP_CORE_ADDR="+a.Addr+","+b.Addr)
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 8}}

	var answered, failed atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				req, _ := http.NewRequest("POST", e.url+"/v2/verify/bank", strings.NewReader(payload(fmt.Sprintf("ROLL%d%07d", w, i))))
				req.Header.Set("Authorization", "Bearer "+keyFast)
				res, err := client.Do(req)
				if err != nil {
					failed.Add(1)
					t.Errorf("request %d.%d: %v", w, i, err)
					continue
				}
				body, _ := io.ReadAll(res.Body)
				res.Body.Close()
				if res.StatusCode != 200 {
					failed.Add(1)
					t.Errorf("request %d.%d: %d %s", w, i, res.StatusCode, body)
					continue
				}
				answered.Add(1)
			}
		})
	}
	// The load stops before the edge and the cores, should the test end
	// early; its idle connections would hold the edge's shutdown.
	stopLoad := sync.OnceFunc(func() { close(stop); wg.Wait(); client.CloseIdleConnections() })
	t.Cleanup(stopLoad)
	progress := func(what string) {
		t.Helper()
		from := answered.Load()
		testnet.Eventually(t, 30*time.Second, func() bool { return answered.Load() >= from+50 },
			func() string { return "the load made no progress " + what })
	}
	readyStatus := func(core *testnet.Program) int {
		res, err := noKeepAlive.Get(core.URL() + "/ready")
		if err != nil {
			return 0
		}
		res.Body.Close()
		return res.StatusCode
	}

	progress("at the start")
	for _, core := range []*testnet.Program{a, b} {
		syscall.Kill(core.Pid(), syscall.SIGTERM)
		testnet.Eventually(t, 10*time.Second, func() bool { return readyStatus(core) == 503 },
			func() string { return "a stopping core's /ready did not fail" })
		e.probe(t)
		if r := e.ready(core); r != 0 {
			t.Fatalf("edge_core_ready of the stopping core: %v, want 0", r)
		}
		progress("while a core drains")
		before := charged(t, core)
		core.Restart(t) // waits until it has stopped, then until it serves again
		e.probe(t)
		if r := e.ready(core); r != 1 {
			t.Fatalf("edge_core_ready of the core started again: %v, want 1", r)
		}
		testnet.Eventually(t, 30*time.Second, func() bool { return charged(t, core) > before },
			func() string { return "the core started again takes no request" })
	}
	progress("at the end")
	stopLoad()
	if n := failed.Load(); n > 0 {
		t.Fatalf("%d requests failed during the rolling restart (%d answered)", n, answered.Load())
	}
	if ca, cb := charged(t, a), charged(t, b); ca+cb != answered.Load() {
		t.Errorf("%d verifications answered, %d charged by one core and %d by the other", answered.Load(), ca, cb)
	}
	t.Logf("%d verifications answered during the rolling restart", answered.Load())
}
