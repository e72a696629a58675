package gateway_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/slipverify/slipverify/core/lib/testnet"
	"github.com/slipverify/slipverify/core/slip"
)

// TestCrossEdgeReplay: copies of one signed request sent to two edges at
// once (a load balancer that does not hash on the key, or an attacker
// replaying what it saw) are accepted once, whichever edge takes them
// first: each edge's nonce store sees only its own copies (here the two
// never hear of each other's nonces), so core claims the nonce in the
// transaction of the write. A quota adjustment moves the limit once; a
// signed verification charges once; a signed async submit queues one job.
func TestCrossEdgeReplay(t *testing.T) {
	core := testnet.StartCore(t, seed)
	// Requests are signed by the clock of the edge started last: an edge
	// without a broker refuses timestamps from before its start.
	edges := [2]*edge{startEdge(t, core), startEdge(t, core)}
	const copies, runs = 50, 20
	race := func(method, path, body string, h []string) (accepted int, other []string) {
		var mu sync.Mutex
		var wg sync.WaitGroup
		for i := range copies {
			wg.Go(func() {
				a := edges[i%2].do(t, method, path, body, h...)
				mu.Lock()
				defer mu.Unlock()
				switch {
				case a.status < 300:
					accepted++
				case a.code() != "DUPLICATE_NONCE" && len(other) < 3:
					other = append(other, fmt.Sprintf("%d %s", a.status, a.raw))
				}
			})
		}
		wg.Wait()
		return accepted, other
	}
	limit := func() float64 {
		a := edges[0].b2b(t, clientFull, secretA, "GET", "/b2b/branches/a-main/quota", "")
		l, _ := get(a.body, "data", "branch", "limitQuota").(float64)
		return l
	}
	edges[0].b2b(t, clientFull, secretA, "PUT", "/b2b/branches/a-main/quota", `{"limitQuota":1000}`).want(t, 200, "")
	for run := range runs {
		const path, body = "/b2b/branches/a-main/quota/adjust", `{"amount":10}`
		h := edges[1].signed(clientFull, secretA, "POST", path, body, 0, "")
		if n, other := race("POST", path, body, h); n != 1 || len(other) > 0 {
			t.Errorf("run %d: a signed quota adjustment was accepted %d times of %d copies; other answers: %v", run, n, copies, other)
		}
		if l, want := limit(), float64(1000+10*(run+1)); l != want {
			t.Fatalf("run %d: the limit is %v, want %v", run, l, want)
		}
	}

	used := func() float64 {
		a := edges[0].b2b(t, clientFull, secretA, "GET", "/b2b/branches/a-main/quota", "")
		u, _ := get(a.body, "data", "service", "usedQuota").(float64)
		return u
	}
	before := used()
	for _, first := range []string{"a new slip", "a slip the branch verified before"} {
		body := payload("REPLAYREF001")
		h := edges[1].signed(keyMain, secretA, "POST", "/v2/verify/bank", body, 0, "")
		if n, other := race("POST", "/v2/verify/bank", body, h); n != 1 || len(other) > 0 {
			t.Errorf("%s: a signed verification was accepted %d times of %d copies; other answers: %v", first, n, copies, other)
		}
		if after := used(); after != before+1 {
			t.Errorf("%s: the service's used quota went from %v to %v, want %v", first, before, after, before+1)
		}
	}
	body := `{"payload":"` + slip.Bank{BankCode: "004", TransRef: "REPLAYREF002"}.Encode() + `","callbackUrl":"https://93.184.216.34/hook"}`
	h := edges[1].signed(keyMain, secretA, "POST", "/v2/verify/bank/async", body, 0, "")
	if n, other := race("POST", "/v2/verify/bank/async", body, h); n != 1 || len(other) > 0 {
		t.Errorf("a signed async submit was accepted %d times of %d copies; other answers: %v", n, copies, other)
	}
}
