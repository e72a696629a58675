package main

import (
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/slipverify/slipverify/core/lib/testnet"
)

// TestCoreDrainNoticed: the edge program probes its cores on its own, with
// no request to prompt it: a core that is stopping (SIGTERM) is dropped
// while it still accepts connections (its drain), so no request meets its
// closing; the other core answers meanwhile, and the stopped core is taken
// back once it is started again.
func TestCoreDrainNoticed(t *testing.T) {
	if testing.Short() {
		t.Skip("runs two cores and the edge as processes")
	}
	seed := testnet.Seed(t, seedJSON("https://shop.example/hooks/slip"))
	coreEnv := []string{"SLIP_EDGE_TOKEN=" + edgeToken, "SLIP_MASTER_KEY=" + masterKey, "SLIP_CORE_DRAIN=3s"}
	a, b := testnet.StartCore(t, seed, coreEnv...), testnet.StartCore(t, seed, coreEnv...)
	metricsAddr := testnet.FreeAddr(t)
	e := testnet.StartEdge(t, a.Addr+","+b.Addr, "SLIP_EDGE_TOKEN="+edgeToken, "SLIP_EDGE_METRICS_ADDR="+metricsAddr,
		"SLIP_EDGE_CORE_PROBE=50ms")
	ready := func(core *testnet.Program) float64 {
		res, err := http.Get("http://" + metricsAddr + "/metrics")
		if err != nil {
			return -1
		}
		raw, _ := io.ReadAll(res.Body)
		res.Body.Close()
		m := regexp.MustCompile(fmt.Sprintf(`(?m)^edge_core_ready\{core=%q\} (\d+)$`, core.Addr)).FindSubmatch(raw)
		if m == nil {
			return -1
		}
		v, _ := strconv.ParseFloat(string(m[1]), 64)
		return v
	}
	info := func() int {
		req, _ := http.NewRequest("GET", e.URL()+"/v2/info", nil)
		req.Header.Set("Authorization", "Bearer "+keyMain)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	if ra, rb := ready(a), ready(b); ra != 1 || rb != 1 {
		t.Fatalf("edge_core_ready: %v and %v, want both 1", ra, rb)
	}

	syscall.Kill(a.Pid(), syscall.SIGTERM)
	testnet.Eventually(t, 10*time.Second, func() bool { return ready(a) == 0 },
		func() string { return "the edge did not drop the stopping core" })
	if !testnet.Listening(a.Addr) {
		t.Errorf("the stopping core was dropped only once it stopped accepting connections")
	}
	if status := info(); status != 200 {
		t.Errorf("a request while one core drains: %d", status)
	}

	a.Restart(t) // once it has stopped
	testnet.Eventually(t, 10*time.Second, func() bool { return ready(a) == 1 },
		func() string { return "the edge did not take the core started again back" })
	if status := info(); status != 200 {
		t.Errorf("a request after the restart: %d", status)
	}
	http.DefaultClient.CloseIdleConnections() // before the edge stops
}
