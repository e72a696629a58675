package main

import (
	"io"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/slipverify/slipverify/core/lib/testnet"
)

// TestMetrics scrapes the edge's metrics listener after known traffic: the
// requests by route and status, their latency, the refusals by reason, the
// auth cache's lookups, the rate factor and the connections closed without
// an answer count what was sent, in Prometheus text format.
func TestMetrics(t *testing.T) {
	metricsAddr := testnet.FreeAddr(t)
	s := startStack(t, nil, "SLIP_EDGE_METRICS_ADDR="+metricsAddr, "SLIP_EDGE_READ_TIMEOUT=1s")
	for range 3 {
		s.served(t) // GET /v2/info with the main branch's key: 200
	}
	if res, _ := s.sendAs(t, "00000000-0000-4000-8000-000000000000", "GET", "/v2/info", ""); res.StatusCode != 401 {
		t.Fatalf("an unknown key got %d", res.StatusCode)
	}
	silent, err := net.Dial("tcp", s.edgeAddr)
	if err != nil {
		t.Fatal(err)
	}
	silent.SetDeadline(time.Now().Add(30 * time.Second))
	io.ReadAll(silent) // the edge closes it after the read timeout
	silent.Close()

	res, err := http.Get("http://" + metricsAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(res.Body)
	res.Body.Close()
	text := string(raw)
	if !strings.HasPrefix(res.Header.Get("Content-Type"), "text/plain") {
		t.Errorf("Content-Type %q", res.Header.Get("Content-Type"))
	}
	value := func(series string) float64 {
		t.Helper()
		m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` ([0-9.e+-]+)$`).FindStringSubmatch(text)
		if m == nil {
			t.Errorf("no series %s", series)
			return -1
		}
		v, _ := strconv.ParseFloat(m[1], 64)
		return v
	}
	for series, want := range map[string]float64{
		`edge_requests_total{route="GET /v2/info",code="200"}`:         3,
		`edge_requests_total{route="GET /v2/info",code="401"}`:         1,
		`edge_rejections_total{reason="INVALID_API_KEY/unauthorized"}`: 1,
		`edge_request_duration_seconds_count{route="GET /v2/info"}`:    4,
		`edge_connections_closed_unanswered_total`:                     1,
		`edge_rate_factor`: 1,
		`edge_auth_cache_lookups_total{result="error"}`: 0,
	} {
		if got := value(series); got != want {
			t.Errorf("%s = %v, want %v", series, got, want)
		}
	}
	// The first request of the branch missed the auth cache, the next two hit.
	if hits := value(`edge_auth_cache_lookups_total{result="hit"}`); hits < 2 {
		t.Errorf("auth cache hits %v, want at least 2", hits)
	}
}

// TestReady: /ready on the metrics listener says whether the edge takes
// requests: yes while core is down (the edge answers API_SERVER_ERROR
// itself, where /health fails), no once it drains.
func TestReady(t *testing.T) {
	metricsAddr := testnet.FreeAddr(t)
	s := startStack(t, nil, "SLIP_EDGE_METRICS_ADDR="+metricsAddr, "SLIP_EDGE_DRAIN=5s")
	status := func(url string) int {
		res, err := http.Get(url)
		if err != nil {
			return 0
		}
		res.Body.Close()
		return res.StatusCode
	}
	if got := status("http://" + metricsAddr + "/ready"); got != 200 {
		t.Fatalf("/ready with core up: %d", got)
	}
	s.core.Kill()
	testnet.Eventually(t, 10*time.Second, func() bool { return status(s.url+"/health") == 503 },
		func() string { return "/health did not fail with core down" })
	if got := status("http://" + metricsAddr + "/ready"); got != 200 {
		t.Errorf("/ready with core down: %d, want 200", got)
	}
	if res, body := s.sendAs(t, keyMain, "GET", "/v2/info", ""); res.StatusCode != 500 || !strings.Contains(body, "API_SERVER_ERROR") {
		t.Errorf("a request with core down: %d %s", res.StatusCode, body)
	}
	syscall.Kill(s.edge.Pid(), syscall.SIGTERM) // 5 s of draining before the listener closes
	testnet.Eventually(t, 4*time.Second, func() bool { return status("http://"+metricsAddr+"/ready") == 503 },
		func() string { return "/ready did not fail while draining" })
}
