package main

import (
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/slipverify/slipverify/core/lib/testnet"
)

// TestProfileOnMetricsListenerOnly runs the edge in this process, its core a
// recorder that would answer any path: the metrics listener serves
// /debug/pprof/ (the index, a one-second CPU profile, the heap), and the
// public listener answers 404 for it and sends core none of it.
func TestProfileOnMetricsListenerOnly(t *testing.T) {
	var mu sync.Mutex
	var coreSaw []string
	coreLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	core := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		coreSaw = append(coreSaw, r.URL.Path)
		mu.Unlock()
		w.Write([]byte(`{"success":true,"data":{}}`))
	})}
	go core.Serve(coreLn)
	defer core.Close()

	public, private := testnet.FreeAddr(t), testnet.FreeAddr(t)
	env := map[string]string{
		"SLIP_EDGE_ADDR":         public,
		"SLIP_EDGE_METRICS_ADDR": private,
		"SLIP_CORE_ADDR":         coreLn.Addr().String(),
		"SLIP_EDGE_TOKEN":        strings.Repeat("t", 32),
		"SLIP_KAFKA_ADDR":        "off",
		"SLIP_EDGE_ACCESS_LOG":   "off",
		"SLIP_EDGE_DRAIN":        "1ms",
	}
	get := func(url string) (int, string) {
		t.Helper()
		res, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		body, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(body)
	}
	testnet.RunInProcess(t, run, env, "http://"+private+"/ready")

	if code, body := get("http://" + private + "/debug/pprof/"); code != 200 || !strings.Contains(body, "heap") {
		t.Errorf("metrics listener /debug/pprof/: %d %.200s", code, body)
	}
	for _, path := range []string{"/debug/pprof/profile?seconds=1", "/debug/pprof/heap"} {
		if code, body := get("http://" + private + path); code != 200 || !strings.HasPrefix(body, "\x1f\x8b") { // gzipped pprof data
			t.Errorf("metrics listener %s: %d %.200q", path, code, body)
		}
	}
	for _, path := range []string{"/debug/pprof/", "/debug/pprof/heap", "/debug/pprof/profile?seconds=1", "/debug/pprof"} {
		if code, body := get("http://" + public + path); code != 404 {
			t.Errorf("public listener %s: %d %.200s", path, code, body)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for _, p := range coreSaw {
		if strings.HasPrefix(p, "/debug") {
			t.Errorf("the edge forwarded %s to core", p)
		}
	}
}
