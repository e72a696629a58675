package admin_test

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/slipverify/slipverify/core/admin"
	"github.com/slipverify/slipverify/core/api"
	"github.com/slipverify/slipverify/core/bank/sandbox"
	"github.com/slipverify/slipverify/core/lib/seedfile"
	"github.com/slipverify/slipverify/core/lib/testnet"
	"github.com/slipverify/slipverify/core/secret"
	"github.com/slipverify/slipverify/core/seed"
	"github.com/slipverify/slipverify/core/server"
	"github.com/slipverify/slipverify/core/slip"
	"github.com/slipverify/slipverify/core/store"
	"github.com/slipverify/slipverify/core/verify"
)

const (
	edgeToken  = "test-edge-token-0123456789abcdef0123"
	adminToken = "test-admin-token-0123456789abcdef01"
)

// core is core's server and its admin API (adminToken its bootstrap
// token) on loopback listeners, over a fresh store that holds service svc
// with branches br-main and br-sub, and the sandbox bank.
type core struct {
	url, adminURL string
	clock         *testnet.Clock
}

func startCore(t *testing.T, mutate func(*store.Records)) *core {
	t.Helper()
	c := &core{clock: testnet.NewClock(time.Date(2026, 11, 22, 10, 0, 0, 0, time.FixedZone("ICT", 7*3600)))}
	st, err := store.Open(filepath.Join(t.TempDir(), "core.db"), c.clock.Now)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	r := store.Records{
		Services: []store.Service{{ID: "svc", Name: "Shop", State: store.StateActive, QuotaLimit: 1000, CycleAnchorDay: 1,
			Rate: store.Rate{Bank: 10, Wallet: 10}}},
		Branches: []store.Branch{
			{ID: "br-main", ServiceID: "svc", Name: "Main", Main: true, Active: true, KeyDigest: store.Digest("k1")},
			{ID: "br-sub", ServiceID: "svc", Name: "Sub", Active: true, KeyDigest: store.Digest("k2")},
		},
	}
	if mutate != nil {
		mutate(&r)
	}
	if _, err := st.InsertMissing(r); err != nil {
		t.Fatal(err)
	}
	bank, err := sandbox.New(sandbox.Config{}, c.clock.Now)
	if err != nil {
		t.Fatal(err)
	}
	box, _ := secret.New(strings.Repeat("ab", 32))
	cs := server.New(&verify.Verifier{Store: st, Upstream: bank}, nil, st, box, edgeToken, 64, slog.New(slog.DiscardHandler))
	adm := admin.Server(admin.Core{Server: cs, Store: st, Box: box, EdgeToken: edgeToken}, adminToken, nil)
	// Idle connections would hold each Shutdown until the client's idle
	// timeout: closed first (cleanups run last registered first).
	for _, l := range []struct {
		url *string
		srv *fasthttp.Server
	}{{&c.url, &fasthttp.Server{Handler: cs.Handler()}}, {&c.adminURL, adm}} {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		go l.srv.Serve(ln)
		t.Cleanup(func() { l.srv.Shutdown() })
		*l.url = "http://" + ln.Addr().String()
	}
	t.Cleanup(http.DefaultClient.CloseIdleConnections)
	return c
}

// send makes one request and returns its status and decoded JSON body;
// header holds names and values in turn.
func send(t testing.TB, method, url string, body any, header ...string) (int, map[string]any) {
	t.Helper()
	var r io.Reader
	if body != nil {
		raw, _ := json.Marshal(body)
		r = bytes.NewReader(raw)
	}
	req, _ := http.NewRequest(method, url, r)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("%s %s: not JSON: %s", method, url, raw)
	}
	return res.StatusCode, m
}

// admin calls the admin API with token ("" for none) and returns the
// status and the decoded envelope.
func (c *core) admin(t *testing.T, token, method, path string, body any) (int, map[string]any) {
	t.Helper()
	var auth []string
	if token != "" {
		auth = []string{"Authorization", "Bearer " + token}
	}
	return send(t, method, c.adminURL+"/admin/v1"+path, body, auth...)
}

// ok asserts a success and returns its data.
func (c *core) adminOK(t *testing.T, method, path string, body any) map[string]any {
	t.Helper()
	status, m := c.admin(t, adminToken, method, path, body)
	if status/100 != 2 || m["success"] != true {
		t.Fatalf("%s %s: %d %v", method, path, status, m)
	}
	d, _ := m["data"].(map[string]any)
	return d
}

// call is one request to core as the edge would forward it.
type call struct {
	method, path    string
	branch, service string // identity headers; empty branch sends none, empty service is svc
	body            any
	header          []string // more headers, name then value
}

// answer is core's answer to a call.
type answer struct {
	status int
	body   map[string]any
}

func (c *core) do(t testing.TB, k call) answer {
	t.Helper()
	header := append([]string{api.HeaderEdgeToken, edgeToken}, k.header...)
	if k.branch != "" {
		header = append(header, api.HeaderBranch, k.branch, api.HeaderService, cmp.Or(k.service, "svc"))
	}
	status, m := send(t, k.method, c.url+k.path, k.body, header...)
	return answer{status, m}
}

// data asserts a 200 with data and returns its data.
func (a answer) data(t testing.TB) map[string]any {
	t.Helper()
	d, _ := a.body["data"].(map[string]any)
	if a.status != 200 || d == nil {
		t.Fatalf("want 200 with data, got %d %v", a.status, a.body)
	}
	return d
}

// v2err asserts a v2 error body.
func (a answer) v2err(t testing.TB, status int, code string) {
	t.Helper()
	if a.status != status || a.body["success"] != false || errCode(a.body) != code || get(a.body, "error", "message") == "" {
		t.Errorf("want %d %s, got %d %v", status, code, a.status, a.body)
	}
}

// get walks a decoded JSON value by keys.
var get = testnet.JSONAt

func bankPayload(code, ref string) string { return slip.Bank{BankCode: code, TransRef: ref}.Encode() }

func errCode(m map[string]any) any { return get(m, "error", "code") }

// branchAuth is the edge's lookup of a branch key: its status and record.
func (c *core) branchAuth(t *testing.T, key string) (int, map[string]any) {
	t.Helper()
	a := c.do(t, call{method: "GET", path: api.PathBranchAuth + store.Digest(key)})
	d, _ := a.body["data"].(map[string]any)
	return a.status, d
}

var onboard = map[string]any{"id": "svc-new", "name": "New shop", "contactEmail": "ops@shop.example",
	"plan": map[string]any{"name": "starter", "quotaLimit": 2, "rateBank": 5, "rateWallet": 3, "cycleAnchorDay": 1}}

func TestAdminAuth(t *testing.T) {
	c := startCore(t, nil)
	if status, m := c.admin(t, "", "GET", "/services", nil); status != 401 || errCode(m) != "MISSING_API_KEY" {
		t.Errorf("no token: %d %v", status, m)
	}
	if status, m := c.admin(t, "not-a-token", "GET", "/services", nil); status != 401 || errCode(m) != "INVALID_API_KEY" {
		t.Errorf("unknown token: %d %v", status, m)
	}
	reader := c.adminOK(t, "POST", "/tokens", map[string]any{"name": "dashboards", "scope": "read"})
	token, _ := reader["token"].(string)
	if !strings.HasPrefix(token, "sa_") || reader["scope"] != "read" {
		t.Fatalf("token: %v", reader)
	}
	if status, _ := c.admin(t, token, "GET", "/services", nil); status != 200 {
		t.Errorf("read token reading: %d", status)
	}
	if status, m := c.admin(t, token, "POST", "/services", onboard); status != 403 || errCode(m) != "PERMISSION_DENIED" {
		t.Errorf("read token writing: %d %v", status, m)
	}
	list := c.adminOK(t, "GET", "/tokens", nil)
	_ = list
	status, m := c.admin(t, adminToken, "GET", "/tokens", nil)
	items, _ := m["data"].([]any)
	if status != 200 || len(items) != 1 || get(items[0], "lastUsedAt") == nil || get(items[0], "token") != nil {
		t.Errorf("tokens: %d %v", status, m)
	}
	c.adminOK(t, "DELETE", "/tokens/"+reader["id"].(string), nil)
	if status, m := c.admin(t, token, "GET", "/services", nil); status != 401 || errCode(m) != "INVALID_API_KEY" {
		t.Errorf("revoked token: %d %v", status, m)
	}
	// An expired token is refused from its instant.
	at := c.clock.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	short := c.adminOK(t, "POST", "/tokens", map[string]any{"name": "short", "scope": "write", "expiresAt": at})
	if status, _ := c.admin(t, short["token"].(string), "GET", "/services", nil); status != 200 {
		t.Errorf("a token before its expiry: %d", status)
	}
	c.clock.Advance(2 * time.Hour)
	if status, _ := c.admin(t, short["token"].(string), "GET", "/services", nil); status != 401 {
		t.Errorf("a token after its expiry: %d", status)
	}
}

func TestAdminOnboardAndRetire(t *testing.T) {
	c := startCore(t, nil)
	status, m := c.admin(t, adminToken, "POST", "/services", onboard)
	d, _ := m["data"].(map[string]any)
	if status != 201 || d["id"] != "svc-new" || get(d, "plan", "quotaLimit") != 2.0 || get(d, "plan", "rateBank") != 5.0 ||
		d["contactEmail"] != "ops@shop.example" || get(d, "usage", "usedQuota") != 0.0 {
		t.Fatalf("create: %d %v", status, m)
	}
	key, _ := get(d, "mainBranch", "key").(string)
	branch, _ := get(d, "mainBranch", "id").(string)
	if key == "" || get(d, "client", "secret") == nil || len(get(d, "client", "permissions").([]any)) != 6 {
		t.Fatalf("create shows no keys: %v", d)
	}
	// The new key works at once, with its plan's rates.
	if status, a := c.branchAuth(t, key); status != 200 || a["rateBank"] != 5.0 || a["branchId"] != branch {
		t.Fatalf("the new key: %d %v", status, a)
	}
	verify := func(ref string) answer {
		return c.do(t, call{method: "POST", path: "/v2/verify/bank", branch: branch, service: "svc-new",
			body: map[string]any{"payload": bankPayload("004", ref)}})
	}
	verify("ADMINREF1").data(t)
	// A quota below the period's use is refused, naming it.
	if status, m := c.admin(t, adminToken, "PUT", "/services/svc-new/plan", map[string]any{"quotaLimit": 0, "effective": "now"}); status != 400 ||
		!strings.Contains(get(m, "error", "message").(string), "the 1 used") {
		t.Errorf("quota below use: %d %v", status, m)
	}
	// A plan change now: the next verification and the next auth record see it.
	c.adminOK(t, "PUT", "/services/svc-new/plan", map[string]any{"quotaLimit": 1, "rateBank": 9, "effective": "now"})
	verify("ADMINREF2").v2err(t, 403, "QUOTA_EXCEEDED")
	if _, a := c.branchAuth(t, key); a["rateBank"] != 9.0 {
		t.Errorf("rate after the plan change: %v", a)
	}
	// From the next period: pending until it starts.
	d = c.adminOK(t, "PUT", "/services/svc-new/plan", map[string]any{"name": "growth", "quotaLimit": 100, "effective": "nextPeriod"})
	if get(d, "plan", "quotaLimit") != 1.0 || get(d, "pendingPlan", "quotaLimit") != 100.0 || get(d, "pendingPlan", "effectiveFrom") != "2026-12-01T00:00:00+07:00" {
		t.Errorf("pending plan: %v", d)
	}
	verify("ADMINREF3").v2err(t, 403, "QUOTA_EXCEEDED")
	c.clock.Advance(10 * 24 * time.Hour) // Dec 2
	verify("ADMINREF4").data(t)
	if d := c.adminOK(t, "GET", "/services/svc-new", nil); get(d, "plan", "name") != "growth" || d["pendingPlan"] != nil {
		t.Errorf("after the period began: %v", d)
	}
	// An end date: expired from its instant, at the edge's lookup too.
	end := c.clock.Now().Add(time.Hour).UTC()
	c.adminOK(t, "PATCH", "/services/svc-new", map[string]any{"expiresAt": end.Format(time.RFC3339)})
	if _, a := c.branchAuth(t, key); a["serviceExpiresAt"] != end.Format(time.RFC3339) || a["serviceState"] != "active" {
		t.Errorf("auth before the end: %v", a)
	}
	c.clock.Advance(2 * time.Hour)
	verify("ADMINREF5").v2err(t, 403, "SERVICE_EXPIRED")
	c.adminOK(t, "PATCH", "/services/svc-new", map[string]any{"expiresAt": nil})
	verify("ADMINREF6").data(t)
	// Banned with a reason, then active again.
	if status, m := c.admin(t, adminToken, "PUT", "/services/svc-new/state", map[string]any{"state": "banned"}); status != 400 ||
		!strings.Contains(get(m, "error", "message").(string), "reason") {
		t.Errorf("a state change without a reason: %d %v", status, m)
	}
	c.adminOK(t, "PUT", "/services/svc-new/state", map[string]any{"state": "banned", "reason": "chargebacks"})
	verify("ADMINREF7").v2err(t, 403, "SERVICE_BANNED")
	c.adminOK(t, "PUT", "/services/svc-new/state", map[string]any{"state": "active", "reason": "resolved"})
	// Deleted: its key is an unknown key; GET shows it deleted; its id is
	// never used again.
	d = c.adminOK(t, "DELETE", "/services/svc-new", map[string]any{"reason": "closed"})
	if d["state"] != "deleted" {
		t.Errorf("deleted: %v", d)
	}
	if status, _ := c.branchAuth(t, key); status != 401 {
		t.Errorf("a deleted service's key: %d", status)
	}
	verify("ADMINREF8").v2err(t, 401, "INVALID_API_KEY")
	if status, m := c.admin(t, adminToken, "POST", "/services", onboard); status != 409 || errCode(m) != "CONFLICT" {
		t.Errorf("a deleted service's id again: %d %v", status, m)
	}
	// The audit log holds every change, newest first, without secrets.
	status, m = c.admin(t, adminToken, "GET", "/audit?service=svc-new", nil)
	items, _ := get(m, "data", "items").([]any)
	var actions []string
	for _, it := range items {
		actions = append(actions, get(it, "action").(string))
	}
	want := "service.delete service.state service.state service.update service.update service.plan service.plan service.create"
	if status != 200 || strings.Join(actions, " ") != want {
		t.Errorf("audit actions %v, want %s", actions, want)
	}
	raw, _ := json.Marshal(items)
	if strings.Contains(string(raw), key) || strings.Contains(string(raw), store.Digest(key)) || get(items[0], "reason") != "closed" ||
		get(items[0], "actor", "type") != "admin" || get(items[0], "requestId") == nil {
		t.Errorf("audit records: %s", raw)
	}
	// Pages follow the cursor.
	_, m = c.admin(t, adminToken, "GET", "/audit?service=svc-new&limit=4", nil)
	next, _ := get(m, "data", "nextCursor").(string)
	_, m2 := c.admin(t, adminToken, "GET", "/audit?service=svc-new&limit=100&cursor="+next, nil)
	if rest, _ := get(m2, "data", "items").([]any); next == "" || len(rest) != len(items)-4 {
		t.Errorf("second page: %d items after cursor %q, want %d", len(rest), next, len(items)-4)
	}
}

// TestAdminKeyRotation: during the overlap both keys work, and from the
// instant it ends the old one is refused (the record carries the instant);
// a second rotation waits for the overlap or is forced.
func TestAdminKeyRotation(t *testing.T) {
	c := startCore(t, nil)
	d := c.adminOK(t, "POST", "/services", onboard)
	oldKey, branch := get(d, "mainBranch", "key").(string), get(d, "mainBranch", "id").(string)
	path := "/services/svc-new/branches/" + branch
	r := c.adminOK(t, "POST", path+"/key/rotate", map[string]any{"overlap": "1h"})
	newKey, _ := r["key"].(string)
	ends := c.clock.Now().Add(time.Hour).UTC().Format(time.RFC3339Nano)
	if newKey == "" || newKey == oldKey || get(r, "previous", "expiresAt") == nil {
		t.Fatalf("rotate: %v", r)
	}
	if status, a := c.branchAuth(t, newKey); status != 200 || a["branchId"] != branch || a["keyExpiresAt"] != nil {
		t.Errorf("the new key: %d %v", status, a)
	}
	if status, a := c.branchAuth(t, oldKey); status != 200 || a["keyExpiresAt"] == nil {
		t.Errorf("the old key in its overlap: %d %v (ends %s)", status, a, ends)
	}
	if status, m := c.admin(t, adminToken, "POST", path+"/key/rotate", nil); status != 409 || errCode(m) != "CONFLICT" {
		t.Errorf("rotation during an overlap: %d %v", status, m)
	}
	status, m := c.admin(t, adminToken, "GET", path+"/keys", nil)
	keys, _ := m["data"].([]any)
	if status != 200 || len(keys) != 2 || get(keys[0], "current") != true || get(keys[1], "expiresAt") == nil ||
		get(keys[1], "lastSeenAt") == nil || strings.Contains(string(must(json.Marshal(keys))), oldKey) {
		t.Errorf("keys: %d %v", status, m)
	}
	c.clock.Advance(time.Hour)
	if status, _ := c.branchAuth(t, oldKey); status != 401 {
		t.Errorf("the old key after its overlap: %d", status)
	}
	if status, _ := c.branchAuth(t, newKey); status != 200 {
		t.Errorf("the new key after the overlap: %d", status)
	}
	// Quota, links and the branch's id survive: the branch verifies on.
	c.do(t, call{method: "POST", path: "/v2/verify/bank", branch: branch, service: "svc-new",
		body: map[string]any{"payload": bankPayload("004", "ROTREF1")}}).data(t)
	// With no overlap the old key stops at once; revoke-previous ends an
	// overlap early.
	third := c.adminOK(t, "POST", path+"/key/rotate", map[string]any{"overlap": "0s"})["key"].(string)
	if status, _ := c.branchAuth(t, newKey); status != 401 {
		t.Errorf("a key rotated without overlap: %d", status)
	}
	c.adminOK(t, "POST", path+"/key/rotate", map[string]any{"overlap": "24h"})
	c.adminOK(t, "POST", path+"/key/revoke-previous", nil)
	if status, _ := c.branchAuth(t, third); status != 401 {
		t.Errorf("a revoked previous key: %d", status)
	}
	if status, m := c.admin(t, adminToken, "POST", path+"/key/rotate", map[string]any{"overlap": "200h"}); status != 400 {
		t.Errorf("overlap beyond 168h: %d %v", status, m)
	}
}

func must(b []byte, _ error) []byte { return b }

// clientAuth is the edge's lookup of a B2B client key.
func (c *core) clientAuth(t *testing.T, key string) (int, map[string]any) {
	t.Helper()
	a := c.do(t, call{method: "GET", path: api.PathClientAuth + store.Digest(key)})
	d, _ := a.body["data"].(map[string]any)
	return a.status, d
}

// TestAdminClients: B2B clients listed, created (key and secret shown
// once), changed and deleted; a secret rotated with an overlap is offered
// to the edge as the previous one until the overlap ends.
func TestAdminClients(t *testing.T) {
	c := startCore(t, nil)
	first := c.adminOK(t, "POST", "/services", onboard)
	firstKey, firstSecret := get(first, "client", "key").(string), get(first, "client", "secret").(string)
	status, m := c.admin(t, adminToken, "GET", "/services/svc-new/clients", nil)
	list, _ := m["data"].([]any)
	if status != 200 || len(list) != 1 || get(list[0], "signer") != true || get(list[0], "key") != nil || get(list[0], "secret") != nil {
		t.Fatalf("clients: %d %v", status, m)
	}
	second := c.adminOK(t, "POST", "/services/svc-new/clients", map[string]any{"name": "reports", "permissions": []string{"quota:read"}})
	if second["key"] == nil || second["secret"] == nil || second["signer"] != false {
		t.Fatalf("a second client: %v", second)
	}
	id := second["id"].(string)
	if status, a := c.clientAuth(t, second["key"].(string)); status != 200 || len(a["permissions"].([]any)) != 1 {
		t.Errorf("its key: %d %v", status, a)
	}
	d := c.adminOK(t, "PATCH", "/services/svc-new/clients/"+id, map[string]any{"permissions": []string{"quota:read", "branch:read"}})
	if len(d["permissions"].([]any)) != 2 {
		t.Errorf("patched: %v", d)
	}
	if status, m := c.admin(t, adminToken, "PATCH", "/services/svc-new/clients/"+id, map[string]any{"permissions": []string{"root"}}); status != 400 {
		t.Errorf("an unknown permission: %d %v", status, m)
	}
	// Rotation: the new secret at once, the old one beside it until the
	// overlap ends; a rotation meanwhile conflicts.
	firstID := get(list[0], "id").(string)
	r := c.adminOK(t, "POST", "/services/svc-new/clients/"+firstID+"/secret/rotate", map[string]any{"overlap": "2h"})
	newSecret, _ := r["secret"].(string)
	if newSecret == "" || newSecret == firstSecret || get(r, "previous", "expiresAt") == nil {
		t.Fatalf("rotate: %v", r)
	}
	if _, a := c.clientAuth(t, firstKey); a["secret"] != newSecret || get(a, "previousSecret", "secret") != firstSecret {
		t.Errorf("the edge's record in the overlap: %v", a)
	}
	if status, m := c.admin(t, adminToken, "POST", "/services/svc-new/clients/"+firstID+"/secret/rotate", nil); status != 409 || errCode(m) != "CONFLICT" {
		t.Errorf("a rotation in the overlap: %d %v", status, m)
	}
	c.clock.Advance(2 * time.Hour)
	if _, a := c.clientAuth(t, firstKey); a["secret"] != newSecret || a["previousSecret"] != nil {
		t.Errorf("the edge's record after the overlap: %v", a)
	}
	// The branch keys sign with the first client's secret: theirs too.
	if _, a := c.branchAuth(t, get(first, "mainBranch", "key").(string)); a["signingSecret"] != newSecret {
		t.Errorf("the branch key's signing secret after the rotation: %v", a)
	}
	c.adminOK(t, "DELETE", "/services/svc-new/clients/"+id, nil)
	if status, _ := c.clientAuth(t, second["key"].(string)); status != 401 {
		t.Errorf("a deleted client's key: %d", status)
	}
	// The tenant's own routes, on the operator's word; reads for a read
	// token only.
	d = c.adminOK(t, "POST", "/services/svc-new/b2b/branches", map[string]any{"name": "Kiosk"})
	if d["key"] == nil || d["name"] != "Kiosk" {
		t.Errorf("a branch through /b2b: %v", d)
	}
	status, m = c.admin(t, adminToken, "GET", "/services/svc-new/b2b/branches", nil)
	if branches, _ := m["data"].([]any); status != 200 || len(branches) != 2 {
		t.Errorf("branches through /b2b: %d %v", status, m)
	}
	reader := c.adminOK(t, "POST", "/tokens", map[string]any{"name": "ro", "scope": "read"})["token"].(string)
	if status, _ := c.admin(t, reader, "POST", "/services/svc-new/b2b/branches", map[string]any{"name": "x"}); status != 403 {
		t.Errorf("a read token writing through /b2b: %d", status)
	}
	// The export: the seed's format, no key or secret.
	status, m = c.admin(t, adminToken, "GET", "/export", nil)
	raw, _ := json.Marshal(m)
	if status != 200 || !strings.Contains(string(raw), `"id":"svc-new"`) || strings.Contains(string(raw), newSecret) ||
		strings.Contains(string(raw), firstKey) || strings.Contains(string(raw), get(first, "mainBranch", "key").(string)) {
		t.Errorf("export: %d %s", status, raw)
	}
	actions := map[string]bool{}
	_, m = c.admin(t, adminToken, "GET", "/audit?service=svc-new", nil)
	for _, it := range get(m, "data", "items").([]any) {
		actions[get(it, "action").(string)] = true
	}
	for _, want := range []string{"client.create", "client.update", "client.secret.rotate", "client.delete", "branch.create"} {
		if !actions[want] {
			t.Errorf("no %s in the audit log: %v", want, actions)
		}
	}
}

// TestAdminAnchorChange: the billing anchor day moves from the next period
// only; the first period under it runs from the old period's end to the
// new anchor day, counters are not zeroed mid-period, and core tells the
// ledger when the anchor took effect.
func TestAdminAnchorChange(t *testing.T) {
	c := startCore(t, nil) // Nov 22, anchor day 1
	c.adminOK(t, "POST", "/services", onboard)
	if status, m := c.admin(t, adminToken, "PUT", "/services/svc-new/plan", map[string]any{"cycleAnchorDay": 15, "effective": "now"}); status != 400 ||
		!strings.Contains(get(m, "error", "message").(string), "next period") {
		t.Errorf("an anchor change now: %d %v", status, m)
	}
	c.adminOK(t, "PUT", "/services/svc-new/plan", map[string]any{"cycleAnchorDay": 15, "quotaLimit": 100, "effective": "nextPeriod"})
	verify := func(ref string) {
		t.Helper()
		c.do(t, call{method: "POST", path: "/v2/verify/bank", branch: "svc-new-main", service: "svc-new",
			body: map[string]any{"payload": bankPayload("004", ref)}}).data(t)
	}
	verify("ANCHORREF1")
	period := func() (string, string, float64) {
		d := c.adminOK(t, "GET", "/services/svc-new", nil)
		return get(d, "usage", "periodStart").(string), get(d, "usage", "periodEnd").(string), get(d, "usage", "usedQuota").(float64)
	}
	if s, e, u := period(); s != "2026-11-01T00:00:00+07:00" || e != "2026-12-01T00:00:00+07:00" || u != 1 {
		t.Errorf("before the change: %s to %s, used %v", s, e, u)
	}
	c.clock.Advance(10 * 24 * time.Hour) // Dec 2
	verify("ANCHORREF2")
	if s, e, u := period(); s != "2026-12-01T00:00:00+07:00" || e != "2026-12-15T00:00:00+07:00" || u != 1 {
		t.Errorf("the first period under anchor 15: %s to %s, used %v", s, e, u)
	}
	counters := c.do(t, call{method: "GET", path: api.PathUsageCounters}).body
	for _, sv := range get(counters, "data", "services").([]any) {
		if get(sv, "serviceId") == "svc-new" && (get(sv, "anchorSince") != "2026-12-01T00:00:00+07:00" ||
			get(sv, "periodStart") != "2026-12-01T00:00:00+07:00" || get(sv, "periodEnd") != "2026-12-15T00:00:00+07:00") {
			t.Errorf("the counters the ledger reconciles with: %v", sv)
		}
	}
	c.clock.Advance(14 * 24 * time.Hour) // Dec 16
	verify("ANCHORREF3")
	if s, e, u := period(); s != "2026-12-15T00:00:00+07:00" || e != "2027-01-15T00:00:00+07:00" || u != 1 {
		t.Errorf("the next period: %s to %s, used %v", s, e, u)
	}
}

// TestAdminPermissionsOwnList: a service created with some permissions
// leaves the default list alone: the next service's client has all six.
func TestAdminPermissionsOwnList(t *testing.T) {
	c := startCore(t, nil)
	d := c.adminOK(t, "POST", "/services", map[string]any{"id": "svc-ro", "name": "Read only", "permissions": []string{"quota:read"},
		"plan": map[string]any{"name": "p", "quotaLimit": 1, "rateBank": 1, "rateWallet": 1, "cycleAnchorDay": 1}})
	if got := fmt.Sprint(get(d, "client", "permissions")); got != "[quota:read]" {
		t.Errorf("the first client: %s", got)
	}
	d = c.adminOK(t, "POST", "/services", onboard)
	if got := fmt.Sprint(get(d, "client", "permissions")); got != fmt.Sprint(api.Permissions) || len(api.Permissions) != 6 ||
		api.Permissions[0] != "branch:read" {
		t.Errorf("the next client: %s; api.Permissions %v", got, api.Permissions)
	}
}

// TestAdminAuditBadCursor: a cursor the log did not give is the caller's
// mistake, named, not a server error.
func TestAdminAuditBadCursor(t *testing.T) {
	c := startCore(t, nil)
	for _, cursor := range []string{"zz", "00"} {
		if status, m := c.admin(t, adminToken, "GET", "/audit?cursor="+cursor, nil); status != 400 || errCode(m) != "VALIDATION_ERROR" {
			t.Errorf("cursor %q: %d %v", cursor, status, m)
		}
	}
}

// hostile is a branch name that retitles and clears an operator's terminal
// when printed raw.
const hostile = "\u001b]0;OWNED\u0007\u001b[2J"

// TestNamesRefused: no name a tenant or an operator sets may hold control
// or bidirectional formatting characters: each path answers 400
// VALIDATION_ERROR naming every failing field, joined with "; ", and
// stores nothing; names as people write them (Thai, accents) pass.
func TestNamesRefused(t *testing.T) {
	c := startCore(t, nil)
	c.adminOK(t, "POST", "/services", onboard)
	refused := func(what string, status int, m map[string]any, fields ...string) {
		t.Helper()
		msg, _ := get(m, "error", "message").(string)
		var want []string
		for _, f := range fields {
			want = append(want, f+": must not hold")
		}
		if status != 400 || errCode(m) != "VALIDATION_ERROR" || !containsInOrder(msg, want) {
			t.Errorf("%s: %d %v, want 400 VALIDATION_ERROR naming %v", what, status, m, fields)
		}
	}
	adm := func(method, path string, body any) (int, map[string]any) {
		return c.admin(t, adminToken, method, path, body)
	}
	// Services, plans, contacts and reasons through the admin API.
	status, m := adm("POST", "/services", map[string]any{"name": "Shop\u202e", "contactEmail": "\u202eops@shop.example",
		"plan": map[string]any{"name": "pro\x00", "quotaLimit": 1, "rateBank": 1, "rateWallet": 1, "cycleAnchorDay": 1}})
	refused("service create", status, m, "name", "plan.name", "contactEmail")
	if msg, _ := get(m, "error", "message").(string); !strings.Contains(msg, "; ") {
		t.Errorf("service create: fields not joined with \"; \": %q", msg)
	}
	status, m = adm("PATCH", "/services/svc-new", map[string]any{"name": hostile})
	refused("service update", status, m, "name")
	status, m = adm("PUT", "/services/svc-new/plan", map[string]any{"name": "gold\u2066", "effective": "now"})
	refused("plan change", status, m, "name")
	status, m = adm("PUT", "/services/svc-new/state", map[string]any{"state": "banned", "reason": "fraud\u009b2J"})
	refused("state change", status, m, "reason")
	// Admin tokens and B2B clients.
	status, m = adm("POST", "/tokens", map[string]any{"name": "ci\u001b[2J", "scope": "read"})
	refused("token create", status, m, "name")
	status, m = adm("POST", "/services/svc-new/clients", map[string]any{"name": "pos\u200f"})
	refused("client create", status, m, "name")
	clients := c.adminOK(t, "POST", "/services/svc-new/clients", map[string]any{"name": "pos"})
	status, m = adm("PATCH", "/services/svc-new/clients/"+clients["id"].(string), map[string]any{"name": "pos\x7f"})
	refused("client update", status, m, "name")
	// Branches and bank accounts through /b2b, by the operator and by the
	// tenant (as the edge forwards it).
	status, m = adm("POST", "/services/svc-new/b2b/branches", map[string]any{"name": hostile})
	refused("admin b2b branch create", status, m, "name")
	status, m = adm("PATCH", "/services/svc-new/b2b/branches/svc-new-main", map[string]any{"name": "Main\u061c"})
	refused("admin b2b branch update", status, m, "name")
	tenant := []string{api.HeaderB2BClient, "client-0", api.HeaderService, "svc"}
	a := c.do(t, call{method: "POST", path: "/b2b/branches", body: map[string]any{"name": hostile}, header: tenant})
	refused("tenant branch create", a.status, a.body, "name")
	a = c.do(t, call{method: "PATCH", path: "/b2b/branches/br-sub", body: map[string]any{"name": "Sub\u202d"}, header: tenant})
	refused("tenant branch update", a.status, a.body, "name")
	a = c.do(t, call{method: "POST", path: "/b2b/bank-accounts", header: tenant, body: map[string]any{
		"bankCode": "014", "bankNumber": "1234567890", "name": map[string]any{"th": "นาย\u202eสมชาย", "en": "SOMCHAI\x1b[2J"}}})
	refused("bank account create", a.status, a.body, "name.th", "name.en")
	a = c.do(t, call{method: "POST", path: "/v2/bank-accounts", branch: "br-main", body: map[string]any{
		"bankCode": "014", "bankNumber": "1234567891", "name": map[string]any{"th": "สมชาย\u0000"}}})
	refused("a branch's own bank account", a.status, a.body, "name.th")
	// Nothing refused was stored.
	if d := c.adminOK(t, "GET", "/services/svc-new", nil); d["name"] != "New shop" || get(d, "plan", "name") != "starter" || d["state"] != "active" {
		t.Errorf("a refused change was stored: %v", d)
	}
	if d := c.do(t, call{method: "GET", path: "/b2b/branches/br-sub", header: tenant}).data(t); d["name"] != "Sub" {
		t.Errorf("a refused branch name was stored: %v", d)
	}
	// Names as people write them pass.
	c.adminOK(t, "PATCH", "/services/svc-new", map[string]any{"name": "ร้านกาแฟ Café Doi"})
	c.adminOK(t, "POST", "/services/svc-new/b2b/branches", map[string]any{"name": "สาขา ลาดพร้าว"})
	c.adminOK(t, "POST", "/tokens", map[string]any{"name": "ทีม ops", "scope": "read"})
}

// containsInOrder reports whether s holds each of parts, in order.
func containsInOrder(s string, parts []string) bool {
	for _, p := range parts {
		i := strings.Index(s, p)
		if i < 0 {
			return false
		}
		s = s[i+len(p):]
	}
	return true
}

// TestAdminDeletedServiceB2B: a deleted service takes no /b2b change from
// the operator either (as no other change): 404, and no branch, key or
// account is made; its records can still be read.
func TestAdminDeletedServiceB2B(t *testing.T) {
	c := startCore(t, nil)
	c.adminOK(t, "POST", "/services", onboard)
	c.adminOK(t, "DELETE", "/services/svc-new", map[string]any{"reason": "closed"})
	for _, w := range []struct {
		method, path string
		body         any
	}{
		{"POST", "/b2b/branches", map[string]any{"name": "Kiosk"}},
		{"PATCH", "/b2b/branches/svc-new-main", map[string]any{"name": "Renamed"}},
		{"PUT", "/b2b/branches/svc-new-main/quota", map[string]any{"limitQuota": 5}},
		{"POST", "/b2b/branches/svc-new-main/key/rotate", nil},
		{"POST", "/b2b/bank-accounts", map[string]any{"bankCode": "014", "bankNumber": "1234567890", "name": map[string]any{"th": "สมชาย"}}},
	} {
		status, m := c.admin(t, adminToken, w.method, "/services/svc-new"+w.path, w.body)
		if status != 404 || errCode(m) != "NOT_FOUND" || get(m, "data") != nil {
			t.Errorf("%s %s on a deleted service: %d %v", w.method, w.path, status, m)
		}
	}
	status, m := c.admin(t, adminToken, "GET", "/services/svc-new/b2b/branches", nil)
	if list, _ := m["data"].([]any); status != 200 || len(list) != 1 || get(list[0], "name") != "Main" {
		t.Errorf("the deleted service's branches: %d %v", status, m)
	}
	if status, m := c.admin(t, adminToken, "POST", "/services/svc-none/b2b/branches", map[string]any{"name": "x"}); status != 404 ||
		!strings.Contains(get(m, "error", "message").(string), "service svc-none") {
		t.Errorf("an unknown service: %d %v", status, m)
	}
}

// TestAdminTokenExpiryCapped: a token made by an expiring token ends no
// later than its maker: without an expiry it gets the maker's, and a later
// one is refused, naming expiresAt; a token made by the bootstrap token
// may never end.
func TestAdminTokenExpiryCapped(t *testing.T) {
	c := startCore(t, nil)
	ends := c.clock.Now().Add(time.Hour).UTC()
	maker := c.adminOK(t, "POST", "/tokens", map[string]any{"name": "contractor", "scope": "write", "expiresAt": ends.Format(time.RFC3339)})["token"].(string)
	status, m := c.admin(t, maker, "POST", "/tokens", map[string]any{"name": "forever", "scope": "write"})
	minted, _ := get(m, "data", "token").(string)
	if status != 201 || get(m, "data", "expiresAt") != ends.Format(time.RFC3339) {
		t.Errorf("a token without expiry made by one that expires: %d %v, want expiresAt %s", status, m, ends.Format(time.RFC3339))
	}
	later := ends.Add(time.Hour).Format(time.RFC3339)
	if status, m := c.admin(t, maker, "POST", "/tokens", map[string]any{"name": "later", "scope": "read", "expiresAt": later}); status != 400 ||
		errCode(m) != "VALIDATION_ERROR" || !strings.Contains(get(m, "error", "message").(string), "expiresAt: must not be after") {
		t.Errorf("a token outliving its maker: %d %v", status, m)
	}
	sooner := ends.Add(-time.Minute).Format(time.RFC3339)
	if d := c.adminOK(t, "POST", "/tokens", map[string]any{"name": "sooner", "scope": "read", "expiresAt": sooner}); d["expiresAt"] != sooner {
		t.Errorf("bootstrap-made token: %v", d)
	}
	if status, m := c.admin(t, maker, "POST", "/tokens", map[string]any{"name": "sooner", "scope": "read", "expiresAt": sooner}); status != 201 ||
		get(m, "data", "expiresAt") != sooner {
		t.Errorf("a token ending before its maker: %d %v", status, m)
	}
	if d := c.adminOK(t, "POST", "/tokens", map[string]any{"name": "ops", "scope": "write"}); d["expiresAt"] != nil {
		t.Errorf("the bootstrap token's token: %v", d)
	}
	c.clock.Advance(time.Hour)
	if status, m := c.admin(t, minted, "GET", "/services", nil); status != 401 || errCode(m) != "INVALID_API_KEY" {
		t.Errorf("the minted token after its maker's end: %d %v", status, m)
	}
}

// TestAdminListenerEnvelope: the admin listener answers everything in the
// v2 envelope of the error catalog, and nothing without a token: OPTIONS,
// methods and paths no route has, a path with a trailing slash (no
// redirect), and a body over its limit (refused before it is read).
func TestAdminListenerEnvelope(t *testing.T) {
	c := startCore(t, nil)
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	send := func(method, path, token string, bodySize int) (int, map[string]any) {
		t.Helper()
		var res *http.Response
		if bodySize == 0 {
			req, _ := http.NewRequest(method, c.adminURL+path, nil)
			if token != "" {
				req.Header.Set("Authorization", "Bearer "+token)
			}
			var err error
			if res, err = client.Do(req); err != nil {
				t.Fatal(err)
			}
		} else {
			// The head only: the listener answers from Content-Length
			// (a client still sending the body could miss the answer).
			conn, err := net.Dial("tcp", strings.TrimPrefix(c.adminURL, "http://"))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			head := method + " " + path + " HTTP/1.1\r\nHost: admin\r\nContent-Type: application/json\r\nContent-Length: " + strconv.Itoa(bodySize) + "\r\n"
			if token != "" {
				head += "Authorization: Bearer " + token + "\r\n"
			}
			io.WriteString(conn, head+"\r\n")
			if res, err = http.ReadResponse(bufio.NewReader(conn), nil); err != nil {
				t.Fatal(err)
			}
		}
		defer res.Body.Close()
		raw, _ := io.ReadAll(res.Body)
		var m map[string]any
		if json.Unmarshal(raw, &m) != nil || m["success"] != false || res.Header.Get("Content-Type") != "application/json" {
			t.Errorf("%s %s: %d %s %q, want the v2 error envelope", method, path, res.StatusCode, res.Header.Get("Content-Type"), raw)
		}
		return res.StatusCode, m
	}
	for _, r := range []struct {
		method, path string
		bodySize     int
		status       int    // with the token
		code         string // with the token
	}{
		{"OPTIONS", "/admin/v1/services", 0, 404, "NOT_FOUND"},
		{"OPTIONS", "/admin/v1/tokens", 0, 404, "NOT_FOUND"},
		{"PUT", "/admin/v1/services", 0, 404, "NOT_FOUND"},
		{"HEAD", "/admin/v1/nothing", 0, 404, ""}, // HEAD: no body to read
		{"GET", "/admin/v1/nothing", 0, 404, "NOT_FOUND"},
		{"GET", "/admin/v1/services/", 0, 404, "NOT_FOUND"},
		{"GET", "/admin/v1/SERVICES", 0, 404, "NOT_FOUND"},
		{"GET", "/admin/v1/services/svc/b2b/branches/", 0, 404, "NOT_FOUND"},
		{"GET", "/admin/v1/services/svc/b2b/BRANCHES", 0, 404, "NOT_FOUND"},
		{"OPTIONS", "/admin/v1/services/svc/b2b/branches", 0, 404, "NOT_FOUND"},
		{"POST", "/admin/v1/tokens", 2 << 20, 400, "VALIDATION_ERROR"},
	} {
		if r.method == "HEAD" {
			req, _ := http.NewRequest("HEAD", c.adminURL+r.path, nil)
			if res, err := client.Do(req); err != nil || res.StatusCode != 401 {
				t.Errorf("HEAD without a token: %v %v", res, err)
			}
			continue
		}
		if status, m := send(r.method, r.path, "", r.bodySize); status != 401 || errCode(m) != "MISSING_API_KEY" {
			t.Errorf("%s %s without a token: %d %v", r.method, r.path, status, m)
		}
		if status, m := send(r.method, r.path, adminToken, r.bodySize); status != r.status || errCode(m) != r.code {
			t.Errorf("%s %s: %d %v, want %d %s", r.method, r.path, status, m, r.status, r.code)
		} else if r.bodySize > 0 && !strings.Contains(get(m, "error", "message").(string), "body") {
			t.Errorf("%s %s: the message does not name the body: %v", r.method, r.path, m)
		}
	}
}

// TestInfoPlanAndContact: GET /v2/info shows the plan's name
// (product.name) and the contact email (account.email) of a service given
// both, onboarded through the admin API or by the seed, and follows a
// change of either; null for a service without them.
func TestInfoPlanAndContact(t *testing.T) {
	seedFile := filepath.Join(t.TempDir(), "seed.json")
	os.WriteFile(seedFile, []byte(`{"services":[{"id":"svc-seeded","name":"Seeded","state":"active",
	  "quota":{"limit":10,"cycleAnchorDay":1},"rate":{"bank":1,"wallet":1},"planName":"growth","contactEmail":"billing@seeded.example",
	  "branches":[{"id":"br-seeded","name":"Main","main":true,"key":"046745d7-0d0a-43c1-ad0d-0d2bb1f9edc2","active":true}]}]}`), 0o600)
	f, err := seedfile.Read(seedFile)
	if err != nil {
		t.Fatal(err)
	}
	box, _ := secret.New(strings.Repeat("ab", 32)) // the harness's
	c := startCore(t, func(r *store.Records) {
		s := seed.Records(f, box)
		r.Services, r.Branches = append(r.Services, s.Services...), append(r.Branches, s.Branches...)
	})
	c.adminOK(t, "POST", "/services", onboard)
	info := func(service, branch string) (any, any) {
		t.Helper()
		d := c.do(t, call{method: "GET", path: "/v2/info", service: service, branch: branch}).data(t)
		return get(d, "product", "name"), get(d, "account", "email")
	}
	if plan, email := info("svc-new", "svc-new-main"); plan != "starter" || email != "ops@shop.example" {
		t.Errorf("onboarded by the admin API: product.name %v, account.email %v", plan, email)
	}
	if plan, email := info("svc-seeded", "br-seeded"); plan != "growth" || email != "billing@seeded.example" {
		t.Errorf("seeded: product.name %v, account.email %v", plan, email)
	}
	c.adminOK(t, "PUT", "/services/svc-new/plan", map[string]any{"name": "pro", "effective": "now"})
	c.adminOK(t, "PATCH", "/services/svc-new", map[string]any{"contactEmail": nil})
	if plan, email := info("svc-new", "svc-new-main"); plan != "pro" || email != nil {
		t.Errorf("after a change: product.name %v, account.email %v", plan, email)
	}
	if plan, email := info("svc", "br-main"); plan != nil || email != nil {
		t.Errorf("a service without either: product.name %v, account.email %v", plan, email)
	}
}

// TestInfoDates: a service's creation and end dates show in GET /v2/info
// (application.autoRenew) and its end date in GET /me (expiredAt), in
// Bangkok time; null for a service without them.
func TestInfoDates(t *testing.T) {
	c := startCore(t, nil)
	end := "2027-01-01T00:00:00+07:00"
	c.adminOK(t, "POST", "/services", map[string]any{"id": "svc-new", "name": "New shop", "expiresAt": end,
		"plan": map[string]any{"name": "starter", "quotaLimit": 2, "rateBank": 5, "rateWallet": 3, "cycleAnchorDay": 1}})
	d := c.do(t, call{method: "GET", path: "/v2/info", service: "svc-new", branch: "svc-new-main"}).data(t)
	if got := get(d, "application", "autoRenew", "expiresAt"); got != end {
		t.Errorf("/v2/info application.autoRenew.expiresAt = %v, want %s", got, end)
	}
	if got := get(d, "application", "autoRenew", "createdAt"); got != "2026-11-22T10:00:00+07:00" {
		t.Errorf("/v2/info application.autoRenew.createdAt = %v, want the creation time", got)
	}
	if got := c.do(t, call{method: "GET", path: "/me", service: "svc-new", branch: "svc-new-main"}).data(t)["expiredAt"]; got != end {
		t.Errorf("/me expiredAt = %v, want %s", got, end)
	}
	d = c.do(t, call{method: "GET", path: "/v2/info", branch: "br-main"}).data(t)
	if get(d, "application", "autoRenew", "expiresAt") != nil || get(d, "application", "autoRenew", "createdAt") != nil {
		t.Errorf("a service without dates: %v", get(d, "application", "autoRenew"))
	}
}
