package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/slipverify/slipverify/core/lib/testnet"
)

// TestOperatorChangesReachEveryEdge: an operator's change (a ban, then a
// key rotation without overlap) reaches two edges, each with the key's
// record cached, through slip.config within milliseconds, not the auth
// cache's TTL (an hour here); and the admin API answers on no edge.
func TestOperatorChangesReachEveryEdge(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the stack as processes")
	}
	const adminToken = "operator-admin-token-0123456789abcdef"
	broker := testnet.StartBroker(t, "SLIP_BROKER_PARTITIONS=1")
	kafka := "SLIP_KAFKA_ADDR=" + broker.Addr
	admin := testnet.FreeAddr(t)
	core := testnet.StartCore(t, testnet.Seed(t, seedJSON("https://shop.example/hook")), kafka,
		"SLIP_EDGE_TOKEN="+edgeToken, "SLIP_MASTER_KEY="+masterKey, "SLIP_ADMIN_ADDR="+admin, "SLIP_ADMIN_TOKEN="+adminToken)
	_ = core
	var edges []*testnet.Program
	for range 2 {
		edges = append(edges, testnet.StartEdge(t, core.Addr, kafka, "SLIP_EDGE_TOKEN="+edgeToken, "SLIP_EDGE_AUTH_TTL=1h"))
	}
	defer http.DefaultClient.CloseIdleConnections()
	info := func(e *testnet.Program, key string) int {
		req, _ := http.NewRequest("GET", e.URL()+"/v2/info", nil)
		req.Header.Set("Authorization", "Bearer "+key)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		return res.StatusCode
	}
	operate := func(method, path string, body any) map[string]any {
		raw, _ := json.Marshal(body)
		req, _ := http.NewRequest(method, "http://"+admin+"/admin/v1"+path, bytes.NewReader(raw))
		req.Header.Set("Authorization", "Bearer "+adminToken)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var m map[string]any
		json.NewDecoder(res.Body).Decode(&m)
		if res.StatusCode != 200 {
			t.Fatalf("%s %s: %d %v", method, path, res.StatusCode, m)
		}
		d, _ := m["data"].(map[string]any)
		return d
	}
	// Each edge reads slip.config from its start; wait until both answer
	// with the key cached.
	for _, e := range edges {
		if s := info(e, keyMain); s != 200 {
			t.Fatalf("before any change: %d", s)
		}
	}
	reached := func(what string, key string, want int) {
		t.Helper()
		start := time.Now()
		for i, e := range edges {
			testnet.Eventually(t, 10*time.Second, func() bool { return info(e, key) == want },
				func() string { return what + " did not reach an edge" })
			t.Logf("%s reached edge %d after %v", what, i+1, time.Since(start).Round(time.Millisecond))
		}
	}
	operate("PUT", "/services/svc/state", map[string]any{"state": "banned", "reason": "test"})
	reached("the ban", keyMain, 403)
	operate("PUT", "/services/svc/state", map[string]any{"state": "active", "reason": "test over"})
	reached("the lifted ban", keyMain, 200)
	newKey := operate("POST", "/services/svc/branches/br-main/key/rotate", map[string]any{"overlap": "0s"})["key"].(string)
	reached("the rotation", keyMain, 401)
	// A plan's rate: the next X-RateLimit-Limit of every edge.
	operate("PUT", "/services/svc/plan", map[string]any{"rateBank": 7, "effective": "now"})
	limit := func(e *testnet.Program) string {
		req, _ := http.NewRequest("POST", e.URL()+"/v2/verify/bank", bytes.NewReader([]byte(`{"payload":"x"}`)))
		req.Header.Set("Authorization", "Bearer "+newKey)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		return res.Header.Get("X-RateLimit-Limit")
	}
	for i, e := range edges {
		testnet.Eventually(t, 10*time.Second, func() bool { return limit(e) == "7" },
			func() string { return "the plan's rate did not reach edge " + string(rune('1'+i)) })
	}
	for _, e := range edges {
		if s := info(e, newKey); s != 200 {
			t.Errorf("the new key: %d", s)
		}
		// Nothing of the admin API answers on an edge's port.
		req, _ := http.NewRequest("GET", e.URL()+"/admin/v1/services", nil)
		req.Header.Set("Authorization", "Bearer "+adminToken)
		if res, err := http.DefaultClient.Do(req); err != nil || res.StatusCode != 404 {
			t.Errorf("the admin API on an edge: %v %v", res.StatusCode, err)
		} else {
			res.Body.Close()
		}
	}
}
