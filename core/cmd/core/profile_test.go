package main

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/slipverify/slipverify/core/api"
	"github.com/slipverify/slipverify/core/lib/testnet"
)

// TestProfile runs core in this process (no broker: its publisher and
// consumers retry meanwhile) and asks its listener for profiles: with the
// edge token it serves the index, a one-second CPU profile and the heap;
// without it, 403 as on every route but /health and /metrics.
func TestProfile(t *testing.T) {
	addr, nobroker := testnet.FreeAddr(t), testnet.FreeAddr(t)
	token := strings.Repeat("t", 32)
	env := map[string]string{
		"SLIP_CORE_ADDR":  addr,
		"SLIP_DATA_DIR":   t.TempDir(),
		"SLIP_SEED":       "none",
		"SLIP_EDGE_TOKEN": token,
		"SLIP_MASTER_KEY": strings.Repeat("ab", 32),
		"SLIP_KAFKA_ADDR": nobroker,
	}
	get := func(path string, withToken bool) (int, string) {
		t.Helper()
		req, _ := http.NewRequest("GET", "http://"+addr+path, nil)
		if withToken {
			req.Header.Set(api.HeaderEdgeToken, token)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		body, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(body)
	}
	testnet.RunInProcess(t, run, env, "http://"+addr+"/health")

	if code, body := get("/debug/pprof/", true); code != 200 || !strings.Contains(body, "goroutine") {
		t.Errorf("/debug/pprof/ with the token: %d %.200s", code, body)
	}
	for _, path := range []string{"/debug/pprof/profile?seconds=1", "/debug/pprof/heap"} {
		if code, body := get(path, true); code != 200 || !strings.HasPrefix(body, "\x1f\x8b") { // gzipped pprof data
			t.Errorf("%s with the token: %d %.200q", path, code, body)
		}
	}
	for _, path := range []string{"/debug/pprof/", "/debug/pprof/heap", "/debug/pprof/profile?seconds=1"} {
		if code, body := get(path, false); code != 403 {
			t.Errorf("%s without the token: %d %.200s", path, code, body)
		}
	}
	if code, body := get("/metrics", false); code != 200 || !strings.Contains(body, "slip_core_outbox_messages") {
		t.Errorf("/metrics: %d", code)
	}
}
