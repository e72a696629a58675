package gateway_test

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/slipverify/slipverify/core/lib/testnet"
)

var (
	clientFull = strings.Repeat("a", 64)
	clientRead = strings.Repeat("b", 64) // quota:read only
	secretRead = "svc-a-readonly-secret-0000"
)

// b2b sends a request signed with a B2B client key.
func (e *edge) b2b(t testing.TB, key, secret, method, path, body string) answer {
	t.Helper()
	return e.do(t, method, path, body, e.signed(key, secret, method, path, body, 0, "")...)
}

// TestPermissions: each of the six permissions, present and absent.
func TestPermissions(t *testing.T) {
	e := startEdge(t, testnet.StartCore(t, seed))
	cases := []struct {
		perm, method, path, body string
	}{
		{"branch:read", "GET", "/b2b/branches", ""},
		{"branch:write", "POST", "/b2b/branches", `{"name":"Perm test"}`},
		{"quota:read", "GET", "/b2b/branches/a-main/quota", ""},
		{"quota:write", "POST", "/b2b/branches/a-main/quota/reset", ""},
		{"bank-account:read", "GET", "/b2b/bank-accounts", ""},
		{"bank-account:write", "POST", "/b2b/bank-accounts", `{"bankCode":"004","bankNumber":"1234567890","name":{"th":"ร้าน"}}`},
	}
	for _, c := range cases {
		if a := e.b2b(t, clientFull, secretA, c.method, c.path, c.body); a.status >= 400 {
			t.Errorf("%s present: %d %s", c.perm, a.status, a.raw)
		}
		a := e.b2b(t, clientRead, secretRead, c.method, c.path, c.body)
		if c.perm == "quota:read" {
			if a.status != 200 {
				t.Errorf("%s present: %d %s", c.perm, a.status, a.raw)
			}
			continue
		}
		a.want(t, 403, "PERMISSION_DENIED")
	}
	// /b2b takes B2B client keys, signed, only.
	e.do(t, "GET", "/b2b/branches", "", bearer(keyMain)...).want(t, 401, "MISSING_API_KEY")
	e.b2b(t, keyMain, secretA, "GET", "/b2b/branches", "").want(t, 401, "INVALID_API_KEY")
	e.b2b(t, strings.Repeat("c", 64), secretA, "GET", "/b2b/branches", "").want(t, 401, "INVALID_API_KEY")
	e.b2b(t, clientFull, secretRead, "GET", "/b2b/branches", "").want(t, 401, "INVALID_SIGNATURE")
	h := e.signed(clientFull, secretA, "GET", "/b2b/branches", "", 0, "")
	e.do(t, "GET", "/b2b/branches", "", h...).want(t, 200, "")
	e.do(t, "GET", "/b2b/branches", "", h...).want(t, 401, "DUPLICATE_NONCE")
}

// TestBranchLifecycle: a created branch's key works at the edge; changes
// reach the edge within the auth TTL (2 s); the main branch stays.
func TestBranchLifecycle(t *testing.T) {
	e := startEdge(t, testnet.StartCore(t, seed), "SLIP_EDGE_AUTH_TTL=2s")
	a := e.b2b(t, clientFull, secretA, "POST", "/b2b/branches", `{"name":"Kiosk 7","limitQuota":3,"ipAllow":["127.0.0.1"],"webhookSecret":"kiosk-7-webhook-secret"}`)
	if a.status != 201 || get(a.body, "data", "key") == nil || get(a.body, "data", "hasWebhookSecret") != true || strings.Contains(a.raw, "kiosk-7-webhook-secret") {
		t.Fatalf("create: %d %s", a.status, a.raw)
	}
	id, key := get(a.body, "data", "id").(string), get(a.body, "data", "key").(string)
	if i := e.do(t, "GET", "/v2/info", "", bearer(key)...); i.status != 200 || get(i.body, "data", "branch", "id") != id {
		t.Fatalf("new key: %d %s", i.status, i.raw)
	}
	if g := e.b2b(t, clientFull, secretA, "GET", "/b2b/branches/"+id, ""); g.status != 200 || get(g.body, "data", "key") != nil {
		t.Errorf("get shows the key again or fails: %d %s", g.status, g.raw)
	}
	e.b2b(t, clientFull, secretA, "PATCH", "/b2b/branches/"+id, `{"active":false,"name":""}`).want(t, 400, "VALIDATION_ERROR")
	e.b2b(t, clientFull, secretA, "PATCH", "/b2b/branches/"+id, `{"active":false}`).want(t, 200, "")
	e.clock.Advance(2100 * time.Millisecond)
	e.do(t, "GET", "/v2/info", "", bearer(key)...).want(t, 403, "BRANCH_INACTIVE")
	// An allow list the edge could not read is refused, each bad entry named
	// as the edge's own parser names it.
	bad := e.b2b(t, clientFull, secretA, "PATCH", "/b2b/branches/"+id, `{"ipAllow":["10.9.9.9","10.0.0.1/8","fe80::1%eth0"]}`)
	bad.want(t, 400, "VALIDATION_ERROR")
	if msg, _ := get(bad.body, "error", "message").(string); !strings.Contains(msg, `entry 1 "10.0.0.1/8": CIDR range has host bits set (did you mean 10.0.0.0/8`) ||
		!strings.Contains(msg, `entry 2 "fe80::1%eth0"`) {
		t.Errorf("a bad allow list: %s", bad.raw)
	}
	e.b2b(t, clientFull, secretA, "PATCH", "/b2b/branches/"+id, `{"active":true,"ipAllow":["10.9.9.9"]}`).want(t, 200, "")
	e.clock.Advance(2100 * time.Millisecond)
	e.do(t, "GET", "/v2/info", "", bearer(key)...).want(t, 403, "IP_NOT_ALLOWED")
	e.b2b(t, clientFull, secretA, "DELETE", "/b2b/branches/"+id, "").want(t, 200, "")
	e.clock.Advance(2100 * time.Millisecond)
	e.do(t, "GET", "/v2/info", "", bearer(key)...).want(t, 401, "INVALID_API_KEY")
	e.b2b(t, clientFull, secretA, "GET", "/b2b/branches/"+id, "").want(t, 404, "NOT_FOUND")
	e.b2b(t, clientFull, secretA, "DELETE", "/b2b/branches/a-main", "").want(t, 400, "VALIDATION_ERROR")
	e.b2b(t, clientFull, secretA, "PATCH", "/b2b/branches/a-main", `{"active":false}`).want(t, 400, "VALIDATION_ERROR")
	// Another service's branch is not found.
	e.b2b(t, clientFull, secretA, "GET", "/b2b/branches/exp-main", "").want(t, 404, "NOT_FOUND")
	l := e.b2b(t, clientFull, secretA, "GET", "/b2b/branches", "")
	if list, _ := l.body["data"].([]any); len(list) != 4 || get(list[0], "id") != "a-main" {
		t.Errorf("list: %s", l.raw)
	}
}

// TestQuotaRules covers spec 4.4's quota rules.
func TestQuotaRules(t *testing.T) {
	e := startEdge(t, testnet.StartCore(t, seed))
	q := func(method, path, body string) answer {
		return e.b2b(t, clientFull, secretA, method, "/b2b/branches/a-fast/quota"+path, body)
	}
	for i := range 3 {
		e.do(t, "POST", "/v2/verify/bank", payload(fmt.Sprintf("QUOTAREF%03d", i)), bearer(keyAFast)...).want(t, 200, "")
	}
	a := q("GET", "", "")
	if get(a.body, "data", "branch", "usedQuota") != 3.0 || get(a.body, "data", "branch", "limitQuota") != nil ||
		get(a.body, "data", "service", "limitQuota") != 100000.0 || get(a.body, "data", "service", "usedQuota") != 3.0 {
		t.Fatalf("quota: %s", a.raw)
	}
	a = q("PUT", "", `{"limitQuota":2}`)
	a.want(t, 400, "VALIDATION_ERROR")
	if !strings.Contains(get(a.body, "error", "message").(string), "(3)") {
		t.Errorf("message does not state the used quota: %s", a.raw)
	}
	// PATCH of the branch takes limitQuota too, under the same rule.
	a = e.b2b(t, clientFull, secretA, "PATCH", "/b2b/branches/a-fast", `{"limitQuota":1}`)
	a.want(t, 400, "VALIDATION_ERROR")
	if !strings.Contains(get(a.body, "error", "message").(string), "(3)") {
		t.Errorf("PATCH: message does not state the used quota: %s", a.raw)
	}
	if a := q("GET", "", ""); get(a.body, "data", "branch", "limitQuota") != nil {
		t.Fatalf("a refused PATCH changed the limit: %s", a.raw)
	}
	q("POST", "/adjust", `{"amount":5}`).want(t, 400, "VALIDATION_ERROR") // no limit of its own yet
	if a := q("PUT", "", `{"limitQuota":4}`); get(a.body, "data", "limitQuota") != 4.0 || get(a.body, "data", "usedQuota") != 3.0 {
		t.Fatalf("put: %s", a.raw)
	}
	q("POST", "/adjust", `{"amount":-2}`).want(t, 400, "VALIDATION_ERROR")
	if a := q("POST", "/adjust", `{"amount":-1}`); get(a.body, "data", "limitQuota") != 3.0 {
		t.Errorf("adjust -1: %s", a.raw)
	}
	e.do(t, "POST", "/v2/verify/bank", payload("QUOTAREF100"), bearer(keyAFast)...).want(t, 403, "QUOTA_EXCEEDED")
	if a := q("POST", "/reset", ""); get(a.body, "data", "usedQuota") != 0.0 || get(a.body, "data", "totalUsedQuota") != 3.0 {
		t.Errorf("reset: %s", a.raw)
	}
	e.do(t, "POST", "/v2/verify/bank", payload("QUOTAREF101"), bearer(keyAFast)...).want(t, 200, "")
	if a := q("PUT", "", `{"limitQuota":null}`); get(a.body, "data", "limitQuota") != nil {
		t.Errorf("put null: %s", a.raw)
	}
	q("PUT", "", `{}`).want(t, 400, "VALIDATION_ERROR")
	q("PUT", "", `{"limitQuota":-1}`).want(t, 400, "VALIDATION_ERROR")
	q("POST", "/adjust", `{"amount":1.5}`).want(t, 400, "VALIDATION_ERROR")
	// A field sent with the wrong type is named as wrong, not as missing.
	for body, want := range map[string]string{`{"amount":"5"}`: "amount: must be a non-zero whole number", `{}`: "amount: is required: a non-zero whole number"} {
		a := q("POST", "/adjust", body)
		if msg, _ := get(a.body, "error", "message").(string); a.status != 400 || !strings.HasPrefix(msg, want) {
			t.Errorf("adjust %s: %s, want a message starting %q", body, a.raw, want)
		}
	}
	// A limit past int64's range is refused as such, not as a negative one.
	q("PUT", "", `{"limitQuota":9000000000000000000}`).want(t, 200, "")
	a = q("POST", "/adjust", `{"amount":9000000000000000000}`)
	a.want(t, 400, "VALIDATION_ERROR")
	if msg, _ := get(a.body, "error", "message").(string); !strings.Contains(msg, "exceed") {
		t.Errorf("adjust past the largest limit: %s", a.raw)
	}
}

// TestQuotaRacesVerifications: limit changes racing concurrent
// verifications never lose an update nor let usage pass the limit.
func TestQuotaRacesVerifications(t *testing.T) {
	e := startEdge(t, testnet.StartCore(t, seed))
	qa := func(method, path, body string) answer {
		return e.b2b(t, clientFull, secretA, method, "/b2b/branches/a-fast/quota"+path, body)
	}
	qa("PUT", "", `{"limitQuota":20}`).want(t, 200, "")
	var ok atomic.Int64
	var wg sync.WaitGroup
	for i := range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a := e.do(t, "POST", "/v2/verify/bank", payload(fmt.Sprintf("RACEREF%04d", i)), bearer(keyAFast)...)
			switch {
			case a.status == 200:
				ok.Add(1)
			case a.code() == "QUOTA_EXCEEDED" || a.code() == "RATE_LIMIT_EXCEEDED":
			default:
				t.Errorf("verify: %d %s", a.status, a.raw)
			}
		}()
	}
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if a := qa("POST", "/adjust", `{"amount":5}`); a.status != 200 {
				t.Errorf("adjust: %s", a.raw)
			}
		}()
	}
	wg.Wait()
	a := qa("GET", "", "")
	used, total, limit := get(a.body, "data", "branch", "usedQuota"), get(a.body, "data", "branch", "totalUsedQuota"), get(a.body, "data", "branch", "limitQuota")
	if limit != 30.0 || used != float64(ok.Load()) || total != used || used.(float64) > 30 {
		t.Errorf("after the race: limit %v used %v total %v, successes %d", limit, used, total, ok.Load())
	}
}

// TestBankAccounts covers create, duplicate, link and unlink, under /b2b and
// the branch's own /bank-accounts.
func TestBankAccounts(t *testing.T) {
	e := startEdge(t, testnet.StartCore(t, seed))
	acc := `{"bankCode":"014","bankNumber":"1112223334","name":{"th":"บริษัท ทดสอบ จำกัด","en":"TEST CO LTD"},"branches":["a-main"]}`
	a := e.b2b(t, clientFull, secretA, "POST", "/b2b/bank-accounts", acc)
	if a.status != 201 {
		t.Fatalf("create: %d %s", a.status, a.raw)
	}
	id := get(a.body, "data", "id").(string)
	e.b2b(t, clientFull, secretA, "POST", "/b2b/bank-accounts", acc).want(t, 409, "BANK_ACCOUNT_DUPLICATE")
	e.b2b(t, clientFull, secretA, "POST", "/b2b/bank-accounts", `{"bankCode":"999","bankNumber":"1112223334","name":{"th":"x"}}`).want(t, 400, "INVALID_BANK_CODE")
	e.b2b(t, clientFull, secretA, "POST", "/b2b/bank-accounts", `{"bankNumber":"12","name":{}}`).want(t, 400, "VALIDATION_ERROR")
	e.b2b(t, clientFull, secretA, "PUT", "/b2b/branches/a-ip/bank-accounts/"+id, "").want(t, 200, "")
	e.b2b(t, clientFull, secretA, "DELETE", "/b2b/branches/a-ip/bank-accounts/"+id, "").want(t, 200, "")
	e.b2b(t, clientFull, secretA, "DELETE", "/b2b/branches/a-ip/bank-accounts/"+id, "").want(t, 404, "BANK_ACCOUNT_NOT_FOUND")
	e.b2b(t, clientFull, secretA, "PUT", "/b2b/branches/a-ip/bank-accounts/acc-nope", "").want(t, 404, "BANK_ACCOUNT_NOT_FOUND")
	// The branch's own view: linked accounts only; creating links to it.
	if l := e.do(t, "GET", "/v2/bank-accounts", "", bearer(keyMain)...); !strings.Contains(l.raw, id) {
		t.Errorf("a-main does not list its account: %s", l.raw)
	}
	if l := e.do(t, "GET", "/bank-accounts", "", bearer(keyAFast)...); strings.Contains(l.raw, id) {
		t.Errorf("a-fast lists an account not linked to it: %s", l.raw)
	}
	c := e.do(t, "POST", "/bank-accounts", `{"bankCode":"004","bankNumber":"9998887776","name":{"th":"ร้าน ข"}}`, bearer(keyAFast)...)
	if c.status != 201 || get(c.body, "data", "branches").([]any)[0] != "a-fast" {
		t.Errorf("utility create: %d %s", c.status, c.raw)
	}
	e.do(t, "PUT", "/bank-accounts/"+id+"/link", "", bearer(keyAFast)...).want(t, 200, "")
	if l := e.do(t, "GET", "/bank-accounts", "", bearer(keyAFast)...); !strings.Contains(l.raw, id) {
		t.Errorf("link did not take: %s", l.raw)
	}
	// Utility routes are not rate limited.
	if l := e.do(t, "GET", "/bank-accounts", "", bearer(keyMain)...); l.header.Get("X-RateLimit-Limit") != "" {
		t.Errorf("utility route carries rate headers")
	}
}

// TestQRGenerate through the edge.
func TestQRGenerate(t *testing.T) {
	e := startEdge(t, testnet.StartCore(t, seed))
	a := e.do(t, "POST", "/qr/generate", `{"type":"promptpay","target":"0812345678","amount":100.5}`, bearer(keyMain)...)
	if a.status != 200 || get(a.body, "data", "payload") != "00020101021229370016A0000006770101110113006681234567853037645802TH5406100.5063045222" {
		t.Errorf("qr: %d %.200s", a.status, a.raw)
	}
	e.do(t, "POST", "/v2/qr/generate", `{"type":"promptpay"}`, bearer(keyMain)...).want(t, 400, "VALIDATION_ERROR")
	e.do(t, "POST", "/qr/generate", `{}`).want(t, 401, "MISSING_API_KEY")
}
