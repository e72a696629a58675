package main

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/slipverify/slipverify/core/lib/testnet"
	"github.com/slipverify/slipverify/edge/authn"
)

// nonceEdge is an edge process with its metrics listener.
type nonceEdge struct {
	*testnet.Program
	metrics string
}

// signedAt sends GET /b2b/branches signed by the B2B client, stamped ts
// with nonce, and returns the status and body.
func (e *nonceEdge) signedAt(t *testing.T, ts int64, nonce string) (int, string) {
	t.Helper()
	const uri = "/b2b/branches"
	tsRaw := strconv.FormatInt(ts, 10)
	sts := authn.AppendStringToSign(nil, []byte("GET"), authn.SignedPath([]byte(uri)), []byte(tsRaw), []byte(nonce), nil)
	req, _ := http.NewRequest("GET", e.URL()+uri, nil)
	req.Header.Set("X-API-Key", clientKey)
	req.Header.Set("X-Timestamp", tsRaw)
	req.Header.Set("X-Nonce", nonce)
	req.Header.Set("X-Signature", authn.NewSigner(clientSecret).Sign(sts))
	res, err := http.DefaultClient.Do(req)
	if err != nil { // not Fatal: the load runs this in goroutines
		t.Error(err)
		return 0, err.Error()
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(body)
}

// want sends a signed request and checks its answer: 200, or the status
// and error code.
func (e *nonceEdge) want(t *testing.T, what string, ts int64, nonce string, status int, code string) {
	t.Helper()
	got, body := e.signedAt(t, ts, nonce)
	if got != status || !strings.Contains(body, code) {
		t.Errorf("%s: %d %s, want %d %s", what, got, body, status, code)
	}
}

// metric returns the value of the sample named exactly name on the edge's
// metrics listener, -1 when absent.
func (e *nonceEdge) metric(t *testing.T, name string) float64 {
	t.Helper()
	for _, l := range e.metricLines(t) {
		if v, ok := strings.CutPrefix(l, name+" "); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return f
		}
	}
	return -1
}

func (e *nonceEdge) metricLines(t *testing.T) []string {
	t.Helper()
	res, err := http.Get("http://" + e.metrics + "/metrics")
	if err != nil {
		return nil
	}
	defer res.Body.Close()
	var lines []string
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	return lines
}

func status(url string) int {
	res, err := http.Get(url)
	if err != nil {
		return 0
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return res.StatusCode
}

// nonceEnv is an edge's settings for these tests: the broker, a metrics
// listener, the stack's token.
func nonceEnv(t *testing.T, kafka string) (env []string, metrics string) {
	metrics = testnet.FreeAddr(t)
	return []string{"SLIP_KAFKA_ADDR=" + kafka, "SLIP_EDGE_METRICS_ADDR=" + metrics, "SLIP_EDGE_TOKEN=" + edgeToken}, metrics
}

// nonceStack starts a broker of two partitions and core on it, with the
// tests' seed.
func nonceStack(t *testing.T) (broker, core *testnet.Program) {
	broker = testnet.StartBroker(t, "SLIP_BROKER_PARTITIONS=2")
	core = testnet.StartCore(t, testnet.Seed(t, seedJSON("https://shop.example/hook")), "SLIP_KAFKA_ADDR="+broker.Addr,
		"SLIP_EDGE_TOKEN="+edgeToken, "SLIP_MASTER_KEY="+masterKey)
	return broker, core
}

// startNonceEdge starts an edge on broker and core (nonceEnv).
func startNonceEdge(t *testing.T, broker, core *testnet.Program) *nonceEdge {
	env, metrics := nonceEnv(t, broker.Addr)
	return &nonceEdge{testnet.StartEdge(t, core.Addr, env...), metrics}
}

// TestNoncesSpanEdgesAndRestarts: a signed request accepted by edge A is
// refused DUPLICATE_NONCE by edge B; one stamped 240 s ahead and accepted
// before a restart of the whole stack (broker, both edges) is refused after
// it, and so is one accepted by B just before its SIGTERM; after A is
// killed (-9) and restarted a replay of a request it
// accepted is refused, and a fresh request stamped 4 minutes before the
// restart is accepted. It reports how long A's nonces take to reach B.
func TestNoncesSpanEdgesAndRestarts(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the stack as processes")
	}
	broker, core := nonceStack(t)
	a, b := startNonceEdge(t, broker, core), startNonceEdge(t, broker, core)
	defer http.DefaultClient.CloseIdleConnections()
	added := func(e *nonceEdge) float64 { return e.metric(t, `edge_nonces_received_total{result="added"}`) }
	waitAdded := func(e *nonceEdge, n float64) {
		t.Helper()
		testnet.Eventually(t, 10*time.Second, func() bool { return added(e) >= n },
			func() string { return fmt.Sprintf("the other edge received %v nonces, want %v", added(e), n) })
	}

	// One edge's nonce, refused by the other.
	n1 := uuid.NewString()
	a.want(t, "signed, edge A", time.Now().Unix(), n1, 200, "")
	sent := time.Now()
	waitAdded(b, 1)
	t.Logf("a nonce accepted by edge A was known to edge B %v after A answered (polled every 20 ms)", time.Since(sent).Round(time.Millisecond))
	b.want(t, "the same request, edge B", time.Now().Unix(), n1, 401, "DUPLICATE_NONCE")

	// Under load: 2,000 signed requests to A from 8 clients at once, then
	// B's lag histogram.
	const load, clients = 2000, 8
	start := time.Now()
	var wg sync.WaitGroup
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range load / clients {
				if got, body := a.signedAt(t, time.Now().Unix(), uuid.NewString()); got != 200 {
					t.Errorf("load: %d %s", got, body)
					return
				}
			}
		}()
	}
	wg.Wait()
	took := time.Since(start)
	waitAdded(b, 1+load)
	sum, count := b.metric(t, "edge_nonces_lag_seconds_sum"), b.metric(t, "edge_nonces_lag_seconds_count")
	var buckets []string
	for _, l := range b.metricLines(t) {
		if strings.HasPrefix(l, "edge_nonces_lag_seconds_bucket") {
			buckets = append(buckets, strings.TrimPrefix(l, "edge_nonces_lag_seconds_bucket"))
		}
	}
	sort.Strings(buckets)
	t.Logf("lag from acceptance by A to the store of B, %v nonces (%d sent by %d clients in %v): mean %.2f ms; buckets %v",
		count, load, clients, took.Round(time.Millisecond), 1000*sum/count, buckets)

	// A request stamped 240 s ahead, across a restart of the whole stack.
	ahead := uuid.NewString()
	a.want(t, "stamped +240 s", time.Now().Unix()+240, ahead, 200, "")
	testnet.Eventually(t, 10*time.Second, func() bool { return a.metric(t, "edge_nonces_published_total") >= 2+load },
		func() string { return "edge A did not publish" })
	// Accepted just before a SIGTERM: published on the way out.
	last := uuid.NewString()
	b.want(t, "just before the SIGTERM, edge B", time.Now().Unix(), last, 200, "")
	b.Stop()
	a.Stop()
	broker.Restart(t)
	a.Restart(t) // waits for /health: the replay is done
	b.Restart(t)
	a.want(t, "stamped +240 s, after a restart of the stack, edge A", time.Now().Unix()+240, ahead, 401, "DUPLICATE_NONCE")
	b.want(t, "stamped +240 s, after a restart of the stack, edge B", time.Now().Unix()+240, ahead, 401, "DUPLICATE_NONCE")
	b.want(t, "edge A's first request, after a restart of the stack, edge B", time.Now().Unix(), n1, 401, "DUPLICATE_NONCE")
	a.want(t, "accepted by B just before its SIGTERM, after the restart, edge A", time.Now().Unix(), last, 401, "DUPLICATE_NONCE")

	// Edge A killed and restarted.
	k := uuid.NewString()
	a.want(t, "before the kill", time.Now().Unix(), k, 200, "")
	testnet.Eventually(t, 10*time.Second, func() bool { return a.metric(t, "edge_nonces_published_total") >= 1 },
		func() string { return "edge A did not publish" })
	a.Kill()
	restarted := time.Now()
	a.Restart(t)
	t.Logf("edge A served /health %v after its restart began (replay included)", time.Since(restarted).Round(time.Millisecond))
	a.want(t, "replayed after kill -9 and restart", time.Now().Unix(), k, 401, "DUPLICATE_NONCE")
	a.want(t, "fresh, stamped 4 minutes before the restart", restarted.Unix()-240, uuid.NewString(), 200, "")
	if v := a.metric(t, "edge_nonces_replay_done"); v != 1 {
		t.Errorf("edge_nonces_replay_done %v", v)
	}
}

// TestNonceFallbackWithoutBroker: an edge started with the broker down
// serves Bearer requests, refuses signed requests stamped before its start
// (the rule of an edge that cannot know the nonces before it), shows it in
// /health, /ready and edge_nonces_fallback; once the broker is back it
// replays and accepts the whole window.
func TestNonceFallbackWithoutBroker(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the stack as processes")
	}
	broker, core := nonceStack(t)
	env, metrics := nonceEnv(t, broker.Addr)
	broker.Stop()
	addr := testnet.FreeAddr(t)
	p := testnet.Start(t, testnet.Build(t, "edge/cmd/edge"), append([]string{"SLIP_EDGE_ADDR=" + addr, "SLIP_CORE_ADDR=" + core.Addr,
		"SLIP_EDGE_DRAIN=0s"}, env...)...)
	e := &nonceEdge{&testnet.Program{Proc: p, Addr: addr}, metrics}
	defer http.DefaultClient.CloseIdleConnections()
	testnet.WaitTCP(t, addr, time.Minute)
	started := time.Now()
	testnet.Eventually(t, 10*time.Second, func() bool { return e.metric(t, "edge_nonces_fallback") == 1 },
		func() string { return "no fallback shown" })
	if got := status(e.URL() + "/health"); got != 503 {
		t.Errorf("/health in the fallback: %d", got)
	}
	if got := status("http://" + metrics + "/ready"); got != 503 {
		t.Errorf("/ready in the fallback: %d", got)
	}
	if res, body := (&stack{url: e.URL()}).sendAs(t, keyMain, "GET", "/v2/info", ""); res.StatusCode != 200 {
		t.Errorf("Bearer in the fallback: %d %s", res.StatusCode, body)
	}
	e.want(t, "fallback: stamped a minute before the start", started.Unix()-60, uuid.NewString(), 401, "INVALID_TIMESTAMP")
	kept := uuid.NewString()
	e.want(t, "fallback: stamped now", time.Now().Unix(), kept, 200, "")
	e.want(t, "fallback: replayed", time.Now().Unix(), kept, 401, "DUPLICATE_NONCE")

	broker.Restart(t)
	testnet.WaitHTTP(t, e.URL()+"/health", 30*time.Second, p)
	lifted := time.Since(started)
	if v := e.metric(t, "edge_nonces_fallback"); v != 0 {
		t.Errorf("edge_nonces_fallback %v after the replay", v)
	}
	if got := status("http://" + metrics + "/ready"); got != 200 {
		t.Errorf("/ready after the replay: %d", got)
	}
	e.want(t, "after the replay: stamped a minute before the start", started.Unix()-60, uuid.NewString(), 200, "")
	e.want(t, "after the replay: replayed", time.Now().Unix(), kept, 401, "DUPLICATE_NONCE")
	testnet.Eventually(t, 20*time.Second, func() bool { return e.metric(t, "edge_nonces_published_total") >= 2 },
		func() string { return "the nonce accepted in the fallback was not published" })
	if f := e.metric(t, "edge_nonces_publish_failures_total"); f < 1 {
		t.Errorf("no publish failure counted with the broker down: %v", f)
	}
	t.Logf("the fallback lifted %v after the edge started (broker restarted meanwhile)", lifted.Round(time.Millisecond))
}

// TestNoncesAcrossBrokerOutage: while the broker is down, an edge keeps
// serving signed requests and counts its failed writes; once the broker is
// back the nonces it accepted meanwhile reach the other edge, which then
// refuses them.
func TestNoncesAcrossBrokerOutage(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the stack as processes")
	}
	broker, core := nonceStack(t)
	a, b := startNonceEdge(t, broker, core), startNonceEdge(t, broker, core)
	defer http.DefaultClient.CloseIdleConnections()
	broker.Stop()
	during := uuid.NewString()
	a.want(t, "broker down, edge A", time.Now().Unix(), during, 200, "")
	testnet.Eventually(t, 30*time.Second, func() bool { return a.metric(t, "edge_nonces_publish_failures_total") >= 1 },
		func() string { return "no failed write counted" })
	a.want(t, "broker down, a replay on edge A", time.Now().Unix(), during, 401, "DUPLICATE_NONCE")
	down := time.Now()
	broker.Restart(t)
	testnet.Eventually(t, 30*time.Second, func() bool { return b.metric(t, `edge_nonces_received_total{result="added"}`) >= 1 },
		func() string { return "edge B never received the nonce accepted during the outage" })
	t.Logf("the nonce accepted during the outage reached edge B %v after the broker was started again",
		time.Since(down).Round(time.Millisecond))
	b.want(t, "after the outage, edge B", time.Now().Unix(), during, 401, "DUPLICATE_NONCE")
}
