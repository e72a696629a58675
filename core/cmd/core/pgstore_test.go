package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/slipverify/slipverify/core/lib/pgtest"
	"github.com/slipverify/slipverify/core/lib/testnet"
	"github.com/slipverify/slipverify/core/slip"
)

// TestMain removes the programs the tests build.
func TestMain(m *testing.M) { testnet.Main(m) }

// TestOnPostgreSQL runs two cores as processes on one PostgreSQL database
// (SLIP_STORE) behind one edge that balances between them, and verifies
// through the edge as a client: a new slip is charged, the same slip again
// is a duplicate, free, whichever core answers, and concurrent
// verifications through both cores stop exactly at the service's quota.
func TestOnPostgreSQL(t *testing.T) {
	if testing.Short() {
		t.Skip("runs PostgreSQL, two cores and the edge as processes")
	}
	const key, quota = "6f1c2b9e-4d7a-4e3b-9a51-0c8d2e7f4a16", 10
	url := pgtest.Start(t).Database(t)
	seed := testnet.Seed(t, `{"services":[{"id":"svc","name":"Shop","state":"active","userBanned":false,
		"quota":{"limit":`+fmt.Sprint(quota)+`,"cycleAnchorDay":1},"rate":{"bank":100000,"wallet":100000},
		"branches":[{"id":"br","name":"main","main":true,"key":"`+key+`","active":true,"ipAllow":["*"],"limitQuota":null,
		"webhookUrl":null,"webhookSecret":null}],"b2bClients":[],"bankAccounts":[]}]}`)
	var cores []string
	for range 2 {
		cores = append(cores, testnet.StartCore(t, seed, "SLIP_STORE="+url).Addr)
	}
	edge := testnet.StartEdge(t, strings.Join(cores, ","))
	defer http.DefaultClient.CloseIdleConnections()
	verify := func(ref string) (status int, code string, duplicate bool) {
		body := `{"payload":"` + slip.Bank{BankCode: "004", TransRef: ref}.Encode() + `"}`
		req, _ := http.NewRequest("POST", edge.URL()+"/v2/verify/bank", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Content-Type", "application/json")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Error(err)
			return 0, "", false
		}
		defer res.Body.Close()
		raw, _ := io.ReadAll(res.Body)
		var out struct {
			Data  struct{ IsDuplicate bool }
			Error struct{ Code string }
		}
		if err := json.Unmarshal(raw, &out); err != nil {
			t.Errorf("%s: %v: %s", ref, err, raw)
		}
		return res.StatusCode, out.Error.Code, out.Data.IsDuplicate
	}
	if status, code, dup := verify("PGFIRST0001"); status != 200 || dup {
		t.Fatalf("a new slip: %d %s duplicate %v", status, code, dup)
	}
	for i := range 4 { // the service's core, as the edge keeps a service on one core
		if status, code, dup := verify("PGFIRST0001"); status != 200 || !dup {
			t.Fatalf("the same slip again (%d): %d %s duplicate %v, want a free duplicate", i, status, code, dup)
		}
	}
	var mu sync.Mutex
	answers := map[string]int{}
	var wg sync.WaitGroup
	for i := range 3 * quota {
		wg.Go(func() {
			status, code, _ := verify(fmt.Sprintf("PGLOAD%05d", i))
			mu.Lock()
			defer mu.Unlock()
			answers[fmt.Sprint(status, " ", code)]++
		})
	}
	wg.Wait()
	if answers["200 "] != quota-1 || answers["403 QUOTA_EXCEEDED"] != 2*quota+1 || len(answers) != 2 {
		t.Errorf("%d verifications over the %d units left: %v, want %d charged and the rest QUOTA_EXCEEDED", 3*quota, quota-1, answers, quota-1)
	}
	if status, code, _ := verify("PGFIRST0001"); status != 200 {
		t.Errorf("a duplicate with the quota used up: %d %s, want a free duplicate", status, code)
	}
}
